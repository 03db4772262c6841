"""MatrixReward math over one group, pure numpy (MatrixReward paper): win-rate matrix (Eq. 1-2) -> matrix
weights (CRITIC Eq. 3; entropy, SVD: App. F) -> fusion with the prior (Eq. 4-5; Sec. 4.3-4.5) -> reward
(TOPSIS Eq. 6-7 and its variants; weighted sum, Sec. 4.4). Shapes: G rollouts (unique answers), K rubrics;
`M` is G x K; `a` matrix weights, `p` prior weights, `w` combined weights (length K, sum 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

#: a column whose max - min is at most this is constant (win rates are exact multiples of 1/(4(G-1)))
CONSTANT_TOL = 1e-12
#: |det H| at or below this makes the game combination fall back (Sec. 3.2, after Eq. 5)
SINGULAR_DET = 1e-12
#: both TOPSIS distances at or below this count as vanished: closeness 1/2 (Sec. 3.3)
VANISHED_DISTANCE = 1e-12
#: covariance eigenvalues below this fraction of the largest are dropped in the Mahalanobis pseudo-inverse
PINV_RTOL = 1e-10
#: the values of the choice options of `matrix_reward` (`matrix_weighting`'s: `MATRIX_WEIGHTINGS`, below)
FUSIONS = ("game", "prior_only", "additive", "multiplicative")
IDEALS = ("observed", "theoretical")
DISTANCES = ("euclidean", "mahalanobis")
AGGREGATIONS = ("topsis", "weighted_sum")


def check_choice(name: str, value: str, options) -> None:
    if value not in options:
        raise ValueError(f"{name}={value!r} is not supported; choose one of {sorted(options)}")


def _check_fraction(name: str, value: float, *, allow_zero: bool) -> None:
    if not ((value >= 0.0 if allow_zero else value > 0.0) and value <= 1.0):
        raise ValueError(f"{name} must be in {'[0, 1]' if allow_zero else '(0, 1]'}, got {value!r}")


def _check_matrix(M) -> np.ndarray:
    M = np.asarray(M, dtype=float)
    if M.ndim != 2 or M.shape[0] < 1 or M.shape[1] < 1:
        raise ValueError(f"Expected a G x K matrix with G, K >= 1, got shape {M.shape}")
    if not (M.min() >= 0.0 and M.max() <= 1.0):  # also false for NaN
        raise ValueError("Win-rate matrix entries must be finite and in [0, 1]; rescale scores before calling")
    return M


def _normalized(d: np.ndarray) -> np.ndarray:
    """d / sum(d), or uniform weights when every d_k is zero (Eq. 3; App. F)."""
    total = d.sum()
    return d / total if total > 0 else np.full(d.shape, 1.0 / d.size)


# --- Sec. 3.1: the rollout-by-rubric win-rate matrix
def pair_indices(G: int) -> tuple[np.ndarray, np.ndarray]:
    """The C(G,2) pairs i < j in `itertools.combinations(range(G), 2)` order, which `win_rate_matrix` expects."""
    return np.triu_indices(G, k=1)


def win_rate_matrix(outcomes, G: int, K: int) -> np.ndarray:
    """M (G x K) from pairwise outcomes (Eq. 1-2, Algorithm 1 lines 4-11): `outcomes` (C(G,2), K), row t for
    pair `pair_indices(G)[t] = (i, j)`, holds z_ijk (1 win, 0 loss, 1/2 tie; j receives 1 - z_ijk).
    M_ik = sum_{j != i} z_ijk / (G - 1) in [0, 1]; each column sums to G/2."""
    if G < 2 or K < 1:
        raise ValueError(f"A win-rate matrix needs G >= 2 rollouts and K >= 1 rubrics, got G={G}, K={K}")
    z = np.asarray(outcomes, dtype=float)
    pairs = G * (G - 1) // 2
    if z.shape != (pairs, K):
        raise ValueError(f"Expected outcomes of shape (C({G},2)={pairs}, {K}), got {z.shape}")
    if not (z.min() >= 0.0 and z.max() <= 1.0):  # also false for NaN
        raise ValueError("Pairwise outcomes must be in [0, 1] (1 win, 1/2 tie, 0 loss)")
    i, j = pair_indices(G)
    scores = np.zeros((G, G, K))  # scores[i, j, k] = z_ijk; the diagonal stays 0
    scores[i, j] = z
    scores[j, i] = 1.0 - z
    return scores.sum(axis=1) / (G - 1)


# --- Sec. 3.2 and App. F: matrix-derived weights a (shape (K,), sum 1)
def _minmax(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(U, nonconstant): each nonconstant column min-max normalized, constant ones zeros."""
    low = M.min(axis=0)
    span = M.max(axis=0) - low
    nonconstant = span > CONSTANT_TOL
    return np.divide(M - low, span, out=np.zeros_like(M), where=nonconstant), nonconstant


