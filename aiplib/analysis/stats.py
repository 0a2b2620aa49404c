"""Statistics for the audit: every number with its uncertainty.

Pure functions (no file I/O): Spearman rank correlation [1]_, percentile bootstrap intervals [2]_,
the exact sign test, McNemar's exact test [3]_, Benjamini–Hochberg adjustment [4]_, the Residual
Effect Ratio of the steering prompt, the per-background degradation and descriptor correlation
tables, and the authors' arithmetic where it differs from ours (their
``scripts/generate_results_new_2.py``).

Degradation is positive when noise hurts: ``delta_wer = WER(noisy) − WER(clean)``,
``delta_acc = acc(clean) − acc(noisy)`` (fractions). Randomness comes only from
``numpy.random.default_rng(seed)``; every result records its ``seed`` and ``n_resamples``.

References
----------
.. [1] C. Spearman, "The proof and measurement of association between two things",
       American Journal of Psychology 15(1), 72–101, 1904.
.. [2] B. Efron, "Bootstrap methods: another look at the jackknife", Annals of Statistics 7(1),
       1–26, 1979; B. Efron, R. J. Tibshirani, *An Introduction to the Bootstrap*, 1993 (§13).
.. [3] Q. McNemar, "Note on the sampling error of the difference between correlated proportions
       or percentages", Psychometrika 12(2), 153–157, 1947.
.. [4] Y. Benjamini, Y. Hochberg, "Controlling the false discovery rate: a practical and
       powerful approach to multiple testing", JRSS B 57(1), 289–300, 1995.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import permutations

import numpy as np
import pandas as pd
from scipy.stats import binomtest, false_discovery_control, rankdata, spearmanr

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import TASK_FAMILIES, TaskFamily, family_spec
from aiplib.io.formats import DESCRIPTORS
from aiplib.scoring.score import SCORERS

#: Fewest resampled units (items, or backgrounds) for a bootstrap interval (at n = 5 a nominal 95 %
#: percentile interval covers about 80 %); below it NaN with a note.
MIN_N_FOR_INTERVAL = 10

#: Least share of resamples with a finite statistic for an interval; below it NaN with a note.
MIN_USABLE_SHARE = 0.95

#: Up to this many pairs the Spearman p-value is exact (all n! permutations).
SPEARMAN_EXACT_MAX_N = 9

#: Up to this many pairs a seeded permutation test; above, scipy's t-approximation.
SPEARMAN_PERMUTATION_MAX_N = 20

#: Monte-Carlo permutations (resolution 1 / 10 000).
SPEARMAN_N_PERMUTATIONS = 9999

#: RER = Δ_steer / (Δ_base + 1e-9), as the authors' generate_results_new_2.py.
RER_DENOMINATOR_EPS = 1e-9

#: Accuracy (KWS): RER is 1.0 when both |Δ_base| and |Δ_steer| are below this (1 pp), as the
#: authors.
RER_KWS_SMALL = 0.01

#: A baseline change below 1 pp (or <= 0) is flagged and unusable in the RER interval.
RER_FLAG_BELOW = 0.01


@dataclass(frozen=True)
class SpearmanResult:
    """Spearman's ρ in [-1, 1] with its two-sided p-value; unpacks as ``rho, p = spearman(x, y)``.

    ``n``: pairs used (NaN pairs dropped); ``note``: why ``rho`` is NaN / what was dropped;
    ``method``: ``exact``, ``permutation`` (seeded Monte Carlo), ``t_approx`` (scipy) or ``""``;
    ``n_permutations`` behind ``p`` (``n!`` when exact, 0 for ``t_approx``).
    """

    rho: float
    p: float
    n: int
    note: str = ""
    method: str = ""
    n_permutations: int = 0

    def __iter__(self):
        return iter((self.rho, self.p))


@dataclass(frozen=True)
class BootstrapResult:
    """A statistic (``estimate``) with its percentile bootstrap interval ``ci_low, ci_high`` (NaN
    when no resample is finite) at coverage ``level``; ``n_valid`` of ``n_resamples`` resamples had
    a finite statistic (0 when fewer than ``min_n`` of the ``n`` observations: no resampling)."""

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
    """An exact binomial test (sign test or McNemar): two-sided ``p`` (NaN with a note when nothing
    is tested); ``n_pos, n_neg``: positive / negative deltas, or McNemar's ``b`` (clean correct,
    noisy wrong) / ``c``; ``n_ties``: zero deltas or concordant pairs dropped; ``n = n_pos +
    n_neg``."""

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
            f"{name}: expected a 1-D array of shape (n,), got shape {a.shape}"
        )
    return a


def bootstrap_ci(
    data,
    stat=np.mean,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    vectorized: bool = False,
    min_n: int = MIN_N_FOR_INTERVAL,
) -> BootstrapResult:
    """Percentile bootstrap interval [2]_, resampling observations (items) with replacement.

    Parameters
    ----------
    data : array-like [shape=(n,)] or tuple of array-likes, each [shape=(n,)]
        One sample, or several *paired* samples resampled with the same indices; NaNs kept.
    stat : callable
        ``stat(*arrays) -> float``; with ``vectorized=True`` called once as
        ``stat(*arrays_2d, axis=-1)`` on shape (n_resamples, n), returning shape (n_resamples,).
    n_resamples, seed, level : int > 0, int (of ``numpy.random.default_rng``), float in (0, 1)
    min_n : int
        Fewer observations, or a share of finite resampled statistics below
        :data:`MIN_USABLE_SHARE`: no interval (NaN).

    Returns a :class:`BootstrapResult`: ``estimate = stat(data)``; the interval is the (1−level)/2
    and (1+level)/2 percentiles of the finite resampled statistics; ``n_valid`` counts them.

    Raises
    ------
    AiplibParameterError
        If the paired samples differ in length, are empty or not 1-D, or ``n_resamples`` /
        ``level`` are out of range.
    """
    arrays = _paired_samples(data)
    n = arrays[0].size
    _check_bootstrap_settings(n_resamples, level)
    with np.errstate(invalid="ignore", divide="ignore"):
        if vectorized:
            estimate = float(stat(*arrays, axis=-1))
        else:
            estimate = float(stat(*arrays))
        if n < int(min_n):
            return BootstrapResult(
                estimate,
                math.nan,
                math.nan,
                float(level),
                int(n_resamples),
                0,
                int(seed),
                int(n),
                f"{n} observation(s) < {int(min_n)}: no interval (a percentile bootstrap of so "
                "few values only spans their range)",
            )
        idx = np.random.default_rng(seed).integers(0, n, size=(int(n_resamples), n))
        boot = _resampled_statistics(arrays, stat, idx, vectorized)
    lo, hi, n_valid, note = _percentile_interval(boot, level)
    return BootstrapResult(
        estimate, lo, hi, float(level), int(n_resamples), n_valid, int(seed), int(n), note
    )


def _paired_samples(data) -> tuple[np.ndarray, ...]:
    """``data`` (one sample or a tuple of paired samples) as 1-D float arrays of one length.

    Raises
    ------
    AiplibParameterError
        If a sample is not 1-D, the lengths differ or the samples are empty.
    """
    if not isinstance(data, tuple):
        data = (data,)
    arrays = tuple(_as_1d(a, "data") for a in data)
    n = arrays[0].size
    if any(a.size != n for a in arrays):
        raise AiplibParameterError(f"paired samples differ in length: {[a.size for a in arrays]}")
    if n == 0:
        raise AiplibParameterError("bootstrap_ci: no observations")
    return arrays


def _check_bootstrap_settings(n_resamples: int, level: float) -> None:
    """Raise :class:`AiplibParameterError` unless ``n_resamples >= 1`` and ``0 < level < 1``."""
    if int(n_resamples) < 1:
        raise AiplibParameterError(f"n_resamples must be > 0, got {n_resamples}")
    if not 0 < level < 1:
        raise AiplibParameterError(f"level must lie in (0, 1), got {level}")


def _resampled_statistics(arrays, stat, idx: np.ndarray, vectorized: bool) -> np.ndarray:
    """``stat`` of every resample (rows of ``idx``, shape (n_resamples, n)): shape
    (n_resamples,)."""
    if vectorized:
        return np.asarray(stat(*(a[idx] for a in arrays), axis=-1), dtype=float)
    return np.array([stat(*(a[i] for a in arrays)) for i in idx], dtype=float)


def _percentile_interval(boot: np.ndarray, level: float):
    """(lo, hi, n_usable, note) of resampled statistics; NaN when too few are finite."""
    finite = boot[np.isfinite(boot)]
    n_valid = int(finite.size)
    if n_valid == 0:
        return math.nan, math.nan, 0, "no resample gave a finite statistic"
    if n_valid < MIN_USABLE_SHARE * boot.size:
        return (
            math.nan,
            math.nan,
            n_valid,
            f"only {n_valid} of {boot.size} resamples usable "
            f"(< {100 * MIN_USABLE_SHARE:g} %): no interval",
        )
    a = (1 - level) / 2
    lo, hi = (float(v) for v in np.quantile(finite, [a, 1 - a]))
    note = (
        ""
        if n_valid == boot.size
        else f"{boot.size - n_valid} of {boot.size} resamples unusable and ignored"
    )
    return lo, hi, n_valid, note


def _centred_ranks(v: np.ndarray) -> np.ndarray:
    r = rankdata(v, axis=-1)
    return r - r.mean(axis=-1, keepdims=True)


@lru_cache(maxsize=None)
def _all_permutations(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, shape (n!, n), int8 (n <= 9: at most 3.3 MB)."""
    return np.array(list(permutations(range(n))), dtype=np.int8)


