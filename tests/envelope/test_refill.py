"""The zygote's refill policy (refill.py), driven with explicit times: no zygote, no sleeping."""

from __future__ import annotations

import pytest

from jigcmd.envelope.refill import BACK_TO_BACK_S, RETRY_PREPARE_S, Refill

FALLBACK_S = 0.03
MS = 0.001


def pool_of(size: int) -> Refill:
    refill = Refill(FALLBACK_S)
    refill.warmed(size, FALLBACK_S)
    return refill


def idle_wants(refill: Refill, now: float, ready: int) -> bool:
    return refill.wanted(now, ready=ready, running=0, starting=False)


def answered_after_a_call(refill: Refill, gap: float) -> float:
    """An answer at 1.0, the next launch `gap` later, its run released at 2.0 and answered."""
    refill.answered(1.0)
    refill.launched(1.0 + gap)
    refill.released(2.0)
    refill.answered(2.0 + MS)
    return 2.0 + MS


def test_an_idle_pool_fills_to_its_size() -> None:
    refill = pool_of(2)
    assert idle_wants(refill, 0.0, ready=0)
    assert idle_wants(refill, 0.0, ready=1)
    assert not idle_wants(refill, 0.0, ready=2)


def test_no_pool_is_never_filled() -> None:
    refill = pool_of(0)
    assert not idle_wants(refill, 0.0, ready=0)
    assert not refill.wanted(0.0, ready=0, running=1, starting=False)


def test_nothing_is_prepared_while_a_launch_has_not_started_its_candidate() -> None:
    refill = pool_of(2)
    assert not refill.wanted(0.0, ready=0, running=1, starting=True)
    assert not refill.wanted(0.0, ready=1, running=2, starting=True)
    # Once the candidate started, an empty pool is refilled beside it.
    assert refill.wanted(0.0, ready=0, running=1, starting=False)


def test_one_ready_envelope_is_enough_while_runs_are_in_flight() -> None:
    refill = pool_of(2)
    assert not refill.wanted(0.0, ready=1, running=1, starting=False)
    assert refill.wanted(0.0, ready=0, running=3, starting=False)


def test_after_a_run_the_refill_waits_for_the_answer() -> None:
    refill = pool_of(2)
    refill.launched(0.0)
    refill.released(1.0)
    assert not idle_wants(refill, 1.0 + MS, ready=1)
    refill.answered(1.0 + 2 * MS)
    assert idle_wants(refill, 1.0 + 2 * MS, ready=1)


def test_with_none_ready_the_refill_does_not_wait_for_the_answer() -> None:
    refill = pool_of(2)
    refill.launched(0.0)
    refill.released(1.0)
    assert idle_wants(refill, 1.0, ready=0)


def test_a_caller_that_never_answers_is_refilled_after_the_fallback() -> None:
    refill = pool_of(2)
    refill.released(1.0)
    assert not idle_wants(refill, 1.0 + FALLBACK_S - MS, ready=1)
    assert idle_wants(refill, 1.0 + FALLBACK_S, ready=1)
    # The fallback let the unanswered run go: a late answer holds nothing back.
    refill.answered(1.0 + FALLBACK_S + MS)
    assert refill.unanswered == 0
    assert idle_wants(refill, 1.0 + FALLBACK_S + MS, ready=1)


def test_a_back_to_back_caller_gets_its_next_call_before_the_refill() -> None:
    refill = pool_of(2)
    answer = answered_after_a_call(refill, BACK_TO_BACK_S / 2)  # the next call came at once
    assert refill.quiet_until == pytest.approx(answer + BACK_TO_BACK_S)
    assert not idle_wants(refill, answer, ready=1)
    # The caller went quiet: the refill goes ahead (the loop wakes at `quiet_until`).
    assert answer + BACK_TO_BACK_S in refill.timers()
    assert idle_wants(refill, answer + BACK_TO_BACK_S, ready=1)


def test_a_back_to_back_caller_with_none_ready_is_refilled_at_once() -> None:
    refill = pool_of(2)
    answer = answered_after_a_call(refill, MS)
    assert idle_wants(refill, answer, ready=0)


def test_a_caller_with_gaps_is_refilled_right_after_the_answer() -> None:
    refill = pool_of(2)
    answer = answered_after_a_call(refill, BACK_TO_BACK_S + MS)  # a gap: not back to back
    assert idle_wants(refill, answer, ready=1)


def test_the_first_launch_is_never_back_to_back() -> None:
    refill = pool_of(2)
    refill.launched(0.0)
    assert not refill.back_to_back


def test_a_spare_answer_never_counts_below_zero() -> None:
    refill = pool_of(2)
    refill.answered(0.0)
    refill.answered(0.0)
    assert refill.unanswered == 0
    refill.released(1.0)
    assert refill.unanswered == 1


def test_a_failed_preparation_is_retried_later() -> None:
    refill = pool_of(2)
    refill.failed(1.0)
    assert not idle_wants(refill, 1.0 + RETRY_PREPARE_S - MS, ready=0)
    assert 1.0 + RETRY_PREPARE_S in refill.timers()
    assert idle_wants(refill, 1.0 + RETRY_PREPARE_S, ready=0)
    # A new shape (Warm) tries at once.
    refill.failed(2.0)
    refill.warmed(2, FALLBACK_S)
    assert idle_wants(refill, 2.0, ready=0)
