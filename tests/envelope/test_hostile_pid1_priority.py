"""The hostile suite, pid 1's scheduling: the candidate cannot demote the collector of its end.

Pid 1 runs with the candidate's uid, so without the seccomp filter the candidate could lower
pid 1's priority (nice 19, SCHED_IDLE, another CPU, idle I/O) and keep its leftovers running
past its own end, which pid 1 would then see and report late. Raw system calls (x86_64
numbers) through bun:ffi, on the whole command path like test_hostile.py.
"""

from __future__ import annotations

import platform

import pytest

from tests.envelope.hostile_runner import Hostile, refused

pytestmark = [
    pytest.mark.envelope,
    pytest.mark.skipif(platform.machine() != "x86_64", reason="raw system call numbers"),
]

# Each call names pid 1, its process group (pid 1 leads its own session) or its uid (the
# candidate's): setpriority 141, sched_setparam 142, sched_setscheduler 144,
# sched_setaffinity 203, sched_setattr 314, ioprio_set 251.
_REACHING_PID_1 = (
    'attemptSys("setpriority(PRIO_PROCESS, 1)", 141, 0, 1, 19);\n'
    # The kernel reads an int: junk in the upper half still names pid 1.
    'attemptSys("setpriority(PRIO_PROCESS, 1 | 1 << 32)", 141, 0, 2 ** 32 + 1, 19);\n'
    'attemptSys("setpriority(PRIO_PGRP, 1)", 141, 1, 1, 19);\n'
    'attemptSys("setpriority(PRIO_PGRP, 0)", 141, 1, 0, 19);\n'
    'attemptSys("setpriority(PRIO_USER, 0)", 141, 2, 0, 19);\n'
    'attemptSys("sched_setparam(1)", 142, 1, param);\n'
    'attemptSys("sched_setattr(1, nice 19)", 314, 1, attr, 0);\n'
    # Last: out of SCHED_IDLE, pid 1 could not be moved back to SCHED_OTHER by sched_setattr.
    'attemptSys("sched_setscheduler(1, SCHED_IDLE)", 144, 1, 5, param);\n'
    'attemptSys("sched_setaffinity(1)", 203, 1, 8, mask);\n'
    'attemptSys("ioprio_set(WHO_PROCESS, 1)", 251, 1, 1, IDLE);\n'
    'attemptSys("ioprio_set(WHO_PGRP, 1)", 251, 2, 1, IDLE);\n'
    'attemptSys("ioprio_set(WHO_USER, 0)", 251, 3, 0, IDLE);\n'
)

# The candidate's own priority stays its own to lower (Node's os.setPriority among others).
_ITS_OWN = (
    'attemptSys("setpriority(PRIO_PROCESS, 0)", 141, 0, 0, 10);\n'
    'attemptSys("setpriority(PRIO_PROCESS, own pid)", 141, 0, process.pid, 11);\n'
    'attempt("os.setPriority", () => setPriority(12));\n'
    'attemptSys("sched_setscheduler(0, SCHED_BATCH)", 144, 0, 3, param);\n'
    'attemptSys("sched_setaffinity(0)", 203, 0, 8, mask);\n'
    'attemptSys("ioprio_set(WHO_PROCESS, 0)", 251, 1, 0, IDLE);\n'
)

# Calls by pid number the filter lets through: the kernel's ptrace check refuses them for
# a non-dumpable pid 1 (migrate_pages 256, move_pages 279, get_robust_list 274), and the
# kernel drops a signal from inside the namespace to a pid 1 without a handler (424).
_KERNEL_GUARDED = (
    'attemptSys("migrate_pages(1)", 256, 1, 0, 0, 0);\n'
    'attemptSys("move_pages(1)", 279, 1, 0, 0, 0, 0, 0);\n'
    'attemptSys("get_robust_list(1)", 274, 1, head, size);\n'
    "const pidfd = sys(434, 1, 0).ret;\n"
    'attemptSys("pidfd_send_signal(pid 1, SIGKILL)", 424, pidfd, 9, 0, 0);\n'
)

SOURCE = (
    'import { attempt, attemptSys, emit, sys } from "./probe.ts";\n'
    'import { setPriority } from "node:os";\n'
    "const param = Buffer.alloc(8);\n"
    "const attr = Buffer.alloc(56);\n"
    "attr.writeUInt32LE(48, 0); // SCHED_ATTR_SIZE_VER0, policy SCHED_OTHER\n"
    "attr.writeInt32LE(19, 16); // sched_nice\n"
    "const mask = Buffer.alloc(8, 0xff);\n"
    "const IDLE = 3 << 13; // IOPRIO_CLASS_IDLE\n"
    "const head = Buffer.alloc(8);\n"
    "const size = Buffer.alloc(8);\n"
    + _ITS_OWN
    + _REACHING_PID_1
    + _KERNEL_GUARDED
    + "await Bun.sleep(100);\n"
    # getpriority answers 20 - nice; sched_getscheduler 0 is SCHED_OTHER.
    + 'emit("pid 1 nice", true, String(20 - sys(140, 0, 1).ret));\n'
    + 'emit("pid 1 policy", true, String(sys(145, 1).ret));\n'
    + "process.exit(7);\n"
)


async def test_the_candidate_cannot_change_pid_1s_priority_policy_cpus_or_io_class(
    hostile: Hostile,
) -> None:
    """Every call that names pid 1, its group or its uid gets EPERM; the candidate's own pass."""
    case = await hostile.run(SOURCE)
    assert (case.evidence.exit_code, case.evidence.stop_reason) == (7, "exited")
    reaching = [line.split('"')[1] for line in _REACHING_PID_1.splitlines() if '"' in line]
    for name in reaching:
        refused(case, name, "EPERM")
    for name in [line.split('"')[1] for line in _ITS_OWN.splitlines()]:
        assert case.attempts[name].ok, case.attempts[name]
    for name in ("migrate_pages(1)", "move_pages(1)", "get_robust_list(1)"):
        refused(case, name, "EPERM", "ENOSYS")
    assert case.attempts["pid 1 nice"].detail == "0"
    assert case.attempts["pid 1 policy"].detail == "0"
