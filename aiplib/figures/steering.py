"""Table 5 and Figure 6: the steering prompt's Residual Effect Ratio (part of :mod:`aiplib.figures`)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .. import stats
from ..tasks import DEGRADATION_COLUMN
from .common import BASE_TASKS, STEER_TASKS, _FAMILY_COLOURS, _FAMILY_LABEL, _new_figure


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
        col = DEGRADATION_COLUMN[fam]
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
