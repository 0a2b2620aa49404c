"""Per-condition results with uncertainty: error rates, paired change against clean, verdict.

A *condition* is one (model, task, background, SNR) cell of the audit. For every condition, and
for the aggregates over backgrounds (per SNR), over SNRs (per background) and over both
(overall), :func:`condition_table` reports

* ASR: corpus WER = Σ(S + D + I) / Σ N and the mean of the per-utterance WERs (both, because a
  few short utterances with many insertions move the mean far more than the corpus value); the
  corpus CER; the substitution, deletion and insertion shares of the reference words
  (``sub_pp + del_pp + ins_pp == wer_pp``; insertions measure how much of a background voice
  ends up in the transcript). Alignments come from jiwer [1]_ on the normalised text of
  ``results/scores/<task>.csv``.
* KWS: accuracy of the closed-set first-word rule.
* The paired change against the *clean* version of the same items — ΔWER = WER(noisy) −
  WER(clean), ΔAcc = acc(clean) − acc(noisy), so positive always means "noise hurt" — with a
  percentile bootstrap interval [2]_ resampling items, an exact test (the sign test on the
  per-item changes, ``scipy.stats.binomtest``; for KWS conditions with one pair per item the
  exact McNemar test [3]_, which is the same binomial test on the discordant pairs), and a
  verdict (:func:`verdict`).

Aggregated scopes hold several pairs per item (one per background and/or SNR). The bootstrap
then resamples whole items (a cluster bootstrap: an item's pairs stay together) and the exact
test is the sign test on each item's mean change, so that the tested units are independent.

Everything is in percent / percentage points (columns ending ``_pp``); the score files hold
fractions.

References
----------
.. [1] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``process_characters``).
.. [2] B. Efron, R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993,
       §13.3 (percentile interval) and §8.5 / Davison & Hinkley 1997 §3.8 (resampling clusters).
.. [3] Q. McNemar, "Note on the sampling error of the difference between correlated proportions
       or percentages", Psychometrika 12(2), 153–157, 1947.
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import stats
from .errors import AiplibError, AiplibParameterError

__all__ = [
    "SCOPES",
    "VERDICTS",
    "DEFAULT_MIN_DIFF_PP",
    "ALPHA",
    "MIN_ITEMS_FOR_VERDICT",
    "COARSE_BELOW_ITEMS",
    "verdict",
    "paired_change",
    "char_counts",
    "condition_label",
    "condition_table",
    "condition_tables",
    "write_condition_tables",
    "read_condition_tables",
]

log = logging.getLogger(__name__)

SCOPES = {"clean": None, "overall": (), "snr": ("snr_db",), "background": ("bg_id",),
          "condition": ("bg_id", "snr_db")}
"""Aggregation scopes → the keys grouped on besides (model, task). ``clean``: the clean stimuli
(absolute values only); ``overall``: every noisy stimulus; ``snr``: per SNR over backgrounds
(``bg_id == "all"``); ``background``: per background over SNRs (``snr_db`` NaN);
``condition``: one background at one SNR."""

VERDICTS = ("worse", "better", "same", "n/a")
"""Possible verdicts (:func:`verdict`)."""

DEFAULT_MIN_DIFF_PP = 2.0
"""Default minimum change (percentage points) for a ``worse`` / ``better`` verdict."""

ALPHA = 0.05
"""Level of the exact test: a ``worse``/``better`` verdict needs its (Benjamini–Hochberg
adjusted, in the condition tables) p-value below this."""

MIN_ITEMS_FOR_VERDICT = stats.MIN_N_FOR_INTERVAL
"""Fewest paired items for a verdict (else ``n/a``): the same as the minimum for an interval
(:data:`aiplib.stats.MIN_N_FOR_INTERVAL`, 10), since the verdict needs the interval."""

COARSE_BELOW_ITEMS = 48
"""Rows with fewer paired items are marked ``coarse`` (as the audiolab stresstest does): the
verdict stands, but the interval's coverage and the test's power are those of a small sample."""

ALL = "all"
"""``bg_id`` of rows aggregated over backgrounds."""

_SCOPE_ORDER = {s: i for i, s in enumerate(SCOPES)}


def verdict(estimate: float, ci_low: float, ci_high: float, min_diff: float, p_value: float,
            *, alpha: float = ALPHA) -> str:
    """Classify a paired change as ``worse``, ``better``, ``same`` or ``n/a``.

    Parameters
    ----------
    estimate : float
        The change, oriented so that positive means worse (ΔWER, ΔAcc = acc before − acc after).
    ci_low, ci_high : float
        Its confidence interval (NaN when none could be given).
    min_diff : float >= 0
        Smallest change that counts, in the units of ``estimate``.
    p_value : float
        Exact two-sided p-value of the change (the Benjamini–Hochberg adjusted one when several
        conditions are tested together). NaN (nothing to test: every pair tied) counts as
        not significant.
    alpha : float
        Significance level (default :data:`ALPHA`).

    Returns
    -------
    str
        ``worse`` if ``ci_low > 0``, ``estimate >= min_diff`` and ``p_value < alpha``;
        ``better`` if ``ci_high < 0``, ``estimate <= -min_diff`` and ``p_value < alpha``;
        ``n/a`` if the estimate or an interval bound is NaN; otherwise ``same``. All three
        conditions are needed: with few items a percentile interval can exclude 0 while the
        exact test cannot (3 of 3 items worse: sign-test p = 0.25).

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