def variation_correlation_weights(M) -> np.ndarray:
    """The CRITIC method (Sec. 3.2, Eq. 3; Diakoulaki et al. 1995): with U the min-max normalized M,
    sigma_k the population std of U_.k and rho_kl the Pearson correlation (0 for a constant column),
    d_k = sigma_k * sum_{l != k} (1 - rho_kl); a = d / sum(d), uniform if every d_k = 0.
    """
    U, nonconstant = _minmax(_check_matrix(M))
    centered = U - U.sum(axis=0) / U.shape[0]
    cov = centered.T @ centered / U.shape[0]
    sigma = np.sqrt(np.diag(cov))
    scale = np.where(nonconstant, sigma, 1.0)
    rho = np.where(nonconstant[:, None] & nonconstant, cov / scale[:, None] / scale, 0.0)
    np.fill_diagonal(rho, 1.0)  # l = k is excluded from the sum: 1 - rho_kk = 0
    return _normalized(sigma * (1.0 - rho).sum(axis=1))


def entropy_weights(M) -> np.ndarray:
    """Entropy weights (App. F): a_k ~ 1 - e_k, e_k = -sum_{q_ik > 0} q_ik log q_ik / log G with
    q_ik = U_ik / sum_j U_jk; constant columns 0 (all constant: uniform)."""
    M = _check_matrix(M)
    U, nonconstant = _minmax(M)
    if not nonconstant.any():
        return np.full(M.shape[1], 1.0 / M.shape[1])
    q = U / np.where(nonconstant, U.sum(axis=0), 1.0)
    e = -np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0).sum(axis=0) / np.log(M.shape[0])
    return _normalized(np.where(nonconstant, 1.0 - e, 0.0))


def svd_weights(M, variance: float = 0.85) -> np.ndarray:
    """SVD weights (App. F): eigenpairs (lambda_j, v_j) of Z^T Z / G, Z the standardized nonconstant columns;
    the fewest m components reaching `variance` of the total; a_k ~ sum_{j<=m} lambda_j v_kj^2; constant
    columns 0 (all constant: uniform)."""
    _check_fraction("svd variance", variance, allow_zero=False)
    M = _check_matrix(M)
    nonconstant = M.max(axis=0) - M.min(axis=0) > CONSTANT_TOL
    a = np.zeros(M.shape[1])
    if not nonconstant.any():
        return np.full(M.shape[1], 1.0 / M.shape[1])
    X = M[:, nonconstant]
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    lam, vecs = np.linalg.eigh(Z.T @ Z / M.shape[0])
    lam, vecs = np.clip(lam[::-1], 0.0, None), vecs[:, ::-1]
    m = int(np.searchsorted(np.cumsum(lam) / lam.sum(), variance - 1e-12)) + 1  # fewest components reaching `variance`
    a[nonconstant] = (vecs[:, :m] ** 2 * lam[:m]).sum(axis=1)
    return _normalized(a)


#: `matrix_weighting` values: how the rubric weights a are read from the matrix M
MATRIX_WEIGHTINGS = {
    "variation_correlation": variation_correlation_weights,
    "entropy": entropy_weights,
    "svd": svd_weights,
}


