"""Percentile bootstrap intervals (part of :mod:`aiplib.analysis.stats`)."""
from __future__ import annotations

import math

import numpy as np

from aiplib.analysis.stats.core import MIN_N_FOR_INTERVAL, MIN_USABLE_SHARE, BootstrapResult, _as_1d
from aiplib.core.errors import AiplibParameterError


def bootstrap_ci(data, stat=np.mean, *, n_resamples: int = 2000, seed: int = 0,
                 level: float = 0.95, vectorized: bool = False,
                 min_n: int = MIN_N_FOR_INTERVAL,
                 min_usable: float = MIN_USABLE_SHARE) -> BootstrapResult:
    """Percentile bootstrap interval [2]_, resampling observations (items) with replacement.

    Parameters
    ----------
    data : array-like [shape=(n,)] or tuple of array-likes, each [shape=(n,)]
        One sample, or several *paired* samples (e.g. per-item errors and reference words, or
        the same items under two conditions); paired samples are resampled with the same
        indices. NaNs are kept (``stat`` decides what to do with them).
    stat : callable
        ``stat(*arrays) -> float``. With ``vectorized=True`` it is called once as
        ``stat(*arrays_2d, axis=-1)`` on arrays of shape (n_resamples, n) and must return shape
        (n_resamples,) — e.g. ``np.mean`` or ``lambda e, w, axis: e.sum(axis) / w.sum(axis)``.
    n_resamples : int > 0
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives the same interval.
    level : float in (0, 1)
        Coverage of the interval.
    vectorized : bool
    min_n : int
        With fewer observations no resampling is done and the interval is NaN with a note
        (default :data:`MIN_N_FOR_INTERVAL`).
    min_usable : float in [0, 1]
        Least share of resamples with a finite statistic; below it the interval is NaN with a
        note (default :data:`MIN_USABLE_SHARE`).

    Returns
    -------
    BootstrapResult
        ``estimate = stat(data)``; the interval is the (1−level)/2 and (1+level)/2 percentiles
        of the finite resampled statistics; ``n_valid`` counts them.

    Raises
    ------
    AiplibParameterError
        If the paired samples differ in length, are empty or not 1-D, or ``n_resamples`` /
        ``level`` are out of range.
    """
    arrays = tuple(_as_1d(a, "data") for a in (data if isinstance(data, tuple) else (data,)))
    n = arrays[0].size
    if any(a.size != n for a in arrays):
        raise AiplibParameterError(f"paired samples differ in length: {[a.size for a in arrays]}")
    if n == 0:
        raise AiplibParameterError("bootstrap_ci: no observations")
    if int(n_resamples) < 1:
        raise AiplibParameterError(f"n_resamples must be > 0, got {n_resamples}")
    if not 0 < level < 1:
        raise AiplibParameterError(f"level must lie in (0, 1), got {level}")
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = float(stat(*arrays, axis=-1) if vectorized else stat(*arrays))
        if n < int(min_n):
            return BootstrapResult(estimate, math.nan, math.nan, float(level), int(n_resamples),
                                   0, int(seed), int(n), _few_note(n, min_n))
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(int(n_resamples), n))
        if vectorized:
            boot = np.asarray(stat(*(a[idx] for a in arrays), axis=-1), dtype=float)
        else:
            boot = np.array([stat(*(a[i] for a in arrays)) for i in idx], dtype=float)
    lo, hi, n_valid, note = _percentile_interval(boot, level, min_usable)
    return BootstrapResult(estimate, lo, hi, float(level), int(n_resamples), n_valid,
                           int(seed), int(n), note)


def _few_note(n: int, min_n: int) -> str:
    return (f"{n} observation(s) < {int(min_n)}: no interval (a percentile bootstrap of so few "
            "values only spans their range)")


def _percentile_interval(boot: np.ndarray, level: float, min_usable: float):
    """(lo, hi, n_usable, note) of resampled statistics; NaN when too few are finite."""
    finite = boot[np.isfinite(boot)]
    n_valid = int(finite.size)
    if n_valid == 0:
        return math.nan, math.nan, 0, "no resample gave a finite statistic"
    if n_valid < min_usable * boot.size:
        return (math.nan, math.nan, n_valid,
                f"only {n_valid} of {boot.size} resamples usable (< {100 * min_usable:g} %): "
                "no interval")
    a = (1 - level) / 2
    lo, hi = (float(v) for v in np.quantile(finite, [a, 1 - a]))
    note = "" if n_valid == boot.size else \
        f"{boot.size - n_valid} of {boot.size} resamples unusable and ignored"
    return lo, hi, n_valid, note
