"""`jigcmd run` where the job's OOM killer takes pid 1: the answer names the OOM kill.

Where the candidate's OOM score is not pinned (no `CAP_SYS_RESOURCE`, forced here by dropping
it from the bounding set), the candidate can lower its score to pid 1's and hold the job's
memory where no process's RSS counts it (memfds); the kernel then kills pid 1, the largest
process, and nobody sees how the candidate ended.
"""

from __future__ import annotations

import base64
import os
import platform
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.optional import require_tools
from tests.required import require_root, require_runtime, usable_cgroups

pytestmark = pytest.mark.envelope

_BASE = 0x400000
_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")


def _filler_elf() -> bytes:
    """A static x86-64 program of a few pages: memfds filled with 4 KiB writes, without end."""
    code_at = _BASE + _ELF_HEADER.size + _PROGRAM_HEADER.size
    name = code_at + 46  # the zero byte after the code: memfd_create's empty name
    code = (
        b"\xb8\x3f\x01\x00\x00"  # outer: mov eax, 319 (memfd_create)
        + b"\xbf"
        + struct.pack("<I", name)  # mov edi, name
        + b"\x31\xf6\x0f\x05"  # xor esi, esi; syscall
        + b"\x89\xc3"  # mov ebx, eax (the fd)
        + b"\xbd\x98\x3a\x00\x00"  # mov ebp, 15000
        + b"\xb8\x01\x00\x00\x00"  # inner: mov eax, 1 (write)
        + b"\x89\xdf"  # mov edi, ebx
        + b"\xbe"
        + struct.pack("<I", _BASE)  # mov esi, the program's own first page
        + b"\xba\x00\x10\x00\x00\x0f\x05"  # mov edx, 4096; syscall
        + b"\xff\xcd\x75\xe9"  # dec ebp; jnz inner
        + b"\xeb\xd2"  # jmp outer
        + b"\x00"
    )
    size = _ELF_HEADER.size + _PROGRAM_HEADER.size + len(code)
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    header = _ELF_HEADER.pack(ident, 2, 0x3E, 1, code_at, 64, 0, 0, 64, 56, 1, 0, 0, 0)
    program = _PROGRAM_HEADER.pack(1, 5, 0, _BASE, _BASE, size, size, 0x1000)
    return header + program + code


# Lowers its own score to pid 1's, writes the filler to /tmp and becomes it (execve through
# bun:ffi: the candidate's process is then a few pages, pid 1 some megabytes).
_CLI = """
import { dlopen, FFIType, ptr } from "bun:ffi";
import { chmodSync, writeFileSync } from "fs";
writeFileSync("/proc/self/oom_score_adj", "0");
writeFileSync("/tmp/filler", Buffer.from("ELF", "base64"));
chmodSync("/tmp/filler", 0o755);
const libc = dlopen("libc.so.6", {
  execve: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
});
const path = Buffer.from("/tmp/filler\\0");
const argv = new BigUint64Array([BigInt(ptr(path)), 0n]);
const envp = new BigUint64Array([0n]);
console.log("execve failed", libc.symbols.execve(ptr(path), ptr(argv), ptr(envp)));
"""


def test_a_job_oom_that_kills_pid_1_is_uncertain_naming_the_memory_limit(tmp_path: Path) -> None:
    """Pid 1 OOM-killed in its own job: UNCERTAIN naming the job's OOM kill as its possible
    end, no exit status invented, and never "killed from outside"."""
    require_root("dropping CAP_SYS_RESOURCE from root's bounding set")
    if platform.machine() != "x86_64":
        pytest.skip("the filler program is x86-64 machine code")
    usable_cgroups()
    require_runtime()
    require_tools("setpriv", what="running jigcmd without CAP_SYS_RESOURCE")
    binding = admit_example(tmp_path)
    candidate = Path(shutil.copytree(binding.parent / "candidates" / "passing", tmp_path / "c"))
    elf = base64.b64encode(_filler_elf()).decode()
    (candidate / "src" / "cli.ts").write_text(_CLI.replace('"ELF"', f'"{elf}"'))
    jigcmd = [sys.executable, "-m", "jigcmd", "run", "--binding", str(binding)]
    where = ["--state-dir", str(tmp_path / "state"), "cli", "--files", str(candidate)]
    done = subprocess.run(
        # Unpinned on any host: without the capability nobody can fix the score as a floor.
        ["setpriv", "--bounding-set=-sys_resource", "--inh-caps=-sys_resource", *jigcmd, *where],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        "jigcmd run: UNCERTAIN: pid 1 of the envelope died without reporting how the candidate "
        "ended: the kernel's OOM killer killed at least one process of the job (memory limit "
        "256 MiB) and may have killed pid 1; the candidate ran, its own exit status is unknown; "
        "the envelope was cleaned up"
    ), done.stderr
