"""Figures 2–3 and Tables 2–3: acoustic descriptors against degradation (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

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
from aiplib.io.formats import DESCRIPTORS


# ------------------------------------------------------------------- Table 2, Figures 2 and 3
def _spearmanr(y: pd.Series, x: pd.Series) -> tuple[float, float]:
    """Spearman ρ and scipy's p-value (t-distribution approximation) of two series on their
    common finite backgrounds (``scipy.stats.spearmanr``); NaN, NaN with fewer than 3 or a
    constant column."""
    y = y.copy()
    y.index, x = y.index.astype(str), x.set_axis(x.index.astype(str))
    both = pd.concat([x.astype(float), y.astype(float)], axis=1, join="inner")
    both = both[np.isfinite(both).all(axis=1)]
    if len(both) < 3 or both.nunique().min() < 2:
        return float("nan"), float("nan")
    res = spearmanr(both.iloc[:, 0], both.iloc[:, 1])
    return float(res.statistic), float(res.pvalue)


def table2_descriptor_correlations(scores: dict, descriptors: pd.DataFrame, *,
                                 n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Spearman ρ of each descriptor vs mean degradation per background (Table 2).

    As the authors' ``scripts/generate_results_new_2.py``: the degradation is the flat mean over
    a background's noisy rows (:func:`aiplib.analysis.stats.degradation_by_background`, ``flat``) and
    the descriptors are rounded first (:func:`aiplib.analysis.stats.round_descriptors`), which can make
    ties and so change the ranks. ``r_s_unrounded`` (ours) is the same correlation on the
    descriptors as stored. ``p`` is ours (exact or permutation up to 20 backgrounds,
    :func:`aiplib.analysis.stats.spearman`); ``p_t_approx`` is the p-value the authors print ("ASR (p)",
    ``scipy.stats.spearmanr``'s t-distribution approximation, on the rounded descriptors).

    Parameters
    ----------
    scores : dict of str -> pandas.DataFrame
        Needs ``"asr"`` and ``"kws"`` (:func:`load_scores`).
    descriptors : pandas.DataFrame
        Indexed by ``bg_id`` (:func:`load_descriptors`), unrounded.
    n_resamples, seed : int
        Bootstrap over backgrounds.

    Returns
    -------
    pandas.DataFrame [shape=(2 · (n_models + 1) · n_descriptors, 19)]
        Columns ``task, family, model`` (``pooled`` first, then each model), then those of
        :func:`aiplib.analysis.stats.descriptor_correlations` on the rounded descriptors: ``descriptor,
        n, r_s, p, p_method, n_permutations, ci_low, ci_high, ci_usable, p_bh`` (BH across the
        descriptors within each task and model), ``level, n_resamples, seed, note``, then
        ``r_s_unrounded``, ``p_t_approx``. ``pooled`` is the flat mean over every model's rows together (the
        note names backgrounds some model lacks).
    """
    rounded = stats.round_descriptors(descriptors)
    frames = []
    for fam, task in BASE_TASKS.items():
        full = stats.degradation_by_background(scores[task], fam)
        deg = full[["pooled"] + [c for c in full.columns if c != "pooled"]]
        deg.attrs = dict(full.attrs)
        t = stats.descriptor_correlations(deg, rounded.reset_index(),
                                          n_resamples=n_resamples, seed=seed)
        t["r_s_unrounded"] = [_spearmanr(deg[m], descriptors[d])[0] for m, d in zip(t["model"], t["descriptor"])]
        t["p_t_approx"] = [_spearmanr(deg[m], rounded[d])[1] for m, d in zip(t["model"], t["descriptor"])]
        t.insert(0, "family", fam)
        t.insert(0, "task", task)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def top_descriptors(table2: pd.DataFrame, k: int = 3) -> list[str]:
    """The ``k`` descriptors with the largest mean |r_s| over ASR and KWS (pooled over models).

    As the authors' ``scripts/generate_results_new_2.py`` (Figure 2): the mean of |r_s(ASR)|
    and |r_s(KWS)| rounded to 3 decimals (:func:`aiplib.analysis.stats.rank_by_mean_abs_rs`), largest
    first, ties in table order; a descriptor whose r_s is NaN in either task is not selected.

    Parameters
    ----------
    table2 : pandas.DataFrame
        :func:`table2_descriptor_correlations` (columns ``task, model, descriptor, r_s``).

    Returns
    -------
    list of str
    """
    pooled = table2[table2["model"] == "pooled"]
    descs = list(dict.fromkeys(pooled["descriptor"]))
    tasks = list(dict.fromkeys(pooled["task"]))
    r = pooled.pivot(index="descriptor", columns="task", values="r_s").reindex(descs)
    if len(tasks) < 2:
        return []
    return list(stats.rank_by_mean_abs_rs(r[tasks[0]], r[tasks[1]]).index[:k])


