"""JudgeCircuitBreaker: when judging has failed for too long, and what the stop message quotes."""

import math

import pytest

from trl_rankreward.rewards.base import GroupResult
from trl_rankreward.trainers.group_scoring import FailureLog, first_failures
from trl_rankreward.trainers.reward_state import JudgeCircuitBreaker


def test_consecutive_all_neutral_batches_trip_it_and_a_good_batch_resets_the_streak():
    breaker = JudgeCircuitBreaker(max_failed_batches=3, window=20, max_neutral_fraction=1.0)
    # two failed batches, one good one, then three failed: trips on the third of those (streak 3)
    outcomes = [breaker.record(n, 4, ["down"] if n else []) for n in (4, 4, 0, 4, 4)]
    assert outcomes == [False] * 5 and not breaker.tripped
    assert breaker.record(4, 4, ["down"]) and breaker.tripped
    assert "every group was neutral in 3 consecutive generation batches" in breaker.reason()
    assert breaker.record(4, 4, []) is False  # once tripped it stays tripped, reported once


def test_the_neutral_fraction_over_a_full_window_trips_it():
    breaker = JudgeCircuitBreaker(max_failed_batches=0, window=4, max_neutral_fraction=0.5)
    # window of 4 batches x 4 groups; neutral 2, 2, 2 -> not full yet; then 3: 9 of 16 = 56% > 50%
    assert [breaker.record(n, 4, ["slow"]) for n in (2, 2, 2)] == [False, False, False]
    assert breaker.record(3, 4, ["slow"])
    assert "9 of 16 groups (56%) were neutral over the last 4 generation batches (limit 50%)" in breaker.reason()


def test_a_short_outage_does_not_trip_it_and_the_quote_is_the_first_failures():
    breaker = JudgeCircuitBreaker(max_failed_batches=3, window=4, max_neutral_fraction=0.5)
    for n, failures in ((4, ["a", "b"]), (4, ["b", "c", "d"]), (0, []), (0, [])):  # 8 of 16 = 50%: not above
        assert breaker.record(n, 4, failures) is False
    assert not breaker.tripped and breaker.reason() == ""
    for _ in range(4):  # a clean window forgets the outage's messages
        breaker.record(0, 4, [])
    for _ in range(3):
        breaker.record(4, 4, ["e"])
    assert breaker.tripped and "  - e" in breaker.reason() and "  - a" not in breaker.reason()


def test_state_round_trip_continues_the_streak():
    a = JudgeCircuitBreaker(max_failed_batches=3, window=20, max_neutral_fraction=1.0)
    a.record(4, 4, ["x"])
    a.record(4, 4, ["x"])
    b = JudgeCircuitBreaker(max_failed_batches=3, window=20, max_neutral_fraction=1.0)
    b.load_state_dict(a.state_dict())
    assert b.record(4, 4, ["x"])  # the third failed batch in a row, counted across the resume


def test_bad_settings_are_rejected():
    # The errors name the settings users set (the configs' and as_reward_func's judge_* keywords).
    with pytest.raises(ValueError, match="judge_stop_after_failed_batches must be >= 0, got -1"):
        JudgeCircuitBreaker(max_failed_batches=-1)
    with pytest.raises(ValueError, match="judge_failure_window must be >= 1, got 0"):
        JudgeCircuitBreaker(window=0)


def test_first_failures_and_the_failure_log_rate():
    results = [GroupResult([math.nan], details={"failure": "down"}),
               GroupResult([0.5], details={"partial_failures": ["fine call failed", "down"]})]  # fmt: skip
    assert first_failures(results) == ["down", "fine call failed"]  # distinct, neutral groups first
    log = FailureLog(interval_s=3600)
    assert log.due() and not log.due()  # the first time, then not within the interval