def spearman_permutation_p(x, y, *, seed: int = 0) -> tuple[float, str, int]:
    """Two-sided permutation p-value of Spearman's ρ (the null of exchangeable pairings).

    The same test as ``scipy.stats.permutation_test((y,), ρ, permutation_type="pairings")``,
    vectorised on ranks: ``p = #{|ρ_π| >= |ρ_obs|} / #π`` over all ``n!`` permutations ``π``
    of ``y`` when ``n <=`` :data:`SPEARMAN_EXACT_MAX_N` (exact), else
    ``(1 + #{|ρ_π| >= |ρ_obs|}) / (1 + n_permutations)`` over :data:`SPEARMAN_N_PERMUTATIONS` seeded
    random permutations (Phipson & Smyth 2010, never 0).

    ``x, y``: shape (n,), finite, non-constant, ``n >= 3``. Returns ``(p, method, n_permutations)``,
    ``method`` ``"exact"`` or ``"permutation"``.

    Examples
    --------
    >>> round(spearman_permutation_p([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 6, 5])[0], 4)  # 12 / 720
    0.0167
    """
    rx, ry = _centred_ranks(np.asarray(x, dtype=float)), _centred_ranks(np.asarray(y, dtype=float))
    den = math.sqrt(float((rx * rx).sum() * (ry * ry).sum()))
    obs = abs(float(rx @ ry)) / den
    tol = 1e-12 * max(1.0, obs)
    n = rx.size
    if n <= SPEARMAN_EXACT_MAX_N:
        perm = np.abs(ry[_all_permutations(n)] @ rx) / den
        return float((perm >= obs - tol).sum() / perm.size), "exact", int(perm.size)
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.broadcast_to(ry, (SPEARMAN_N_PERMUTATIONS, n)), axis=1)
    perm = np.abs(shuffled @ rx) / den
    return (
        float((1 + (perm >= obs - tol).sum()) / (1 + perm.size)),
        "permutation",
        SPEARMAN_N_PERMUTATIONS,
    )


