"""`python -m jigcmd` entry point."""

from jigcmd.cli import main

raise SystemExit(main())
