"""Exact sign test, McNemar's exact test and Benjamini–Hochberg adjustment (part of :mod:`aiplib.analysis.stats`)."""
from __future__ import annotations

import math

import numpy as np

from aiplib.analysis.stats.core import BinomTestResult, _as_1d
from aiplib.core.errors import AiplibParameterError


def sign_test(deltas) -> BinomTestResult:
    """Exact two-sided sign test of the median delta against 0 (``scipy.stats.binomtest``).

    Parameters
    ----------
    deltas : array-like [shape=(n,)]
        Paired differences (e.g. ΔWER per item). Zeros (ties) and NaNs are dropped.

    Returns
    -------
    BinomTestResult
        ``p = binomtest(n_pos, n_pos + n_neg, 0.5).pvalue``; NaN with a note when every delta
        is a tie.

    Examples
    --------
    >>> sign_test([1] * 9 + [-1]).p
    0.021484375
    """
    from scipy.stats import binomtest

    d = _as_1d(deltas, "deltas")
    d = d[np.isfinite(d)]
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    ties = int(d.size - pos - neg)
    if pos + neg == 0:
        return BinomTestResult(math.nan, 0, 0, ties, 0, "no non-zero deltas")
    return BinomTestResult(float(binomtest(pos, pos + neg, 0.5).pvalue), pos, neg, ties, pos + neg)


def mcnemar_exact(clean_correct, noisy_correct) -> BinomTestResult:
    """McNemar's test [3]_ in its exact form: a binomial test on the discordant pairs.

    Parameters
    ----------
    clean_correct, noisy_correct : array-like of bool or 0/1 [shape=(n,)]
        Whether each paired item is correct in the clean and in the noisy condition.

    Returns
    -------
    BinomTestResult
        ``n_pos = b`` (clean correct, noisy wrong), ``n_neg = c`` (clean wrong, noisy correct),
        ``p = binomtest(b, b + c, 0.5).pvalue`` (two-sided); NaN with a note when ``b + c == 0``.

    Raises
    ------
    AiplibParameterError
        If the arrays differ in length.
    """
    from scipy.stats import binomtest

    a = _as_1d(clean_correct, "clean_correct").astype(bool)
    b_ = _as_1d(noisy_correct, "noisy_correct").astype(bool)
    if a.size != b_.size:
        raise AiplibParameterError(
            f"clean and noisy arrays differ in length: {a.size} vs {b_.size}")
    b = int((a & ~b_).sum())
    c = int((~a & b_).sum())
    conc = int(a.size - b - c)
    if b + c == 0:
        return BinomTestResult(math.nan, b, c, conc, 0, "no discordant pairs")
    return BinomTestResult(float(binomtest(b, b + c, 0.5).pvalue), b, c, conc, b + c)


def bh_adjust(pvalues) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values [4]_ (``scipy.stats.false_discovery_control``).

    ``p_bh(i) = min_{j ≥ i} min(1, m · p_(j) / j)`` over the ``m`` finite p-values sorted
    ascending.

    Parameters
    ----------
    pvalues : array-like [shape=(m,)]
        NaNs are allowed: they stay NaN and do not count towards ``m``.

    Returns
    -------
    np.ndarray [shape=(m,)], float

    Raises
    ------
    AiplibParameterError
        If a finite p-value lies outside [0, 1].
    """
    from scipy.stats import false_discovery_control

    p = _as_1d(pvalues, "pvalues")
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        if np.any((p[ok] < 0) | (p[ok] > 1)):
            raise AiplibParameterError(f"p-values must lie in [0, 1], got {p[ok].tolist()}")
        out[ok] = false_discovery_control(p[ok], method="bh")
    return out
