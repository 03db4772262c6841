"""Request validation: BufferSelectRequest.combined_order (RankBuffer App. G)."""

import pytest

from trl_rankreward.judging.requests import BufferSelectRequest


def _request(**kw):
    return BufferSelectRequest(query="q", anchors=["a0", "a1"], rollouts=["r0", "r1"], size=2, **kw)


def test_combined_order_is_optional_and_kept_as_a_tuple():
    assert _request().combined_order == ()
    # pool: a0=0 a1=1 r0=2 r1=3; any permutation of 0..3 is accepted and stored as a tuple
    assert _request(combined_order=[2, 0, 3, 1]).combined_order == (2, 0, 3, 1)


@pytest.mark.parametrize(
    "order",
    [
        [0, 1, 2],  # misses r1
        [0, 1, 2, 2],  # repeats r0, misses r1
        [0, 1, 2, 4],  # 4 is past the pool of 4
        [-1, 0, 1, 2],
    ],
)
def test_combined_order_must_be_a_permutation_of_the_pool(order):
    with pytest.raises(ValueError, match=r"must be a permutation of 0\.\.3 .*2 anchors, then 2 rollouts"):
        _request(combined_order=order)


@pytest.mark.parametrize("order", ["0123", [0, 1, 2, 3.0], [True, 0, 2, 3], 3])
def test_combined_order_must_hold_ints(order):
    with pytest.raises(TypeError, match="combined_order must"):
        _request(combined_order=order)