def _ratio(s, n, axis=-1):
    return s.sum(axis) / n.sum(axis)


def paired_change(item_sum, item_n, *, n_resamples: int = 2000, seed: int = 0,
                  level: float = 0.95, min_diff: float = DEFAULT_MIN_DIFF_PP,
                  mcnemar=None, min_items: int = MIN_ITEMS_FOR_VERDICT) -> dict:
    """Mean paired change with a cluster-bootstrap interval, an exact test and a verdict.

    Parameters
    ----------
    item_sum : array-like [shape=(n_items,)]
        Per item, the sum of its paired changes (positive = worse).
    item_n : array-like [shape=(n_items,)]
        Per item, how many pairs it contributes (>= 1).
    n_resamples, seed, level : int, int, float
        Percentile bootstrap (:func:`aiplib.stats.bootstrap_ci`) resampling *items* with
        replacement; ``default_rng(seed)`` afresh for every call, so one condition's interval
        does not depend on which others are computed.
    min_diff : float
        Minimum change for a verdict other than ``same`` (same units as the changes).
    mcnemar : tuple of two bool arrays, optional
        ``(before_correct, after_correct)`` per pair. When given and every item has one pair,
        the test is :func:`aiplib.stats.mcnemar_exact` (exact McNemar) instead of the sign test.
    min_items : int
        Fewer paired items than this give no interval and the verdict ``n/a`` (default
        :data:`MIN_ITEMS_FOR_VERDICT`).

    Returns
    -------
    dict
        ``estimate`` = Σ item_sum / Σ item_n (the mean over pairs), ``ci_low, ci_high``,
        ``ci_usable`` (usable bootstrap resamples; 0 when no interval was attempted);
        ``test`` (``sign``, ``sign_item_means`` or ``mcnemar_exact``), ``p_value`` (two-sided,
        exact), ``n_worse, n_better, n_ties`` (items — or discordant pairs for McNemar — with a
        positive / negative / zero change); ``verdict`` (:func:`verdict` on the unadjusted
        ``p_value``; :func:`condition_table` re-decides it on the BH-adjusted one);
        ``n_items``, ``coarse`` (``n_items <`` :data:`COARSE_BELOW_ITEMS`); ``level,
        n_resamples, seed``; ``note``.

    Notes
    -----
    Sign test: ``p = binomtest(n_worse, n_worse + n_better, 0.5)`` on the per-item mean changes
    (ties dropped). With one pair per item this is the classical sign test; with several it is
    the sign test of the item means, which keeps the tested units independent.
    """
    s = np.asarray(item_sum, dtype=float)
    n = np.asarray(item_n, dtype=float)
    if s.shape != n.shape or s.ndim != 1:
        raise AiplibParameterError(f"item_sum and item_n must be 1-D of one length, got "
                                   f"{s.shape} and {n.shape}")
    out = {"estimate": math.nan, "ci_low": math.nan, "ci_high": math.nan, "ci_usable": 0,
           "test": "", "p_value": math.nan, "n_worse": 0, "n_better": 0, "n_ties": 0,
           "verdict": "n/a", "n_items": 0, "coarse": True, "level": float(level),
           "n_resamples": int(n_resamples), "seed": int(seed), "note": ""}
    keep = (n > 0) & np.isfinite(s)
    s, n = s[keep], n[keep]
    if s.size == 0:
        out["note"] = "no paired items"
        return out
    b = stats.bootstrap_ci((s, n), _ratio, n_resamples=n_resamples, seed=seed, level=level,
                           vectorized=True, min_n=min_items)
    one_pair = bool(np.all(n == 1))
    if mcnemar is not None and one_pair:
        t = stats.mcnemar_exact(*mcnemar)
        test = "mcnemar_exact"
    else:
        t = stats.sign_test(s / n)
        test = "sign" if one_pair else "sign_item_means"
    notes = [x for x in (b.note, t.note) if x]
    out.update(estimate=b.estimate, ci_low=b.ci_low, ci_high=b.ci_high, ci_usable=b.n_valid,
               test=test, p_value=t.p, n_worse=t.n_pos, n_better=t.n_neg, n_ties=t.n_ties,
               verdict=verdict(b.estimate, b.ci_low, b.ci_high, min_diff, t.p),
               n_items=int(s.size), coarse=bool(s.size < COARSE_BELOW_ITEMS))
    if s.size < min_items:
        out["verdict"] = "n/a"
        notes.append(f"no verdict below {min_items} items")
    elif s.size < COARSE_BELOW_ITEMS:
        notes.append(f"coarse: {s.size} items < {COARSE_BELOW_ITEMS}")
    out["note"] = "; ".join(notes)
    return out


