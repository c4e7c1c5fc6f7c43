"""runc with the OCI bundle's `nofile` and `nproc` rlimits lowered to this host's hard limits.

Rootful podman asks for 1,048,576 of each in every container (the pod's pause container
included, which `containers.conf` does not reach); a host whose root lacks
`CAP_SYS_RESOURCE` cannot grant that and runc fails ("error setting rlimit type 7").
`podman --runtime <a script running this>` then works unchanged: only `create` (the bundle's
config) and `exec` (the process file) are touched, and only limits above what this process
may grant.
"""

from __future__ import annotations

import json
import os
import resource
import sys

__all__ = ["clamp", "main"]

_LIMITS = {"RLIMIT_NOFILE": resource.RLIMIT_NOFILE, "RLIMIT_NPROC": resource.RLIMIT_NPROC}


def clamp(config: dict[str, object]) -> None:
    """Lower each rlimit of an OCI config to this process's hard limit (in place)."""
    process = config.get("process")
    if not isinstance(process, dict):
        return
    for limit in process.get("rlimits") or []:
        which = _LIMITS.get(limit.get("type"))
        if which is None:
            continue
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            limit["hard"] = min(int(limit["hard"]), hard)
            limit["soft"] = min(int(limit["soft"]), limit["hard"])


def _rewrite(path: str, wrap: bool) -> None:
    with open(path, encoding="utf-8") as handle:
        found = json.load(handle)
    config = {"process": found} if wrap else found
    clamp(config)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config["process"] if wrap else config, handle)


def main(argv: list[str]) -> None:
    """`runc ARGS`, clamped first: a bundle's config on `create`, the process on `exec`."""
    runc, args = argv[0], argv[1:]
    if "create" in args and "--bundle" in args:
        _rewrite(os.path.join(args[args.index("--bundle") + 1], "config.json"), wrap=False)
    elif "exec" in args and "--process" in args:
        _rewrite(args[args.index("--process") + 1], wrap=True)
    os.execv(runc, [runc, *args])


if __name__ == "__main__":
    main(sys.argv[1:])