def spearman(x, y, *, seed: int = 0) -> SpearmanResult:
    """Spearman's rank correlation of one pair of columns [1]_ (``scipy.stats.spearmanr``).

    ``x, y``: paired observations of shape (n,) (pairs with a NaN dropped); ``seed``: of the
    permutation p-value (``10 <= n <= 20``). The two-sided ``p`` is exact up to
    :data:`SPEARMAN_EXACT_MAX_N` pairs, a permutation test up to :data:`SPEARMAN_PERMUTATION_MAX_N`,
    else scipy's t-approximation (``method``); ``rho`` and ``p`` are NaN with a ``note`` below 3
    pairs or for a constant column.

    Raises
    ------
    AiplibParameterError
        If ``x`` and ``y`` are not 1-D or differ in length.

    Examples
    --------
    >>> round(spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]).rho, 12)   # 1 − 6·4 / (5·24)
    0.8
    """
    x, y = _as_1d(x, "x"), _as_1d(y, "y")
    if x.shape != y.shape:
        raise AiplibParameterError(f"x and y differ in length: {x.shape[0]} vs {y.shape[0]}")
    keep = np.isfinite(x) & np.isfinite(y)
    notes = [f"dropped {int((~keep).sum())} pairs with NaN"] if (~keep).any() else []
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
    p, method, n_perm = (
        spearman_permutation_p(x, y, seed=seed)
        if n <= SPEARMAN_PERMUTATION_MAX_N
        else (float(res.pvalue), "t_approx", 0)
    )
    return SpearmanResult(float(res.statistic), p, n, "; ".join(notes), method, n_perm)


