"""Figure 7: performance against SNR (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from aiplib.analysis import stats
from aiplib.analysis.figures.common import (
    _FAMILY_LABEL,
    BASE_TASKS,
    FIG7_KWS_EXCLUDE,
    _model_colours,
    _new_figure,
    _norm_id,
)


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
