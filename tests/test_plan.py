"""The plan: plain data, with a digest that stays what it was when the types were Structs."""

from __future__ import annotations

import msgspec
import pytest

from jigcmd.plan import Bind, Limits, RunPlan, ScratchFile, plan_digest

PLAN = RunPlan(
    profile="candidate",
    argv=("a", "b"),
    env=(("X", "1"),),
    cwd="/work",
    binds=(Bind(source="/s", target="/t", staged=True),),
    files=(("f", "c"),),
    stdin=b"\x00",
    limits=Limits(pids_max=9),
    deadline=1.5,
    cpus=(1,),
    scratch_file=ScratchFile(name="n", max_bytes=3),
)


def test_a_plan_keeps_the_digest_it_had_as_a_struct() -> None:
    """The journal's and the statements' plan digests did not change with the NamedTuples."""
    # Both values computed by fcd6b13, where the plan's types were msgspec Structs.
    assert plan_digest(PLAN) == (
        "sha256:6838e0688a4161965821ab5d511eb5d4f8c68bd2f7d43dd75ed2b09f35bc288b"
    )
    assert plan_digest(PLAN._replace(scratch_file=None)) == (
        "sha256:63b281dae894a81a3bd86a33b1106a69abfe26a3324cfe89825e2ed306ab833e"
    )


def test_msgspec_checks_a_plan_field_by_field() -> None:
    """The server's decoder refuses a plan whose fields are not the types say (here argv)."""
    wire = msgspec.msgpack.encode(PLAN._replace(argv=("a", 1)))  # type: ignore[arg-type]
    with pytest.raises(msgspec.ValidationError, match="Expected `str`, got `int`"):
        msgspec.msgpack.decode(wire, type=RunPlan)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(PLAN), type=RunPlan) == PLAN
