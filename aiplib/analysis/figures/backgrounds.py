"""Figure 4: backgrounds ranked by degradation (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from aiplib.analysis import stats
from aiplib.analysis.figures.common import (
    _CATEGORY_COLOURS,
    _DEG_LABEL,
    _FAMILY_LABEL,
    _OTHER_COLOUR,
    BASE_TASKS,
    _categories,
    _category_legend,
    _new_figure,
)
from aiplib.core.tasks import DEGRADATION_COLUMN


# ---------------------------------------------------------------------- Figure 4 and Table 3
def _item_bg_means(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """Per (bg_id, item_id) the mean degradation over SNRs and models — only items that every
    model of ``df`` has for that background (a pooled value never mixes sets of models)."""
    noisy = df[(df["bg_id"] != "clean") & df[col].notna()]
    per_model = noisy.groupby(["bg_id", "item_id", "model"])[col].mean().unstack("model")
    per_model = per_model[per_model.notna().all(axis=1)]
    return per_model.mean(axis=1).rename(col).reset_index()


def background_ranking(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Pooled degradation per background for ASR and KWS, in Figure 4 order.

    Parameters
    ----------
    scores : dict of str -> pandas.DataFrame
        Needs ``"asr"`` and ``"kws"``.
    n_resamples, seed : int
        Bootstrap over items.

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, 15)]
        Index ``bg_id`` in Figure 4 order; columns ``rank`` (1 = most harmful),
        ``mean_degradation_pp`` (mean of the ASR ΔWER and KWS ΔAcc below, the ranking key),
        ``asr_delta_wer_pp, asr_ci_low_pp, asr_ci_high_pp, asr_ci_usable,
        asr_delta_wer_snr_balanced_pp, kws_delta_acc_pp, kws_ci_low_pp, kws_ci_high_pp,
        kws_ci_usable, kws_delta_acc_snr_balanced_pp, n_resamples, seed, note``. The point
        values are the authors' flat mean over all of the background's noisy rows of every
        model together (:func:`aiplib.analysis.stats.degradation_by_background`, ``flat``); beside them
        ``*_snr_balanced_pp`` (ours: over items per SNR, then SNRs, then models; NaN when a
        model lacks the background, named in ``note``). Intervals bootstrap the items (each
        item's mean over models and SNRs, items every model has) and are NaN below
        :data:`aiplib.analysis.stats.MIN_N_FOR_INTERVAL` items.

    Notes
    -----
    Figure 4 order, as the authors' ``scripts/generate_results_new_2.py``: backgrounds sorted
    by the mean of their ASR ΔWER and KWS ΔAcc (both positive = worse, in pp), largest first;
    backgrounds without both values last. Both panels share this order.
    """
    out, notes = {}, {}
    for fam, task in BASE_TASKS.items():
        col = DEGRADATION_COLUMN[fam]
        deg = stats.degradation_by_background(scores[task], fam)
        balanced = stats.degradation_by_background(scores[task], fam, method="snr_balanced")
        for bg, missing in deg.attrs.get("partial", {}).items():
            notes.setdefault(bg, []).append(
                f"{fam.upper()}: no rows of models {', '.join(missing)} (flat mean over the "
                "others; SNR-balanced value not pooled)")
        point = deg["pooled"] * 100
        items = _item_bg_means(scores[task], col)
        lo, hi, use = {}, {}, {}
        for bg, g in items.groupby("bg_id"):
            if not np.isfinite(point.get(bg, np.nan)):
                continue
            b = stats.bootstrap_ci(g[col].to_numpy(float) * 100, np.mean,
                                   n_resamples=n_resamples, seed=seed, vectorized=True)
            lo[bg], hi[bg], use[bg] = b.ci_low, b.ci_high, b.n_valid
            if b.note:
                notes.setdefault(bg, []).append(f"{fam.upper()}: {b.note}")
        name = "delta_wer" if fam == "asr" else "delta_acc"
        out[f"{fam}_{name}_pp"] = point
        out[f"{fam}_ci_low_pp"] = pd.Series(lo, dtype=float)
        out[f"{fam}_ci_high_pp"] = pd.Series(hi, dtype=float)
        out[f"{fam}_ci_usable"] = pd.Series(use, dtype=float)
        out[f"{fam}_{name}_snr_balanced_pp"] = balanced["pooled"] * 100
    t = pd.DataFrame(out)
    t.index.name = "bg_id"
    t.insert(0, "mean_degradation_pp", (t["asr_delta_wer_pp"] + t["kws_delta_acc_pp"]) / 2)
    t = t.sort_values("mean_degradation_pp", ascending=False, kind="stable", na_position="last")
    t.insert(0, "rank", np.arange(1, len(t) + 1))
    for c in ("asr_ci_usable", "kws_ci_usable"):
        t[c] = t[c].fillna(0).astype(int)
    t["n_resamples"], t["seed"] = int(n_resamples), int(seed)
    t["note"] = ["; ".join(notes.get(bg, [])) for bg in t.index]
    return t


def figure4_background_ranking(ranking: pd.DataFrame, *, battery=None):
    """Figure 4: ASR ΔWER (a) and KWS ΔAcc (b) per background, pooled over models.

    Horizontal bars with 95 % bootstrap intervals (items), coloured by category; backgrounds in
    the order of :func:`background_ranking` (mean of ASR ΔWER and KWS ΔAcc, as the authors),
    the most harmful on top.

    Returns
    -------
    matplotlib.figure.Figure
    """
    bgs = list(ranking.index)
    cats = _categories(bgs, battery)
    colours = [_CATEGORY_COLOURS.get(c, _OTHER_COLOUR) for c in cats]
    fig = _new_figure(8.0, 1.2 + 0.24 * len(bgs))
    axes = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(bgs))
    for ax, fam, col, tag in zip(axes, ("asr", "kws"), ("asr_delta_wer_pp", "kws_delta_acc_pp"),
                                 ("a", "b")):
        v = ranking[col].to_numpy(float)
        lo = ranking[f"{fam}_ci_low_pp"].to_numpy(float)
        hi = ranking[f"{fam}_ci_high_pp"].to_numpy(float)
        err = np.vstack([np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)])
        ax.barh(y, v, color=colours, xerr=np.nan_to_num(err), error_kw={"lw": 0.7, "capsize": 1.5})
        ax.axvline(0, color="k", lw=0.6)
        ax.set_xlabel(_DEG_LABEL[fam] + ", mean over SNRs and models", fontsize=8)
        ax.set_title(f"({tag}) {_FAMILY_LABEL[fam]}", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[0].set_yticks(y, bgs)
    axes[0].invert_yaxis()
    _category_legend(axes[1], cats)
    return fig
