"""Stage 9: Figures 2–7 and Tables 2–5 from ``results/scores`` and the descriptors.

Reads ``results/scores/<task>.csv`` (stage 8), ``descriptors/acoustic_descriptors.csv`` and
``descriptors/battery.csv``; writes ``results/figures/<name>.png`` and ``.pdf`` and
``results/tables/<name>.csv``. Figures are drawn on :class:`matplotlib.figure.Figure` objects
(Agg canvas, never pyplot), so nothing is displayed and a notebook's backend is left alone.

Conventions
-----------
* Degradation is positive when noise hurts: ΔWER = WER(noisy) − WER(clean);
  ΔAcc = acc(clean) − acc(noisy). Figures and tables show both in percentage points (columns ending ``_pp``).
* Per background, degradation is averaged over items, then over SNRs, then over models for the
  ``pooled`` value (:func:`aiplib.stats.degradation_by_background`); descriptors are
  rank-correlated with it across backgrounds (:func:`aiplib.stats.descriptor_correlations`).
* Every interval is a 95 % percentile bootstrap over items (backgrounds for correlations), with
  ``seed`` and ``n_resamples`` written into the tables.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import warnings

import numpy as np
import pandas as pd

from . import stats
from .errors import AiplibError

__all__ = [
    "BASE_TASKS",
    "STEER_TASKS",
    "FIG7_KWS_EXCLUDE",
    "FIGURE_NAMES",
    "TABLE_NAMES",
    "load_scores",
    "load_descriptors",
    "load_battery",
    "table2_descriptor_correlations",
    "figure2_descriptor_regressions",
    "figure3_descriptor_correlations",
    "background_ranking",
    "figure4_background_ranking",
    "table3_descriptor_values",
    "table4_accent_dwer",
    "table4_supplement",
    "figure5_accent_degradation",
    "table5_prompt_steering_rer",
    "figure6_prompt_steering_rer",
    "snr_curves",
    "figure7_snr_performance",
    "save_figure",
    "make_all_figures",
]

log = logging.getLogger(__name__)

BASE_TASKS = {"asr": "asr", "kws": "kws"}
"""Baseline task of each family."""
STEER_TASKS = {"asr": "asr_steer_p5", "kws": "kws_steer_p5"}
"""Steering-prompt task of each family (Figure 6, Table 5)."""
FIG7_KWS_EXCLUDE = ("qwen2_audio_7b",)
"""Models left out of Figure 7b (KWS accuracy per SNR), as in the paper. Matched after
lower-casing and mapping ``-`` / ``.`` to ``_``."""
FIGURE_NAMES = ("figure2_descriptor_regressions", "figure3_descriptor_correlations",
                "figure4_background_ranking", "figure5_accent_degradation",
                "figure6_prompt_steering_rer", "figure7_snr_performance")
"""Output names of the figures (``results/figures/<name>.png`` / ``.pdf``), as the paper's
README lists them."""
TABLE_NAMES = ("table2_descriptor_correlations", "table3_descriptor_values",
               "table4_accent_dwer", "table4_accent_dwer_pooled_unspecified",
               "table5_prompt_steering_rer")
"""Output names of the tables (``results/tables/<name>.csv``). Table 4 holds the accent groups
per model only (as the paper); the ``pooled`` (over models) and ``unspecified`` (items without
an accent group) rows are in ``table4_accent_dwer_pooled_unspecified``."""

_FAMILY_LABEL = {"asr": "ASR", "kws": "KWS"}
_FAMILY_COLOURS = {"asr": "#332288", "kws": "#88CCEE"}
_DEG_LABEL = {"asr": "ΔWER (pp)", "kws": "ΔAcc (pp)"}
_CATEGORY_COLOURS = {"stationary": "#4477AA", "transient": "#EE6677", "music": "#228833",
                     "speech-like": "#CCBB44"}
_OTHER_COLOUR = "#BBBBBB"
_NUMERIC = ("snr_db", "wer", "errors", "ref_words", "substitutions", "deletions", "insertions",
            "hits", "delta_wer", "correct", "delta_acc")


def _model_colours(models) -> dict:
    """One colour per model (tab10 by sorted name), grey for ``pooled``: same in every figure."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    names = sorted(m for m in set(models) if m != "pooled")
    out = {m: cmap(i % 10) for i, m in enumerate(names)}
    out["pooled"] = "#555555"
    return out


