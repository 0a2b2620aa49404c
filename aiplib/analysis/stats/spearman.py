"""Spearman rank correlation with an exact / permutation / asymptotic p-value (part of :mod:`aiplib.analysis.stats`)."""
from __future__ import annotations

import math
from functools import lru_cache
from itertools import permutations

import numpy as np

from aiplib.analysis.stats.core import (
    SPEARMAN_EXACT_MAX_N,
    SPEARMAN_N_PERMUTATIONS,
    SPEARMAN_PERMUTATION_MAX_N,
    SpearmanResult,
    _as_1d,
)
from aiplib.core.errors import AiplibParameterError


def _centred_ranks(v: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    r = rankdata(v)
    return r - r.mean()


@lru_cache(maxsize=None)
def _all_permutations(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, shape (n!, n), int8 (n <= 9: at most 3.3 MB)."""
    return np.array(list(permutations(range(n))), dtype=np.int8)


def spearman_permutation_p(x, y, *, seed: int = 0,
                           n_permutations: int = SPEARMAN_N_PERMUTATIONS) -> tuple[float, str, int]:
    """Two-sided permutation p-value of Spearman's ρ (the null of exchangeable pairings).

    The same test as ``scipy.stats.permutation_test((y,), ρ, permutation_type="pairings")``,
    vectorised on ranks: ``p = #{|ρ_π| >= |ρ_obs|} / #π`` over all ``n!`` permutations ``π``
    of ``y`` when ``n <=`` :data:`SPEARMAN_EXACT_MAX_N` (exact), else
    ``(1 + #{|ρ_π| >= |ρ_obs|}) / (1 + n_permutations)`` over seeded random permutations
    (Phipson & Smyth 2010, never 0).

    Parameters
    ----------
    x, y : array-like [shape=(n,)], float
        Finite, non-constant, ``n >= 3`` (checked by :func:`spearman`).
    seed : int
        ``numpy.random.default_rng(seed)`` for the random permutations.
    n_permutations : int

    Returns
    -------
    (p, method, n_permutations) : (float, str, int)
        ``method`` is ``"exact"`` or ``"permutation"``.

    Examples
    --------
    >>> round(spearman_permutation_p([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 6, 5])[0], 4)  # 12 / 720
    0.0167
    """
    rx = _centred_ranks(np.asarray(x, dtype=float))
    ry = _centred_ranks(np.asarray(y, dtype=float))
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    obs = abs(float(rx @ ry)) / den
    tol = 1e-12 * max(1.0, obs)
    n = rx.size
    if n <= SPEARMAN_EXACT_MAX_N:
        perm = np.abs(ry[_all_permutations(n)] @ rx) / den
        return float((perm >= obs - tol).sum() / perm.size), "exact", int(perm.size)
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.broadcast_to(ry, (int(n_permutations), n)), axis=1)
    perm = np.abs(shuffled @ rx) / den
    return (float((1 + (perm >= obs - tol).sum()) / (1 + perm.size)), "permutation",
            int(n_permutations))


def spearman(x, y, *, seed: int = 0) -> SpearmanResult:
    """Spearman's rank correlation of one pair of columns [1]_ (``scipy.stats.spearmanr``).

    Parameters
    ----------
    x, y : array-like [shape=(n,)], float
        Paired observations (e.g. one descriptor and the mean degradation, per background).
        Pairs where either value is NaN are dropped.
    seed : int
        Seed of the Monte-Carlo permutation p-value (``10 <= n <= 20``).

    Returns
    -------
    SpearmanResult
        ``rho`` and the two-sided ``p``: exact for ``n <=`` :data:`SPEARMAN_EXACT_MAX_N`, a
        seeded permutation test for ``n <=`` :data:`SPEARMAN_PERMUTATION_MAX_N`
        (:func:`spearman_permutation_p`), else scipy's t-distribution approximation (``method``
        says which). Both NaN with a ``note`` when fewer than 3 pairs remain or a column is
        constant — never an exception.

    Raises
    ------
    AiplibParameterError
        If ``x`` and ``y`` are not 1-D or differ in length.

    Examples
    --------
    >>> round(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]).rho, 12)   # 1 − 6·4 / (5·24)
    0.8
    """
    from scipy.stats import spearmanr

    x, y = _as_1d(x, "x"), _as_1d(y, "y")
    if x.shape != y.shape:
        raise AiplibParameterError(f"x and y differ in length: {x.shape[0]} vs {y.shape[0]}")
    keep = np.isfinite(x) & np.isfinite(y)
    notes = []
    if (~keep).any():
        notes.append(f"dropped {int((~keep).sum())} pairs with NaN")
    x, y = x[keep], y[keep]
    n = int(x.size)
    if n < 3:
        notes.append(f"only {n} pairs; need at least 3")
        return SpearmanResult(math.nan, math.nan, n, "; ".join(notes))
    const = [nm for nm, v in (("x", x), ("y", y)) if np.all(v == v[0])]
    if const:
        notes.append(f"constant column ({', '.join(const)}): rank correlation undefined")
        return SpearmanResult(math.nan, math.nan, n, "; ".join(notes))
    res = spearmanr(x, y)
    if n <= SPEARMAN_PERMUTATION_MAX_N:
        p, method, n_perm = spearman_permutation_p(x, y, seed=seed)
    else:
        p, method, n_perm = float(res.pvalue), "t_approx", 0
    return SpearmanResult(float(res.statistic), p, n, "; ".join(notes), method, n_perm)


def _spearman_rows(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Row-wise Spearman ρ of two arrays of shape (r, n); NaN where a row is constant."""
    from scipy.stats import rankdata

    rx = rankdata(xs, axis=-1)
    ry = rankdata(ys, axis=-1)
    rx -= rx.mean(axis=-1, keepdims=True)
    ry -= ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (rx * ry).sum(-1) / den
    r[den == 0] = np.nan
    return np.clip(r, -1.0, 1.0)
