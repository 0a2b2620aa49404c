"""Constants and result records shared by :mod:`aiplib.analysis.stats` (see its docstring)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aiplib.core.errors import AiplibParameterError

MIN_N_FOR_INTERVAL = 10
"""Fewest resampled units (items, or backgrounds for correlations) for a bootstrap interval.

Below it no interval is given (NaN with a note): a percentile bootstrap interval of ``n`` values
lies inside their range, and for the mean it behaves like a z-interval with divisor ``n`` —
about 80 % coverage at ``n = 5`` and about 90 % at ``n = 10`` for a nominal 95 %. A 2-item group
would otherwise report the range of its two values as a "95 % interval"."""

MIN_USABLE_SHARE = 0.95
"""Least share of resamples that must give a finite statistic for an interval to be reported.

Resamples fail when the statistic is undefined on them (a Spearman resample with a constant
column, an RER resample whose baseline change is not positive); quantiles of the survivors are
conditional on the failure not happening, so with more than 5 % failures the interval is refused
(NaN with a note). Every table reports the usable count beside its interval."""

SPEARMAN_EXACT_MAX_N = 9
"""Up to this many pairs the Spearman p-value is exact (all ``n!`` permutations)."""

SPEARMAN_PERMUTATION_MAX_N = 20
"""Up to this many pairs (and above :data:`SPEARMAN_EXACT_MAX_N`) the Spearman p-value is a
seeded Monte-Carlo permutation test with :data:`SPEARMAN_N_PERMUTATIONS` permutations; above
it, scipy's t-distribution approximation. At n = 6 the approximation gives 0.0048 where the exact
value is 0.0167, and at n = 20 it is still about 1.5× too small."""

SPEARMAN_N_PERMUTATIONS = 9999
"""Random permutations of the Monte-Carlo Spearman p-value (resolution 1 / 10 000)."""

RER_DENOMINATOR_EPS = 1e-9
"""Added to the baseline change in the RER denominator, as the authors'
``scripts/generate_results_new_2.py``: ``RER = Δ_steer / (Δ_base + 1e-9)``."""

RER_KWS_SMALL = 0.01
"""KWS: RER is 1.0 when both ``|Δ_base|`` and ``|Δ_steer|`` are below this (1 pp), as the
authors' script."""

RER_FLAG_BELOW = 0.01
"""A baseline change below this (1 pp) — or not positive — is flagged beside the RER
(:func:`rer_flag`), and such resamples are unusable for the RER interval."""


@dataclass(frozen=True)
class SpearmanResult:
    """Spearman's ρ with its two-sided p-value. Unpacks as ``rho, p = spearman(x, y)``.

    Attributes
    ----------
    rho : float in [-1, 1], or NaN
    p : float in [0, 1], or NaN
    n : int
        Pairs used (after dropping pairs with a NaN).
    note : str
        Empty, or why ``rho`` is NaN / what was dropped.
    method : str
        How ``p`` was computed: ``exact`` (all permutations), ``permutation`` (seeded Monte
        Carlo), ``t_approx`` (scipy's large-sample approximation) or ``""`` (no p).
    n_permutations : int
        Permutations behind ``p`` (``n!`` when exact, 0 for ``t_approx``).
    """

    rho: float
    p: float
    n: int
    note: str = ""
    method: str = ""
    n_permutations: int = 0

    def __iter__(self):
        yield self.rho
        yield self.p


@dataclass(frozen=True)
class BootstrapResult:
    """A statistic with its percentile bootstrap interval.

    Attributes
    ----------
    estimate : float
        The statistic on the original data.
    ci_low, ci_high : float
        Percentile interval bounds (NaN when no resample gave a finite value).
    level : float
        Coverage, e.g. 0.95.
    n_resamples : int
        Resamples drawn.
    n_valid : int
        Usable resamples: those with a finite statistic (the interval uses only these); 0 when
        no resampling was done (fewer than ``min_n`` observations).
    seed : int
    n : int
        Observations (items) resampled.
    note : str
    """

    estimate: float
    ci_low: float
    ci_high: float
    level: float
    n_resamples: int
    n_valid: int
    seed: int
    n: int
    note: str = ""


@dataclass(frozen=True)
class BinomTestResult:
    """Result of an exact binomial test (sign test or McNemar).

    Attributes
    ----------
    p : float
        Two-sided exact p-value (NaN with a note when there is nothing to test).
    n_pos, n_neg : int
        Sign test: positive / negative deltas. McNemar: ``b`` (clean correct, noisy wrong) /
        ``c`` (clean wrong, noisy correct).
    n_ties : int
        Dropped zero deltas (sign test) or concordant pairs (McNemar).
    n : int
        Pairs tested, ``n_pos + n_neg``.
    note : str
    """

    p: float
    n_pos: int
    n_neg: int
    n_ties: int
    n: int
    note: str = ""


def _as_1d(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise AiplibParameterError(
            f"{name}: expected a 1-D array of shape (n,), got shape {a.shape}")
    return a
