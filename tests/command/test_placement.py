"""Which CPUs an envelope is pinned to: its quota's worth, a distinct run of them per slot."""

from __future__ import annotations

import os

import pytest

from jigcmd.command.placement import Placement, pinned_cpus, placeable_cpus, quota_width
from jigcmd.envelope.cgroups.files import cpu_list
from jigcmd.errors import Code, JigError
from jigcmd.plan import Limits

HALF = Limits()  # 50 ms per 100 ms: half a core
THIRTY_TWO = tuple(range(32))


def test_half_a_core_is_one_cpu_and_one_and_a_half_cores_are_two() -> None:
    """The quota rounds up to whole CPUs, never to none."""
    assert quota_width(HALF) == 1
    assert quota_width(Limits(cpu_quota_us=150_000)) == 2
    assert quota_width(Limits(cpu_quota_us=1)) == 1


def test_an_unlimited_quota_pins_to_every_allowed_cpu() -> None:
    """cpu.max "max" (a non-positive quota) pays for the whole allowed set."""
    assert quota_width(Limits(cpu_quota_us=-1)) is None
    assert pinned_cpus(Limits(cpu_quota_us=-1), 3, THIRTY_TWO) == THIRTY_TWO


def test_concurrent_slots_on_a_large_host_get_distinct_cpus() -> None:
    """Sixteen slots of half a core on 32 CPUs: sixteen different single CPUs."""
    chosen = [pinned_cpus(HALF, slot, THIRTY_TWO) for slot in range(16)]
    assert all(len(cpus) == 1 for cpus in chosen)
    assert len(set(chosen)) == 16


def test_wider_quotas_take_disjoint_runs_of_cpus_per_slot() -> None:
    """Two CPUs per envelope: slots 0..3 take {0,1}, {2,3}, {4,5}, {6,7}."""
    wide = Limits(cpu_quota_us=200_000)
    assert [pinned_cpus(wide, slot, range(8)) for slot in range(4)] == [
        (0, 1),
        (2, 3),
        (4, 5),
        (6, 7),
    ]


def test_more_slots_than_cpus_share_them_evenly() -> None:
    """Four slots on two CPUs: each CPU carries two envelopes."""
    chosen = [pinned_cpus(HALF, slot, (4, 9)) for slot in range(4)]
    assert sorted(chosen) == [(4,), (4,), (9,), (9,)]


def test_only_cpus_this_process_may_use_are_chosen() -> None:
    """Without an explicit set, the choice comes from the server's own affinity mask."""
    allowed = os.sched_getaffinity(0)
    for slot in (0, 1, 7, None):
        assert set(pinned_cpus(HALF, slot)) <= allowed


def test_runs_without_a_slot_still_move_across_the_cpus() -> None:
    """Consecutive unslotted runs of one process take consecutive CPUs."""
    chosen = {pinned_cpus(HALF, None, THIRTY_TWO) for _ in range(4)}
    assert len(chosen) == 4


def test_an_empty_allowed_set_is_refused() -> None:
    """No CPU to pin to is an error, never an unpinned run."""
    with pytest.raises(ValueError, match="no CPU"):
        pinned_cpus(HALF, 0, ())


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11\n", (0, 1, 2, 3, 8, 10, 11)), ("5", (5,)), ("\n", ())],
)
def test_kernel_cpu_lists_are_read_as_the_cpus_they_name(text: str, cpus: tuple[int, ...]) -> None:
    """Ranges, single CPUs and the empty list, as cpuset files print them."""
    assert cpu_list(text) == cpus


def test_a_new_envelope_takes_a_cpu_no_live_envelope_holds_whatever_its_slot() -> None:
    """Sessions with state directories of their own all hold slot 0: the kernel's record of
    the live pins still sends each to a free CPU."""
    assert pinned_cpus(HALF, 0, range(4), busy=[(0,), (1,)]) == (2,)
    assert pinned_cpus(HALF, 0, range(4), busy=[(0,), (1,), (2,)]) == (3,)


def test_when_every_cpu_is_held_the_least_held_one_is_taken() -> None:
    """Three live envelopes on two CPUs: the fourth joins the CPU that carries one."""
    assert pinned_cpus(HALF, 0, (0, 1), busy=[(0,), (0,), (1,)]) == (1,)


def test_a_wide_envelope_takes_the_least_used_run_of_cpus() -> None:
    """Two CPUs per envelope with {0,1} held: the next takes {2,3}."""
    wide = Limits(cpu_quota_us=200_000)
    assert pinned_cpus(wide, 0, range(8), busy=[(0, 1)]) == (2, 3)


def test_only_cpus_the_cgroup_bases_cpuset_also_allows_are_placeable() -> None:
    """A base narrowed to CPU 1 under affinity 0-1: CPU 1 only (a job's cpuset cannot name a
    CPU its parent lacks); no cpuset: the affinity as it is."""
    where = "/sys/fs/cgroup/cpuset/jigcmd-x/cpuset.effective_cpus"
    assert placeable_cpus((where, (1, 5)), own={0, 1}) == (1,)
    assert placeable_cpus(None, own={0, 1}) == (0, 1)
    last = max(os.sched_getaffinity(0))
    assert Placement(bound=lambda: (where, (last, 4096))).place(HALF, 0) == (last,)


def test_a_base_sharing_no_cpu_with_this_process_is_refused_naming_both_and_the_fix() -> None:
    """EXECUTION_FAILED, nothing ran: the base's file and CPUs, ours, and taskset."""
    where = "/sys/fs/cgroup/cpuset/jigcmd-x/cpuset.effective_cpus"
    with pytest.raises(JigError) as refused:
        placeable_cpus((where, (1,)), own={0})
    assert refused.value.code is Code.EXECUTION_FAILED
    message = refused.value.message
    assert f"cpuset ({where}) gives its jobs CPUs 1, and this process may run on CPUs 0" in message
    assert "nothing ran" in message and "taskset -c 1 jigcmd" in message
