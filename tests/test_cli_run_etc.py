"""`jigcmd run` on a candidate that uses `localhost` and the home directory, as tests do.

The envelope's `/etc` is jigcmd's own (jigcmd/envelope/etcfiles.py): `localhost` resolves and
binds, `os.homedir()` and `os.userInfo()` answer, any other name fails as not found without
a DNS query, and nothing there is the host's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.admitted_example import EXAMPLE, admit_example, jigcmd_cli
from tests.required import require_runtime, usable_cgroups

pytestmark = pytest.mark.envelope

# What the envelope's /etc holds, byte for byte: fixed by jigcmd, nothing read from the host.
_ETC = {
    "group": "root:x:0:\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    "passwd": "root:x:0:0:root:/tmp:/nonexistent\n",
    "resolv.conf": "nameserver 192.0.2.1\n",
}

# The outside tester's three cases, as a project's own test file would have them.
_LOCALHOST_TESTS = """
import { expect, test } from "bun:test";
import { lookup } from "node:dns/promises";
test("Bun.serve on 127.0.0.1, fetch via localhost", async () => {
  const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("pong") });
  try { expect(await (await fetch(`http://localhost:${s.port}/`)).text()).toBe("pong"); }
  finally { s.stop(true); }
});
test("Bun.serve hostname localhost", async () => {
  const s = Bun.serve({ port: 0, hostname: "localhost", fetch: () => new Response("pong") });
  try { expect(await (await fetch(s.url)).text()).toBe("pong"); } finally { s.stop(true); }
});
test("dns lookup localhost", async () => {
  expect((await lookup("localhost")).address).toBe("127.0.0.1");
});
"""

# Prints what the candidate finds: /etc, its home and user, and how other names fail.
_PROBE = """
import { lookup, resolve4 } from "node:dns/promises";
import { homedir, userInfo } from "node:os";
import { lstatSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
const failure = async (f: () => Promise<unknown>) => {
  try { await f(); return "resolved"; } catch (e: any) { return String(e.code); }
};
const etc: Record<string, string> = {};
for (const name of readdirSync("/etc")) {
  if (!lstatSync(`/etc/${name}`).isFile()) etc[name] = "not a regular file";
  else etc[name] = readFileSync(`/etc/${name}`, "utf8");
}
let write = "written";
try { writeFileSync("/etc/hosts", "10.0.0.1 localhost\\n"); } catch (e: any) { write = e.code; }
const { username, ...user } = userInfo();
console.log(JSON.stringify({
  etc, write, home: homedir(), user,
  lookup: await failure(() => lookup("example.com")),
  fetch: await failure(() => fetch("http://example.com/")),
  bunLookup: await failure(() => Bun.dns.lookup("example.com", { backend: "libc" })),
  resolve: await failure(() => resolve4("example.com")),
}));
"""


def _candidate(tmp_path: Path) -> Path:
    files = Path(shutil.copytree(EXAMPLE / "candidates" / "passing", tmp_path / "candidate"))
    (files / "test" / "project.test.ts").write_text(_LOCALHOST_TESTS)
    (files / "src" / "cli.ts").write_text(_PROBE)
    return files


def _answer(binding: Path, tmp_path: Path, command: str, files: Path) -> dict[str, Any]:
    state = str(tmp_path / "state")
    done = jigcmd_cli(
        "run", "--binding", str(binding), "--state-dir", state, command, "--files", str(files),
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_localhost_resolves_and_binds_in_a_projects_own_tests(tmp_path: Path) -> None:
    """The tester's three cases pass: fetch via localhost, Bun.serve on it, dns.lookup."""
    usable_cgroups()
    require_runtime()
    binding = admit_example(tmp_path)
    found = _answer(binding, tmp_path, "tests", _candidate(tmp_path))
    results = {test["name"]: test["status"] for test in found["tests"]["tests"]}
    assert results == {
        "Bun.serve on 127.0.0.1, fetch via localhost": "passed",
        "Bun.serve hostname localhost": "passed",
        "dns lookup localhost": "passed",
    }, found["evidence"]["stderr"]["text"]


def test_etc_holds_four_fixed_files_a_home_and_no_dns(tmp_path: Path) -> None:
    """/etc is exactly jigcmd's five read-only files; home is /tmp; other names: ENOTFOUND."""
    usable_cgroups()
    require_runtime()
    binding = admit_example(tmp_path)
    evidence = _answer(binding, tmp_path, "cli", _candidate(tmp_path))["evidence"]
    assert evidence["exitCode"] == 0, evidence["stderr"]["text"]
    assert json.loads(evidence["stdout"]["text"]) == {
        "etc": _ETC,
        "write": "EROFS",
        "home": "/tmp",
        # Bun takes the name and shell from $USER and $SHELL, which the envelope does not set.
        "user": {"homedir": "/tmp", "shell": "unknown", "uid": 0, "gid": 0},
        # Not found at once, from the files: no DNS query is sent (it timed out before: EAGAIN).
        "lookup": "ENOTFOUND",
        "fetch": "ENOTFOUND",
        "bunLookup": "DNS_ENOTFOUND",
        # A DNS query has no route to its server (it spun until the deadline before).
        "resolve": "ECONNREFUSED",
    }