def prior_weights(points) -> np.ndarray:
    """p_k = t_k / sum_l t_l from the rubrics' stored importance points (Sec. 3.2)."""
    t = np.asarray(points, dtype=float)
    if t.ndim != 1 or t.size == 0 or not (t.min() > 0 and t.max() < math.inf):
        raise ValueError(f"Rubric weights must be a non-empty list of positive numbers, got {list(t)}")
    return t / t.sum()


# --- Sec. 3.2 and 4.5: fusing a with the prior p
class Fusion(NamedTuple):
    """Combined weights `w` and the coefficients on (a, p); None where a rule has none."""

    w: np.ndarray
    alpha: float | None
    beta: float | None
    fallback: bool = False


def game_combination(a, p) -> Fusion:
    """Game-theoretic combination (Sec. 3.2, Eq. 4-5; Huang et al. 2023): solve H [u v]^T = [a.a, p.p]^T,
    H = [[a.a, a.p], [p.a, p.p]]; (alpha, beta) = (|u|, |v|) / (|u| + |v|), w = alpha a + beta p. When
    |det H| <= 1e-12 or not finite: w = sqrt(a p) / sum sqrt(a p), (0.5, 0.5), fallback. -> (w, alpha, beta, fallback)
    """
    a, p = np.asarray(a, dtype=float), np.asarray(p, dtype=float)
    if a.shape != p.shape or a.ndim != 1:
        raise ValueError(f"a and p must be vectors of one length, got shapes {a.shape} and {p.shape}")
    aa, ap, pp = float(a @ a), float(a @ p), float(p @ p)
    det = aa * pp - ap * ap
    if math.isfinite(det) and abs(det) > SINGULAR_DET:
        u, v = (aa * pp - ap * pp) / det, (aa * pp - ap * aa) / det  # Cramer's rule on Eq. 4
        if math.isfinite(u) and math.isfinite(v) and abs(u) + abs(v) > 0:
            alpha, beta = abs(u) / (abs(u) + abs(v)), abs(v) / (abs(u) + abs(v))
            return Fusion(alpha * a + beta * p, alpha, beta, False)
    return Fusion(_normalized(np.sqrt(a * p)), 0.5, 0.5, True)


def fuse(a, p, fusion: str = "game", mixture_alpha: float = 0.5) -> Fusion:
    """Combine a with p: "game" (Eq. 4-5), "prior_only" (w = p, Table 2), "additive"
    (w = (1 - mixture_alpha) p + mixture_alpha a) or "multiplicative" (w ~ a_k p_k) (Sec. 4.5, Table 4)."""
    check_choice("fusion", fusion, FUSIONS)
    a, p = np.asarray(a, dtype=float), np.asarray(p, dtype=float)
    if fusion == "game":
        return game_combination(a, p)
    if fusion == "prior_only":
        return Fusion(p.copy(), 0.0, 1.0)
    if fusion == "additive":
        _check_fraction("mixture_alpha", mixture_alpha, allow_zero=True)
        return Fusion((1.0 - mixture_alpha) * p + mixture_alpha * a, float(mixture_alpha), 1.0 - mixture_alpha)
    return Fusion(_normalized(a * p), None, None)


# --- Sec. 3.3 and 4.4: from weighted profiles to a reward in [0, 1]
def _mahalanobis(diff: np.ndarray, V: np.ndarray) -> np.ndarray:
    """sqrt(d S^+ d^T) per row of diff, S the covariance of the profiles V; S is often singular, so S^+ drops
    eigenvalues below PINV_RTOL * the largest."""
    centered = V - V.sum(axis=0) / V.shape[0]
    lam, vecs = np.linalg.eigh(centered.T @ centered / V.shape[0])
    keep = lam > PINV_RTOL * max(lam.max(), 0.0)
    if not keep.any():
        return np.zeros(diff.shape[0])
    return np.sqrt(((diff @ vecs[:, keep]) ** 2 / lam[keep]).sum(axis=1))