def char_counts(ref_norm, hyp_norm) -> tuple[np.ndarray, np.ndarray]:
    """Per-utterance character errors and reference characters (jiwer [1]_).

    Parameters
    ----------
    ref_norm, hyp_norm : sequence of str [shape=(n,)]
        Normalised references (non-empty) and hypotheses.

    Returns
    -------
    errors, n_chars : np.ndarray of int [shape=(n,)]
        ``S + D + I`` and ``H + S + D`` of ``jiwer.process_characters`` (spaces count as
        characters, as in ``jiwer.cer``), so ``errors.sum() / n_chars.sum()`` is the corpus CER
        that :func:`aiplib.scoring.wer_details` reports.
    """
    import jiwer

    e = np.zeros(len(ref_norm), dtype=np.int64)
    c = np.zeros(len(ref_norm), dtype=np.int64)
    cache: dict = {}
    for i, (r, h) in enumerate(zip(ref_norm, hyp_norm)):
        key = (r, h)
        if key not in cache:
            if not r:
                cache[key] = (len(h), 0)
            else:
                o = jiwer.process_characters(r, h)
                cache[key] = (o.substitutions + o.deletions + o.insertions,
                              o.hits + o.substitutions + o.deletions)
        e[i], c[i] = cache[key]
    return e, c


def condition_label(bg_id, snr_db) -> str:
    """Human label of a condition: ``"bg03 @ 0 dB"``, ``"all @ 5 dB"``, ``"bg03 @ all SNRs"``,
    ``"all @ all SNRs"`` or ``"clean"``."""
    if bg_id == "clean":
        return "clean"
    snr = "all SNRs" if snr_db is None or (isinstance(snr_db, float) and math.isnan(snr_db)) \
        else f"{float(snr_db):g} dB"
    return f"{bg_id} @ {snr}"


