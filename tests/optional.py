"""The optional host tools some tests need, each named with the Debian package that has it.

A test that needs one calls `require_tools` before it creates anything (a fixture before its
`yield`, so its teardown never runs a tool that is not there): locally a missing tool is a
skip whose reason names the package to install; under `CI` it is a failure. The README's
"Development" section lists the same tools and what each adds.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable

from tests.required import unavailable

__all__ = ["PACKAGES", "missing_packages", "require_tools"]

# tool on PATH -> the Debian package that installs it.
PACKAGES = {
    "podman": "podman",
    "runc": "runc",
    "newuidmap": "uidmap",
    "newgidmap": "uidmap",
    "qemu-system-x86_64": "qemu-system-x86",
    "busybox": "busybox-static",
    "busybox (static)": "busybox-static",
    "prlimit": "util-linux",
    "setpriv": "util-linux",
    "su": "util-linux",
    "apt-get": "apt",
    "apt-cache": "apt",
    "dpkg-deb": "dpkg",
    "curl": "curl",
    "catatonit": "catatonit",
}


def missing_packages(tools: Iterable[str]) -> str:
    """`tools` and the one apt-get line that installs them: "needs X, Y (apt-get install …)"."""
    names = list(dict.fromkeys(tools))
    packages = dict.fromkeys(PACKAGES.get(tool, tool) for tool in names)
    return (
        f"needs {', '.join(names)} (apt-get install --no-install-recommends {' '.join(packages)})"
    )


def require_tools(*tools: str, what: str) -> None:
    """Skip (fail under CI) unless every tool is on PATH; `what` says what needs them."""
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        unavailable(f"{what} {missing_packages(missing)}")