def _spearman_rows(xs: np.ndarray, ys: np.ndarray, axis: int = -1) -> np.ndarray:
    """Row-wise Spearman ρ of two arrays of shape (r, n) (or (n,)); NaN where a row is constant."""
    rx, ry = _centred_ranks(xs), _centred_ranks(ys)
    den = np.sqrt((rx * rx).sum(-1) * (ry * ry).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (rx * ry).sum(-1) / den
    return np.clip(np.where(den == 0, np.nan, r), -1.0, 1.0)


def sign_test(deltas) -> BinomTestResult:
    """Exact two-sided sign test of the median delta against 0 (``scipy.stats.binomtest``).

    ``deltas``: paired differences of shape (n,) (e.g. ΔWER per item); zeros (ties) and NaNs
    dropped. ``p = binomtest(n_pos, n_pos + n_neg, 0.5).pvalue``; NaN with a note when every delta
    is a tie.

    Examples
    --------
    >>> sign_test([1] * 9 + [-1]).p
    0.021484375
    """
    d = _as_1d(deltas, "deltas")
    d = d[np.isfinite(d)]
    pos, neg = int((d > 0).sum()), int((d < 0).sum())
    ties = int(d.size - pos - neg)
    if pos + neg == 0:
        return BinomTestResult(math.nan, 0, 0, ties, 0, "no non-zero deltas")
    return BinomTestResult(float(binomtest(pos, pos + neg, 0.5).pvalue), pos, neg, ties, pos + neg)


def mcnemar_exact(clean_correct, noisy_correct) -> BinomTestResult:
    """McNemar's test [3]_ in its exact form: a binomial test on the discordant pairs.

    ``clean_correct, noisy_correct``: bool or 0/1 of shape (n,), each paired item correct or not.
    ``n_pos = b`` (clean correct, noisy wrong), ``n_neg = c``, ``p = binomtest(b, b + c,
    0.5).pvalue`` (two-sided); NaN with a note when ``b + c == 0``.

    Raises
    ------
    AiplibParameterError
        If the arrays differ in length.
    """
    a = _as_1d(clean_correct, "clean_correct").astype(bool)
    z = _as_1d(noisy_correct, "noisy_correct").astype(bool)
    if a.size != z.size:
        raise AiplibParameterError(f"clean and noisy arrays differ in length: {a.size} vs {z.size}")
    b = int((a & ~z).sum())
    c = int((~a & z).sum())
    if b + c == 0:
        return BinomTestResult(math.nan, b, c, int(a.size), 0, "no discordant pairs")
    return BinomTestResult(float(binomtest(b, b + c, 0.5).pvalue), b, c, int(a.size - b - c), b + c)


def bh_adjust(pvalues) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values [4]_ (``scipy.stats.false_discovery_control``).

    ``p_bh(i) = min_{j ≥ i} min(1, m · p_(j) / j)`` over the ``m`` finite p-values sorted
    ascending.

    ``pvalues``: shape (m,); NaNs stay NaN and do not count towards ``m``. Returns shape (m,).

    Raises
    ------
    AiplibParameterError
        If a finite p-value lies outside [0, 1].
    """
    p = _as_1d(pvalues, "pvalues")
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        if np.any((p[ok] < 0) | (p[ok] > 1)):
            raise AiplibParameterError(f"p-values must lie in [0, 1], got {p[ok].tolist()}")
        out[ok] = false_discovery_control(p[ok], method="bh")
    return out


def rer(delta_steer, delta_base, *, task_family: str, usable_only: bool = False):
    """Residual Effect Ratio of the steering prompt, as the authors compute it.

    ``RER = Δ_steer / (Δ_base + 1e-9)`` with Δ the mean degradation (fractions) under the
    steering and the baseline prompt; KWS 1.0 when both |Δ| < :data:`RER_KWS_SMALL`. RER < 1
    means "the prompt helped" only when Δ_base is clearly positive (:func:`rer_flag`).

    ``delta_steer, delta_base``: mean degradations, fractions (0.05 = 5 pp), broadcastable; NaN in
    either gives NaN. ``usable_only``: NaN wherever :func:`rer_flag` would flag the baseline, except
    the KWS both-small rule (for bootstrap resamples). Returns a float, or an array for array input.

    Raises
    ------
    AiplibParameterError
        If ``task_family`` is not a family of ``aiplib/core/tasks.yaml`` (``asr``, ``kws``).

    Examples
    --------
    >>> round(rer(0.05, 0.10, task_family="asr"), 6), rer(0.004, -0.003, task_family="kws")
    (0.5, 1.0)
    """
    family_spec(task_family)  # an unknown family raises
    s = np.asarray(delta_steer, dtype=float)
    b = np.asarray(delta_base, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = s / (b + RER_DENOMINATOR_EPS)
    if usable_only:
        r = np.where(b < RER_FLAG_BELOW, np.nan, r)
    if TASK_FAMILIES[task_family].is_binary:  # accuracy: both changes tiny reads as no effect
        r = np.where((np.abs(s) < RER_KWS_SMALL) & (np.abs(b) < RER_KWS_SMALL), 1.0, r)
    r = np.where(np.isnan(s) | np.isnan(b), np.nan, r)
    return float(r) if r.ndim == 0 else r


def rer_flag(delta_base) -> str:
    """Why an RER cannot be read as "< 1: the prompt helped" ("" when it can).

    ``delta_base``: mean baseline degradation (fraction). ``"baseline <= 0"`` (the ratio's sign is
    inverted), ``"baseline < 1 pp"`` (unstable ratio of small numbers), ``"baseline NaN"`` or
    ``""``.
    """
    b = float(delta_base)
    return (
        "baseline NaN"
        if math.isnan(b)
        else "baseline <= 0"
        if b <= 0
        else "baseline < 1 pp"
        if b < RER_FLAG_BELOW
        else ""
    )


#: Ways :func:`degradation_by_background` averages: ``flat`` (the authors'), ``snr_balanced``.
DEGRADATION_METHODS = ("flat", "snr_balanced")


def degradation_by_background(
    scores_df: pd.DataFrame, family: str, *, task: str | None = None, method: str = "flat"
) -> pd.DataFrame:
    """Mean degradation per background, the authors' way (``flat``) or SNR-balanced.

    ``flat`` (the authors' ``load_task_degradations``): ``noisy.groupby("bg_id")[col].mean()``
    per model, and ``pooled`` over every model's rows together. ``snr_balanced`` (ours): over
    items per SNR, then SNRs, then models; ``pooled`` only where every model has the background.
    The two agree when no row is missing.

    Parameters
    ----------
    scores_df : pandas.DataFrame
        A ``results/scores/<task>.csv`` table (columns ``model, task, bg_id, snr_db`` and
        ``delta_wer`` or ``delta_acc``). Clean rows and NaN deltas (failed or missing
        generations) are ignored.
    family, task, method
        ``"asr"``/``"kws"`` (picks the column); only this task (needed if ``scores_df`` holds
        several); ``"flat"`` or ``"snr_balanced"``.

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, n_models + 1)]
        Index ``bg_id`` (sorted); one column per model and ``pooled``; fractions.
        ``attrs["partial"]``: ``{bg_id: [models without a row of it]}``; ``attrs["method"]``;
        ``attrs["n_rows"]``: ``{bg_id: scored noisy rows, all models}``.

    Raises
    ------
    AiplibParameterError
        If ``family`` or ``method`` is unknown, the column is missing or several tasks remain.
    """
    family_spec(family)  # an unknown family raises
    col = TASK_FAMILIES[family].degradation_column
    if method not in DEGRADATION_METHODS:
        raise AiplibParameterError(f"method must be one of {DEGRADATION_METHODS}, got {method!r}")
    df = scores_df
    if task is not None and "task" in df.columns:
        df = df[df["task"] == task]
    if "task" in df.columns and df["task"].nunique() > 1:
        raise AiplibParameterError(
            f"scores hold several tasks {sorted(df['task'].unique())}; pass task="
        )
    if col not in df.columns:
        raise AiplibParameterError(f"scores lack the column {col!r} of family {family!r}")
    df = df[(df["bg_id"] != "clean") & df[col].notna()]
    if method == "flat":
        per_bg = df.groupby(["model", "bg_id"])[col].mean().unstack("model")
    else:
        per_snr = df.groupby(["model", "bg_id", "snr_db"])[col].mean()
        per_bg = per_snr.groupby(level=["model", "bg_id"]).mean().unstack("model")
    per_bg = per_bg.set_axis([str(c) for c in per_bg.columns], axis=1).sort_index()
    models = list(per_bg.columns)
    complete = per_bg[models].notna().all(axis=1)
    per_bg["pooled"] = (
        df.groupby("bg_id")[col].mean().reindex(per_bg.index)
        if method == "flat"
        else per_bg[models].mean(axis=1).where(complete)
    )
    per_bg.attrs["partial"] = {
        str(bg): [m for m in models if pd.isna(per_bg.at[bg, m])] for bg in per_bg.index[~complete]
    }
    per_bg.attrs["method"] = method
    per_bg.attrs["n_rows"] = {str(k): int(v) for k, v in df.groupby("bg_id").size().items()}
    return per_bg


#: Columns of :func:`worst_stimuli`, in order.
WORST_STIMULI_COLUMNS = [
    "model",
    "task",
    "stimulus_id",
    "item_id",
    "bg_id",
    "snr_db",
    "reference",
    "clean_response",
    "response",
    "clean_score",
    "score",
    "delta",
]


def worst_stimuli(
    scores_df: pd.DataFrame,
    family: str,
    n: int = 10,
    *,
    model: str | None = None,
    one_per_item: bool = True,
) -> pd.DataFrame:
    """The stimuli that hurt most (the report's and the explorer's ranking): degradation against the
    clean version of the item > 0 (KWS: a flip), largest first, ties to the higher SNR, then model
    and stimulus id.

    ``scores_df``: one task's ``results/scores/<task>.csv``; ``family`` picks the degradation
    column; at most ``n`` (>= 1) rows, of ``model`` only if given, only each item's worst stimulus
    with ``one_per_item``. Shape (<= n, 12): :data:`WORST_STIMULI_COLUMNS`; ``snr_db`` in dB,
    ``clean_score`` / ``score`` WER (fraction) or KWS correct (0/1), ``delta`` ΔWER or Δacc = 1.
    Empty when nothing got worse.

    Raises
    ------
    AiplibParameterError
        If ``family`` is unknown or ``n < 1``.
    """
    family_spec(family)  # an unknown family raises
    col = TASK_FAMILIES[family].degradation_column
    if int(n) < 1:
        raise AiplibParameterError(f"n must be at least 1, got {n}")
    if scores_df is None or scores_df.empty or col not in scores_df.columns:
        return pd.DataFrame(columns=WORST_STIMULI_COLUMNS)
    df = scores_df if model is None else scores_df[scores_df["model"].astype(str) == model]
    df = df[(df["bg_id"] != "clean") & (df[col] > 0)]
    df = df.sort_values(
        [col, "snr_db", "model", "stimulus_id"], ascending=[False, False, True, True], kind="stable"
    )
    if one_per_item:
        df = df.drop_duplicates("item_id", keep="first")
    df = df.head(int(n))
    key = ["model", "task", "item_id"]
    clean = (
        scores_df[scores_df["bg_id"] == "clean"].drop_duplicates(key, keep="last").set_index(key)
    )
    at = pd.MultiIndex.from_frame(df[key])
    spec = TASK_FAMILIES[family]
    score_col = spec.measure
    ref_col = SCORERS[spec.scoring].reference_column

    def column(frame, name, default):
        return frame[name].to_numpy() if name in frame.columns else default

    out = pd.DataFrame(
        {
            "model": df["model"].astype(str).to_numpy(),
            "task": df["task"].to_numpy(),
            "stimulus_id": df["stimulus_id"].to_numpy(),
            "item_id": df["item_id"].astype(str).to_numpy(),
            "bg_id": df["bg_id"].astype(str).to_numpy(),
            "snr_db": df["snr_db"].to_numpy(),
            "reference": column(df, ref_col, ""),
            "clean_response": column(clean.reindex(at), "response", ""),
            "response": column(df, "response", ""),
            "clean_score": column(clean.reindex(at), score_col, math.nan),
            "score": df[score_col].to_numpy(),
            "delta": df[col].to_numpy(),
        }
    )
    out["clean_response"] = out["clean_response"].where(out["clean_response"].notna(), "")
    return out[WORST_STIMULI_COLUMNS]


def partial_note(partial: dict, method: str = "snr_balanced") -> str:
    """Text for ``attrs["partial"]`` of :func:`degradation_by_background` ("" when empty).

    ``method`` is the table's ``attrs["method"]``: ``snr_balanced`` leaves the partial
    backgrounds out of ``pooled``; ``flat`` pools the rows there are (the authors' rule).
    """
    if not partial:
        return ""
    names = ", ".join(f"{bg} (missing {', '.join(ms)})" for bg, ms in sorted(partial.items()))
    if method == "flat":
        return f"{len(partial)} backgrounds pooled over the models that have rows: {names}"
    return (
        f"pooled only over backgrounds every model covers; {len(partial)} partial left out: {names}"
    )


def descriptor_correlations(
    degradation: pd.DataFrame,
    descriptors_df: pd.DataFrame,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Spearman ρ of each descriptor against degradation across backgrounds, with CIs and BH.

    Parameters
    ----------
    degradation : pandas.DataFrame [shape=(n_backgrounds, n_columns)]
        Index ``bg_id``; columns are models and/or ``pooled`` (as returned by
        :func:`degradation_by_background`).
    descriptors_df : pandas.DataFrame [shape=(n_backgrounds, ...)]
        ``descriptors/acoustic_descriptors.csv``: a ``bg_id`` column (or index) and the
        descriptor columns: those of :data:`DESCRIPTORS` present are used (else every numeric
        column).
    n_resamples, seed, level
        Bootstrap over backgrounds; each (model, descriptor) cell starts ``default_rng(seed)``
        afresh.

    Returns
    -------
    pandas.DataFrame, long format
        ``model, descriptor, n, r_s, p, p_method, n_permutations`` (:func:`spearman`),
        ``ci_low, ci_high, ci_usable`` (resamples without a constant column), ``p_bh`` (BH across
        the descriptors of each model column), ``level, n_resamples, seed, note``.

    Raises
    ------
    AiplibParameterError
        If ``descriptors_df`` has no ``bg_id``.
    """
    table = _descriptor_table(descriptors_df)
    descriptors = _descriptor_columns(table)
    pnote = partial_note(
        degradation.attrs.get("partial") or {}, degradation.attrs.get("method", "snr_balanced")
    )
    deg = degradation.set_axis(degradation.index.astype(str))
    table.index = table.index.astype(str)
    common = deg.index.intersection(table.index)
    only = sorted(set(deg.index) ^ set(table.index))
    base_note = f"{len(only)} backgrounds without both values ignored" if only else ""
    settings = {"n_resamples": n_resamples, "seed": seed, "level": level}
    rows = []
    for model in deg.columns:
        y_all = deg.loc[common, model].to_numpy(dtype=float)
        model_notes = [base_note]
        if model == "pooled":
            model_notes.append(pnote)
        cell_rows = []
        for desc in descriptors:
            x_all = table.loc[common, desc].to_numpy(dtype=float)
            row = _correlation_row(x_all, y_all, model_notes, settings)
            cell_rows.append({"model": model, "descriptor": desc, **row})
        for row, q in zip(cell_rows, bh_adjust([r["p"] for r in cell_rows])):
            rows.append({**row, "p_bh": float(q)})
    return pd.DataFrame(rows, columns=_CORRELATION_COLUMNS)


#: Columns of :func:`descriptor_correlations`, in order.
_CORRELATION_COLUMNS = [
    "model",
    "descriptor",
    "n",
    "r_s",
    "p",
    "p_method",
    "n_permutations",
    "ci_low",
    "ci_high",
    "ci_usable",
    "p_bh",
    "level",
    "n_resamples",
    "seed",
    "note",
]


def _descriptor_table(descriptors_df: pd.DataFrame) -> pd.DataFrame:
    """A copy of the descriptor table indexed by ``bg_id``.

    Raises
    ------
    AiplibParameterError
        If it has no ``bg_id`` column or index.
    """
    table = descriptors_df.copy()
    if "bg_id" in table.columns:
        return table.set_index("bg_id")
    if table.index.name != "bg_id":
        raise AiplibParameterError("descriptors_df needs a bg_id column or index")
    return table


def _descriptor_columns(table: pd.DataFrame) -> list[str]:
    """The columns of :data:`DESCRIPTORS` in ``table``, else every numeric column."""
    known = [c for c in DESCRIPTORS if c in table.columns]
    if known:
        return known
    return [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]


def _correlation_row(x_all, y_all, model_notes: list[str], settings: dict) -> dict:
    """Spearman ρ of one (model, descriptor) cell with its bootstrap interval and notes
    (``settings``: ``n_resamples, seed, level``)."""
    seed = settings["seed"]
    level = settings["level"]
    n_resamples = settings["n_resamples"]
    res = spearman(x_all, y_all, seed=seed)
    ok = np.isfinite(x_all) & np.isfinite(y_all)
    lo = math.nan
    hi = math.nan
    usable = 0
    notes = [n for n in (*model_notes, res.note) if n]
    if np.isfinite(res.rho):
        b = bootstrap_ci(
            (x_all[ok], y_all[ok]),
            _spearman_rows,
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            vectorized=True,
        )
        lo = b.ci_low
        hi = b.ci_high
        usable = b.n_valid
        if b.note:
            notes.append(b.note.replace("unusable", "with a constant column"))
    return {
        "n": res.n,
        "r_s": res.rho,
        "p": res.p,
        "p_method": res.method,
        "n_permutations": res.n_permutations,
        "ci_low": lo,
        "ci_high": hi,
        "ci_usable": int(usable),
        "level": level,
        "n_resamples": int(n_resamples),
        "seed": int(seed),
        "note": "; ".join(notes),
    }


#: Decimals the authors keep of each descriptor before the correlations (Python ``round``): their
#: descriptor script's ``round(zcr, 4)`` …, and ``round(sf, 4)`` of the speech fraction in their VAD
#: labelling script. Any other column is not rounded.
AUTHORS_DESCRIPTOR_DECIMALS = {
    "zcr": 4,
    "spectral_centroid": 2,
    "spectral_rolloff": 2,
    "spectral_bandwidth": 2,
    "spectral_flux": 4,
    "spectral_flatness": 4,
    "spectral_contrast": 4,
    "rms_variance": 6,
    "vad_speech_fraction": 4,
}

#: The authors rank Figure 2's descriptors by mean |r_s| rounded to this many decimals
#: (``numpy.round``,
#: :func:`rank_by_mean_abs_rs`).
TOP_RANK_DECIMALS = 3


def round_descriptors(descriptors: pd.DataFrame, decimals: dict | None = None) -> pd.DataFrame:
    """A copy of ``descriptors/acoustic_descriptors.csv`` (units as stored: Hz, dB) with each column
    of ``decimals`` (default :data:`AUTHORS_DESCRIPTOR_DECIMALS`) rounded with Python's ``round``,
    as their ``round(zcr, 4)`` (``numpy.round`` can differ at ties); NaN and inf kept, same
    shape."""
    out = descriptors.copy()
    for col, nd in (AUTHORS_DESCRIPTOR_DECIMALS if decimals is None else decimals).items():
        if col in out.columns:
            out[col] = [round(v, int(nd)) if math.isfinite(v) else v for v in map(float, out[col])]
    return out


def rank_by_mean_abs_rs(
    r_asr: pd.Series, r_kws: pd.Series, *, decimals: int = TOP_RANK_DECIMALS
) -> pd.Series:
    """Descriptors sorted as Figure 2 picks them: mean of |r_s(ASR)| and |r_s(KWS)|, rounded.

    ``r_asr, r_kws``: r_s per descriptor (index in table order). The mean is rounded to ``decimals``
    (``numpy.round``, as their ``round`` of a ``numpy.float64``: 0.3015 → 0.302) before a stable
    sort, so ties keep the table order; a descriptor NaN in either task is left out.
    """
    m = pd.concat([r_asr.abs(), r_kws.abs()], axis=1).mean(axis=1, skipna=False).dropna()
    m = pd.Series(np.round(m.to_numpy(dtype=float), int(decimals)), index=m.index)
    return m.sort_values(ascending=False, kind="stable")


def _unpaired_column(spec: TaskFamily) -> str:
    """The score column :func:`unpaired_delta` averages: the per-pair degradation of an error
    rate, the 0/1 measure itself for accuracy (clean and noisy rows averaged apart)."""
    if spec.is_binary:
        return spec.measure
    return spec.degradation_column


def unpaired_delta(df: pd.DataFrame, family: str) -> tuple[float, int]:
    """One task's mean degradation the authors' way, without pairing to another task.

    ASR: the mean of the task's per-row ``delta_wer`` over its noisy rows. KWS: accuracy over all
    its clean rows minus accuracy over all its noisy rows (``correct``).

    ``df``: one model's rows of one task's scores (``bg_id``, ``delta_wer`` or ``correct``; NaN rows
    left out). Returns Δ as a fraction (NaN when a needed set of rows is empty) and the number of
    rows used.

    Raises
    ------
    AiplibParameterError
        If ``family`` is unknown or the column is missing.
    """
    family_spec(family)
    spec = TASK_FAMILIES[family]
    col = _unpaired_column(spec)
    if col not in df.columns:
        raise AiplibParameterError(f"scores lack the column {col!r} of family {family!r}")
    ok = df[df[col].notna()]
    noisy = ok[ok["bg_id"] != "clean"][col].astype(float)
    if not spec.is_binary:
        mean_change = float(noisy.mean()) if len(noisy) else math.nan
        return mean_change, int(len(noisy))
    clean = ok[ok["bg_id"] == "clean"][col].astype(float)
    if len(clean) and len(noisy):
        change = float(clean.mean() - noisy.mean())
    else:
        change = math.nan
    return change, int(len(clean) + len(noisy))


def unpaired_item_sums(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """Per item (index ``item_id``), the sums and counts :func:`unpaired_delta` is made of:
    ``clean_sum, clean_n, noisy_sum, noisy_n`` (ASR: clean 0, noisy of ``delta_wer``; KWS: of
    ``correct``)."""
    spec = TASK_FAMILIES[family]
    col = _unpaired_column(spec)
    ok = df[df[col].notna()]
    ok = ok.assign(_v=ok[col].astype(float), _clean=ok["bg_id"] == "clean")
    g = ok.groupby(["item_id", "_clean"])["_v"].agg(["sum", "size"]).unstack("_clean", fill_value=0)
    g = g.reindex(
        columns=pd.MultiIndex.from_product([["sum", "size"], [True, False]]), fill_value=0
    ).astype(float)
    out = pd.DataFrame(
        {
            "clean_sum": g[("sum", True)],
            "clean_n": g[("size", True)],
            "noisy_sum": g[("sum", False)],
            "noisy_n": g[("size", False)],
        }
    )
    if not spec.is_binary:  # an error rate: the per-pair changes of the noisy rows only
        out["clean_sum"] = 0.0
        out["clean_n"] = 0.0
    return out


def delta_from_sums(clean_sum, clean_n, noisy_sum, noisy_n, *, family: str, axis=-1):
    """Δ of :func:`unpaired_delta` from per-item sums (arrays; sums over ``axis``)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        noisy = np.sum(noisy_sum, axis) / np.sum(noisy_n, axis)
        if not TASK_FAMILIES[family].is_binary:
            return noisy
        return np.sum(clean_sum, axis) / np.sum(clean_n, axis) - noisy
