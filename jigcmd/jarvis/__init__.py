"""jarvis: the UTCP HTTP tool provider — policy-checked runs behind a bearer token on loopback."""

__all__: list[str] = []
