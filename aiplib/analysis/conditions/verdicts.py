"""Scopes, the paired change against clean and its verdict (part of
:mod:`aiplib.analysis.conditions`)."""

from __future__ import annotations

import math

import numpy as np

from aiplib.analysis import stats
from aiplib.core.errors import AiplibParameterError

#: Aggregation scope → the keys grouped on besides (model, task): ``clean`` the clean stimuli
#: (absolute values only), ``overall`` every noisy one, ``snr`` per SNR (``bg_id == "all"``),
#: ``background`` per background (``snr_db`` NaN), ``condition`` one background at one SNR.
SCOPES = {
    "clean": None,
    "overall": (),
    "snr": ("snr_db",),
    "background": ("bg_id",),
    "condition": ("bg_id", "snr_db"),
}

#: Possible verdicts (:func:`verdict`).
VERDICTS = ("worse", "better", "same", "n/a")

#: Default minimum change (percentage points) for a ``worse`` / ``better`` verdict.
DEFAULT_MIN_DIFF_PP = 2.0

#: A ``worse``/``better`` verdict needs its (Benjamini–Hochberg adjusted) p-value below this.
ALPHA = 0.05

#: Fewest paired items for a verdict (else ``n/a``): the minimum for an interval (10).
MIN_ITEMS_FOR_VERDICT = stats.MIN_N_FOR_INTERVAL

#: Rows with fewer paired items are marked ``coarse`` (as the audiolab stresstest does).
COARSE_BELOW_ITEMS = 48

#: ``bg_id`` of rows aggregated over backgrounds.
ALL = "all"

#: Scope → its rank in :data:`SCOPES` (the row order of a condition table).
SCOPE_ORDER = {s: i for i, s in enumerate(SCOPES)}


def verdict(
    estimate: float,
    ci_low: float,
    ci_high: float,
    min_diff: float,
    p_value: float,
    *,
    alpha: float = ALPHA,
) -> str:
    """Classify a paired change as ``worse``, ``better``, ``same`` or ``n/a``.

    Parameters
    ----------
    estimate, ci_low, ci_high : float
        The change (positive = worse: ΔWER, ΔAcc = acc before − acc after) and its interval (NaN:
        none).
    min_diff : float >= 0
        Smallest change that counts, in the units of ``estimate``.
    p_value, alpha : float
        Exact two-sided p-value (BH-adjusted when conditions are tested together; NaN, every pair
        tied, is not significant) and the level it must be below.

    Returns
    -------
    str
        ``worse`` if ``ci_low > 0``, ``estimate >= min_diff`` and ``p_value < alpha``; ``better``
        mirrored; ``n/a`` if the estimate or a bound is NaN; else ``same``.

    Raises
    ------
    AiplibParameterError
        If ``min_diff < 0``.

    Examples
    --------
    >>> verdict(5.0, 1.0, 9.0, 2.0, 0.01), verdict(5.0, 1.0, 9.0, 2.0, 0.25)
    ('worse', 'same')
    >>> verdict(1.5, 0.5, 2.5, 2.0, 0.01), verdict(-3, -5, -1, 2, 0.001)
    ('same', 'better')
    """
    if min_diff < 0:
        raise AiplibParameterError(f"min_diff must be >= 0, got {min_diff}")
    if not all(np.isfinite(v) for v in (estimate, ci_low, ci_high)):
        return "n/a"
    significant = bool(np.isfinite(p_value) and p_value < alpha)
    if ci_low > 0 and estimate >= min_diff and significant:
        return "worse"
    if ci_high < 0 and estimate <= -min_diff and significant:
        return "better"
    return "same"


def pooled_ratio(s, n, axis=-1):
    return s.sum(axis) / n.sum(axis)


