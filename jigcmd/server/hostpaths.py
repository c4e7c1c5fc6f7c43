"""The host's own paths, taken out of every text that reaches a caller.

A refusal ("all 4 envelope slots are in use (shared by every jigcmd using …)"), an
admission reason ("no lock at …"), a start-up failure: each may name the state directory,
the user's home, the checkout or the Python environment. A model or an HTTP client has no
use for them and should not learn them; the operator's stderr keeps the full text. Each
front scrubs the texts it sends with the paths it knows: the longest first, each replaced by
its placeholder (`<state dir>`, `~`, …) where it is a whole path prefix.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from jigcmd.errors import JigError

__all__ = ["HostPaths"]

# Shorter than this is no path worth hiding ("/", "/tmp" belong to every machine).
_SHORTEST = 5


class HostPaths:
    """Placeholders for the host paths one front knows about."""

    def __init__(self, named: Mapping[str, str | os.PathLike[str] | None]) -> None:
        """`named` maps a placeholder to a path (None or a short path is ignored)."""
        pairs: list[tuple[str, str]] = []
        for placeholder, path in named.items():
            if path is None:
                continue
            try:
                text = os.path.abspath(os.fspath(path)).rstrip("/")
            except FileNotFoundError:
                # Relative, and the working directory was removed since: it names nothing.
                continue
            if len(text) >= _SHORTEST and (text, placeholder) not in pairs:
                pairs.append((text, placeholder))
                real = os.path.realpath(text)
                if real != text and len(real) >= _SHORTEST:
                    pairs.append((real, placeholder))
        pairs.sort(key=lambda pair: len(pair[0]), reverse=True)
        self._pairs = pairs
        self._pattern = (
            re.compile("|".join(f"({re.escape(path)})(?![\\w.-])" for path, _ in pairs))
            if pairs
            else None
        )

    @classmethod
    def of_host(
        cls,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        binding: str | os.PathLike[str] | None = None,
        project: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> HostPaths:
        """The usual ones: the state directory, the Binding's directory, cwd, home, Python.

        `project`: a TypeScript Binding's project root (its `jig.ts`), above its directory.
        """
        environ = os.environ if environ is None else environ
        return cls(
            {
                "<state dir>": state_dir,
                "<binding dir>": Path(binding).parent if binding is not None else None,
                "<project>": project,
                "<python env>": sys.prefix,
                "<cwd>": _working_directory(),
                "~": environ.get("HOME") or None,
            }
        )

    def scrub(self, text: str) -> str:
        """`text` with every known host path replaced by its placeholder."""
        if self._pattern is None:
            return text
        pattern_pairs = self._pairs
        return self._pattern.sub(lambda match: pattern_pairs[(match.lastindex or 1) - 1][1], text)

    def scrub_error(self, error: JigError) -> JigError:
        """The same refusal with its words and details scrubbed (collected evidence kept)."""
        details = error.details
        if details:
            details = {
                key: value if key == "command" else self._scrub_value(value)
                for key, value in details.items()
            }
        return error.reworded(self.scrub(error.message), details)

    def _scrub_value(self, value: object) -> object:
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list | tuple):
            return [self._scrub_value(item) for item in value]
        if isinstance(value, dict):
            return {key: self._scrub_value(item) for key, item in value.items()}
        return value


def _working_directory() -> str | None:
    """The working directory, or None once it was removed (it names nothing left to hide)."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None
