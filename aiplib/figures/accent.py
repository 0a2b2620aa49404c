"""Table 4 and Figure 5: degradation per accent (part of :mod:`aiplib.figures`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import stats
from .common import _model_colours, _new_figure


# ---------------------------------------------------------------------- Table 4 and Figure 5
def table4_accent_dwer(scores: dict, *, n_resamples: int = 2000, seed: int = 0
                       ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 4: mean ΔWER per model and accent group, with a bootstrap CI over items.

    Each item's ΔWER is first averaged over backgrounds and SNRs; the table gives the mean over
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
        :data:`aiplib.stats.MIN_N_FOR_INTERVAL` items has no interval (NaN, noted).
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


def figure5_accent_degradation(table4: pd.DataFrame):
    """Figure 5: mean ΔWER per accent group (grouped bars per model, 95 % bootstrap CI).

    Accent groups and single models only (pass Table 4 of :func:`table4_accent_dwer`); ``pooled`` and
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
