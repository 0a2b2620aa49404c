"""Table 4 and Figure 5: degradation per accent (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis import stats
from aiplib.analysis.figures.common import _model_colours, _new_figure

AUTHORS_ACCENT_LABELS_FILE = Path(__file__).resolve().parent.parent / "authors_accent_labels.csv"
"""``aiplib/analysis/authors_accent_labels.csv``: columns ``accent`` (a raw accent label of the ASR
manifest: LibriSpeech's ``american_english``, a Common Voice 17 string) and ``label`` (the name
on the authors' accent figure, their ``accent_clean_map`` in ``scripts/generate_results_new_2.py``)."""


@lru_cache(maxsize=1)
def authors_accent_labels() -> dict:
    """The authors' accent label table (:data:`AUTHORS_ACCENT_LABELS_FILE`) as {accent: label}."""
    with open(AUTHORS_ACCENT_LABELS_FILE, newline="", encoding="utf-8") as fh:
        return {r["accent"]: r["label"] for r in csv.DictReader(fh)}


def authors_accent_label(accent) -> str | None:
    """The authors' label of a raw accent string; a string not in their table is kept as it is
    (their ``.map(...).fillna(accent)``); None for a missing or empty accent."""
    if accent is None or (isinstance(accent, float) and np.isnan(accent)) or str(accent) == "":
        return None
    return authors_accent_labels().get(str(accent), str(accent))


def table4_accent_dwer_authors(scores: dict) -> pd.DataFrame:
    """Table 4 the authors' way: mean ΔWER per model and accent label, flat over noisy rows.

    As ``generate_accent_degradation_plot`` of the authors' ``scripts/generate_results_new_2.py``:
    noisy ASR rows with an accent, the raw ``accent`` mapped through their label table
    (:func:`authors_accent_label`: ``american_english`` → "US English (anon)", the long Common
    Voice strings → short names, any other string kept as it is), then
    ``groupby(["model", "accent_label"])["dwer"].mean()`` over the rows. No interval (theirs has
    none; :func:`table4_accent_dwer` gives ours with one).

    Parameters
    ----------
    scores : dict of str -> pandas.DataFrame
        Needs ``"asr"`` with ``accent`` (or, from older score files, ``accent_group``) and
        ``delta_wer``.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, accent_label, accent, n_items, n_rows, mean_delta_wer_pp`` (``accent``:
        the raw strings mapped to the label, ``;``-joined), sorted by model and label.
    """
    df = scores["asr"]
    raw = df["accent"] if "accent" in df.columns else df["accent_group"]
    df = df.assign(_accent=raw.map(lambda v: None if authors_accent_label(v) is None else str(v)))
    df["accent_label"] = df["_accent"].map(authors_accent_label)
    noisy = df[(df["bg_id"] != "clean") & df["delta_wer"].notna() & df["accent_label"].notna()]
    cols = ["model", "accent_label", "accent", "n_items", "n_rows", "mean_delta_wer_pp"]
    if noisy.empty:
        return pd.DataFrame(columns=cols)
    g = noisy.groupby(["model", "accent_label"])
    t = pd.DataFrame({
        "accent": g["_accent"].agg(lambda a: ";".join(sorted(set(a)))),
        "n_items": g["item_id"].nunique(), "n_rows": g.size(),
        "mean_delta_wer_pp": 100 * g["delta_wer"].mean()}).reset_index()
    return t[cols].sort_values(["model", "accent_label"], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------- Table 4 and Figure 5
def table4_accent_dwer(scores: dict, *, n_resamples: int = 2000, seed: int = 0
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 4, our view: mean ΔWER per model and accent group, with a bootstrap CI over items.

    The authors' view (their labels, flat mean over rows) is :func:`table4_accent_dwer_authors`,
    shown beside this one. Each item's ΔWER is first averaged over backgrounds and SNRs; the table gives the mean over
    the group's items (pp) and its 95 % percentile interval.

    Returns
    -------
    (table4, supplement) : tuple of pandas.DataFrame
        ``table4``: accent groups and single models only, as the paper's table. ``supplement``:
        the rows kept out of it, ``pooled`` (each item averaged over the models — only items
        every model ran) per accent group, and ``unspecified`` (items without an accent group)
        per model. Columns ``model, accent_group, n_items, clean_wer_pp`` (corpus WER of the
        group's clean rows), ``mean_delta_wer_pp, ci_low_pp, ci_high_pp, ci_usable, level,
        n_resamples, seed, note``; a group with fewer than
        :data:`aiplib.analysis.stats.MIN_N_FOR_INTERVAL` items has no interval (NaN, noted).
    """
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
    t = t.sort_values(["_o", "model", "accent_group"], kind="stable").drop(columns="_o")
    main = (t["model"] != "pooled") & (t["accent_group"] != "unspecified")
    return t[main].reset_index(drop=True), t[~main].reset_index(drop=True)


def _bars(ax, table, group_col, models, colours, *, ci: bool) -> None:
    groups = list(dict.fromkeys(table[group_col]))
    w = 0.8 / max(len(models), 1)
    x = np.arange(len(groups))
    for k, m in enumerate(models):
        t = table[table["model"] == m].set_index(group_col).reindex(groups)
        v = t["mean_delta_wer_pp"].to_numpy(float)
        kw = {}
        if ci:
            err = np.vstack([np.clip(v - t["ci_low_pp"].to_numpy(float), 0, None),
                             np.clip(t["ci_high_pp"].to_numpy(float) - v, 0, None)])
            kw = {"yerr": np.nan_to_num(err), "error_kw": {"lw": 0.7, "capsize": 2}}
        ax.bar(x + (k - (len(models) - 1) / 2) * w, v, w, label=m, color=colours[m], **kw)
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=8)
    ax.axhline(0, color="k", lw=0.6)
    ax.grid(axis="y", alpha=0.3)


def figure5_accent_degradation(table4: pd.DataFrame, authors: pd.DataFrame | None = None):
    """Figure 5: mean ΔWER per accent group (grouped bars per model).

    With ``authors`` (:func:`table4_accent_dwer_authors`), panel (a) shows the authors' labels
    (flat mean over rows, no interval) and panel (b) our accent groups with 95 % bootstrap CIs
    (:func:`table4_accent_dwer`, accent groups and single models only; ``pooled`` and
    ``unspecified`` rows, if present, are left out). Without it, only our panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    table4 = table4[(table4["model"] != "pooled") & (table4["accent_group"] != "unspecified")]
    panels = [] if authors is None or authors.empty else [("authors", authors)]
    panels.append(("ours", table4))
    models = list(dict.fromkeys([*(authors["model"] if panels[0][0] == "authors" else []),
                                 *table4["model"]]))
    colours = _model_colours(models)
    n_groups = max(len(set(t["accent_label" if k == "authors" else "accent_group"]))
                   for k, t in panels)
    fig = _new_figure(max(4.5, 1.2 + 0.55 * n_groups * max(len(models), 1) ** 0.5),
                      3.4 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (kind, t), tag in zip(axes, panels, "ab"):
        if kind == "authors":
            _bars(ax, t, "accent_label", [m for m in models if m in set(t["model"])], colours,
                  ci=False)
            title = "the authors' accent labels, mean over noisy rows"
        else:
            _bars(ax, t, "accent_group", [m for m in models if m in set(t["model"])], colours,
                  ci=True)
            title = "accent groups (ours), mean over items, 95 % bootstrap CI"
        ax.set_ylabel("ΔWER (pp), mean over backgrounds and SNRs", fontsize=8)
        ax.set_title((f"({tag}) " if len(panels) > 1 else "") + title, fontsize=9, loc="left")
    axes[0].legend(fontsize=7, frameon=False, ncol=min(len(models), 4), loc="lower center",
                   bbox_to_anchor=(0.5, 1.12))
    fig.suptitle("ASR degradation by accent", fontsize=9)
    return fig
