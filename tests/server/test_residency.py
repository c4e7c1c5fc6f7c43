"""The server lets go of the library pages its imports mapped: which ones, and for real."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pytest

from jigcmd.server.residency import FileMapping, releasable
from scripts.bench_envelope import BINDING, admit, candidate_files
from tests.required import require_root

_RUST = "cryptography/hazmat/bindings/_rust"
_ROOT = Path(__file__).resolve().parents[2]
# How long the served test waits for the warm-up's release at most (never asserted).
_FAILSAFE_S = 60.0


def _mapping(header: str, **fields: int) -> list[str]:
    values = {
        "Rss": 64,
        "KernelPageSize": 4,
        "Anonymous": 0,
        "Private_Dirty": 0,
        "Shared_Dirty": 0,
        "Locked": 0,
        "Swap": 0,
        **fields,
    }
    return [header, *(f"{name}: {value} kB" for name, value in values.items()), "VmFlags: rd ex"]


def _smaps(*mappings: list[str]) -> list[str]:
    return [line for mapping in mappings for line in mapping]


def test_only_private_read_only_file_mappings_of_clean_pages_are_released() -> None:
    """The library's text goes; its data, copies, anonymous memory and odd mappings stay."""
    lib = "/usr/lib/libx.so"
    smaps = _smaps(
        _mapping(f"7f0000000000-7f0000100000 r-xp 00001000 08:01 42 {lib}", Rss=1024),
        # Relocated data: read-only now, but it holds private copies (anonymous pages).
        _mapping(f"7f0000100000-7f0000102000 r--p 00100000 08:01 42 {lib}", Anonymous=8),
        _mapping(f"7f0000102000-7f0000103000 rw-p 00102000 08:01 42 {lib}"),
        _mapping(f"7f0000103000-7f0000104000 r--s 00000000 08:01 43 {lib}.shared"),
        _mapping("7f0000104000-7f0000105000 r--p 00000000 08:01 44 /gone.so (deleted)"),
        _mapping("7f0000105000-7f0000106000 r--p 00000000 00:00 0 [vvar]"),
        _mapping("7f0000106000-7f0000107000 rw-p 00000000 00:00 0 "),
        _mapping(f"7f0000107000-7f0000108000 r--p 00000000 08:01 45 {lib}.locked", Locked=4),
        _mapping("7f0000108000-7f0000109000 r--p 00000000 08:01 46 /never/touched.so", Rss=0),
        _mapping(
            "7f0000200000-7f0000400000 r--p 00000000 00:2f 47 /hugepages/file",
            KernelPageSize=2048,
        ),
        _mapping(f"7f0000109000-7f000010a000 r--p 00000000 08:01 48 {lib}.dirty", Shared_Dirty=4),
    )
    assert releasable(smaps) == [FileMapping(0x7F0000000000, 0x7F0000100000, lib, 1024)]


def clean_kb(pid: int) -> int:
    """The resident pages of cryptography's core in `pid` that are the file's own (KiB)."""
    total, inside = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if "-" in line.split(" ", 1)[0]:
            inside = _RUST in line
        elif inside and line.startswith(("Rss:", "Anonymous:")):
            kb = int(line.split()[1])
            total += kb if line.startswith("Rss:") else -kb
    return total


def fresh_import_kb() -> int:
    """`clean_kb` of a fresh interpreter that has just imported cryptography's core."""
    probe = "import cryptography.hazmat.bindings._rust"
    imported = subprocess.Popen([sys.executable, "-c", f"{probe}; input()"], stdin=subprocess.PIPE)
    try:
        failsafe = time.monotonic() + _FAILSAFE_S
        while (fresh := clean_kb(imported.pid)) < 1024:
            assert time.monotonic() < failsafe, "the probe never imported the library"
            time.sleep(0.05)
    finally:
        imported.communicate(b"\n", timeout=60)
    return fresh


_PROBE = """
import json, os
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jigcmd.server.residency import release_file_pages
from tests.server.test_residency import clean_kb

key = Ed25519PrivateKey.generate()
before = clean_kb(os.getpid())
released = release_file_pages()
after = clean_kb(os.getpid())
signature = key.sign(b"still here")
key.public_key().verify(signature, b"still here")
print(json.dumps([before, after, released.kb]))
"""


def test_a_process_releases_a_librarys_pages_and_goes_on_using_it() -> None:
    """cryptography's core leaves memory, and signing afterwards maps back what it needs."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=_ROOT,
    )
    before, after, released_kb = json.loads(done.stdout)
    assert before > 1024, done.stdout
    assert after < before // 10
    assert released_kb >= before - after


def _call(server: subprocess.Popen[bytes], number: int) -> dict[str, object]:
    """One Run/1 call of the example's tests; its answer."""
    assert server.stdin is not None and server.stdout is not None
    call = {
        "jsonrpc": "2.0",
        "id": f"r{number}",
        "method": "capability/call",
        "params": {
            "operationId": f"residency-{number}",
            "slot": "command",
            "method": "run",
            "input": {"command": "tests", "files": candidate_files()},
        },
    }
    server.stdin.write(json.dumps(call).encode() + b"\n")
    server.stdin.flush()
    answer: dict[str, object] = json.loads(server.stdout.readline())
    return answer


def _released(stderr: IO[bytes], seen: threading.Event) -> None:
    for line in stderr:
        if b"KiB of file pages from" in line:
            seen.set()


@pytest.mark.envelope
def test_the_served_server_lets_go_after_its_warm_up_and_still_signs(tmp_path: Path) -> None:
    """A real `jigcmd serve`: the library's pages leave at the warm-up's end; calls still sign.

    Read before any call: each call maps back what it runs, and with the library's file in the
    page cache the kernel maps the pages around each fault too (docs/performance.md).
    """
    require_root()
    fresh = fresh_import_kb()
    lock = tmp_path / "jigcmd.lock"
    admit(lock)
    command = [sys.executable, "-m", "jigcmd", "-v", "serve", "--binding", str(BINDING)]
    command += ["--lock", str(lock), "--state-dir", str(tmp_path / "state")]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as server:
        assert server.stdin is not None and server.stderr is not None
        seen = threading.Event()
        threading.Thread(target=_released, args=(server.stderr, seen), daemon=True).start()
        try:
            assert seen.wait(_FAILSAFE_S), "the warm-up never released the library's pages"
            assert clean_kb(server.pid) < fresh // 10
            # Each call signs its statements (Ed25519, through cryptography) and answers.
            for number in (1, 2):
                answer = _call(server, number)
                assert answer["result"]["value"]["exitCode"] == 0, answer  # type: ignore[index]
        finally:
            server.stdin.close()
            server.wait(timeout=60)
