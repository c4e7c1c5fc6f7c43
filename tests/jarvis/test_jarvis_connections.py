"""Which held connection gives way to a new one, and the cap within the descriptor limit."""

from __future__ import annotations

import resource

from jigcmd.jarvis.connections import ConnectionLimits, Connections, fd_capacity


def test_below_the_cap_every_newcomer_is_admitted_and_nobody_gives_way() -> None:
    """Room left: admitted, nothing closed."""
    held: Connections[str] = Connections(lambda: 2)
    held.waiting("a", authorized=False)
    assert held.admit() == (True, None)


def test_at_the_cap_the_longest_waiting_unauthenticated_connection_gives_way_first() -> None:
    """Those that never presented the token go before idle authorized ones, oldest first."""
    held: Connections[str] = Connections(lambda: 3)
    held.waiting("idle-authorized", authorized=True)
    held.waiting("half-open-1", authorized=False)
    held.waiting("half-open-2", authorized=False)
    assert held.admit() == (True, "half-open-1")
    held.waiting("new", authorized=False)
    assert held.admit() == (True, "half-open-2")
    held.waiting("newer", authorized=False)
    assert held.admit() == (True, "new")


def test_an_idle_authorized_connection_gives_way_when_no_other_waits() -> None:
    """With no unauthenticated connection left, the oldest idle authorized one goes."""
    held: Connections[str] = Connections(lambda: 2)
    held.waiting("idle-1", authorized=True)
    held.busy("busy")
    assert held.admit() == (True, "idle-1")


def test_busy_connections_never_give_way_so_the_newcomer_is_refused() -> None:
    """Every held connection has a request in progress: refused, nobody closed."""
    held: Connections[str] = Connections(lambda: 2)
    held.busy("a")
    held.busy("b")
    assert held.admit() == (False, None)
    assert held.counts() == {"waiting": 0, "stalled": 0, "authorized-waiting": 0, "busy": 2}


def test_a_stalled_connection_gives_way_after_the_unauthenticated_before_idle_ones() -> None:
    """Busy with a request but not reading its answer: it may give way, once it stalled a while."""
    now = [100.0]
    held: Connections[str] = Connections(lambda: 3, min_wait_s=0.5, clock=lambda: now[0])
    held.waiting("idle-authorized", authorized=True)
    held.busy("no-reader")
    held.stalled("no-reader")
    held.waiting("half-open", authorized=False)
    now[0] += 0.5
    assert held.admit() == (True, "half-open")
    held.busy("caller")
    assert held.admit() == (True, "no-reader")
    assert held.counts() == {"waiting": 0, "stalled": 0, "authorized-waiting": 1, "busy": 1}


def test_a_connection_back_to_waiting_joins_the_end_of_the_queue() -> None:
    """After its answer a keep-alive connection waits again, behind those already waiting."""
    held: Connections[str] = Connections(lambda: 2)
    held.waiting("a", authorized=False)
    held.busy("b")
    held.waiting("b", authorized=False)
    assert held.admit() == (True, "a")
    held.remove("b")
    assert len(held) == 0


def test_short_of_descriptors_a_waiting_connection_gives_way_below_the_cap() -> None:
    """`force`: no descriptor left, whatever the count."""
    held: Connections[str] = Connections(lambda: 100)
    held.busy("busy")
    assert held.admit(force=True) == (False, None)
    held.waiting("idle", authorized=True)
    assert held.admit(force=True) == (True, "idle")


def test_the_cap_stays_within_the_descriptor_limit_less_the_reserve() -> None:
    """The configured cap, unless the soft RLIMIT_NOFILE leaves less after the reserve."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert fd_capacity(ConnectionLimits(max_connections=10, reserved_fds=64)) == min(10, soft - 64)
    tight = ConnectionLimits(max_connections=10**9, reserved_fds=64)
    assert fd_capacity(tight) == soft - 64


def test_a_connection_that_just_arrived_does_not_give_way_before_its_fair_chance() -> None:
    """min_wait: in a burst, a head not read yet is not pushed out; once it waited, it is."""
    now = [100.0]
    held: Connections[str] = Connections(lambda: 1, min_wait_s=0.5, clock=lambda: now[0])
    held.waiting("just-accepted", authorized=False)
    assert not held.has_room()
    assert held.admit() == (False, None)
    now[0] += 0.5
    assert held.has_room()
    assert held.admit() == (True, "just-accepted")


def test_short_of_descriptors_even_a_new_connection_gives_way() -> None:
    """`force` ignores min_wait: no descriptor is left for anyone."""
    held: Connections[str] = Connections(lambda: 1, min_wait_s=60, clock=lambda: 0.0)
    held.waiting("new", authorized=False)
    assert held.admit(force=True) == (True, "new")


def test_a_young_unauthenticated_waiter_makes_the_newcomer_wait_not_a_caller_give_way() -> None:
    """The order holds: while one unauthenticated connection waits, no stalled or authorized
    one gives way; one too young to go means the newcomer waits (then 503), no one goes."""
    now = [0.0]
    held: Connections[str] = Connections(lambda: 3, min_wait_s=0.5, clock=lambda: now[0])
    held.stalled("authorized-reading-its-answer")
    held.waiting("idle-authorized", authorized=True)
    now[0] = 1.0
    held.waiting("unauthenticated-newcomer", authorized=False)
    now[0] = 1.1
    assert not held.has_room()
    assert held.admit() == (False, None)
    now[0] = 1.5
    assert held.admit() == (True, "unauthenticated-newcomer")
    held.busy("caller")
    assert held.admit() == (True, "authorized-reading-its-answer")
