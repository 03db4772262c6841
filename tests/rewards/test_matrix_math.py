"""MatrixReward math (MatrixReward paper, Sec. 3, App. E, App. F): hand-worked values and properties."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_rankreward.rewards import matrix_math
from trl_rankreward.rewards.matrix_math import (
    entropy_weights,
    fuse,
    game_combination,
    pair_indices,
    prior_weights,
    svd_weights,
    topsis_closeness,
    variation_correlation_weights,
    weighted_aggregation,
    win_rate_matrix,
)
from trl_rankreward.rewards.matrix_reward import MatrixRewardOptions


def matrix_reward(M, points, **options):
    """`matrix_math.matrix_reward` with the paper's method (`MatrixRewardOptions`' defaults) where `options` are silent."""
    return matrix_math.matrix_reward(M, points, **{**MatrixRewardOptions().math_options(), **options})


# A G=3, K=3 matrix used by several tests. Rubric 0: 0 beats 1, 0 beats 2, 1 beats 2 -> wins
# (2, 1, 0) / 2 = (1, .5, 0). Rubric 1: 0 ties 1, 0 beats 2, 1 beats 2 -> (1.5, 1.5, 0) / 2.
# Rubric 2: all ties -> (.5, .5, .5), a constant column.
M3 = np.array([[1.0, 0.75, 0.5], [0.5, 0.75, 0.5], [0.0, 0.0, 0.5]])
# pairs in pair_indices order (0,1), (0,2), (1,2); z = score of the first of the pair
Z3 = np.array([[1.0, 0.5, 0.5], [1.0, 1.0, 0.5], [1.0, 1.0, 0.5]])

VARIANTS = [
    {},
    {"matrix_weighting": "entropy"},
    {"matrix_weighting": "svd"},
    {"fusion": "prior_only"},
    {"fusion": "additive", "mixture_alpha": 0.3},
    {"fusion": "multiplicative"},
    {"ideals": "theoretical"},
    {"distance": "mahalanobis"},
    {"aggregation": "weighted_sum"},
]


# --- matrix ---------------------------------------------------------------------------------


def test_pair_order_is_combinations_order():
    assert list(zip(*pair_indices(4), strict=True)) == list(itertools.combinations(range(4), 2))


def test_win_rate_matrix_by_hand():
    # see the derivation of M3 above; each entry is wins (ties 1/2) over G - 1 = 2 opponents
    np.testing.assert_allclose(win_rate_matrix(Z3, 3, 3), M3)


def test_win_rate_matrix_rejects_bad_input():
    with pytest.raises(ValueError, match=r"shape \(C\(3,2\)=3, 3\)"):
        win_rate_matrix(np.zeros((2, 3)), 3, 3)
    with pytest.raises(ValueError, match="G >= 2"):
        win_rate_matrix(np.zeros((0, 1)), 1, 1)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        win_rate_matrix(np.full((1, 1), 2.0), 2, 1)


# --- matrix weightings -------------------------------------------------------------------------------


def test_critic_by_hand():
    # U (min-max): col0 (1, .5, 0), col1 (1, 1, 0), col2 constant -> zeros.
    # sigma0 = sqrt(((.5)^2 + 0 + (.5)^2) / 3) = sqrt(1/6); col1 centered (1/3, 1/3, -2/3):
    # sigma1 = sqrt((1/9 + 1/9 + 4/9) / 3) = sqrt(2)/3; cov01 = (.5/3 + 0 + .5*2/3) / 3 = 1/6,
    # rho01 = (1/6) / (sqrt(1/6) sqrt(2)/3) = sqrt(3)/2; rho with the constant column = 0.
    # h0 = h1 = (1 - sqrt(3)/2) + (1 - 0); d_k = sigma_k h_k, d2 = 0, so a0 : a1 = sigma0 : sigma1
    # = sqrt(3)/2 : 1 -> a0 = sqrt(3)/(2 + sqrt(3)) = 2 sqrt(3) - 3, a1 = 4 - 2 sqrt(3).
    s3 = math.sqrt(3)
    np.testing.assert_allclose(variation_correlation_weights(M3), [2 * s3 - 3, 4 - 2 * s3, 0.0], atol=1e-12)


def test_critic_redundant_column_loses_weight():
    # G=2: two identical columns (rho01 = 1) and one anti-correlated (rho02 = rho12 = -1), all sigma = 1/2:
    # h0 = (1 - 1) + (1 + 1) = 2, h1 = 2, h2 = (1 + 1) + (1 + 1) = 4 -> a = (2, 2, 4) / 8
    M = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(variation_correlation_weights(M), [0.25, 0.25, 0.5])


@pytest.mark.parametrize("extract", [variation_correlation_weights, entropy_weights, svd_weights])
def test_constant_matrix_gives_uniform_weights(extract):
    np.testing.assert_allclose(extract(np.full((4, 5), 0.5)), np.full(5, 0.2))


def test_entropy_by_hand():
    # App. F. U col0 (1, .5, 0) -> q = (2/3, 1/3, 0); col1 (1, 1, 0) -> q = (1/2, 1/2, 0); col2 constant -> 0.
    # e0 = -(2/3 ln 2/3 + 1/3 ln 1/3) / ln 3, e1 = ln 2 / ln 3; a ~ (1 - e0, 1 - e1, 0).
    e0 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3)) / math.log(3)
    e1 = math.log(2) / math.log(3)
    d = np.array([1 - e0, 1 - e1, 0.0])  # (0.4206, 0.3691, 0)
    np.testing.assert_allclose(entropy_weights(M3), d / d.sum(), atol=1e-12)
    assert entropy_weights(M3)[0] == pytest.approx(0.5326, abs=1e-4)


def test_svd_85_percent_by_hand():
    # App. F. With orthogonal zero-mean +-1 patterns x, y, z over G = 4 rows, take columns
    # x, x + y/2, z (then affinely mapped into [0, 1], which standardization undoes). The correlation
    # matrix Z^T Z / G is [[1, r, 0], [r, 1, 0], [0, 0, 1]] with r = 1/sqrt(1.25) = 0.8944:
    # eigenpairs (1 + r, (1,1,0)/sqrt2), (1, (0,0,1)), (1 - r, (1,-1,0)/sqrt2); total 3.
    # Explained: (1 + r)/3 = 0.631 < 0.85 <= (2 + r)/3 = 0.965 -> keep m = 2:
    # a ~ ((1 + r)/2, (1 + r)/2, 1). With variance 0.99 all three are kept: a ~ (1, 1, 1).
    x, y, z = np.array([1, 1, -1, -1.0]), np.array([1, -1, 1, -1.0]), np.array([1, -1, -1, 1.0])
    raw = np.stack([x, x + y / 2, z], axis=1)
    M = (raw - raw.min()) / (raw.max() - raw.min())
    r = 1 / math.sqrt(1.25)
    expected = np.array([(1 + r) / 2, (1 + r) / 2, 1.0]) / (2 + r)
    np.testing.assert_allclose(svd_weights(M), expected, atol=1e-12)
    np.testing.assert_allclose(svd_weights(M, variance=0.99), np.full(3, 1 / 3), atol=1e-12)


def test_svd_constant_column_gets_zero():
    # M3: only columns 0 and 1 vary; for K'=2 the kept components give both equal weight:
    # eigenvalues 1 +- rho with vectors (1, +-1)/sqrt2 -> each component splits its lambda evenly.
    np.testing.assert_allclose(svd_weights(M3), [0.5, 0.5, 0.0], atol=1e-12)


# --- fusion -----------------------------------------------------------------------------------


def test_game_combination_appendix_e():
    # App. E: a = (0.2413, 0.2952, 0.2637, 0.1998), points (3,3,2,2) -> p = (.3,.3,.2,.2).
    # The paper prints alpha = 0.1582, beta = 0.8418, w = (0.2907, 0.2992, 0.2101, 0.2000).
    # From the printed (rounded) a we get alpha = 0.15898: H is nearly singular (det H = 0.0019,
    # a and p nearly parallel), so alpha is very sensitive to a; moving each a_k within its rounding
    # interval +-5e-5 (and renormalizing) moves alpha over [0.1577, 0.1603], which holds 0.1582.
    # w = p + alpha (a - p) is insensitive (|a - p| <= 0.064), so w agrees to 4 decimals.
    a = [0.2413, 0.2952, 0.2637, 0.1998]
    p = prior_weights([3, 3, 2, 2])
    np.testing.assert_allclose(p, [0.3, 0.3, 0.2, 0.2])
    w, alpha, beta, fallback = game_combination(a, p)
    assert not fallback
    assert alpha == pytest.approx(0.158, abs=1.5e-3) and alpha == pytest.approx(0.15898, abs=1e-5)
    assert alpha + beta == pytest.approx(1.0)
    np.testing.assert_allclose(w, [0.2907, 0.2992, 0.2101, 0.2000], atol=5e-5)


def test_game_combination_uniform_a_gives_prior():
    # a uniform: a.a = a.p = 1/K, so Eq. 4's first row gives u (1/K) + v (1/K) = 1/K and u = 0
    # by Cramer (a.a p.p - a.p p.p = 0): alpha = 0, beta = 1, w = p.
    w, alpha, beta, fallback = game_combination([0.5, 0.5], [0.75, 0.25])
    assert (alpha, beta, fallback) == (0.0, 1.0, False)
    np.testing.assert_allclose(w, [0.75, 0.25])


def test_game_combination_fallback_when_singular():
    # a = p: det H = |a|^2 |p|^2 - (a.p)^2 = 0 -> w = sqrt(a p)/sum = p, coefficients (0.5, 0.5)
    w, alpha, beta, fallback = game_combination([0.2, 0.8], [0.2, 0.8])
    assert (alpha, beta, fallback) == (0.5, 0.5, True)
    np.testing.assert_allclose(w, [0.2, 0.8])
    _, _, _, fallback = game_combination([np.nan, 1.0], [0.5, 0.5])
    assert fallback


def test_other_fusions_by_hand():
    a, p = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.3, 0.5])
    prior = fuse(a, p, "prior_only")
    np.testing.assert_allclose(prior.w, p)
    assert (prior.alpha, prior.beta) == (0.0, 1.0)
    # additive, alpha = 0.25: 0.75 p + 0.25 a = (0.15 + 0.15, 0.225 + 0.075, 0.375 + 0.025)
    additive = fuse(a, p, "additive", mixture_alpha=0.25)
    np.testing.assert_allclose(additive.w, [0.3, 0.3, 0.4])
    assert (additive.alpha, additive.beta) == (0.25, 0.75)
    # multiplicative: a p = (0.12, 0.09, 0.05), sum 0.26
    multiplicative = fuse(a, p, "multiplicative")
    np.testing.assert_allclose(multiplicative.w, [0.12 / 0.26, 0.09 / 0.26, 0.05 / 0.26])
    assert multiplicative.alpha is None and not multiplicative.fallback
    with pytest.raises(ValueError, match="fusion='sum' is not supported"):
        fuse(a, p, "sum")


# --- reward -----------------------------------------------------------------------------------


def test_topsis_observed_euclidean_by_hand():
    # G=2: answer 0 wins rubric 0, answer 1 wins rubric 1 -> M = I, L = 1, N = M.
    # v0 = (w0, 0), v1 = (0, w1); v+ = (w0, w1), v- = (0, 0).
    # D0+ = w1, D0- = w0 -> r0 = w0 / (w0 + w1) = w0 = 0.7; r1 = 0.3.
    np.testing.assert_allclose(topsis_closeness(np.eye(2), [0.7, 0.3]), [0.7, 0.3])


def test_topsis_g3_by_hand():
    # M3 columns 0-1, w = (.5, .5). L0 = sqrt(1.25), L1 = sqrt(2 * .5625) = .75 sqrt2.
    # v col0 = .5 (1, .5, 0)/sqrt(1.25); col1 = .5 (1, 1, 0)/sqrt2 -> row 0 and row 1 share column 1.
    # v+ = row 0, so r0 = 1; row 2 = v- = (0, 0), so r2 = 0.
    # row 1: D+ = .5 * .5/sqrt(1.25) = .2236, D- = sqrt((.25/sqrt1.25)^2 + (.5/sqrt2)^2) = sqrt(.05 + .125)
    v_gap = 0.25 / math.sqrt(1.25)
    r1 = math.sqrt(v_gap**2 + 0.125) / (v_gap + math.sqrt(v_gap**2 + 0.125))
    np.testing.assert_allclose(topsis_closeness(M3[:, :2], [0.5, 0.5]), [1.0, r1, 0.0], atol=1e-12)


def test_theoretical_ideals_by_hand():
    # M = [[1, .5], [0, .5]], w = (.5, .5): L = (1, sqrt(.5)). v0 = (.5, .5 * .5/sqrt.5) = (.5, sqrt(.125)),
    # v1 = (0, sqrt(.125)). Theoretical v+ = w / L = (.5, .5/sqrt.5 = sqrt.5), v- = 0.
    # D0+ = sqrt.5 - sqrt.125 = sqrt.125, D0- = sqrt(.25 + .125) = sqrt.375 -> r0 = sqrt3 / (1 + sqrt3)
    # D1+ = sqrt(.25 + .125) = sqrt.375, D1- = sqrt.125 -> r1 = 1 / (1 + sqrt3).
    # (Observed ideals give 1 and 0: the all-tie column is constant there and drops out.)
    s3 = math.sqrt(3)
    M = np.array([[1.0, 0.5], [0.0, 0.5]])
    np.testing.assert_allclose(topsis_closeness(M, [0.5, 0.5], ideals="theoretical"), [s3 / (1 + s3), 1 / (1 + s3)])
    np.testing.assert_allclose(topsis_closeness(M, [0.5, 0.5]), [1.0, 0.0])


def test_mahalanobis_by_hand():
    # Rows (1,1), (1,0), (0,1), (0,0): the centered columns (.5,.5,-.5,-.5) and (.5,-.5,.5,-.5) are
    # orthogonal, so the covariance of v is diagonal and the Mahalanobis distance is the Euclidean
    # distance after dividing each column by its std: the weights cancel and both columns count alike.
    # Row (1,0): D+ = D- -> 1/2 (Euclidean with w = (.7, .3): D+ = .3 c, D- = .7 c -> 0.7).
    M = np.array([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(topsis_closeness(M, [0.7, 0.3], distance="mahalanobis"), [1.0, 0.5, 0.5, 0.0])
    np.testing.assert_allclose(topsis_closeness(M, [0.7, 0.3]), [1.0, 0.7, 0.3, 0.0])


def test_weighted_aggregation_by_hand():
    # r = M w: row 0 = .6*1 + .4*.75 = .9, row 1 = .6*.5 + .4*.75 = .6, row 2 = 0
    np.testing.assert_allclose(weighted_aggregation(M3[:, :2], [0.6, 0.4]), [0.9, 0.6, 0.0])


def test_matrix_reward_defaults_by_hand():
    # M = I (G=2, K=2), points (3, 1): CRITIC a = (.5, .5) (sigma = .5 each, rho = -1, h = 2 each);
    # a uniform -> alpha = 0, w = p = (.75, .25) (see test_game_combination_uniform_a_gives_prior);
    # TOPSIS on M = I gives r = w (test_topsis_observed_euclidean_by_hand).
    result = matrix_reward(np.eye(2), [3, 1])
    np.testing.assert_allclose(result.rewards, [0.75, 0.25])
    np.testing.assert_allclose(result.matrix_weights, [0.5, 0.5])
    assert (result.alpha, result.beta, result.fallback) == (0.0, 1.0, False)
    np.testing.assert_allclose(result.column_spread, [1.0, 1.0])


def test_matrix_reward_validation():
    with pytest.raises(ValueError, match="2 rubric weights for a matrix with 3"):
        matrix_reward(M3, [1, 2])
    with pytest.raises(ValueError, match="positive numbers"):
        matrix_reward(M3, [1, 0, 2])
    with pytest.raises(ValueError, match="matrix_weighting='pca' is not supported"):
        matrix_reward(M3, [1, 1, 1], matrix_weighting="pca")
    with pytest.raises(ValueError, match=r"entries must be finite and in \[0, 1\]"):
        matrix_reward(M3 * 2, [1, 1, 1])


# --- properties over random judge outcomes ----------------------------------------------------


@st.composite
def outcome_tables(draw, values=(0.0, 0.5, 1.0)):
    G = draw(st.integers(2, 8))
    K = draw(st.integers(1, 5))
    flat = draw(st.lists(st.sampled_from(values), min_size=G * (G - 1) // 2 * K, max_size=G * (G - 1) // 2 * K))
    return G, K, np.array(flat).reshape(-1, K)


def _granularity_ok(M, G, step):
    scaled = M * (G - 1) / step
    return np.allclose(scaled, np.round(scaled), atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(outcome_tables())
def test_columns_sum_to_half_g(table):
    # each pair hands out exactly 1 per rubric: C(G,2) / (G-1) = G/2
    G, K, z = table
    np.testing.assert_allclose(win_rate_matrix(z, G, K).sum(axis=0), np.full(K, G / 2))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_entry_granularity(data):
    # z in {0, 1} (no ties, one order): multiples of 1/(G-1); both orders without ties, or ties in one
    # order, give z in {0, 1/2, 1}: multiples of 1/(2(G-1)); both orders with ties give quarters:
    # multiples of 1/(4(G-1)).
    for values, step in [((0.0, 1.0), 1.0), ((0.0, 0.5, 1.0), 0.5), ((0.0, 0.25, 0.5, 0.75, 1.0), 0.25)]:
        G, K, z = data.draw(outcome_tables(values))
        M = win_rate_matrix(z, G, K)
        assert _granularity_ok(M, G, step)


@settings(max_examples=60, deadline=None)
@given(outcome_tables((0.0, 0.25, 0.5, 0.75, 1.0)), st.lists(st.integers(1, 3), min_size=5, max_size=5))
def test_rewards_in_unit_interval_for_every_variant(table, points):
    G, K, z = table
    M = win_rate_matrix(z, G, K)
    for options in VARIANTS:
        r = matrix_reward(M, points[:K], **options)
        assert r.rewards.shape == (G,)
        assert np.all(r.rewards >= 0.0) and np.all(r.rewards <= 1.0), options
        assert r.weights.sum() == pytest.approx(1.0) and np.all(r.weights >= 0)


@settings(max_examples=60, deadline=None)
@given(outcome_tables((0.0, 0.25, 0.5, 0.75, 1.0)), st.data(), st.lists(st.integers(1, 3), min_size=5, max_size=5))
def test_rollout_that_wins_everything_gets_one(table, data, points):
    G, K, z = table
    best = data.draw(st.integers(0, G - 1))
    i, j = pair_indices(G)
    z = z.copy()
    z[i == best] = 1.0
    z[j == best] = 0.0
    M = win_rate_matrix(z, G, K)
    for options in VARIANTS:
        assert matrix_reward(M, points[:K], **options).rewards[best] == pytest.approx(1.0), options


@settings(max_examples=60, deadline=None)
@given(outcome_tables((0.0, 0.25, 0.5, 0.75, 1.0)), st.randoms(use_true_random=False))
def test_permuting_rollouts_permutes_rewards(table, rnd):
    G, K, z = table
    full = np.full((G, G, K), 0.5)  # full[i, j] = score of i against j
    i, j = pair_indices(G)
    full[i, j], full[j, i] = z, 1.0 - z
    perm = list(range(G))
    rnd.shuffle(perm)
    permuted = full[np.ix_(perm, perm)][i, j]  # new rollout a is old rollout perm[a]
    points = [1 + k % 3 for k in range(K)]
    for options in VARIANTS:
        before = matrix_reward(win_rate_matrix(z, G, K), points, **options).rewards
        after = matrix_reward(win_rate_matrix(permuted, G, K), points, **options).rewards
        np.testing.assert_allclose(after, before[perm], atol=1e-9, err_msg=str(options))


@pytest.mark.parametrize("options", VARIANTS)
@pytest.mark.parametrize("G,K", [(2, 1), (5, 3), (8, 5)])
def test_all_tie_group_gets_equal_rewards(options, G, K):
    M = win_rate_matrix(np.full((G * (G - 1) // 2, K), 0.5), G, K)
    rewards = matrix_reward(M, list(range(1, K + 1)), **options).rewards
    np.testing.assert_allclose(rewards, np.full(G, rewards[0]))
