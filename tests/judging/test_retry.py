"""RetryPolicy: what is retried, how long it waits (Retry-After, backoff with jitter), what propagates."""

import asyncio
import random

import pytest

from trl_rankreward.judging.backends.base import BackendError
from trl_rankreward.judging.calls import RetryPolicy
from trl_rankreward.judging.parsing import InvalidAnswer


def run_with_waits(policy, failures, result="ok"):
    """Run `policy` over an attempt that raises `failures` in turn, then returns `result`;
    asyncio.sleep is replaced so the waits are recorded, not slept."""
    waits, tries = [], []

    async def attempt(number):
        tries.append(number)
        if failures:
            raise failures.pop(0)
        return result

    async def main():
        original = asyncio.sleep

        async def fake_sleep(seconds, *args):
            waits.append(seconds)
            await original(0)

        asyncio.sleep = fake_sleep
        try:
            return await policy.run(attempt)
        finally:
            asyncio.sleep = original

    return asyncio.run(main()), waits, tries


def test_retry_after_is_honoured_and_capped():
    policy = RetryPolicy(max_attempts=3, max_retry_after_s=10)
    failures = [BackendError("busy", kind="http", status=429, retry_after_s=4.0),
                BackendError("busy", kind="http", status=429, retry_after_s=500.0)]  # fmt: skip
    result, waits, tries = run_with_waits(policy, failures)
    assert (result, tries) == ("ok", [1, 2, 3])
    assert waits == [4.0, 10.0]  # the server's 4 s, then its 500 s capped at max_retry_after_s


def test_backoff_doubles_within_its_jitter_and_cap():
    policy = RetryPolicy(max_attempts=5, backoff_s=1.0, max_backoff_s=3.0, jitter_s=0.5)
    failures = [BackendError("reset", kind="transport") for _ in range(4)]
    _, waits, _ = run_with_waits(policy, failures)
    # after try n: min(3, 1 * 2**(n-1)) + uniform(0, 0.5) -> 1, 2, 3 (capped), 3 (capped)
    for wait, base in zip(waits, [1.0, 2.0, 3.0, 3.0], strict=True):
        assert base <= wait <= base + 0.5


def test_an_invalid_answer_is_asked_again_at_once():
    _, waits, tries = run_with_waits(RetryPolicy(max_attempts=3), [InvalidAnswer("prose, no JSON")])
    assert (waits, tries) == ([0.0], [1, 2])


def test_the_last_retryable_error_propagates_after_max_attempts():
    failures = [BackendError("a", kind="timeout"), BackendError("b", kind="transport"), BackendError("c")]
    with pytest.raises(BackendError, match="^b$"):
        run_with_waits(RetryPolicy(max_attempts=2, backoff_s=0.0, jitter_s=0.0), failures)


@pytest.mark.parametrize("error", [BackendError("bad key", kind="http", status=401), KeyError("a bug")])
def test_non_retryable_errors_and_bugs_propagate_on_the_first_try(error):
    tries = []

    async def attempt(number):
        tries.append(number)
        raise error

    with pytest.raises(type(error)):
        asyncio.run(RetryPolicy(max_attempts=5).run(attempt))
    assert tries == [1]


def test_worst_case_time_against_a_hung_server():
    # 3 tries x 120 s timeout + 2 waits, each the larger of the backoff (1 s, then 2 s, + 1 s of jitter at
    # most) and a Retry-After capped at max_retry_after_s = 120 s: 360 + 120 + 120
    assert RetryPolicy().worst_case_s(120) == 3 * 120 + 120 + 120
    # with the Retry-After cap below the backoff, the backoff decides: 360 + (1 + 1) + (2 + 1)
    assert RetryPolicy(max_retry_after_s=0).worst_case_s(120) == 3 * 120 + 2 + 3


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"max_attempts": True}, {"backoff_s": -1}])
def test_bad_settings_are_rejected(kwargs):
    with pytest.raises(ValueError, match="must be"):
        RetryPolicy(**kwargs)


def test_jitter_is_drawn_from_the_policys_own_seeded_generator():
    error = BackendError("down", kind="transport")

    def waits(seed):
        policy = RetryPolicy(seed=seed, backoff_s=0.0, jitter_s=1.0)
        random.seed(123)  # the global generator, reseeded and drawn from elsewhere, does not matter
        first = policy.wait_s(1, error)
        random.random()
        return [first, policy.wait_s(1, error)]

    assert waits(5) == waits(5)  # reproducible from the judge's seed
    assert waits(5) != waits(6)
    assert all(0.0 <= w <= 1.0 for w in waits(5))
