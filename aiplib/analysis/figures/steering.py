"""Table 5 and Figure 6: the steering prompt's Residual Effect Ratio (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from aiplib.analysis import stats
from aiplib.analysis.figures.common import (
    _FAMILY_COLOURS,
    _FAMILY_LABEL,
    BASE_TASKS,
    STEER_TASKS,
    _new_figure,
)
from aiplib.core.tasks import DEGRADATION_COLUMN

# ---------------------------------------------------------------------- Table 5 and Figure 6
TABLE5_COLUMNS = ["model", "family", "base_task", "steer_task", "n_items", "n_base_rows",
                  "n_steer_rows", "delta_base_pp", "delta_steer_pp", "rer", "base_flag", "ci_low",
                  "ci_high", "ci_usable", "rule", "n_pairs", "delta_base_paired_pp",
                  "delta_steer_paired_pp", "rer_paired", "rer_paired_ci_low", "rer_paired_ci_high",
                  "rer_paired_ci_usable", "level", "n_resamples", "seed", "note"]
"""Columns of :func:`table5_prompt_steering_rer`, in order."""


def _rer_rule(fam: str, ds: float, db: float) -> tuple[str, str]:
    small = stats.RER_KWS_SMALL
    rule = "kws_both_below_1pp" if fam == "kws" and abs(ds) < small and abs(db) < small else "ratio"
    return rule, ("" if rule != "ratio" else stats.rer_flag(db))


def _authors_rer(fam: str, b: pd.DataFrame, s: pd.DataFrame, *, n_resamples: int, seed: int):
    """The authors' unpaired RER of one model and its item bootstrap (both tasks' rows of an
    item resampled together)."""
    db, nb = stats.unpaired_delta(b, fam)
    ds, ns = stats.unpaired_delta(s, fam)
    sb, ss = stats.unpaired_item_sums(b, fam), stats.unpaired_item_sums(s, fam)
    items = sb.index.union(ss.index)
    sb, ss = sb.reindex(items, fill_value=0.0), ss.reindex(items, fill_value=0.0)
    arrays = tuple(t[c].to_numpy(float) for t in (sb, ss)
                   for c in ("clean_sum", "clean_n", "noisy_sum", "noisy_n"))

    def stat(*a, axis=-1, _fam=fam):
        d_base = stats.delta_from_sums(*a[:4], family=_fam, axis=axis)
        d_steer = stats.delta_from_sums(*a[4:], family=_fam, axis=axis)
        return stats.rer(d_steer, d_base, task_family=_fam, usable_only=True)

    res = stats.bootstrap_ci(arrays, stat, n_resamples=n_resamples, seed=seed, vectorized=True)
    return db, ds, nb, ns, len(items), res


def table5_prompt_steering_rer(scores: dict, *, n_resamples: int = 2000, seed: int = 0
                               ) -> pd.DataFrame:
    """Table 5: Residual Effect Ratio of the steering prompt per model, ASR and KWS.

    ``rer`` is the authors' (``generate_prompt_rer_plot`` of their
    ``scripts/generate_results_new_2.py``): each task's Δ is computed on its own rows, unpaired
    (:func:`aiplib.analysis.stats.unpaired_delta`: ASR the mean of the task's per-row ΔWER; KWS accuracy
    over all clean rows − accuracy over all noisy rows), then ``RER = Δ_steer / (Δ_base +
    1e-9)``, KWS 1.0 when both |Δ| < 1 pp (:func:`aiplib.analysis.stats.rer`). Its CI (ours) resamples
    items (all of an item's rows of both tasks together); a resample whose Δ_base is below 1 pp
    is unusable, and the interval is refused when more than 5 % are.

    Beside it, ours: ``rer_paired`` pairs the baseline and steering rows on (model,
    stimulus_id) — noisy stimuli with a degradation value in both — so both Δ use the same
    stimuli; it differs from ``rer`` whenever the two tasks' failed or missing rows differ
    (and, for KWS, because the clean rows of both tasks enter). ``base_flag``
    (:func:`aiplib.analysis.stats.rer_flag`, of ``delta_base_pp``) says when Δ_base is not clearly
    positive, so that "RER < 1: the prompt helped" does not hold.

    Returns
    -------
    pandas.DataFrame
        :data:`TABLE5_COLUMNS`: ``model, family, base_task, steer_task, n_items, n_base_rows,
        n_steer_rows`` (rows each Δ used), ``delta_base_pp, delta_steer_pp, rer, base_flag,
        ci_low, ci_high, ci_usable, rule`` (``ratio`` or ``kws_both_below_1pp``: RER = 1), then
        the paired view ``n_pairs, delta_base_paired_pp, delta_steer_paired_pp, rer_paired,
        rer_paired_ci_low, rer_paired_ci_high, rer_paired_ci_usable``, and ``level,
        n_resamples, seed, note``. Empty if no steering task is present.
    """
    rows = []
    for fam, steer_task in STEER_TASKS.items():
        base_task = BASE_TASKS[fam]
        if steer_task not in scores or base_task not in scores:
            continue
        col = DEGRADATION_COLUMN[fam]
        keys = ["model", "stimulus_id"]
        base_all, steer_all = scores[base_task], scores[steer_task]
        b = base_all.loc[lambda d: (d["bg_id"] != "clean") & d[col].notna(),
                         keys + ["item_id", col]]
        s = steer_all.loc[lambda d: (d["bg_id"] != "clean") & d[col].notna(), keys + [col]]
        pairs = b.merge(s, on=keys, suffixes=("_base", "_steer"))
        models = sorted(set(base_all["model"].astype(str)) & set(steer_all["model"].astype(str)))
        for model in models:
            db, ds, nb, ns, n_items, res = _authors_rer(
                fam, base_all[base_all["model"].astype(str) == model],
                steer_all[steer_all["model"].astype(str) == model],
                n_resamples=n_resamples, seed=seed)
            rule, flag = _rer_rule(fam, ds, db)
            g = pairs[pairs["model"].astype(str) == model]
            it = g.groupby("item_id").agg(sb=(f"{col}_base", "sum"), ss=(f"{col}_steer", "sum"),
                                          n=(f"{col}_base", "size"))

            def stat(sb, ss, n, axis=-1, _fam=fam):
                return stats.rer(ss.sum(axis) / n.sum(axis), sb.sum(axis) / n.sum(axis),
                                 task_family=_fam, usable_only=True)

            pres = stats.bootstrap_ci((it["sb"].to_numpy(float), it["ss"].to_numpy(float),
                                       it["n"].to_numpy(float)), stat, n_resamples=n_resamples,
                                      seed=seed, vectorized=True) if len(it) else None
            pdb = g[f"{col}_base"].mean() if len(g) else np.nan
            pds = g[f"{col}_steer"].mean() if len(g) else np.nan
            notes = [n for n in (res.note, f"paired: {pres.note}" if pres and pres.note else "") if n]
            rows.append({"model": model, "family": fam, "base_task": base_task,
                         "steer_task": steer_task, "n_items": n_items, "n_base_rows": nb,
                         "n_steer_rows": ns, "delta_base_pp": 100 * db, "delta_steer_pp": 100 * ds,
                         "rer": stats.rer(ds, db, task_family=fam), "base_flag": flag,
                         "ci_low": res.ci_low, "ci_high": res.ci_high, "ci_usable": res.n_valid,
                         "rule": rule, "n_pairs": len(g), "delta_base_paired_pp": 100 * pdb,
                         "delta_steer_paired_pp": 100 * pds,
                         "rer_paired": stats.rer(pds, pdb, task_family=fam),
                         "rer_paired_ci_low": pres.ci_low if pres else np.nan,
                         "rer_paired_ci_high": pres.ci_high if pres else np.nan,
                         "rer_paired_ci_usable": pres.n_valid if pres else 0,
                         "level": res.level, "n_resamples": res.n_resamples,
                         "seed": res.seed, "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=TABLE5_COLUMNS)


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