def figure2_descriptor_regressions(scores: dict, descriptors: pd.DataFrame,
                                   table2: pd.DataFrame, *, battery=None, k: int = 3):
    """Figure 2: the ``k`` descriptors with the largest mean |r_s| (pooled ASR and KWS).

    One row per family (ASR, KWS) and one column per descriptor: each point is a background
    (descriptor value, rounded as the authors, vs pooled mean degradation in pp, coloured by
    category) with the ordinary-least-squares line; the title gives r_s, its 95 % CI and the
    BH-adjusted p.

    Returns
    -------
    matplotlib.figure.Figure
    """
    top = top_descriptors(table2, k)
    descriptors = stats.round_descriptors(descriptors)
    fig = _new_figure(3.2 * max(len(top), 1), 5.8)
    axes = fig.subplots(2, max(len(top), 1), squeeze=False)
    for i, (fam, task) in enumerate(BASE_TASKS.items()):
        deg = stats.degradation_by_background(scores[task], fam)["pooled"] * 100
        common = deg.index.intersection(descriptors.index)
        cats = _categories(list(common), battery)
        colours = [_CATEGORY_COLOURS.get(c, _OTHER_COLOUR) for c in cats]
        for j, desc in enumerate(top):
            ax = axes[i, j]
            x = descriptors.loc[common, desc].to_numpy(float)
            y = deg.loc[common].to_numpy(float)
            ax.scatter(x, y, c=colours, s=22, edgecolors="k", linewidths=0.3, zorder=3)
            ok = np.isfinite(x) & np.isfinite(y)
            if ok.sum() >= 2 and np.ptp(x[ok]) > 0:
                b1, b0 = np.polyfit(x[ok], y[ok], 1)
                xs = np.linspace(x[ok].min(), x[ok].max(), 50)
                ax.plot(xs, b0 + b1 * xs, color="k", lw=1)
            r = table2[(table2["task"] == task) & (table2["model"] == "pooled")
                       & (table2["descriptor"] == desc)].iloc[0]
            ax.set_title(f"{_FAMILY_LABEL[fam]} · {desc}\n$r_s$ = {r.r_s:.2f} "
                         f"[{r.ci_low:.2f}, {r.ci_high:.2f}], $p_{{BH}}$ = {r.p_bh:.3g}",
                         fontsize=8)
            ax.set_xlabel(desc, fontsize=8)
            if j == 0:
                ax.set_ylabel(_DEG_LABEL[fam], fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        if top:
            _category_legend(axes[i, -1], cats)
    return fig


def figure3_descriptor_correlations(table2: pd.DataFrame):
    """Figure 3: heatmap of pooled r_s, tasks (rows) × descriptors (columns), annotated.

    Each cell shows r_s; ``*`` marks p_BH < 0.05.

    Returns
    -------
    matplotlib.figure.Figure
    """
    pooled = table2[table2["model"] == "pooled"]
    descs = list(dict.fromkeys(pooled["descriptor"]))
    tasks = list(dict.fromkeys(pooled["task"]))
    mat = pooled.pivot(index="task", columns="descriptor", values="r_s").loc[tasks, descs]
    pbh = pooled.pivot(index="task", columns="descriptor", values="p_bh").loc[tasks, descs]
    fig = _new_figure(1.0 + 0.85 * len(descs), 1.2 + 0.6 * len(tasks))
    ax = fig.subplots()
    im = ax.imshow(mat.to_numpy(float), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(tasks)):
        for j in range(len(descs)):
            v, q = mat.iat[i, j], pbh.iat[i, j]
            txt = "n/a" if not np.isfinite(v) else f"{v:.2f}" + ("*" if q < 0.05 else "")
            ax.text(j, i, txt, ha="center", va="center", fontsize=8,
                    color="white" if np.isfinite(v) and abs(v) > 0.6 else "black")
    ax.set_xticks(range(len(descs)), descs, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(tasks)), [t.upper() for t in tasks], fontsize=8)
    fig.colorbar(im, ax=ax, label="Spearman $r_s$", shrink=0.9)
    ax.set_title("Descriptor vs mean degradation across backgrounds, pooled over models "
                 "(* $p_{BH}$ < 0.05)", fontsize=9)
    return fig


def table3_descriptor_values(ranking: pd.DataFrame, descriptors: pd.DataFrame, *,
                             battery=None) -> pd.DataFrame:
    """Table 3: the descriptor values of each background, in Figure 4 order.

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, 7 + n_descriptors)]
        Columns ``rank, bg_id, category, asr_delta_wer_pp, kws_delta_acc_pp`` (the authors' flat
        mean), ``asr_delta_wer_snr_balanced_pp, kws_delta_acc_snr_balanced_pp`` (ours, when the
        ranking has them) and the descriptors as stored, unrounded (in
        :data:`aiplib.io.formats.DESCRIPTORS` order when present).
    """
    descs = [c for c in DESCRIPTORS if c in descriptors.columns] or list(descriptors.columns)
    deg = ["asr_delta_wer_pp", "kws_delta_acc_pp"]
    deg += [c for c in ("asr_delta_wer_snr_balanced_pp", "kws_delta_acc_snr_balanced_pp")
            if c in ranking.columns]
    t = ranking[["rank", *deg]].copy()
    t.insert(1, "category", _categories(list(t.index), battery))
    t = t.join(descriptors[descs], how="left")
    return t.reset_index()[["rank", "bg_id", "category", *deg, *descs]]
