"""A project's workspace members, found as Bun finds them: the root package.json's globs.

`workspaces` is a list of directory globs, or an object holding one as `packages` (Bun's
form with catalogs); a glob starting with `!` takes directories out. A member is a
directory of the candidate with a `package.json` that a glob matches; another nested
`package.json` (a test fixture, a vendored package) is no member. Pure: the candidate's
files (path → text) in, the members' manifests out.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from jigcmd.command.packagejson import MANIFEST, manifest_problem, read_manifest
from jigcmd.policy.wildcards import Glob

__all__ = ["manifest_notes", "member_manifests"]


def member_manifests(files: Mapping[str, str]) -> dict[str, dict[str, object]]:
    """Each workspace member's directory → its package.json, in path order."""
    globs = read_manifest(files.get(MANIFEST)).get("workspaces")
    if isinstance(globs, dict):
        globs = globs.get("packages")
    if not isinstance(globs, list):
        return {}
    taken = [_segments(g) for g in globs if isinstance(g, str) and not g.startswith("!")]
    dropped = [_segments(g[1:]) for g in globs if isinstance(g, str) and g.startswith("!")]
    members: dict[str, dict[str, object]] = {}
    for path in sorted(files):
        directory = posixpath.dirname(path)
        if posixpath.basename(path) != MANIFEST or not directory:
            continue
        names = directory.split("/")
        if any(g.matches(names) for g in taken) and not any(g.matches(names) for g in dropped):
            members[directory] = read_manifest(files[path])
    return members


def manifest_notes(files: Mapping[str, str]) -> list[str]:
    """The sentence for each package.json Bun reads (the root's, each member's) that jigcmd
    cannot read, so that none is taken for `{}` without a word."""
    members = [posixpath.join(member, MANIFEST) for member in member_manifests(files)]
    problems = (manifest_problem(path, files) for path in (MANIFEST, *members))
    return [problem for problem in problems if problem is not None]


def _segments(glob: str) -> Glob:
    """A directory glob: `*` and `?` within one name, a `**` segment any run of names
    (matched by `wildcards`, since a regular expression backtracks exponentially)."""
    return Glob.of(glob.strip().removeprefix("./").rstrip("/").split("/"))