def _prepare_rows(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """Per-row numeric columns for the sums, with each noisy row's clean partner joined."""
    need = {"model", "task", "item_id", "bg_id", "snr_db"}
    need |= ({"errors", "ref_words", "substitutions", "deletions", "insertions", "wer",
              "ref_norm", "hyp_norm"} if family == "asr" else {"correct"})
    missing = need - set(df.columns)
    if missing:
        raise AiplibParameterError(f"scores lack columns {sorted(missing)}")
    r = df.copy()
    r["item_id"] = r["item_id"].astype(str)
    r["bg_id"] = r["bg_id"].astype(str)
    r["snr_db"] = pd.to_numeric(r["snr_db"], errors="coerce")
    if family == "asr":
        for c in ("ref_norm", "hyp_norm"):
            r[c] = r[c].fillna("").astype(str)
        r["char_errors"], r["ref_chars"] = char_counts(r["ref_norm"].tolist(),
                                                       r["hyp_norm"].tolist())
        value_cols = ["errors", "wer"]
    else:
        r["correct"] = pd.to_numeric(r["correct"], errors="coerce").astype(float)
        value_cols = ["correct"]
    clean = (r[r["bg_id"] == "clean"].drop_duplicates(["model", "task", "item_id"], keep="last")
             .set_index(["model", "task", "item_id"])[value_cols])
    key = pd.MultiIndex.from_frame(r[["model", "task", "item_id"]])
    cl = clean.reindex(key)
    for c in value_cols:
        r[f"clean_{c}"] = cl[c].to_numpy(dtype=float)
    is_noisy = (r["bg_id"] != "clean").to_numpy()
    paired = is_noisy & np.isfinite(r[f"clean_{value_cols[0]}"].to_numpy(dtype=float))
    r["paired"] = paired.astype(float)
    r["n"] = 1.0
    z = lambda col: np.where(paired, r[col].to_numpy(dtype=float), 0.0)  # noqa: E731
    if family == "asr":
        r["wer_capped"] = np.minimum(r["wer"].to_numpy(float), 1.0)
        r["p_d_capped"] = np.where(paired, r["wer_capped"].to_numpy(float)
                                   - np.minimum(r["clean_wer"].fillna(0).to_numpy(float), 1.0),
                                   0.0)
        r["loop"], r["loop_n"] = _flag_sums(r, "is_loop")
        r["p_ref_words"] = z("ref_words")
        r["p_errors"] = z("errors")
        r["p_clean_errors"] = np.where(paired, r["clean_errors"].fillna(0).to_numpy(float), 0.0)
        r["p_wer"] = z("wer")
        r["p_clean_wer"] = np.where(paired, r["clean_wer"].fillna(0).to_numpy(float), 0.0)
        r["d"] = r["p_wer"] - r["p_clean_wer"]
    else:
        r["strict"], r["strict_n"] = _flag_sums(r, "correct_strict")
        r["non_answer"], r["non_answer_n"] = _flag_sums(r, "non_answer")
        cc = r["clean_correct"].fillna(0).to_numpy(float)
        r["p_correct"] = z("correct")
        r["p_clean_correct"] = np.where(paired, cc, 0.0)
        r["d"] = r["p_clean_correct"] - r["p_correct"]
    return r


_ASR_SUMS = ["n", "errors", "ref_words", "substitutions", "deletions", "insertions", "wer",
             "char_errors", "ref_chars", "paired", "p_ref_words", "p_errors", "p_clean_errors",
             "p_wer", "p_clean_wer", "d", "wer_capped", "p_d_capped", "loop", "loop_n"]
_KWS_SUMS = ["n", "correct", "paired", "p_correct", "p_clean_correct", "d", "strict",
             "strict_n", "non_answer", "non_answer_n"]


def _as_flag(col: pd.Series) -> np.ndarray:
    """A boolean score column (bool, 0/1 or "True"/"False" text) as floats, NaN if unknown."""
    if col.dtype == bool:
        return col.to_numpy(float)
    txt = col.astype(str).str.strip().str.lower()
    out = np.full(len(col), np.nan)
    out[txt.isin(["true", "1", "1.0", "yes"]).to_numpy()] = 1.0
    out[txt.isin(["false", "0", "0.0", "no"]).to_numpy()] = 0.0
    return out


def _flag_sums(r: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(flag as 0/1 with unknown → 0, 1 where known) of column ``name``; zeros if absent."""
    if name not in r.columns:
        z = np.zeros(len(r))
        return z, z
    f = _as_flag(r[name])
    known = np.isfinite(f)
    return np.where(known, f, 0.0), known.astype(float)


def _share(tot: dict, num: str, den: str) -> float:
    """100 · Σ num / Σ den, NaN when no row had the flag (column absent or all unknown)."""
    return 100.0 * tot[num] / tot[den] if tot[den] else math.nan


def _row_medians(rows: pd.DataFrame, col: str, scopes) -> dict:
    """Median of ``col`` over the stimuli of every scope group: {(scope, model, task, bg_id,
    snr_db or None): median}."""
    out = {}
    clean_rows = rows[rows["bg_id"] == "clean"]
    noisy = rows[rows["bg_id"] != "clean"]
    for scope in scopes:
        src = clean_rows if scope == "clean" else noisy
        if src.empty:
            continue
        by = ["model", "task"] + list(SCOPES[scope] or ())
        for gkey, g in src.groupby(by, sort=False)[col]:
            k = dict(zip(by, gkey if isinstance(gkey, tuple) else (gkey,)))
            out[_median_key(scope, k.get("model"), k.get("task"),
                            k.get("bg_id", "clean" if scope == "clean" else ALL),
                            k.get("snr_db", math.nan))] = float(g.median())
    return out


def _median_key(scope, model, task, bg_id, snr_db):
    snr = None if snr_db is None or (isinstance(snr_db, float) and math.isnan(snr_db)) \
        else float(snr_db)
    return (scope, str(model), str(task), str(bg_id), snr)


def _pct(a, b) -> float:
    return 100.0 * a / b if b else math.nan


class _Group:
    """Per-item sums of one group: ``g["col"]`` is a float array [shape=(n_items,)]."""

    __slots__ = ("cols", "idx", "_cache")

    def __init__(self, cols: dict, idx: np.ndarray):
        self.cols, self.idx, self._cache = cols, idx, {}

    def __getitem__(self, c) -> np.ndarray:
        if c not in self._cache:
            self._cache[c] = self.cols[c][self.idx]
        return self._cache[c]

    def __len__(self) -> int:
        return int(self.idx.size)

    def total(self, c) -> float:
        return float(self[c].sum())

    def subset(self, mask) -> "_Group":
        return _Group(self.cols, self.idx[np.asarray(mask, dtype=bool)])


def _iter_scopes(rows: pd.DataFrame, sum_cols, scopes):
    """Yield (scope, {model, task, bg_id, snr_db}, :class:`_Group` of per-item sums)."""
    clean_rows = rows[rows["bg_id"] == "clean"]
    noisy = rows[rows["bg_id"] != "clean"]
    for scope in scopes:
        src = clean_rows if scope == "clean" else noisy
        if src.empty:
            continue
        extra = list(SCOPES[scope] or ())
        by = ["model", "task"] + extra
        items = src.groupby(by + ["item_id"], sort=True)[sum_cols].sum()
        cols = {c: items[c].to_numpy(dtype=float) for c in sum_cols}
        for gkey, idx in items.groupby(level=by, sort=True).indices.items():
            gkey = gkey if isinstance(gkey, tuple) else (gkey,)
            k = dict(zip(by, gkey))
            k.setdefault("bg_id", "clean" if scope == "clean" else ALL)
            k.setdefault("snr_db", math.nan)
            yield scope, k, _Group(cols, np.asarray(idx))


def condition_table(scores: pd.DataFrame, family: str, *, n_resamples: int = 2000,
                    seed: int = 0, level: float = 0.95,
                    min_diff_pp: float = DEFAULT_MIN_DIFF_PP, scopes=tuple(SCOPES)
                    ) -> pd.DataFrame:
    """The per-condition table of one task (every model), with intervals, tests and verdicts.

    Parameters
    ----------
    scores : pandas.DataFrame
        A ``results/scores/<task>.csv`` table (:func:`aiplib.figures.load_scores`); may hold
        several models (and tasks: each (model, task) is summarised separately).
    family : {"asr", "kws"}
    n_resamples, seed, level : int, int, float
        Bootstrap settings; recorded in every row.
    min_diff_pp : float
        Minimum change in percentage points for a ``worse``/``better`` verdict (default 2).
    scopes : sequence of str
        Subset of :data:`SCOPES` to compute.

    Returns
    -------
    pandas.DataFrame
        One row per (scope, model, task, bg_id, snr_db). Common columns ``scope, model, task,
        family, bg_id, snr_db, condition, n_items, n_stimuli, n_pairs`` then, for ASR,
        ``wer_pp`` (corpus), ``mean_wer_pp``, ``cer_pp`` (corpus), ``sub_pp, del_pp, ins_pp``
        (shares of the reference words; they add up to ``wer_pp``), ``clean_wer_pp,
        clean_mean_wer_pp`` (the same items clean, weighted like the noisy pairs), the robust
        view ``mean_wer_capped_pp`` (mean of min(WER, 1) per utterance), ``median_wer_pp``
        (median over the stimuli) and ``n_loops`` (stimuli whose score row has ``is_loop``
        true; NaN when the scores have no such column); or for KWS ``acc_pp, clean_acc_pp``
        and, when the scores have the columns ``correct_strict`` / ``non_answer``,
        ``strict_acc_pp`` (non-answers count wrong) and ``non_answer_pp`` (share of empty,
        refusal or multi-word responses), else NaN; then ``measure`` (``delta_wer`` /
        ``delta_acc``), ``delta_pp`` (mean paired change, positive = worse), ``ci_low_pp,
        ci_high_pp, ci_usable`` (usable bootstrap resamples); ASR also ``delta_corpus_pp,
        corpus_ci_low_pp, corpus_ci_high_pp, corpus_ci_usable`` (corpus WER change, same
        bootstrap) and ``delta_capped_pp`` (paired change of the capped WER); ``test, p_value,
        p_bh`` (Benjamini–Hochberg across the conditions of the same task, model and scope),
        ``n_worse, n_better, n_ties, verdict, coarse`` (fewer than
        :data:`COARSE_BELOW_ITEMS` paired items), ``min_diff_pp, level, n_resamples, seed,
        note``. ``clean`` rows carry the absolute values only.

    Raises
    ------
    AiplibParameterError
        If ``family`` is unknown, a scope is unknown or a needed column is missing.

    Notes
    -----
    ``delta_pp`` (ASR) is the mean over pairs of WER(noisy) − WER(clean), the quantity of
    Figures 4–5 and Table 4; ``delta_corpus_pp`` = (Σ errors noisy − Σ errors clean) / Σ N
    over the same pairs. The verdict (:func:`verdict`) needs all of: the interval excludes 0,
    ``|delta_pp| >= min_diff_pp`` and ``p_bh <`` :data:`ALPHA`; it is ``n/a`` with fewer than
    :data:`MIN_ITEMS_FOR_VERDICT` paired items (no interval then either). Noisy rows whose
    clean partner is missing count in the absolute values but not in the paired change
    (``note``).
    """
    if family not in ("asr", "kws"):
        raise AiplibParameterError(f"family must be 'asr' or 'kws', got {family!r}")
    bad = [s for s in scopes if s not in SCOPES]
    if bad:
        raise AiplibParameterError(f"unknown scopes {bad}; choose from {list(SCOPES)}")
    if scores.empty:
        return pd.DataFrame(columns=_columns(family))
    rows = _prepare_rows(scores, family)
    sum_cols = _ASR_SUMS if family == "asr" else _KWS_SUMS
    medians = _row_medians(rows, "wer", scopes) if family == "asr" else {}
    out = []
    for scope, k, g in _iter_scopes(rows, sum_cols, scopes):
        tot = {c: g.total(c) for c in sum_cols}
        rec = {"scope": scope, "model": k["model"], "task": k["task"], "family": family,
               "bg_id": k["bg_id"], "snr_db": k["snr_db"],
               "condition": condition_label(k["bg_id"], k["snr_db"]),
               "n_items": int(len(g)), "n_stimuli": int(tot["n"]),
               "n_pairs": int(tot["paired"])}
        if family == "asr":
            rec.update(wer_pp=_pct(tot["errors"], tot["ref_words"]),
                       mean_wer_pp=_pct(tot["wer"], tot["n"]),
                       cer_pp=_pct(tot["char_errors"], tot["ref_chars"]),
                       sub_pp=_pct(tot["substitutions"], tot["ref_words"]),
                       del_pp=_pct(tot["deletions"], tot["ref_words"]),
                       ins_pp=_pct(tot["insertions"], tot["ref_words"]),
                       mean_wer_capped_pp=_pct(tot["wer_capped"], tot["n"]),
                       median_wer_pp=100 * medians.get(
                           _median_key(scope, k["model"], k["task"], k["bg_id"], k["snr_db"]),
                           math.nan),
                       n_loops=tot["loop"] if tot["loop_n"] else math.nan)
        else:
            rec.update(acc_pp=_pct(tot["correct"], tot["n"]),
                       strict_acc_pp=_share(tot, "strict", "strict_n"),
                       non_answer_pp=_share(tot, "non_answer", "non_answer_n"))
        rec["measure"] = stats.DEGRADATION_COLUMN[family]
        rec.update(min_diff_pp=float(min_diff_pp), level=float(level),
                   n_resamples=int(n_resamples), seed=int(seed))
        notes = []
        if scope != "clean":
            pg = g.subset(g["paired"] > 0)
            if family == "asr":
                rec.update(clean_wer_pp=_pct(tot["p_clean_errors"], tot["p_ref_words"]),
                           clean_mean_wer_pp=_pct(tot["p_clean_wer"], tot["paired"]))
                mc = None
            else:
                rec["clean_acc_pp"] = _pct(tot["p_clean_correct"], tot["paired"])
                mc = None
                if len(pg) and bool((pg["paired"] == 1).all()):
                    mc = (pg["p_clean_correct"].astype(bool), pg["p_correct"].astype(bool))
            pc = paired_change(100 * pg["d"], pg["paired"],
                               n_resamples=n_resamples, seed=seed, level=level,
                               min_diff=min_diff_pp, mcnemar=mc)
            rec.update(delta_pp=pc["estimate"], ci_low_pp=pc["ci_low"],
                       ci_high_pp=pc["ci_high"], ci_usable=pc["ci_usable"], test=pc["test"],
                       p_value=pc["p_value"], n_worse=pc["n_worse"], n_better=pc["n_better"],
                       n_ties=pc["n_ties"], verdict=pc["verdict"], coarse=pc["coarse"])
            if pc["note"]:
                notes.append(pc["note"])
            if family == "asr" and len(pg):
                b = stats.bootstrap_ci(
                    (100 * (pg["p_errors"] - pg["p_clean_errors"]), pg["p_ref_words"]),
                    _ratio, n_resamples=n_resamples, seed=seed, level=level, vectorized=True)
                rec.update(delta_corpus_pp=b.estimate, corpus_ci_low_pp=b.ci_low,
                           corpus_ci_high_pp=b.ci_high, corpus_ci_usable=b.n_valid,
                           delta_capped_pp=_pct(tot["p_d_capped"], tot["paired"]))
            unpaired = rec["n_stimuli"] - rec["n_pairs"]
            if unpaired:
                notes.append(f"{unpaired} noisy stimuli without a clean partner: in the "
                             "absolute values only")
        rec["note"] = "; ".join(notes)
        out.append(rec)
    t = pd.DataFrame(out)
    t = t.reindex(columns=_columns(family))
    t["_s"] = t["scope"].map(_SCOPE_ORDER)
    t["_snr"] = -t["snr_db"].fillna(np.inf)
    t = (t.sort_values(["task", "model", "_s", "_snr", "bg_id"], kind="stable")
         .drop(columns=["_s", "_snr"]).reset_index(drop=True))
    for c in ("n_worse", "n_better", "n_ties"):
        t[c] = t[c].astype("Int64")
    # Benjamini–Hochberg across the conditions of one (task, model, scope): many conditions are
    # tested at once, so the adjusted p-value is the one to read against a 5 % false discovery rate.
    t["p_bh"] = np.nan
    for _, idx in t.groupby(["task", "model", "scope"], sort=False).groups.items():
        t.loc[idx, "p_bh"] = stats.bh_adjust(t.loc[idx, "p_value"].to_numpy(float))
    # the verdict needs the adjusted p: interval, minimum change and p_BH < ALPHA together
    tested = (t["scope"] != "clean") & (t["verdict"] != "n/a")
    t.loc[tested, "verdict"] = [
        verdict(e, lo, hi, min_diff_pp, q) for e, lo, hi, q in
        t.loc[tested, ["delta_pp", "ci_low_pp", "ci_high_pp", "p_bh"]].itertuples(index=False)]
    return t


def _columns(family: str) -> list[str]:
    head = ["scope", "model", "task", "family", "bg_id", "snr_db", "condition", "n_items",
            "n_stimuli", "n_pairs"]
    if family == "asr":
        vals = ["wer_pp", "mean_wer_pp", "cer_pp", "sub_pp", "del_pp", "ins_pp",
                "clean_wer_pp", "clean_mean_wer_pp", "mean_wer_capped_pp", "median_wer_pp",
                "n_loops"]
    else:
        vals = ["acc_pp", "clean_acc_pp", "strict_acc_pp", "non_answer_pp"]
    delta = ["measure", "delta_pp", "ci_low_pp", "ci_high_pp", "ci_usable"]
    if family == "asr":
        delta += ["delta_corpus_pp", "corpus_ci_low_pp", "corpus_ci_high_pp", "corpus_ci_usable",
                  "delta_capped_pp"]
    tail = ["test", "p_value", "p_bh", "n_worse", "n_better", "n_ties", "verdict", "coarse",
            "min_diff_pp", "level", "n_resamples", "seed", "note"]
    return head + vals + delta + tail


def condition_tables(scores: dict, **kwargs) -> dict[str, pd.DataFrame]:
    """:func:`condition_table` for every task in ``scores`` (task → table).

    Parameters
    ----------
    scores : dict of str -> pandas.DataFrame
        As returned by :func:`aiplib.figures.load_scores`.
    **kwargs
        Passed on (``n_resamples, seed, level, min_diff_pp, scopes``).
    """
    from .scoring import task_family

    return {task: condition_table(df, task_family(task), **kwargs)
            for task, df in scores.items() if not df.empty}


def write_condition_tables(ws, *, scores=None, **kwargs) -> dict[str, Path]:
    """Write ``results/tables/conditions_<task>.csv`` for every scored task.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    scores : dict, optional
        Default :func:`aiplib.figures.load_scores` of ``ws`` (every task file present).
    **kwargs
        Passed to :func:`condition_table`.

    Returns
    -------
    dict of str -> pathlib.Path
        Task → written file.

    Raises
    ------
    AiplibError
        If there are no score files (run stage 8 first).
    """
    from .figures import load_scores

    if scores is None:
        scores = load_scores(ws, tasks=_score_tasks(ws))
    if not scores:
        raise AiplibError(f"no results/scores/<task>.csv under {ws.results}; run stage 8 "
                          "(scoring) first")
    out_dir = ws.tables_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for task, t in condition_tables(scores, **kwargs).items():
        p = out_dir / f"conditions_{task}.csv"
        t.to_csv(p, index=False)
        written[task] = p
    return written


def _score_tasks(ws) -> list[str]:
    d = ws.scores_dir
    return sorted(p.stem for p in d.glob("*.csv")) if d.is_dir() else []


_TEXT_COLUMNS = {"bg_id", "model", "task", "condition", "scope", "test", "verdict", "note",
                 "measure", "family", "coarse"}


def read_condition_tables(results_dir) -> dict[str, pd.DataFrame]:
    """Read every ``tables/conditions_<task>.csv`` under a results folder (task → table)."""
    out = {}
    for p in sorted((Path(results_dir) / "tables").glob("conditions_*.csv")):
        t = pd.read_csv(p, dtype={"bg_id": str, "model": str, "task": str, "condition": str,
                                  "scope": str, "test": str, "verdict": str, "note": str,
                                  "measure": str, "family": str},
                        keep_default_na=False, na_values={"snr_db": [""]})
        for c in t.columns:
            if c == "coarse":
                t[c] = t[c].astype(str).map({"True": True, "False": False}).astype(object)
            elif (t[c].dtype == object or pd.api.types.is_string_dtype(t[c])) \
                    and c not in _TEXT_COLUMNS:
                t[c] = pd.to_numeric(t[c].replace("", np.nan), errors="coerce")
        out[p.stem[len("conditions_"):]] = t
    return out


def _inactive(s: pd.DataFrame) -> pd.Series:
    """True where a scored row's background segment was digital silence (``bg_active`` false)."""
    return s["bg_active"].astype(str).str.lower().isin(["false", "0", "0.0"])


def inactive_background_rows(scores: dict) -> pd.DataFrame:
    """Count the scored noisy rows whose background segment was digital silence.

    Such rows (``bg_active`` False, measured at stage 5; e.g. an ESC-50 clip zero-padded to 5 s)
    are kept in every headline number, as the authors' mixer made them (effectively clean); this
    table states how many there are per task and background.

    Parameters
    ----------
    scores : dict of str -> pandas.DataFrame
        Task → scores (``results/scores/<task>.csv``) with a ``bg_active`` column.

    Returns
    -------
    pandas.DataFrame
        ``task, bg_id, n_noisy, n_inactive, inactive_share`` (only backgrounds with inactive rows).
    """
    rows = []
    for task, s in scores.items():
        if "bg_active" not in s.columns:
            continue
        noisy = s[s["bg_id"].astype(str) != "clean"]
        inactive = _inactive(noisy)
        for bg, grp in noisy.groupby("bg_id"):
            k = int(inactive.loc[grp.index].sum())
            if k:
                rows.append({"task": task, "bg_id": bg, "n_noisy": len(grp), "n_inactive": k,
                             "inactive_share": k / len(grp)})
    return pd.DataFrame(rows, columns=["task", "bg_id", "n_noisy", "n_inactive", "inactive_share"])


def write_active_only_tables(ws, *, scores=None, **kwargs) -> dict[str, Path]:
    """The per-condition tables again without the rows whose background segment was silent.

    Writes ``results/tables/conditions_<task>_bg_active.csv`` (clean rows kept, noisy rows with
    ``bg_active`` False left out) for each task that has such rows; the headline tables keep them.

    Returns
    -------
    dict of str -> pathlib.Path
        Task → written file (empty when no row was inactive).
    """
    from .figures import load_scores

    if scores is None:
        scores = load_scores(ws, tasks=_score_tasks(ws))
    counts = inactive_background_rows(scores)
    out_dir = ws.tables_dir
    written = {}
    for task in sorted(set(counts["task"])):
        s = scores[task]
        keep = ~_inactive(s)
        t = condition_table(s[keep].reset_index(drop=True), "kws" if task.startswith("kws") else "asr",
                            **kwargs)
        out_dir.mkdir(parents=True, exist_ok=True)
        p = out_dir / f"conditions_{task}_bg_active.csv"
        t.to_csv(p, index=False)
        written[task] = p
    return written
