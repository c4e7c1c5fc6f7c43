"""jigcmd: run operator-reviewed Bun commands inside a native Linux containment envelope."""

__version__ = "0.1.0"

__all__ = ["__version__"]