def _norm_id(s: str) -> str:
    return re.sub(r"[-.]", "_", str(s).lower())


# --------------------------------------------------------------------------------------- loading
def load_scores(ws, tasks=tuple(BASE_TASKS.values()) + tuple(STEER_TASKS.values())
                ) -> dict[str, pd.DataFrame]:
    """Read the ``results/scores/<task>.csv`` files that exist.

    Text columns stay strings (``"None"``, ``"NA"`` or ``"0001"`` are not turned into NaN or
    numbers); numeric columns are converted; ``accent_group`` ``""`` becomes NaN.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    tasks : sequence of str

    Returns
    -------
    dict of str -> pandas.DataFrame
        Only the tasks whose file exists.
    """
    from .formats import load_scores as _load  # noqa: PLC0415 - the one reader of score files

    return _load(ws, tasks)


def load_descriptors(ws) -> pd.DataFrame | None:
    """``descriptors/acoustic_descriptors.csv`` indexed by ``bg_id``, or None if missing."""
    from .formats import read_descriptor_table  # noqa: PLC0415

    return read_descriptor_table(ws.descriptor_csv, index=True)


def load_battery(ws) -> pd.DataFrame | None:
    """``descriptors/battery.csv`` indexed by ``bg_id``, or None if missing."""
    from .formats import read_battery_csv  # noqa: PLC0415

    battery = read_battery_csv(ws.battery_csv)
    return None if battery is None else battery.set_index("bg_id")


def _categories(bg_ids, battery) -> list[str]:
    if battery is None or "category" not in battery.columns:
        return ["unknown"] * len(bg_ids)
    return [battery["category"].get(b, "unknown") or "unknown" for b in bg_ids]


def _category_legend(ax, cats) -> None:
    from matplotlib.patches import Patch

    order = list(_CATEGORY_COLOURS)
    seen = sorted(set(cats), key=lambda c: (order.index(c) if c in order else len(order), c))
    handles = [Patch(color=_CATEGORY_COLOURS.get(c, _OTHER_COLOUR), label=c) for c in seen]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="best")


def _new_figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def save_figure(fig, out_dir, name: str, *, formats=("png", "pdf"), dpi: int = 200) -> list[Path]:
    """Write ``fig`` as ``<out_dir>/<name>.<fmt>`` for each format; return the paths.

    PDFs carry no creation date, so re-running on the same data gives the same bytes.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        p = out_dir / f"{name}.{fmt}"
        meta = {"CreationDate": None} if fmt == "pdf" else {}
        fig.savefig(p, format=fmt, dpi=dpi, metadata=meta)
        paths.append(p)
    return paths


# ------------------------------------------------------------------- Table 2, Figures 2 and 3
def table2_descriptor_correlations(scores: dict, descriptors: pd.DataFrame, *,
                                 n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Spearman ρ of each descriptor vs mean degradation per background (Table 2).

    Parameters
    ----------
    scores : dict of str -> pandas.DataFrame
        Needs ``"asr"`` and ``"kws"`` (:func:`load_scores`).
    descriptors : pandas.DataFrame
        Indexed by ``bg_id`` (:func:`load_descriptors`).
    n_resamples, seed : int
        Bootstrap over backgrounds.

    Returns
    -------
    pandas.DataFrame [shape=(2 · (n_models + 1) · n_descriptors, 17)]
        Columns ``task, family, model`` (``pooled`` first, then each model), then those of
        :func:`aiplib.stats.descriptor_correlations`: ``descriptor, n, r_s, p, p_method,
        n_permutations, ci_low, ci_high, ci_usable, p_bh`` (BH across the descriptors within
        each task and model), ``level, n_resamples, seed, note``. ``pooled`` uses only the
        backgrounds every model covers (the note names the others).
    """
    frames = []
    for fam, task in BASE_TASKS.items():
        full = stats.degradation_by_background(scores[task], fam)
        deg = full[["pooled"] + [c for c in full.columns if c != "pooled"]]
        deg.attrs = dict(full.attrs)
        t = stats.descriptor_correlations(deg, descriptors.reset_index(),
                                          n_resamples=n_resamples, seed=seed)
        t.insert(0, "family", fam)
        t.insert(0, "task", task)
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def top_descriptors(table2: pd.DataFrame, k: int = 3) -> list[str]:
    """The ``k`` descriptors with the largest mean |r_s| over ASR and KWS (pooled over models).

    As the authors' ``scripts/generate_results_new_2.py`` (Figure 2): the mean of |r_s(ASR)|
    and |r_s(KWS)|; a descriptor whose r_s is NaN in either task is not selected.

    Parameters
    ----------
    table2 : pandas.DataFrame
        :func:`table2_descriptor_correlations`.

    Returns
    -------
    list of str
        Descriptors, largest mean |r_s| first (ties keep the table order).
    """
    pooled = table2[table2["model"] == "pooled"]
    m = (pooled.assign(a=pooled["r_s"].abs()).groupby("descriptor", sort=False)["a"]
         .agg(lambda a: a.mean(skipna=False)))
    return list(m.dropna().sort_values(ascending=False, kind="stable").index[:k])


