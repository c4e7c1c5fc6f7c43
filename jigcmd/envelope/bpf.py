"""A tiny classic-BPF assembler: statements, jumps to labels, packed `struct sock_filter`.

A program is a flat list of instructions (`u16 code, u8 jt, u8 jf, u32 k`) and label
strings; a jump names labels, resolved to forward offsets when the program is assembled.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "JEQ_K",
    "JSET_K",
    "LD_W_ABS",
    "RET_K",
    "AssemblyError",
    "Insn",
    "Jump",
    "assemble",
    "jeq",
    "jset",
    "stmt",
]

# Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
_BPF_MAXINSNS = 4096


class AssemblyError(ValueError):
    """A jump that cannot reach its label, or a program longer than the kernel takes."""


class Jump(NamedTuple):
    """A conditional jump whose targets are labels, resolved when the program is assembled."""

    code: int
    k: int
    jt: str | None
    jf: str | None


Insn = tuple[int, int] | Jump | str  # (code, k) statement, jump, or a label


def stmt(code: int, k: int) -> tuple[int, int]:
    """A statement: load or return."""
    return (code, k)


def jeq(k: int, jt: str | None = None, jf: str | None = None) -> Jump:
    """Jump to `jt` if the accumulator equals `k`, to `jf` otherwise (None: the next one)."""
    return Jump(JEQ_K, k, jt, jf)


def jset(k: int, jt: str | None = None, jf: str | None = None) -> Jump:
    """Jump to `jt` if the accumulator has any bit of `k` set, to `jf` otherwise."""
    return Jump(JSET_K, k, jt, jf)


def assemble(program: list[Insn]) -> bytes:
    """The program as packed `struct sock_filter` records, its labels resolved."""
    labels: dict[str, int] = {}
    index = 0
    for insn in program:
        if isinstance(insn, str):
            labels[insn] = index
        else:
            index += 1

    def offset(here: int, label: str | None) -> int:
        if label is None:
            return 0
        distance = labels[label] - here - 1
        if not 0 <= distance <= 255:
            raise AssemblyError(f"seccomp jump to {label!r} out of range ({distance})")
        return distance

    out = bytearray()
    here = 0
    for insn in program:
        if isinstance(insn, str):
            continue
        if isinstance(insn, Jump):
            out += struct.pack(
                "=HBBI", insn.code, offset(here, insn.jt), offset(here, insn.jf), insn.k
            )
        else:
            out += struct.pack("=HBBI", insn[0], 0, 0, insn[1])
        here += 1
    if here > _BPF_MAXINSNS:
        raise AssemblyError(f"seccomp program too long ({here} instructions)")
    return bytes(out)
