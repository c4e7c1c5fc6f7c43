"""The zygote's process image: every pid 1 is a clone of it, so what it imports costs every run."""

from __future__ import annotations

import subprocess
import sys

from jigcmd.envelope.native import ZYGOTE_FLAGS
from jigcmd.envelope.zygote import return_free_heap

# Each was in the image once (docs/envelope.md, "The zygote's image without msgspec"):
# msgspec with typing_extensions, inspect, ast, decimal, uuid, datetime; anyio and pathlib
# through the envelope's seam; dataclasses (inspect again); hashlib's libcrypto.
_KEPT_OUT = ("msgspec", "anyio", "pathlib", "dataclasses", "inspect", "hashlib", "decimal")
_KEPT_OUT_OF_JIGCMD = ("jigcmd.evidence", "jigcmd.contract", "jigcmd.envelope.api")
# `site` and what the venv's `.pth` files import (docs/performance.md, "the idle footprint").
_KEPT_OUT_WITH_SITE = ("site", "_sitebuiltins", "_distutils_hack")


def _zygote_modules() -> set[str]:
    probe = "import sys, jigcmd.envelope.zygote; print(' '.join(sys.modules))"
    return set(
        subprocess.run(
            # As the server starts it: isolated, without site, with the server's import path.
            [
                sys.executable,
                *ZYGOTE_FLAGS,
                "-c",
                f"import sys; sys.path[:] = {sys.path!r}; {probe}",
            ],
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


def test_the_zygote_runs_without_site_and_what_the_venv_pth_files_import() -> None:
    """No `site`, `_sitebuiltins` nor `_distutils_hack`: the server hands over its import path."""
    modules = _zygote_modules()
    assert modules.isdisjoint(_KEPT_OUT_WITH_SITE)
    assert "jigcmd.envelope.lifecycle" in modules


class _Libc:
    """glibc's one entry point the zygote calls here, recorded."""

    def __init__(self) -> None:
        self.trims: list[int] = []

    def malloc_trim(self, pad: int) -> int:
        self.trims.append(pad)
        return 1


def test_the_zygote_gives_back_its_free_heap_where_libc_can() -> None:
    """`malloc_trim(0)` once with glibc; a libc without it (musl) is left alone."""
    libc = _Libc()
    return_free_heap(libc)
    assert libc.trims == [0]
    return_free_heap(object())