def figure2_descriptor_regressions(scores: dict, descriptors: pd.DataFrame,
                                   table2: pd.DataFrame, *, battery=None, k: int = 3):
    """Figure 2: the ``k`` descriptors with the largest mean |r_s| (pooled ASR and KWS).

    One row per family (ASR, KWS) and one column per descriptor: each point is a background
    (descriptor value vs pooled mean degradation in pp, coloured by category) with the
    ordinary-least-squares line; the title gives r_s, its 95 % CI and the BH-adjusted p.

    Returns
    -------
    matplotlib.figure.Figure
    """
    top = top_descriptors(table2, k)
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
    pandas.DataFrame [shape=(n_backgrounds, 13)]
        Index ``bg_id`` in Figure 4 order; columns ``rank`` (1 = most harmful),
        ``mean_degradation_pp`` (mean of the ASR ΔWER and KWS ΔAcc below, the ranking key),
        ``asr_delta_wer_pp, asr_ci_low_pp, asr_ci_high_pp, asr_ci_usable, kws_delta_acc_pp,
        kws_ci_low_pp, kws_ci_high_pp, kws_ci_usable, n_resamples, seed, note``. The point
        values come from :func:`aiplib.stats.degradation_by_background` (pooled over the models
        when every model covers the background, else NaN and named in ``note``); intervals
        bootstrap the items (each item's mean over models and SNRs) and are NaN below
        :data:`aiplib.stats.MIN_N_FOR_INTERVAL` items.

    Notes
    -----
    Figure 4 order, as the authors' ``scripts/generate_results_new_2.py``: backgrounds sorted
    by the mean of their ASR ΔWER and KWS ΔAcc (both positive = worse, in pp), largest first;
    backgrounds without both values last. Both panels share this order.
    """
    out, notes = {}, {}
    for fam, task in BASE_TASKS.items():
        col = stats.DEGRADATION_COLUMN[fam]
        deg = stats.degradation_by_background(scores[task], fam)
        for bg, missing in deg.attrs.get("partial", {}).items():
            notes.setdefault(bg, []).append(
                f"{fam.upper()}: not pooled, missing models {', '.join(missing)}")
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


def table3_descriptor_values(ranking: pd.DataFrame, descriptors: pd.DataFrame, *,
                             battery=None) -> pd.DataFrame:
    """Table 3: the descriptor values of each background, in Figure 4 order.

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, 5 + n_descriptors)]
        Columns ``rank, bg_id, category, asr_delta_wer_pp, kws_delta_acc_pp`` and the
        descriptors (in :data:`aiplib.stats.DESCRIPTORS` order when present).
    """
    descs = [c for c in stats.DESCRIPTORS if c in descriptors.columns] or list(descriptors.columns)
    t = ranking[["rank", "asr_delta_wer_pp", "kws_delta_acc_pp"]].copy()
    t.insert(1, "category", _categories(list(t.index), battery))
    t = t.join(descriptors[descs], how="left")
    return t.reset_index()[["rank", "bg_id", "category", "asr_delta_wer_pp",
                            "kws_delta_acc_pp", *descs]]


# ---------------------------------------------------------------------- Table 4 and Figure 5
def _accent_rows(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Every Table 4 row: per model and accent group, ``pooled`` over models, ``unspecified``."""
    df = scores["asr"].copy()
    df["accent_group"] = df["accent_group"].fillna("unspecified")
    noisy = df[(df["bg_id"] != "clean") & df["delta_wer"].notna()]
    clean = df[df["bg_id"] == "clean"]
    per_item = noisy.groupby(["model", "accent_group", "item_id"])["delta_wer"].mean().reset_index()
    wide = per_item.pivot_table(index=["accent_group", "item_id"], columns="model",
                                values="delta_wer")
    complete = wide.notna().all(axis=1)
    pooled = wide[complete].mean(axis=1).rename("delta_wer").reset_index()
    pooled.insert(0, "model", "pooled")
    dropped = wide[~complete].groupby(level="accent_group").size().to_dict()
    rows = []
    for (model, group), g in pd.concat([pooled, per_item]).groupby(["model", "accent_group"],
                                                                    sort=False):
        b = stats.bootstrap_ci(g["delta_wer"].to_numpy(float) * 100, np.mean,
                               n_resamples=n_resamples, seed=seed, vectorized=True)
        c = clean[clean["accent_group"] == group]
        if model != "pooled":
            c = c[c["model"] == model]
        cw = 100 * c["errors"].sum() / c["ref_words"].sum() if c["ref_words"].sum() else np.nan
        notes = [b.note] if b.note else []
        if model == "pooled" and dropped.get(group):
            notes.append(f"{dropped[group]} item(s) not run by every model left out")
        rows.append({"model": model, "accent_group": group, "n_items": len(g),
                     "clean_wer_pp": cw, "mean_delta_wer_pp": b.estimate,
                     "ci_low_pp": b.ci_low, "ci_high_pp": b.ci_high, "ci_usable": b.n_valid,
                     "level": b.level, "n_resamples": b.n_resamples, "seed": b.seed,
                     "note": "; ".join(notes)})
    t = pd.DataFrame(rows)
    t["_o"] = t["model"] != "pooled"
    return (t.sort_values(["_o", "model", "accent_group"], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def _split_table4(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    main = (rows["model"] != "pooled") & (rows["accent_group"] != "unspecified")
    return rows[main].reset_index(drop=True), rows[~main].reset_index(drop=True)


def table4_accent_dwer(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Table 4: mean ΔWER per model and accent group, with a bootstrap CI over items.

    Each item's ΔWER is first averaged over backgrounds and SNRs; the table gives the mean over
    the group's items (pp) and its 95 % percentile interval. Only accent groups and single
    models, as the paper's table; the rest is :func:`table4_supplement`.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, accent_group, n_items, clean_wer_pp`` (corpus WER of the group's clean
        rows), ``mean_delta_wer_pp, ci_low_pp, ci_high_pp, ci_usable, level, n_resamples, seed,
        note``; a group with fewer than :data:`aiplib.stats.MIN_N_FOR_INTERVAL` items has no
        interval (NaN, noted).
    """
    return _split_table4(_accent_rows(scores, n_resamples=n_resamples, seed=seed))[0]


def table4_supplement(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The rows kept out of Table 4: ``pooled`` (each item averaged over the models — only
    items every model ran) per accent group, and ``unspecified`` (items without an accent
    group) per model. Columns as :func:`table4_accent_dwer`."""
    return _split_table4(_accent_rows(scores, n_resamples=n_resamples, seed=seed))[1]


def figure5_accent_degradation(table4: pd.DataFrame):
    """Figure 5: mean ΔWER per accent group (grouped bars per model, 95 % bootstrap CI).

    Accent groups and single models only (pass :func:`table4_accent_dwer`); ``pooled`` and
    ``unspecified`` rows, if present, are left out.

    Returns
    -------
    matplotlib.figure.Figure
    """
    table4 = table4[(table4["model"] != "pooled") & (table4["accent_group"] != "unspecified")]
    groups = list(dict.fromkeys(table4["accent_group"]))
    models = list(dict.fromkeys(table4["model"]))
    fig = _new_figure(max(4.5, 1.2 + 0.55 * len(groups) * max(len(models), 1) ** 0.5), 3.4)
    ax = fig.subplots()
    w = 0.8 / max(len(models), 1)
    x = np.arange(len(groups))
    colours = _model_colours(models)
    for k, m in enumerate(models):
        t = table4[table4["model"] == m].set_index("accent_group").reindex(groups)
        v = t["mean_delta_wer_pp"].to_numpy(float)
        err = np.vstack([np.clip(v - t["ci_low_pp"].to_numpy(float), 0, None),
                         np.clip(t["ci_high_pp"].to_numpy(float) - v, 0, None)])
        ax.bar(x + (k - (len(models) - 1) / 2) * w, v, w, label=m,
               yerr=np.nan_to_num(err), error_kw={"lw": 0.7, "capsize": 2},
               color=colours[m])
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ΔWER (pp), mean over backgrounds and SNRs", fontsize=8)
    ax.axhline(0, color="k", lw=0.6)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, frameon=False, ncol=min(len(models), 4), loc="lower center",
              bbox_to_anchor=(0.5, 1.0))
    ax.set_title("ASR degradation by accent group", fontsize=9, pad=22)
    return fig


# ---------------------------------------------------------------------- Table 5 and Figure 6
def table5_prompt_steering_rer(scores: dict, *, n_resamples: int = 2000, seed: int = 0
                               ) -> pd.DataFrame:
    """Table 5: Residual Effect Ratio of the steering prompt per model, ASR and KWS.

    For each family whose steering task is present, the baseline and steering rows are paired
    on (model, stimulus_id) (noisy stimuli with a degradation value in both), so both Δ use the
    same stimuli. ``RER = Δ_steer / (Δ_base + 1e-9)``, KWS 1.0 when both |Δ| < 1 pp
    (:func:`aiplib.stats.rer`, the authors' definition); ``base_flag``
    (:func:`aiplib.stats.rer_flag`) says when Δ_base is not clearly positive, so that "RER < 1:
    the prompt helped" does not hold. The CI (ours) resamples items (all of an item's pairs
    together); a resample whose Δ_base is below 1 pp is unusable, and the interval is refused
    when more than 5 % are.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, family, base_task, steer_task, n_items, n_pairs, delta_base_pp,
        delta_steer_pp, rer, base_flag, ci_low, ci_high, ci_usable, rule, level, n_resamples,
        seed, note``; ``rule`` is ``ratio`` or ``kws_both_below_1pp`` (RER = 1). Empty if no
        steering task is present.
    """
    rows = []
    for fam, steer_task in STEER_TASKS.items():
        base_task = BASE_TASKS[fam]
        if steer_task not in scores or base_task not in scores:
            continue
        col = stats.DEGRADATION_COLUMN[fam]
        keys = ["model", "stimulus_id"]
        b = scores[base_task].loc[lambda d: (d["bg_id"] != "clean") & d[col].notna(),
                                  keys + ["item_id", col]]
        s = scores[steer_task].loc[lambda d: (d["bg_id"] != "clean") & d[col].notna(),
                                   keys + [col]]
        pairs = b.merge(s, on=keys, suffixes=("_base", "_steer"))
        for model, g in pairs.groupby("model"):
            it = g.groupby("item_id").agg(sb=(f"{col}_base", "sum"), ss=(f"{col}_steer", "sum"),
                                          n=(f"{col}_base", "size"))

            def stat(sb, ss, n, axis=-1, _fam=fam):
                return stats.rer(ss.sum(axis) / n.sum(axis), sb.sum(axis) / n.sum(axis),
                                 task_family=_fam, usable_only=True)

            res = stats.bootstrap_ci((it["sb"].to_numpy(float), it["ss"].to_numpy(float),
                                      it["n"].to_numpy(float)), stat, n_resamples=n_resamples,
                                     seed=seed, vectorized=True)
            db, ds = g[f"{col}_base"].mean(), g[f"{col}_steer"].mean()
            small = stats.RER_KWS_SMALL
            rule = "kws_both_below_1pp" if fam == "kws" and abs(ds) < small and abs(db) < small \
                else "ratio"
            flag = "" if rule != "ratio" else stats.rer_flag(db)
            rows.append({"model": model, "family": fam, "base_task": base_task,
                         "steer_task": steer_task, "n_items": len(it), "n_pairs": len(g),
                         "delta_base_pp": 100 * db, "delta_steer_pp": 100 * ds,
                         "rer": stats.rer(ds, db, task_family=fam), "base_flag": flag,
                         "ci_low": res.ci_low, "ci_high": res.ci_high, "ci_usable": res.n_valid,
                         "rule": rule, "level": res.level, "n_resamples": res.n_resamples,
                         "seed": res.seed, "note": res.note})
    cols = ["model", "family", "base_task", "steer_task", "n_items", "n_pairs", "delta_base_pp",
            "delta_steer_pp", "rer", "base_flag", "ci_low", "ci_high", "ci_usable", "rule",
            "level", "n_resamples", "seed", "note"]
    return pd.DataFrame(rows, columns=cols)


def figure6_prompt_steering_rer(table5: pd.DataFrame):
    """Figure 6: RER per model, ASR and KWS bars with 95 % bootstrap CI; 1 = no change.

    An RER whose baseline change is flagged (``base_flag``: ≤ 0 or < 1 pp) is not drawn as a
    bar but marked "flagged" (its value is in Table 5).

    Returns
    -------
    matplotlib.figure.Figure
    """
    models = sorted(table5["model"].unique())
    fams = [f for f in ("asr", "kws") if f in set(table5["family"])]
    fig = _new_figure(max(4.0, 1.5 + 0.9 * len(models)), 3.2)
    ax = fig.subplots()
    w = 0.8 / max(len(fams), 1)
    x = np.arange(len(models))
    for k, fam in enumerate(fams):
        t = table5[table5["family"] == fam].set_index("model").reindex(models)
        flagged = t["base_flag"].fillna("").astype(str).ne("").to_numpy() \
            if "base_flag" in t.columns else np.zeros(len(t), bool)
        v = np.where(flagged, np.nan, t["rer"].to_numpy(float))  # no readable ratio: not drawn
        err = np.vstack([np.clip(v - t["ci_low"].to_numpy(float), 0, None),
                         np.clip(t["ci_high"].to_numpy(float) - v, 0, None)])
        xs = x + (k - (len(fams) - 1) / 2) * w
        with warnings.catch_warnings():  # matplotlib's own finiteness probe of a (2, 1) yerr
            warnings.filterwarnings("ignore", message="Conversion of an array with ndim > 0",
                                    category=DeprecationWarning)
            ax.bar(xs, np.nan_to_num(v), w, label=_FAMILY_LABEL[fam], yerr=np.nan_to_num(err),
                   color=_FAMILY_COLOURS[fam], error_kw={"lw": 0.7, "capsize": 2})
        for xi, vi, fl in zip(xs, v, flagged):
            if not np.isfinite(vi):
                ax.text(xi, 0.02, "flagged" if fl else "n/a", ha="center", va="bottom",
                        fontsize=7, rotation=90)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ok = table5["base_flag"].fillna("").astype(str).eq("").to_numpy() \
        if "base_flag" in table5.columns else np.ones(len(table5), bool)
    top = np.nanmax(np.r_[table5["ci_high"].to_numpy(float)[ok],
                          table5["rer"].to_numpy(float)[ok], 1.0])
    ax.set_ylim(min(0.0, np.nanmin(np.r_[table5["ci_low"].to_numpy(float)[ok], 0.0])), top * 1.25)
    ax.set_xticks(x, models, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("RER = Δ(steering) / Δ(baseline)", fontsize=8)
    ax.legend(fontsize=7, frameon=False, ncol=2, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Steering prompt: residual noise effect\n(RER < 1: effect reduced)", fontsize=9)
    return fig


# -------------------------------------------------------------------------------- Figure 7
def snr_curves(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Mean per-utterance WER and KWS accuracy per model and condition (clean, SNRs high → low).

    As the authors' Figure 7 (``scripts/generate_results_new_2.py``): the mean of the
    per-utterance WERs over every stimulus of the condition (all backgrounds), and the mean
    KWS correctness. The corpus WER is given beside it, named.

    Returns
    -------
    pandas.DataFrame
        Columns ``family, model, condition`` (``clean`` or e.g. ``10 dB``), ``snr_db`` (NaN for
        clean), ``value_pp`` (mean per-utterance WER, or accuracy, in %), ``ci_low_pp,
        ci_high_pp, ci_usable`` (bootstrap over items: all of an item's stimuli together),
        ``corpus_wer_pp`` (ASR: Σ errors / Σ reference words; NaN for KWS), ``n_items``.
    """
    rows = []
    for fam, task in BASE_TASKS.items():
        df = scores[task]
        snrs = sorted(df["snr_db"].dropna().unique(), reverse=True)
        conds = [("clean", np.nan)] + [(f"{s:g} dB", s) for s in snrs]
        value = "wer" if fam == "asr" else "correct"
        for model, g in df.groupby("model"):
            for cond, snr in conds:
                sel = g[g["bg_id"] == "clean"] if cond == "clean" else g[g["snr_db"] == snr]
                sel = sel[sel[value].notna()]
                if sel.empty:
                    continue
                it = sel.groupby("item_id").agg(a=(value, "sum"), n=(value, "size"))
                res = stats.bootstrap_ci(
                    (it["a"].to_numpy(float), it["n"].to_numpy(float)),
                    lambda a, n, axis=-1: 100 * a.sum(axis) / n.sum(axis),
                    n_resamples=n_resamples, seed=seed, vectorized=True)
                corpus = (100 * sel["errors"].sum() / sel["ref_words"].sum()
                          if fam == "asr" and sel["ref_words"].sum() else np.nan)
                rows.append({"family": fam, "model": model, "condition": cond, "snr_db": snr,
                             "value_pp": res.estimate, "ci_low_pp": res.ci_low,
                             "ci_high_pp": res.ci_high, "ci_usable": res.n_valid,
                             "corpus_wer_pp": corpus, "n_items": len(it)})
    return pd.DataFrame(rows)


def figure7_snr_performance(curves: pd.DataFrame, *, kws_exclude=FIG7_KWS_EXCLUDE):
    """Figure 7: (a) mean per-utterance WER and (b) KWS accuracy per condition (clean, 10, 5,
    0 dB), per model (:func:`snr_curves`).

    Panel (b) leaves out ``kws_exclude`` (default :data:`FIG7_KWS_EXCLUDE`, as in the paper).
    Shaded bands are 95 % bootstrap intervals over items.

    Returns
    -------
    matplotlib.figure.Figure
    """
    excl = {_norm_id(m) for m in kws_exclude}
    colours = _model_colours(curves["model"])
    fig = _new_figure(8.0, 3.2)
    axes = fig.subplots(1, 2)
    for ax, fam, tag, ylab in zip(axes, ("asr", "kws"), ("a", "b"),
                                  ("mean WER per utterance (%)", "KWS accuracy (%)")):
        c = curves[curves["family"] == fam]
        conds = list(dict.fromkeys(c["condition"]))
        for model, g in c.groupby("model"):
            if fam == "kws" and _norm_id(model) in excl:
                continue
            g = g.set_index("condition").reindex(conds)
            xs = np.arange(len(conds))
            ax.plot(xs, g["value_pp"], marker="o", ms=3, label=model, color=colours[model])
            ax.fill_between(xs, g["ci_low_pp"], g["ci_high_pp"], alpha=0.15, color=colours[model])
        ax.set_xticks(range(len(conds)), conds, fontsize=8)
        ax.set_xlabel("condition (SNR)", fontsize=8)
        ax.set_ylabel(ylab, fontsize=8)
        ax.set_title(f"({tag}) {_FAMILY_LABEL[fam]}", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, frameon=False)
    return fig


# -------------------------------------------------------------------------------- everything
def make_all_figures(ws, *, n_resamples: int = 2000, seed: int = 0, formats=("png", "pdf")
                     ) -> dict[str, Path]:
    """Write every figure and table the available inputs allow.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    n_resamples, seed : int
        Bootstrap settings for every interval (recorded in the tables).
    formats : sequence of str
        Figure formats (default PNG and PDF).

    Returns
    -------
    dict of str -> pathlib.Path
        File name (e.g. ``"figure2_descriptor_regressions.png"``) → path, for what was written.
        Outputs that cannot be made are skipped with a logged warning: Figures 2, 3 and Tables
        2, 3 without ``descriptors/acoustic_descriptors.csv``; Figure 6 and Table 5 without
        ``results/scores/asr_steer_p5.csv`` / ``kws_steer_p5.csv``; Table 4 and Figure 5 when no
        ASR item has an ``accent_group`` (a custom profile without that column).

    Raises
    ------
    AiplibError
        If ``results/scores/asr.csv`` or ``kws.csv`` is missing (run stage 8 first).
    """
    scores = load_scores(ws)
    missing = [t for t in BASE_TASKS.values() if t not in scores]
    if missing:
        raise AiplibError(f"stage 9 needs results/scores/{{{','.join(missing)}}}.csv under "
                          f"{ws.results}; run stage 8 (scoring) first")
    descriptors, battery = load_descriptors(ws), load_battery(ws)
    fig_dir, tab_dir = ws.figures_dir, ws.tables_dir
    tab_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    kw = {"n_resamples": n_resamples, "seed": seed}

    def fig_out(name, fig):
        for p in save_figure(fig, fig_dir, name, formats=formats):
            written[p.name] = p

    def tab_out(name, table):
        p = tab_dir / f"{name}.csv"
        table.to_csv(p, index=False)
        written[p.name] = p

    ranking = background_ranking(scores, **kw)
    if descriptors is None:
        log.warning("descriptors/acoustic_descriptors.csv is missing: Figures 2, 3 and Tables 2, "
                    "3 skipped (run stage 3)")
    else:
        t2 = table2_descriptor_correlations(scores, descriptors, **kw)
        tab_out("table2_descriptor_correlations", t2)
        fig_out("figure2_descriptor_regressions",
                figure2_descriptor_regressions(scores, descriptors, t2, battery=battery))
        fig_out("figure3_descriptor_correlations", figure3_descriptor_correlations(t2))
        tab_out("table3_descriptor_values",
                table3_descriptor_values(ranking, descriptors, battery=battery))
    fig_out("figure4_background_ranking", figure4_background_ranking(ranking, battery=battery))
    if scores["asr"]["accent_group"].isna().all():
        log.warning("no accent_group in the ASR item bank: Table 4 and Figure 5 skipped")
    else:
        t4, t4s = _split_table4(_accent_rows(scores, **kw))
        tab_out("table4_accent_dwer", t4)
        tab_out("table4_accent_dwer_pooled_unspecified", t4s)
        if t4.empty:
            log.warning("no ASR item has an accent group: Table 4 is empty, Figure 5 skipped")
        else:
            fig_out("figure5_accent_degradation", figure5_accent_degradation(t4))
    t5 = table5_prompt_steering_rer(scores, **kw)
    absent = [t for t in STEER_TASKS.values() if t not in scores]
    if t5.empty:
        log.warning("no steering scores (%s): Figure 6 and Table 5 skipped",
                    ", ".join(f"results/scores/{t}.csv" for t in absent))
    else:
        if absent:
            log.warning("steering scores missing for %s: Figure 6 / Table 5 show only the rest",
                        ", ".join(absent))
        tab_out("table5_prompt_steering_rer", t5)
        fig_out("figure6_prompt_steering_rer", figure6_prompt_steering_rer(t5))
    fig_out("figure7_snr_performance", figure7_snr_performance(snr_curves(scores, **kw)))
    return written