def topsis_closeness(M, w, *, ideals: str = "observed", distance: str = "euclidean") -> np.ndarray:
    """TOPSIS closeness (Sec. 3.3, Eq. 6-7; Hwang and Yoon), shape (G,): v_ik = w_k N_ik; ideals "observed"
    (v+/v- = column max/min) or "theoretical" (Sec. 4.4: v+ = w_k / L_k, a rollout winning everything;
    v- = 0); distance "euclidean" or "mahalanobis" (Sec. 4.4; whitening leaves w only its zero pattern).
    r_i = D-_i / (D+_i + D-_i), 1/2 when both vanish.
    """
    check_choice("ideals", ideals, IDEALS)
    check_choice("distance", distance, DISTANCES)
    M = _check_matrix(M)
    w = np.asarray(w, dtype=float)
    if w.shape != (M.shape[1],):
        raise ValueError(f"Expected {M.shape[1]} weights for a {M.shape} matrix, got shape {w.shape}")
    L = np.sqrt((M * M).sum(axis=0))  # N = M / L, L_k the Euclidean norm of column k; a zero column: 0 (Eq. 6)
    inv_norm = np.divide(1.0, L, out=np.zeros_like(L), where=L > 0)
    V = M * inv_norm * w
    v_pos, v_neg = (V.max(axis=0), V.min(axis=0)) if ideals == "observed" else (w * inv_norm, np.zeros_like(w))
    d_pos, d_neg = (
        np.sqrt((g * g).sum(axis=1)) if distance == "euclidean" else _mahalanobis(g, V) for g in (V - v_pos, V - v_neg)
    )
    total = d_pos + d_neg
    return np.where(total > VANISHED_DISTANCE, d_neg / np.where(total > 0, total, 1.0), 0.5)


def weighted_aggregation(M, w) -> np.ndarray:
    """r_i = sum_k w_k M_ik: the weighted average of raw win rates (Sec. 4.4, Table 3)."""
    return _check_matrix(M) @ np.asarray(w, dtype=float)


# --- the whole pipeline for one group
def check_reward_options(*, matrix_weighting, fusion, mixture_alpha, ideals, distance, aggregation, svd_variance):
    """Check every option of `matrix_reward` (names and ranges), including those its settings do not use."""
    check_choice("matrix_weighting", matrix_weighting, MATRIX_WEIGHTINGS)
    check_choice("fusion", fusion, FUSIONS)
    check_choice("ideals", ideals, IDEALS)
    check_choice("distance", distance, DISTANCES)
    check_choice("aggregation", aggregation, AGGREGATIONS)
    _check_fraction("mixture_alpha", mixture_alpha, allow_zero=True)
    _check_fraction("svd_variance", svd_variance, allow_zero=False)


@dataclass(frozen=True)
class MatrixRewardResult:
    """Quality rewards (G,) and the intermediate quantities worth logging."""

    rewards: np.ndarray
    weights: np.ndarray
    matrix_weights: np.ndarray
    prior: np.ndarray
    alpha: float | None
    beta: float | None
    fallback: bool
    column_spread: np.ndarray


def matrix_reward(M, points, **options: Any) -> MatrixRewardResult:
    """Algorithm 1 lines 12-28: weights from M and the rubrics' points t_k, then r^qual. `options`: every keyword
    of `check_reward_options`; the paper's method is `MatrixRewardOptions().math_options()`."""
    check_reward_options(**options)
    M = _check_matrix(M)
    p = prior_weights(points)
    if p.size != M.shape[1]:
        raise ValueError(f"Got {p.size} rubric weights for a matrix with {M.shape[1]} rubric columns")
    weighting = options["matrix_weighting"]
    a = svd_weights(M, options["svd_variance"]) if weighting == "svd" else MATRIX_WEIGHTINGS[weighting](M)
    fused = fuse(a, p, options["fusion"], options["mixture_alpha"])
    if options["aggregation"] == "topsis":
        rewards = topsis_closeness(M, fused.w, ideals=options["ideals"], distance=options["distance"])
    else:
        rewards = weighted_aggregation(M, fused.w)
    spread = M.max(axis=0) - M.min(axis=0)
    return MatrixRewardResult(rewards, fused.w, a, p, fused.alpha, fused.beta, fused.fallback, spread)
