"""`python -m jigcmd` entry point."""

from jigcmd.cli import main

__all__: list[str] = []

raise SystemExit(main())