def paired_change(
    item_sum,
    item_n,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff: float = DEFAULT_MIN_DIFF_PP,
    mcnemar=None,
    min_items: int = MIN_ITEMS_FOR_VERDICT,
) -> dict:
    """Mean paired change with a cluster-bootstrap interval, an exact test and a verdict.

    Parameters
    ----------
    item_sum, item_n : array-like [shape=(n_items,)]
        Per item, the sum of its paired changes (positive = worse) and its number of pairs (>= 1).
    n_resamples, seed, level : int, int, float
        Percentile bootstrap (:func:`aiplib.analysis.stats.bootstrap_ci`) over *items*, with
        ``default_rng(seed)`` afresh on every call.
    min_diff : float
        Minimum change for a verdict other than ``same`` (units of the changes).
    mcnemar : tuple of two bool arrays, optional
        ``(before_correct, after_correct)`` per pair: with one pair per item the test is the exact
        McNemar (:func:`aiplib.analysis.stats.mcnemar_exact`) instead of the sign test.
    min_items : int
        Fewer paired items give no interval and the verdict ``n/a``.

    Returns
    -------
    dict
        ``estimate`` (Σ item_sum / Σ item_n), ``ci_low, ci_high, ci_usable`` (usable resamples);
        ``test`` (``sign``, ``sign_item_means``, ``mcnemar_exact``), ``p_value`` (two-sided, exact),
        ``n_worse, n_better, n_ties`` (items, or discordant pairs for McNemar); ``verdict`` (on the
        unadjusted p), ``n_items``, ``coarse`` (below :data:`COARSE_BELOW_ITEMS`), ``level,
        n_resamples, seed, note``.

    Raises
    ------
    AiplibParameterError
        If ``item_sum`` and ``item_n`` are not 1-D of one length.

    Notes
    -----
    Sign test: ``binomtest(n_worse, n_worse + n_better, 0.5)`` on the per-item mean changes (ties
    dropped): the classical sign test with one pair per item, else that of the item means.
    """
    s, n = np.asarray(item_sum, dtype=float), np.asarray(item_n, dtype=float)
    if s.shape != n.shape or s.ndim != 1:
        raise AiplibParameterError(
            f"item_sum and item_n must be 1-D of one length, got {s.shape} and {n.shape}"
        )
    out = {
        "estimate": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "ci_usable": 0,
        "test": "",
        "p_value": math.nan,
        "n_worse": 0,
        "n_better": 0,
        "n_ties": 0,
        "verdict": "n/a",
        "n_items": 0,
        "coarse": True,
        "level": float(level),
        "n_resamples": int(n_resamples),
        "seed": int(seed),
        "note": "",
    }
    keep = (n > 0) & np.isfinite(s)
    s, n = s[keep], n[keep]
    if s.size == 0:
        out["note"] = "no paired items"
        return out
    b = stats.bootstrap_ci(
        (s, n),
        pooled_ratio,
        n_resamples=n_resamples,
        seed=seed,
        level=level,
        vectorized=True,
        min_n=min_items,
    )
    one_pair = bool(np.all(n == 1))
    test = (
        "mcnemar_exact"
        if mcnemar is not None and one_pair
        else "sign"
        if one_pair
        else "sign_item_means"
    )
    t = stats.mcnemar_exact(*mcnemar) if test == "mcnemar_exact" else stats.sign_test(s / n)
    notes = [x for x in (b.note, t.note) if x]
    out.update(
        estimate=b.estimate,
        ci_low=b.ci_low,
        ci_high=b.ci_high,
        ci_usable=b.n_valid,
        test=test,
        p_value=t.p,
        n_worse=t.n_pos,
        n_better=t.n_neg,
        n_ties=t.n_ties,
        verdict=verdict(b.estimate, b.ci_low, b.ci_high, min_diff, t.p),
        n_items=int(s.size),
        coarse=bool(s.size < COARSE_BELOW_ITEMS),
    )
    if s.size < min_items:
        out["verdict"] = "n/a"
        notes.append(f"no verdict below {min_items} items")
    elif s.size < COARSE_BELOW_ITEMS:
        notes.append(f"coarse: {s.size} items < {COARSE_BELOW_ITEMS}")
    out["note"] = "; ".join(notes)
    return out


def condition_label(bg_id, snr_db) -> str:
    """Human label of a condition: ``"bg03 @ 0 dB"``, ``"all @ 5 dB"``, ``"bg03 @ all SNRs"``,
    ``"all @ all SNRs"`` or ``"clean"``."""
    if bg_id == "clean":
        return "clean"
    snr = (
        "all SNRs"
        if snr_db is None or (isinstance(snr_db, float) and math.isnan(snr_db))
        else f"{float(snr_db):g} dB"
    )
    return f"{bg_id} @ {snr}"
