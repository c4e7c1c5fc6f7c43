"""The zygote's process image: every pid 1 is a clone of it, so what it imports costs every run."""

from __future__ import annotations

import subprocess
import sys

# Each was in the image once (docs/envelope.md, "The zygote's image without msgspec"):
# msgspec with typing_extensions, inspect, ast, decimal, uuid, datetime; anyio and pathlib
# through the envelope's seam; dataclasses (inspect again); hashlib's libcrypto.
_KEPT_OUT = ("msgspec", "anyio", "pathlib", "dataclasses", "inspect", "hashlib", "decimal")
_KEPT_OUT_OF_JIGCMD = ("jigcmd.evidence", "jigcmd.contract", "jigcmd.envelope.api")


def _zygote_modules() -> set[str]:
    probe = "import sys, jigcmd.envelope.zygote; print(' '.join(sys.modules))"
    return set(
        subprocess.run(
            # As the server starts it: isolated, with the server's import path.
            [sys.executable, "-I", "-c", f"import sys; sys.path[:] = {sys.path!r}; {probe}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
    )


def test_the_zygote_imports_neither_msgspec_nor_anyio_nor_their_company() -> None:
    """No msgspec, anyio, pathlib, dataclasses, inspect, hashlib, decimal, nor the server types."""
    modules = _zygote_modules()
    assert {m for m in modules if m.split(".")[0] in _KEPT_OUT} == set()
    assert modules.isdisjoint(_KEPT_OUT_OF_JIGCMD)
    assert "jigcmd.envelope.lifecycle" in modules  # the probe did import the zygote
