# %% [markdown]
# # 9 · Results
#
# How the speech recognisers (ASR) and keyword spotters (KWS) of this run hold up when real-world
# background sound is mixed into the speech: the findings first, then each table and figure under its
# caption. The terms are explained in the [Glossary](#glossary); how the numbers were made and which
# files this stage reads and writes, in [How this was run](#how-this-was-run).

# %% tags=["parameters"]
import os
import aiplib
from typing import Optional

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
n_resamples: Optional[int] = None  # bootstrap resamples of every interval; None: 200 when smoke, else 2000
seed: int = 0  # bootstrap seed (recorded in every table and sidecar)
min_diff_pp: float = 2.0  # smallest change (percentage points) called worse / better
criteria: str = ""  # optional criteria JSON (format: aiplib/analysis/criteria.py); empty for none
previous: str = ""  # optional previous run (workspace root or results folder) to compare with
manifests_dir: str = ""  # folder of asr.csv, kws.csv (make score MANIFESTS_DIR); empty: manifests/ here
partial_models: str = ""  # keep | leave_out a partial model in Figures 2-7, Tables 2-5; empty: by profile

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)
if n_resamples is None:
    n_resamples = 200 if smoke else 2000

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %% tags=["report-hide"]
import json
import warnings

import matplotlib as mpl
import numpy as np
import pandas as pd
from IPython.display import Markdown, display
from matplotlib import colormaps
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from aiplib.analysis import conditions as cond
from aiplib.analysis import paper
from aiplib.analysis import report_tables as rt
from aiplib.analysis import stats
from aiplib.analysis.findings import findings, findings_lines, findings_markdown
from aiplib.analysis.provenance import model_records
from aiplib.core.tasks import BASE_TASKS, TASK_FAMILIES
from aiplib.io.formats import load_scores

boot = dict(n_resamples=n_resamples, seed=seed)
all_scores, descriptors, battery_info = paper.load_inputs(ws)  # every task's scores; descriptors, battery by bg_id
kw = dict(boot, min_diff_pp=min_diff_pp)
cond_paths = cond.write_condition_tables(ws, **kw)
scores = load_scores(ws, tasks=list(cond_paths))
tabs = ws.tables_dir
tabs.mkdir(parents=True, exist_ok=True)
print(f"{len(cond_paths)} condition tables written under {ws.results}")

# %% tags=["report-hide"]
read_tables = cond.read_condition_tables(ws.results)
tables = {t: v for t, v in read_tables.items() if t in cond_paths}
stale_tables = sorted(set(read_tables) - set(tables))
if stale_tables:
    tables_text = ("Not read (written by an earlier run; this run did not score the task): "
                   + ", ".join(f"`conditions_{t}.csv`" for t in stale_tables) + ".")
else:
    tables_text = f"Condition tables read: {', '.join(f'`conditions_{t}.csv`' for t in tables)}."

# %% tags=["report-hide"]
import sys

from aiplib.core.tasks import task_family
from aiplib.io.formats import find_manifest
from aiplib.scoring.coverage import COLUMNS as COVERAGE_COLUMNS, manifest_from_scores, partial_lines

cov = pd.read_csv(tabs / "coverage.csv") if (tabs / "coverage.csv").is_file() else pd.DataFrame(columns=COVERAGE_COLUMNS)
for line in partial_lines(cov):  # on stderr, which `make` shows as the stage runs
    print(line, file=sys.stderr)
cov_bg = cov[cov["family"] == "background"].astype({"complete": bool})
partial = cov_bg[~cov_bg["complete"]]

# %% tags=["report-hide"]
partial_rule = partial_models or paper.PARTIAL_MODEL_RULES.get(profile, "leave_out")
dropped = paper.partial_models_left_out(cov_bg, partial_rule)
all_scores = {t: df[~df["model"].isin(dropped)] for t, df in all_scores.items()}
if partial.empty:
    partial_text = f"rule for partial models: {partial_rule}; no model × task is partial"
elif dropped:
    partial_text = (f"rule for partial models: {partial_rule}; left out of Figures 2–7 and Tables 2–5: "
                    f"{', '.join(dropped)} (partial on a task another model covers whole)")
else:
    partial_text = (f"rule for partial models: {partial_rule}; every scored row of "
                    f"{', '.join(sorted(set(partial['model'])))} is kept in Figures 2–7 and Tables 2–5")

# %% tags=["report-hide"]
manifests = {}  # task family → its manifest; the rows the models scored together when there is none
for fam in ("asr", "kws"):
    manifests[fam] = find_manifest(ws, fam, manifests_dir)
    if manifests[fam] is None:
        manifests[fam] = manifest_from_scores(all_scores[BASE_TASKS[fam]])
gaps = {}  # (model, task) of a partial run kept in the views → the backgrounds and items it lacks
for r in partial[~partial["model"].isin(dropped)].itertuples():
    man, got = manifests[task_family(r.task)], all_scores.get(r.task, pd.DataFrame(columns=["model"]))
    got = got[got["model"] == r.model]
    gaps[(r.model, r.task)] = {"backgrounds": sorted(set(man.loc[man["condition"] == "noisy", "background_id"])
                                                     - set(got.get("bg_id", []))),
                               "items": sorted(set(man["speech_id"]) - set(got.get("item_id", []))),
                               "n_backgrounds": r.n_backgrounds, "n_items": r.n_items}


def names(xs, n=6):
    return ", ".join(map(str, xs[:n])) + (f" … (+{len(xs) - n})" if len(xs) > n else "")


def coverage_mark(needs, tasks=("asr", "kws")):
    """Markdown under a figure or table that needs every background / item: what the partial runs lack."""
    parts = [f"{m} × {t} lacks {len(g[needs])} of {g['n_' + needs]} {needs} ({names(g[needs])})"
             for (m, t), g in gaps.items() if t in tasks and g[needs]]
    if dropped:
        parts.append(f"{', '.join(dropped)} left out (partial run; Coverage)")
    if parts:
        display(Markdown("**Partial run:** " + "; ".join(parts) + "."))


def no_data(ax, task):
    """Write on an empty panel which run lacks it, instead of leaving blank axes."""
    why = [f"{m}: {len(g['backgrounds'])} of {g['n_backgrounds']}\nbackgrounds missing" for (m, t), g in gaps.items()
           if t == task]
    ax.text(0.5, 0.5, "no data\n" + "\n".join(why or ["not scored"]), ha="center", va="center",
            transform=ax.transAxes, fontsize=MIN_FONT_PT, color="#aa3333")
    ax.set_xticks([])
    ax.set_yticks([])


if cov.empty:
    coverage_text = "Stage 8 wrote no coverage table (`tables/coverage.csv`): re-run stage 8."
elif partial.empty:
    coverage_text = f"Every model × task covers its whole manifest ({len(cov_bg)} rows, `tables/coverage.csv`)."
else:
    coverage_text = "**Partial runs** (the figures and tables below mark them):\n\n" + "\n".join(
        f"- {x}" for x in partial_lines(cov))
    if dropped:
        coverage_text += (f"\n\nLeft out of Figures 2–7 and Tables 2–5: {', '.join(dropped)}; another model covers the "
                          "whole manifest, and a view pooled over unequal coverage would use only the part they share.")

# %% [markdown] tags=["report-hide"]
# The figures below are drawn here with matplotlib, each from the tidy table one `aiplib.analysis.paper`
# call returns (shown in the cell before it). Colours: one per model (tab10 by sorted name), one per
# background category, the same in every figure.

# %% tags=["report-hide"]
FAMILY = {"asr": "ASR", "kws": "KWS"}
DEG = {"asr": "ΔWER (pp)", "kws": "ΔAcc (pp)"}
FAMILY_COLOURS = {"asr": "#332288", "kws": "#88CCEE"}
CATEGORY_COLOURS = {"stationary": "#4477AA", "transient": "#EE6677", "music": "#228833", "speech-like": "#CCBB44"}
OTHER_COLOUR = "#BBBBBB"
warnings.filterwarnings("ignore", message="Conversion of an array with ndim > 0", category=DeprecationWarning)
# one font scale for every figure (in points); each figure is shown at its own size, 100 px per inch (the widest
# ones scaled down to the page's 1200 px). Readable at 800 px: a figure w inches wide shown 800 px wide draws
# f pt as f · 800 / (72 · w) px, so with 8 pt the smallest text no figure is wider than MAX_WIDTH_IN (9 px).
MIN_FONT_PT, MIN_TEXT_PX, SHOWN_PX = 8, 9, 800
MAX_WIDTH_IN = MIN_FONT_PT * SHOWN_PX / (72 * MIN_TEXT_PX)  # 9.88 in
mpl.rcParams.update({"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": MIN_FONT_PT,
                     "ytick.labelsize": MIN_FONT_PT, "legend.fontsize": MIN_FONT_PT, "figure.titlesize": 10,
                     "legend.title_fontsize": MIN_FONT_PT})
PX_PER_INCH, MAX_WIDTH_PX = 100, 1200
DESCRIPTOR_LABELS = rt.descriptor_labels()  # the paper's descriptor names and units (aiplib/battery/descriptor_info.csv)


def model_colours(models):
    names = sorted(m for m in set(models) if m != "pooled")
    return {**{m: colormaps["tab10"](i % 10) for i, m in enumerate(names)}, "pooled": "#555555"}


def category_legend(ax, cats):
    order = list(CATEGORY_COLOURS)
    seen = sorted(set(cats), key=lambda c: (order.index(c) if c in order else len(order), c))
    ax.legend(handles=[Patch(color=CATEGORY_COLOURS.get(c, OTHER_COLOUR), label=c) for c in seen],
              frameon=False, loc="best")


def ci_bars(ax, pos, v, lo, hi, *, horizontal=False):
    """Error bars from each value to its interval bounds, drawn only where both bounds exist."""
    pos, v, lo, hi = (np.asarray(a, float) for a in (pos, v, lo, hi))
    ok = np.isfinite(v) & np.isfinite(lo) & np.isfinite(hi)
    if ok.any():
        err = np.vstack([np.clip(v[ok] - lo[ok], 0, None), np.clip(hi[ok] - v[ok], 0, None)])
        xy = (v[ok], pos[ok]) if horizontal else (pos[ok], v[ok])
        ax.errorbar(*xy, **{"xerr" if horizontal else "yerr": err}, fmt="none", ecolor="k", lw=0.7, capsize=2)


def publish(fig, name):
    """Write results/figures/<name>.png and .pdf and show the PNG (the report embeds it)."""
    paper.save_figure(fig, ws.figures_dir, name)
    rt.show_figure(ws.results, name, width=min(MAX_WIDTH_PX, round(PX_PER_INCH * fig.get_figwidth())))


def write_table(t, name):
    """Write results/tables/<name>.csv and read it back as the report shows it."""
    t.to_csv(tabs / f"{name}.csv", index=False)
    return pd.read_csv(tabs / f"{name}.csv", keep_default_na=False, na_values=[""])

# %% tags=["report-hide"]
# The tidy tables of Figures 2–7 and Tables 2–5, one `aiplib.analysis.paper` call each, made here so the Findings
# can cite them; the cell of each figure or table below draws or shows one of them.
curves = paper.snr_curves(all_scores, **boot)  # Figure 7
ranking = paper.background_ranking(all_scores, **boot)  # Figure 4, Table 3
t2 = paper.table2_descriptor_correlations(all_scores, descriptors, **boot) if descriptors is not None else None
has_accents = not all_scores["asr"]["accent_group"].isna().all()
t4, t4_rest = paper.table4_accent_dwer(all_scores, **boot) if has_accents else (None, None)  # Table 4, Figure 5
t4a = paper.table4_accent_dwer_authors(all_scores) if has_accents else None
t5 = paper.table5_prompt_steering_rer(all_scores, **boot)  # Table 5, Figure 6
found = findings(tables, ranking, table2=t2, table4=t4, table5=t5)
found

# %% [markdown]
# ## Findings

# %%
left_out_csv = tabs / "failures_by_model_task.csv"
left_out_table = pd.read_csv(left_out_csv) if left_out_csv.is_file() else None
finding_lines = findings_lines(found, tables=tables, ranking=ranking, n_resamples=n_resamples, table2=t2,
                               table4=t4, failures=left_out_table)
finding_lines += rt.window_warnings(model_records(ws))  # a run on the opt-in 15/20/30 s window says so
display(Markdown(findings_markdown(finding_lines)))

# %% [markdown]
# ## Coverage
#
# How much of its manifest each model × task scored (stage 8, `tables/coverage.csv`). A partial run (a
# `limit`, a stopped run, shards not merged) is named here, and every figure and table below that
# needs every background or item says what it lacks; when another model covers the whole manifest,
# the paper's views (Figures 2–7, Tables 2–5) leave the partial model out.

# %%
Markdown(coverage_text)

# %% [markdown]
# ## How the numbers are made
#
# **What the authors did.** They scored every response (`scripts/06_score_metrics.py`,
# `scoring/score_all.py` in IvLabs/AIP-Speech: WER on normalised text, KWS by the first word of
# the answer in the closed keyword set), averaged the degradation per background over items and
# SNRs, rank-correlated it with the acoustic descriptors (Spearman) and drew Figures 2–7 and Tables
# 2–5 (`scoring/figures.py`, `scripts/generate_plots_new.py`).
# **What we do.** The same definitions (`aiplib.analysis.paper`; the figures are drawn in the cells below), with, beside every number, a 95 %
# bootstrap interval over items, an exact test and a verdict per condition (`aiplib.analysis.conditions`,
# `aiplib.analysis.stats`).
#
# ΔWER = WER(noisy) − WER(clean) and ΔAcc = acc(clean) − acc(noisy) on the same items, in
# percentage points (pp): positive means the background hurt. WER % is the corpus WER (Σ errors /
# Σ reference words); mean WER is the mean of per-utterance WERs (the authors' figures use it);
# S / D / I are substitutions, deletions and insertions as shares of the reference words (they add
# up to the WER; insertions show how much of a background voice ends up in the text).
#
# Every interval is a 95 % percentile bootstrap over items; rows pooled over backgrounds and/or
# SNRs resample whole items (all of an item's pairs together). Tests are exact: the sign test
# (binomial, `scipy.stats.binomtest`) on per-item changes, McNemar's exact test for single KWS
# conditions. p (BH) is Benjamini–Hochberg adjusted across the conditions of the same task, model
# and scope. **Verdict:** *worse* / *better* when the interval excludes 0, the change is at least
# the minimum change and the adjusted p is below α; otherwise *same*; *n/a* with too few paired
# items, which get no interval either (a percentile bootstrap of so few values only spans their
# range). Rows with few items are marked *coarse*; an interval is refused when too few of its
# resamples were usable (the tables give the usable count, `ci_usable`). Beside the paper's means, a
# robust view: WER capped at 1 per utterance, the median WER and the count of looping transcripts
# (ASR); strict accuracy counting non-answers wrong and the share of non-answers (KWS).
#
# The settings of this run:

# %%
Markdown(
    f"{n_resamples} bootstrap resamples, seed {seed}, level 95 %; minimum change {min_diff_pp:g} pp; "
    f"α = {cond.ALPHA:g} (BH-adjusted); no interval or verdict below {cond.MIN_ITEMS_FOR_VERDICT} "
    f"paired items; coarse below {cond.COARSE_BELOW_ITEMS}; an interval needs "
    f"{100 * stats.MIN_USABLE_SHARE:g} % usable resamples. Models: "
    f"{', '.join(sorted({m for s in scores.values() for m in s['model'].unique()}))}.")

# %% [markdown]
# ## Summary
#
# <a id="table-r1"></a>**Table R1 · Each task and model at a glance.** Clean and noisy (all backgrounds and SNRs)
# level, the mean per-item change with its 95 % interval (+ = worse), the corpus-level change,
# the exact test of the overall change and its verdict, and how the background × SNR conditions
# split into verdicts. The last column is the robust view (ASR: capped mean / median WER and the
# number of looping transcripts; KWS: strict accuracy / share of non-answers).

# %%
rt.summary_table(tables)

# %% [markdown]
# The same headline numbers for a leaderboard or a script, one record per condition family × model × task
# with the intervals, their resample count, the items and the coverage: `summary.json` and `summary.csv`
# (format in `docs/FILE_FORMATS.md`).

# %%
from aiplib.analysis.summary import read_summary, write_summary

summary_files = write_summary(ws, tables)
Markdown(f"{summary_files['records']} records written to `summary.json` and `summary.csv`.")

# %% [markdown]
# ## Performance against SNR (Figure 7)

# %%
Markdown(rt.figure7_caption(curves))  # the caption names the models of this run

# %% tags=["report-hide"]
curves  # Figure 7's table, made above for the Findings

# %%
colours = model_colours(curves["model"])
fig = Figure(figsize=(8.0, 3.2), layout="constrained")
for ax, fam, tag, ylab in zip(fig.subplots(1, 2), ("asr", "kws"), "ab",
                              ("mean WER per utterance (%)", "KWS accuracy (%)")):
    c = curves[curves["family"] == fam]
    conds = list(dict.fromkeys(c["condition"]))
    xs = np.arange(len(conds))
    if not c["in_figure"].any():
        no_data(ax, fam)
    for model, g in c[c["in_figure"]].groupby("model"):
        g = g.set_index("condition").reindex(conds)
        ax.plot(xs, g["value_pp"], marker="o", ms=3, color=colours[model],
                label=f"{model} (partial run)" if (model, fam) in gaps else model)
        ax.fill_between(xs, g["ci_low_pp"], g["ci_high_pp"], alpha=0.15, color=colours[model])
    ax.set_xticks(xs, conds)
    ax.set_xlabel("condition (SNR)")
    ax.set_ylabel(ylab)
    ax.set_title(f"({tag}) {FAMILY[fam]}", loc="left")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False)
publish(fig, "figure7_snr_performance")
coverage_mark("backgrounds")

# %% [markdown]
# ## Which backgrounds hurt most (Figure 4, Table 3)
#
# <a id="figure-4"></a>**Figure 4 · Backgrounds ranked by the mean of ASR ΔWER and KWS ΔAcc** (the authors' ranking):
# per background the plain mean over all its noisy rows of every model (the authors' rule), with
# 95 % intervals over items (none below 10 items); colours are the background categories. Our per-SNR-balanced mean is in
# Table 3's SNR-balanced columns (`*_snr_balanced_pp` in the CSV) (the two differ only when rows are missing).
# `figures/figure4_background_ranking.pdf`

# %% tags=["report-hide"]
ranking  # Figure 4's table, made above for the Findings

# %%
lacking = sorted(set(manifests["asr"].query("condition == 'noisy'")["background_id"]) - set(ranking.index)) \
    if gaps else []  # a partial run: its missing backgrounds are listed in the figure, not left out silently
bgs = list(ranking.index) + lacking
cats = paper.categories(bgs, battery_info)
fig = Figure(figsize=(8.0, 1.2 + 0.24 * len(bgs)), layout="constrained")
axes = fig.subplots(1, 2, sharey=True)
y = np.arange(len(bgs))
for ax, fam, col, tag in zip(axes, ("asr", "kws"), ("asr_delta_wer_pp", "kws_delta_acc_pp"), "ab"):
    r = ranking.reindex(bgs)
    v = r[col].to_numpy(float)
    ax.barh(y, v, color=[CATEGORY_COLOURS.get(c, OTHER_COLOUR) for c in cats])
    ci_bars(ax, y, v, r[f"{fam}_ci_low_pp"], r[f"{fam}_ci_high_pp"], horizontal=True)
    for yi in y[len(ranking):]:
        ax.text(0, yi, " missing (partial run)", va="center", fontsize=MIN_FONT_PT, color="#aa3333")
    ax.axvline(0, color="k", lw=0.6)
    ax.set_xlabel(DEG[fam] + ", mean over SNRs and models")
    ax.set_title(f"({tag}) {FAMILY[fam]}", loc="left")
    ax.grid(axis="x", alpha=0.3)
axes[0].set_yticks(y, bgs)
axes[0].invert_yaxis()
category_legend(axes[1], cats)
publish(fig, "figure4_background_ranking")
coverage_mark("backgrounds")

# %% [markdown]
# <a id="table-3"></a>**Table 3 · The acoustic descriptors of each background**, beside its ASR ΔWER, KWS ΔAcc
# and their mean (pp), in the authors' order: least harmful first, by the mean over the tasks the
# background has (`rank` is Figure 4's). The descriptors under the paper's names with their units, to the
# decimals that tell the backgrounds apart (the CSV keeps the authors' rounding: RMS variance to 6
# decimals). `tables/table3_descriptor_values.csv`

# %%
display(rt.table3_display(write_table(paper.table3_descriptor_values(ranking, descriptors, battery=battery_info),
                                      "table3_descriptor_values"))
        if descriptors is not None else Markdown("_No descriptors: Table 3 not made._"))
coverage_mark("backgrounds")

# %% [markdown]
# ## Descriptors and degradation (Table 2, Figures 3 and 2)
#
# <a id="table-2"></a>**Table 2 · Spearman r_s across backgrounds between each descriptor and the mean degradation**
# (the plain mean over a background's noisy rows; `pooled` = over every model's rows together), on
# the descriptors rounded as the authors (ZCR, flux, flatness, contrast and the VAD speech fraction
# to 4 decimals; centroid, rolloff, bandwidth to 2; RMS variance to 6); r_s (3 decimals, as the
# paper) and the unrounded descriptors' r_s beside. p is the authors' (scipy's t-approximation);
# ours, `p_permutation`, is exact up to 9 backgrounds, a seeded permutation test (9999 permutations)
# up to 20, asymptotic above;
# the 95 % interval is a percentile bootstrap over backgrounds (resamples with a constant column are
# unusable; no interval with more than 5 % of them, nor below 10 backgrounds); p_BH =
# Benjamini–Hochberg over the descriptors within each task and model. A constant column gives NaN
# with a note. `tables/table2_descriptor_correlations.csv`

# %%
if t2 is None:
    display(Markdown("_No descriptors: Table 2 not made._"))
else:
    t2_shown = write_table(t2, "table2_descriptor_correlations")
    if t2["model"].nunique() == 2:  # "pooled" and one model: the same numbers twice
        t2_shown = t2_shown[t2_shown["model"] != "pooled"]
        display(Markdown(f"_One model (`{t2_shown['model'].iloc[0]}`): its rows are the pooled rows, shown once "
                         "(the CSV keeps both; Figure 3 draws the pooled ones)._"))
    display(rt.table2_display(t2_shown))
coverage_mark("backgrounds")

# %% [markdown]
# <a id="figure-3"></a>**Figure 3 · Spearman r_s of each descriptor against degradation**, pooled over models, one row per
# task: Table 2's `pooled` rows as a heatmap (* p_BH < 0.05). `figures/figure3_descriptor_correlations.pdf`

# %%
if t2 is None:
    display(Markdown("_No descriptors: Figure 3 not made._"))
else:
    pooled = t2[t2["model"] == "pooled"]
    descs, tasks = list(dict.fromkeys(pooled["descriptor"])), list(dict.fromkeys(pooled["task"]))
    mat = pooled.pivot(index="task", columns="descriptor", values="r_s").loc[tasks, descs]
    pbh = pooled.pivot(index="task", columns="descriptor", values="p_bh").loc[tasks, descs]
    fig = Figure(figsize=(min(MAX_WIDTH_IN, 1.0 + 0.85 * len(descs)), 1.6 + 0.6 * len(tasks)), layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(mat.to_numpy(float), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(tasks)):
        for j in range(len(descs)):
            v, q = mat.iat[i, j], pbh.iat[i, j]
            ax.text(j, i, "n/a" if not np.isfinite(v) else f"{v:.2f}" + ("*" if q < 0.05 else ""),
                    ha="center", va="center",
                    color="white" if np.isfinite(v) and abs(v) > 0.6 else "black")
    ax.set_xticks(range(len(descs)), [DESCRIPTOR_LABELS["display_name"].get(d, d) for d in descs],
                  rotation=40, ha="right")
    ax.set_yticks(range(len(tasks)), [t.upper() for t in tasks])
    fig.colorbar(im, ax=ax, label="Spearman $r_s$", shrink=0.9)
    ax.set_title("Descriptor vs mean degradation across backgrounds, pooled over models "
                 "(* $p_{BH}$ < 0.05)")
    publish(fig, "figure3_descriptor_correlations")
    coverage_mark("backgrounds")

# %% [markdown]
# **Figure 2 · The descriptors most correlated with degradation**: the three with the largest mean of
# |r_s(ASR)| and |r_s(KWS)| (pooled, rounded to 3 decimals as the authors); one point per background
# (descriptor rounded as the authors, in its unit, vs its mean degradation in pp over SNRs and models), with an
# ordinary least-squares line. `figures/figure2_descriptor_regressions.pdf`

# %% tags=["report-hide"]
points = paper.descriptor_points(all_scores, descriptors, t2, battery=battery_info) if t2 is not None else None
points

# %%
if points is None:
    display(Markdown("_No descriptors: Figure 2 not made._"))
else:
    top_descriptors = list(dict.fromkeys(points["descriptor"]))
    fig = Figure(figsize=(min(MAX_WIDTH_IN, 3.2 * max(len(top_descriptors), 1)), 5.8), layout="constrained")
    axes = fig.subplots(2, max(len(top_descriptors), 1), squeeze=False)
    for i, fam in enumerate(("asr", "kws")):
        if not top_descriptors:  # no descriptor has a correlation (too few backgrounds covered)
            no_data(axes[i, 0], fam)
        for j, desc in enumerate(top_descriptors):
            ax, p = axes[i, j], points[(points["family"] == fam) & (points["descriptor"] == desc)]
            x, y = p["x"].to_numpy(float), p["y_pp"].to_numpy(float)
            if not (np.isfinite(x) & np.isfinite(y)).any():
                no_data(ax, fam)
                continue
            ax.scatter(x, y, c=[CATEGORY_COLOURS.get(c, OTHER_COLOUR) for c in p["category"]], s=22,
                       edgecolors="k", linewidths=0.3, zorder=3)
            ok = np.isfinite(x) & np.isfinite(y)
            if ok.sum() >= 2 and np.ptp(x[ok]) > 0:
                b1, b0 = np.polyfit(x[ok], y[ok], 1)
                xs = np.linspace(x[ok].min(), x[ok].max(), 50)
                ax.plot(xs, b0 + b1 * xs, color="k", lw=1)
            r = p.iloc[0]
            ax.set_title(f"{FAMILY[fam]} · {DESCRIPTOR_LABELS['display_name'].get(desc, desc)}\n"
                         f"$r_s$ = {r.r_s:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}], $p_{{BH}}$ = {r.p_bh:.3g}")
            ax.set_xlabel(DESCRIPTOR_LABELS["header"].get(desc, desc))  # the descriptor's unit
            if j == 0:
                ax.set_ylabel(DEG[fam] + ", mean over SNRs")
            ax.grid(alpha=0.3)
        if top_descriptors:
            category_legend(axes[i, -1], p["category"])
    publish(fig, "figure2_descriptor_regressions")
    coverage_mark("backgrounds")

# %% [markdown]
# ## Accent groups (Table 4, Figure 5)
#
# <a id="table-4"></a>**Table 4 · Mean ΔWER per model and accent label** (the authors'): the raw accent strings
# mapped through the authors' label table (`aiplib/analysis/authors_accent_labels.csv`; LibriSpeech's
# `american_english` → "US English (anon)"; strings not in it kept as they are), plain mean over
# the noisy rows, no interval. `tables/table4_accent_dwer.csv`

# %%
rt.table4_authors_display(write_table(t4a, "table4_accent_dwer")) if has_accents \
    else Markdown("_No accents: Table 4 not made._")

# %% [markdown]
# <a id="table-4-ours"></a>**Table 4, ours beside · Mean of the items' ΔWER per model and accent group**, 95 % bootstrap
# interval over the group's items (none below 10 items); each item's ΔWER is first averaged over
# backgrounds and SNRs, so every item weighs the same. Rows pooled over models and items without an
# accent group are in `tables/table4_accent_dwer_item_means_pooled_unspecified.csv`. In `demo` the
# groups are synthetic voices. `tables/table4_accent_dwer_item_means.csv`

# %%
if has_accents:
    write_table(t4_rest, "table4_accent_dwer_item_means_pooled_unspecified")
display(rt.table4_display(write_table(t4, "table4_accent_dwer_item_means")) if has_accents
        else Markdown("_No accent groups: Table 4 (ours) not made._"))
coverage_mark("items", ("asr",))

# %% [markdown]
# <a id="figure-5"></a>**Figure 5 · ΔWER by accent**: grouped bars per model, (a) the authors' labels (mean over noisy
# rows, no interval), (b) our groups (mean over items; 95 % bootstrap CI where a group has ≥ 10 items, with the
# run's resamples; no error bar on a smaller group), the two tables above; n = the items behind each bar. When
# the two panels would show the same groups with the same values (every item has all its noisy rows and the
# labels are the groups, as in the demo), one panel is drawn and its title says so.
# `figures/figure5_accent_degradation.pdf`

# %%
if not has_accents or t4.empty:
    display(Markdown("_No ASR item has an accent group: Figure 5 not made._"))
else:
    bars = paper.accent_bars(t4, t4a)
    panels = [p for p in ("authors", "ours") if p in set(bars["panel"])]
    titles = {"authors": "the authors' accent labels,\nmean over noisy rows (no interval)",
              "ours": f"accent groups (ours), mean over items;\n95 % bootstrap CI where a group has "
                      f"≥ {stats.MIN_N_FOR_INTERVAL} items ({n_resamples} resamples)"}
    by_panel = {p: bars[bars["panel"] == p].set_index(["model", "group"])[["n_items", "value_pp"]].sort_index()
                for p in panels}
    same_panels = (len(panels) == 2 and by_panel["authors"].index.equals(by_panel["ours"].index)
                   and np.allclose(by_panel["authors"].to_numpy(float), by_panel["ours"].to_numpy(float)))
    if same_panels:  # the authors' labels and our groups give the same bars: one panel, said in its title
        panels = ["ours"]
        titles["ours"] = (f"accent groups = the authors' labels (same groups and means: one panel),\nmean over "
                          f"items; 95 % bootstrap CI where a group has ≥ {stats.MIN_N_FOR_INTERVAL} items "
                          f"({n_resamples} resamples)")
    models = list(dict.fromkeys(bars["model"]))
    colours = model_colours(models)
    n_groups = int(bars.groupby("panel")["group"].nunique().max())
    fig = Figure(figsize=(min(MAX_WIDTH_IN, max(4.5, 1.2 + 0.55 * n_groups * max(len(models), 1) ** 0.5)),
                          1.0 + 3.4 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, panel, tag in zip(axes, panels, "ab"):
        b = bars[bars["panel"] == panel]
        groups, ms = list(dict.fromkeys(b["group"])), [m for m in models if m in set(b["model"])]
        w, x = 0.8 / len(ms), np.arange(len(groups))
        for k, m in enumerate(ms):
            t = b[b["model"] == m].set_index("group").reindex(groups)
            xs, v = x + (k - (len(ms) - 1) / 2) * w, t["value_pp"].to_numpy(float)
            ax.bar(xs, v, w, label=m, color=colours[m])
            ci_bars(ax, xs, v, t["ci_low_pp"], t["ci_high_pp"])
            ends = np.where(v >= 0, np.fmax(v, t["ci_high_pp"]), np.fmin(v, t["ci_low_pp"]))
            for xi, vi, yi, n in zip(xs, v, ends, t["n_items"]):
                if np.isfinite(vi):  # n = items behind the bar
                    ax.annotate(f"n={int(n)}", (xi, yi), xytext=(0, 2 if vi >= 0 else -2), textcoords="offset points",
                                ha="center", va="bottom" if vi >= 0 else "top", fontsize=MIN_FONT_PT)
        ax.set_xticks(x, groups, rotation=30, ha="right")
        ax.axhline(0, color="k", lw=0.6)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.15)
        ax.set_ylabel("ΔWER (pp), mean over backgrounds and SNRs")
        ax.set_title((f"({tag}) " if len(panels) > 1 else "") + titles[panel], loc="left")
    axes[0].legend(frameon=False, ncol=min(len(models), 4), loc="lower center", bbox_to_anchor=(0.5, 1.12))
    fig.suptitle("ASR degradation by accent")
    publish(fig, "figure5_accent_degradation")
    fig5 = fig

# %% [markdown]
# ## The steering prompt (Table 5, Figure 6)
#
# <a id="table-5"></a>**Table 5 · Residual Effect Ratio of the steering prompt.** RER = Δ(steering) / (Δ(baseline) +
# 1e-9) as the authors compute it, each Δ on its own task's rows (ASR: mean per-row ΔWER; KWS:
# accuracy over all clean rows − over all noisy rows); KWS with both |Δ| below 1 pp → RER = 1. Our
# paired RER (the same stimuli in both tasks) is beside it.
# RER < 1 means the prompt reduced the noise effect only when Δ(baseline) is clearly positive: the
# flag column marks Δ(baseline) ≤ 0 (the ratio's sign is inverted) or < 1 pp (an unstable ratio of
# small numbers). The 95 % interval (ours) resamples items; resamples whose Δ(baseline) is below
# 1 pp are unusable, and with more than 5 % unusable (or fewer than 10 items) no interval is given.
# For Whisper the prompt is the decoder's initial prompt (a lexical prior, not an instruction).
# `tables/table5_prompt_steering_rer.csv`

# %%
display(rt.table5_display(write_table(t5, "table5_prompt_steering_rer")) if not t5.empty
        else Markdown("_No steering scores: Table 5 not made._"))
if rt.not_applicable_note(ws):
    display(Markdown(rt.not_applicable_note(ws)))
coverage_mark("items", ("asr", "kws", "asr_steer_p5", "kws_steer_p5"))

# %% [markdown]
# <a id="figure-6"></a>**Figure 6 · Residual Effect Ratio per model and task**: Table 5's `rer` as bars with its 95 % CI
# where one exists (1 = the prompt changed nothing); a flagged RER (Δ(baseline) ≤ 0 or < 1 pp) is not drawn as a bar
# but marked "flagged". `figures/figure6_prompt_steering_rer.pdf`

# %%
if t5.empty:
    display(Markdown("_No steering scores: Figure 6 not made._"))
else:
    models = sorted(t5["model"].unique())
    fams = [f for f in ("asr", "kws") if f in set(t5["family"])]
    fig = Figure(figsize=(min(MAX_WIDTH_IN, max(4.0, 1.5 + 0.9 * len(models))), 3.2), layout="constrained")
    ax = fig.subplots()
    w, x = 0.8 / max(len(fams), 1), np.arange(len(models))
    for k, fam in enumerate(fams):
        t = t5[t5["family"] == fam].set_index("model").reindex(models)
        flagged = t["base_flag"].fillna("").astype(str).ne("").to_numpy()
        v = np.where(flagged, np.nan, t["rer"].to_numpy(float))
        xs = x + (k - (len(fams) - 1) / 2) * w
        ax.bar(xs, np.nan_to_num(v), w, label=FAMILY[fam], color=FAMILY_COLOURS[fam])
        ci_bars(ax, xs, v, t["ci_low"], t["ci_high"])
        for xi, vi, fl in zip(xs, v, flagged):
            if not np.isfinite(vi):
                ax.text(xi, 0.02, "flagged" if fl else "n/a", ha="center", va="bottom", rotation=90)
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ok = t5["base_flag"].fillna("").astype(str).eq("").to_numpy()
    rer_top = np.nanmax(np.r_[t5["ci_high"].to_numpy(float)[ok], t5["rer"].to_numpy(float)[ok], 1.0])
    ax.set_ylim(min(0.0, np.nanmin(np.r_[t5["ci_low"].to_numpy(float)[ok], 0.0])), rer_top * 1.25)
    ax.set_xticks(x, models, rotation=20, ha="right")
    ax.set_ylabel("RER = Δ(steering) / Δ(baseline)")
    ax.legend(frameon=False, ncol=2, loc="upper right")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Steering prompt: residual noise effect\n(RER < 1: effect reduced)")
    publish(fig, "figure6_prompt_steering_rer")

# %% [markdown]
# ## Speech recognition per condition
#
# <a id="table-r2"></a>**Table R2 · ASR by SNR, pooled over backgrounds** (and the clean stimuli), per model.
# `tables/conditions_asr.csv`

# %%
rt.condition_display(tables["asr"], ["clean", "overall", "snr"])

# %% [markdown]
# **Table R3 · ASR by background, pooled over SNRs.**

# %%
rt.condition_display(tables["asr"], "background")

# %% [markdown]
# **Table R4 · ASR in every condition (background × SNR)**, collapsed in the report.

# %%
rt.condition_display(tables["asr"], "condition",
                     collapsed=f"Show all {int((tables['asr']['scope'] == 'condition').sum())} ASR conditions")

# %% [markdown]
# **Table R5 · The ASR stimuli that got worst**, one per item (largest ΔWER against the clean version
# of the same item, ties to the higher SNR; responses cut to 30 words, "… +N words").

# %%
rt.worst_display(scores["asr"], "asr")

# %% [markdown]
# ## Keyword spotting per condition
#
# <a id="table-r6"></a>**Table R6 · KWS by SNR, pooled over backgrounds** (and the clean clips), per model.
# `tables/conditions_kws.csv`

# %%
rt.condition_display(tables["kws"], ["clean", "overall", "snr"])

# %% [markdown]
# **Table R7 · KWS by background, pooled over SNRs.**

# %%
rt.condition_display(tables["kws"], "background")

# %% [markdown]
# **Table R8 · KWS in every condition (background × SNR)**, collapsed in the report.

# %%
rt.condition_display(tables["kws"], "condition",
                     collapsed=f"Show all {int((tables['kws']['scope'] == 'condition').sum())} KWS conditions")

# %% [markdown]
# **Table R9 · KWS clips recognised when clean and missed when noisy**, one per item (its
# mildest-SNR flip), mildest SNR first.

# %%
rt.worst_display(scores["kws"], "kws")

# %% [markdown]
# ## Steering-prompt tasks per SNR
#
# **Table R10 · ASR with the steering prompt, by SNR.** `tables/conditions_asr_steer_p5.csv`

# %%
rt.condition_display(tables["asr_steer_p5"], ["clean", "overall", "snr"]) if "asr_steer_p5" in tables \
    else Markdown("_asr_steer_p5 was not scored in this run._")

# %% [markdown]
# **Table R11 · KWS with the steering prompt, by SNR.** `tables/conditions_kws_steer_p5.csv`

# %%
rt.condition_display(tables["kws_steer_p5"], ["clean", "overall", "snr"]) if "kws_steer_p5" in tables \
    else Markdown("_kws_steer_p5 was not scored in this run._")

# %% [markdown]
# ## Silent background segments
#
# A background that is partly digital silence (ESC-50 clips are zero-padded to 5 s) can leave a
# stimulus effectively clean. Such rows (`bg_active` false, measured at stage 5) stay in every
# number above, as the authors' mixer made them. **Table R12 · Noisy rows whose background segment
# was silent, per task and background**; `tables/conditions_<task>_bg_active.csv` repeats the
# per-condition analysis without them.

# %%
inactive = cond.inactive_background_rows(scores)
active_only = cond.write_active_only_tables(ws, scores=scores, **kw)
display(Markdown(f"{int(inactive['n_inactive'].sum())} noisy rows with a silent background segment; "
                 f"analysis without them: {', '.join(f'`tables/{p.name}`' for p in active_only.values()) or 'not needed'}."))
rt.Table(inactive.assign(inactive_share=inactive["inactive_share"].round(3)))

# %% [markdown]
# ## Beyond additive background
#
# Two further condition families run with `make all SUITE=all` (or a comma list such as
# `SUITE=background,channel`); the default `make all` runs the background battery only, and then
# every cell below prints one line. Each family has its own manifests holding the items' clean rows
# too, so ΔWER and ΔAcc pair each stimulus with the clean version of the same item inside the
# family, with the intervals, exact tests and verdicts described above (Benjamini–Hochberg across
# the conditions of the family, task and model).
#
# **Competing speech.** The distractors are real recordings of *other* talkers with their
# transcripts: the Asterisk prompts of Debian's `asterisk-core-sounds-<lang>` packages in French
# (`fr_CA_f_June`), Italian (`it_IT_m_Carlo`, male) and Russian (`ru_RU_f_IvrvoiceRU`). Spanish
# (`es_MX_f_Allison`) is read by the *same voice* as the English Asterisk items: a same-voice,
# other-language control, marked in the tables and dashed in the figure (for the demo items read
# by synthetic voices it is simply another talker). English (`en_US_f_Allison`, `talker_en`) is the
# same-language distractor: the *other* English prompts of the target's own package (its own prompt
# is never played); for the Allison items it is also the same voice, so only there can an
# English-only recogniser write the distractor's words. A distractor is a stream of a language's
# utterances in a seeded order, each at −23 LUFS, 0.2 s apart, starting at a seeded offset before
# the target; the cocktail sums the French, Italian and Russian streams at equal power. The SNR is
# the target over the *total* distractor power, with the background mixer's own formula (target at
# −23 LUFS, gain = √(P_target / (P_distractor · 10^(SNR/10)))), from −10 to +10 dB; each stream of a
# cocktail sits about 4.8 dB below the total.
#
# **Leakage** (MUSA's "interference" error class, measured): the share of the hypothesis words
# (paper normalisation) that occur in the transcript of the distractor utterances heard and not in
# the target's, pooled per condition (Σ leak words / Σ hypothesis words, 95 % bootstrap interval over
# items), beside the number of those words the alignment marks as insertions; for KWS, an answer
# whose first word is a distractor word other than the label. Some words are shared by chance
# ("a", "no", "de"), so every condition also gets its **floor**: the same measure of the items'
# clean hypotheses against the same distractor texts. Leakage above the floor is the distractor's.
# That floor is near 0 whenever the clean transcript is right (the target's own words never count),
# so a second chance baseline stands beside it, **mismatch**: the noisy hypotheses against a
# distractor text they did not hear (the next item's, same languages and SNR). Leakage clearly
# above the mismatch share is content taken from the distractor actually heard.
#
# **Channel.** Each condition is a named, parameterised transform of the clean speech (no
# background is added; `applied_to` = speech; `snr_db` 99 is a marker, not an SNR): telephone band
# (8 kHz, 300–3400 Hz), codecs through ffmpeg (G.711 A-law and μ-law, GSM, AMR-NB, Opus 8 kbit/s),
# packet loss (10 % of 20 ms frames, seeded, zero-filled), clipping (+12/+20/+30 dB then a hard
# clip), low level (−40/−50/−60 dBFS RMS), reverberation (pyroomacoustics rooms, RT60 0.3–1.2 s),
# one echo, a cut head or tail. A condition the local tools cannot run is listed with its reason,
# never replaced.

# %% [markdown]
# **Stale families are not shown.** A condition family whose scores a later run on changed inputs
# left behind (its manifest or stimuli changed since it was scored) is named with its reason and
# left out of Tables F1–F4 and Figure F1: its rows would describe other stimuli.

# %%
from aiplib.analysis import family_results as fr

from aiplib.scoring.families import stale_reasons

family_scores = {}
for cf in fr.TABLE_FAMILIES:  # a family left behind by a later run on changed inputs is named, not shown
    stale = stale_reasons(ws, cf)
    for line in stale:
        print("stale, not shown:", line)
    family_scores[cf] = {} if stale else fr.read_family_scores(ws, cf)
fam_kw = dict(n_resamples=n_resamples, seed=seed, min_diff_pp=min_diff_pp)
print({cf: {t: len(d) for t, d in s.items()} for cf, s in family_scores.items()})

# %% [markdown]
# **Table F1 · Every condition of the families with its parameters and source**; `status` says
# whether it ran here, could run, or was skipped and why. `tables/family_conditions.csv`

# %%
if any(family_scores.values()):
    from aiplib.sources.corpora.asterisk_langs import read_distractor_table

    table = read_distractor_table(ws.distractors_csv, root=ws.root) if ws.distractors_csv.is_file() else None
    listing = fr.conditions_listing(family_scores["competing_speech"].get("asr"), family_scores["channel"].get("asr"),
                                    distractors=table)
    listing.to_csv(tabs / "family_conditions.csv", index=False)
    display(rt.Table(listing))
else:
    print(fr.NOT_RUN)

# %% [markdown]
# **Table F2 · Stage-7 time per condition family** (the last run of each, model loading included).
# `checks/stage7_families.csv`

# %%
times = fr.stage7_times(ws)
display(rt.Table(times)) if any(family_scores.values()) and times is not None else print(fr.NOT_RUN)

# %% [markdown]
# **Table F3 · Competing speech per distractor and SNR**: n items, ASR ΔWER (pp) with its 95 %
# interval and verdict, the leak share of the hypothesis words (%) with its interval, its floor and
# the mismatch baseline, KWS ΔAcc (pp) and the share of KWS answers that are a distractor word (with its floor); *same
# voice* marks the control. Beside the mean ΔWER (the paper's measure), which a few looping transcripts
# ("a a a a …", WER 5 and more) can carry past +100 pp, the robust view: *capped ΔWER*, the mean paired change of
# min(WER, 1) per utterance; *median ΔWER*, the median of the per-stimulus paired changes; *loops*, the
# number of noisy transcripts counted as repetition loops (clean ones are not counted). For KWS, *Δ strict
# acc*, the paired change of the accuracy that counts non-answers wrong (+ = worse, as ΔAcc), and
# *non-answers*, the number of noisy responses that are empty, a refusal or several words. ΔWER and
# ΔAcc stay as the paper defines them; the robust columns stand beside them. `tables/competing_speech.csv`

# %%
if "asr" in family_scores["competing_speech"]:
    competing = fr.write_family_table(ws, "competing_speech", family_scores["competing_speech"], **fam_kw)
    display(fr.competing_display(competing))
else:
    print(fr.NOT_RUN)

# %% [markdown]
# **Figure F1 · Competing speech against SNR**: (a) ASR ΔWER (pp), (b) leak words (% of the
# hypothesis words), one line per distractor language or cocktail with its 95 % bootstrap band; the
# same-voice control is dashed, each line's floor dotted. `figures/figure_competing_speech.pdf`

# %%
if "asr" in family_scores["competing_speech"]:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    from aiplib.analysis.paper import save_figure

    competing_lines = fr.competing_figure_data(competing)
    fig = Figure(figsize=(8.6, 3.4), layout="constrained")
    axes = fig.subplots(1, 2, sharex=True)
    for i, g in competing_lines.groupby("line"):
        color, ls = colormaps["tab10"](i % 10), "--" if g["same_voice_control"].iloc[0] else "-"
        for ax, y, lo, hi in ((axes[0], "delta_wer_pp", "delta_wer_ci_low_pp", "delta_wer_ci_high_pp"),
                              (axes[1], "leak_pct", "leak_ci_low_pct", "leak_ci_high_pct")):
            ax.plot(g["snr_db"], g[y], ls, marker="o", ms=3, color=color, label=g["label"].iloc[0])
            ax.fill_between(g["snr_db"], g[lo], g[hi], color=color, alpha=0.12)  # the 95 % bootstrap band
        axes[1].plot(g["snr_db"], g["leak_floor_pct"], ":", lw=0.8, color=color)  # the leakage floor
    for ax, tag, ylab in zip(axes, "ab", ("ASR ΔWER (pp)", "leak words (% of hypothesis words)")):
        ax.set_xticks(sorted(competing_lines["snr_db"].unique()))
        ax.set_xlabel("SNR, target over distractor (dB)")
        ax.set_ylabel(ylab)
        ax.axhline(0, color="#999999", lw=0.6)
        ax.set_title(f"({tag}) {competing_lines['model'].iloc[0]}", loc="left")
    axes[1].legend(frameon=False, loc="best")
    save_figure(fig, ws.figures_dir, "figure_competing_speech")
    rt.show_figure(ws.results, "figure_competing_speech")
else:
    print(fr.NOT_RUN)

# %% [markdown]
# **Table F4 · Channel conditions**: parameters, what the transform was applied to, n items, WER,
# ΔWER (pp) with its 95 % interval, the exact sign test (BH-adjusted p) and verdict, KWS ΔAcc with
# its interval and verdict (McNemar); conditions that could not run are listed with the reason. The
# robust view stands beside the means as in Table F3: capped ΔWER (min(WER, 1) per utterance,
# paired), median ΔWER, the count of noisy looping transcripts (*loops*), Δ strict accuracy
# (non-answers count wrong) and the count of noisy KWS non-answers. `tables/channel_conditions.csv`

# %%
if "asr" in family_scores["channel"]:
    display(fr.channel_display(fr.write_family_table(ws, "channel", family_scores["channel"], **fam_kw)))
else:
    print(fr.NOT_RUN)

# %% [markdown]
# ## Criteria and the previous run
#
# With a criteria file (`criteria`, format in `aiplib/analysis/criteria.py`) every criterion is checked
# against the condition tables; with a previous run (`previous`) the two runs are paired by (model,
# stimulus id) and every condition that got worse fails (`aiplib.analysis.comparison.compare_runs`,
# written to `tables/comparison.csv`). **Table R13 · Change from the previous run** (clean, overall
# and per SNR; + = worse).

# %%
from aiplib.analysis.comparison import compare_runs
from aiplib.analysis.criteria import check_criteria

failures = check_criteria(ws, criteria or None, previous or None, tables=tables, n_resamples=n_resamples,
                          seed=seed) if (criteria or previous) else None
if failures is None:
    display(Markdown("No criteria file and no previous run were given."))
elif failures:
    display(Markdown(f"**FAILED: {len(failures)} problem(s).**\n\n"
                     + "\n".join(f"- {f['message']}" for f in failures[:200])))
else:
    display(Markdown("**PASSED:** every criterion holds"
                     + (" and no condition got worse than the previous run." if previous else ".")))
if previous:
    comparison = compare_runs(previous, ws, **kw)
    comparison.to_csv(tabs / "comparison.csv", index=False)
    verdict_counts = comparison[comparison["scope"] == "condition"]["verdict"].value_counts()
    display(Markdown(f"Previous run: `{comparison.attrs.get('run_a')}`. Per background × SNR: "
                     + ", ".join(f"{int(verdict_counts.get(v, 0))} {v}" for v in cond.VERDICTS) + "."))
    display(rt.comparison_display(comparison))

# %% [markdown]
# ## Stimuli left out
#
# A decode that failed (an endpoint's refusal, a model error) or never ran is left out of every
# score above; stage 8 counts them per model × task and lists each in
# `results/tables/failed_stimuli.csv`. The next stage-7 run retries them.

# %%
from aiplib.scoring.failures import failure_markdown

Markdown(failure_markdown(pd.read_csv(left_out_csv)) if left_out_csv.is_file() else
         "Stage 8 wrote no table of left-out stimuli (results/tables/failures_by_model_task.csv): re-run stage 8.")

# %% [markdown]
# ## Provenance
#
# The run record (`results/provenance.json`): versions, the normaliser, the bootstrap settings,
# the SHA-256 of each manifest, each model's revision and weights, the numeric path its rows were
# decoded on (CPU, instruction set, GEMM backend, CTranslate2's pin: more than one line for a model
# means its rows come from different paths), the prompt of each task, and the version and `.deb`
# SHA-256 of every Debian package the inputs come from (as stage 1 found them). Every results file
# gets a JSON sidecar (same name, `.json`) with its SHA-256 and this record.

# %%
from aiplib.analysis.provenance import annotate_results

sidecars = annotate_results(ws, seed=seed, n_resamples=n_resamples, level=0.95,
                            extra={"min_diff_pp": float(min_diff_pp)})
rec = json.loads(sidecars[0].read_text())
Markdown("\n".join(f"- {line}" for line in rt.provenance_lines(rec)))

# %% [markdown]
# ## Checks
# The counts add up. In every condition table and for each model, the pairs of the background × SNR
# conditions sum to the overall pairs, and so do those of the SNR rows and of the background rows;
# where the run covered the manifest (no stimulus left out), the overall pairs are items ×
# backgrounds × SNRs of the manifest and Table 2's `n` is the number of backgrounds. The left-out
# table holds: scored + failed + missing = the manifest's stimuli, and scored = the rows of the scores.
# Figure 5 draws an error bar only where a group has an interval (from 10 items), `summary.json` holds the
# numbers of the condition tables, and every number of the Findings is the one in the file it cites.

# %%
from aiplib.io.formats import read_battery_csv

left = pd.read_csv(tabs / "failures_by_model_task.csv") if (tabs / "failures_by_model_task.csv").is_file() else None
if left is not None:
    for r in left.itertuples():
        assert r.n_left_out == r.n_failed + r.n_missing and r.n_scored + r.n_left_out == r.n_stimuli, \
            (f"failures_by_model_task.csv {r.model}/{r.task}: scored {r.n_scored} + failed {r.n_failed} "
             f"+ missing {r.n_missing} ≠ {r.n_stimuli} stimuli")
        if r.task in scores:
            n_rows = int((scores[r.task]["model"] == r.model).sum())
            assert n_rows == r.n_scored, f"{r.model}/{r.task}: {n_rows} rows in results/scores, the left-out table says {r.n_scored} scored"
covered = {(r.model, r.task) for r in left.itertuples() if r.n_left_out == 0} if left is not None else set()
not_covered = []
for task, t in tables.items():
    for model, g in t.groupby("model"):
        overall = int(g.loc[g["scope"] == "overall", "n_pairs"].sum())
        for scope in ("condition", "snr", "background"):
            n = int(g.loc[g["scope"] == scope, "n_pairs"].sum())
            assert n == overall, f"conditions_{task}.csv {model}: the {scope} rows hold {n} pairs, the overall row {overall}"
        if (model, task) not in covered:
            not_covered.append(f"{model}/{task}")
            continue
        man = manifests[g["family"].iloc[0]]
        noisy = man[man["condition"] == "noisy"]
        expect = man["speech_id"].nunique() * noisy["background_id"].nunique() * noisy["snr_db"].nunique()
        assert overall == expect, (f"conditions_{task}.csv {model}: {overall} pairs, but the run covered the manifest: "
                                   f"{man['speech_id'].nunique()} items × {noisy['background_id'].nunique()} backgrounds × "
                                   f"{noisy['snr_db'].nunique()} SNRs = {expect}")
battery = read_battery_csv(ws.battery_csv)
if (tabs / "table2_descriptor_correlations.csv").is_file() and battery is not None:
    t2_csv = pd.read_csv(tabs / "table2_descriptor_correlations.csv")
    n_bg = len(battery)
    assert (t2_csv["n"] <= n_bg).all(), f"table2: n up to {t2_csv['n'].max()}, more than the {n_bg} backgrounds"
    covered_t2 = [all((m, task) in covered for m in (scores[task]["model"].unique() if model == "pooled" else [model]))
                  if task in scores else False for model, task in zip(t2_csv["model"], t2_csv["task"])]
    full = t2_csv[covered_t2]
    wrong = full[full["n"] != n_bg]
    first = wrong.iloc[0] if len(wrong) else None
    assert wrong.empty, f"table2 {first['task']}/{first['model']}/{first['descriptor']}: n {first['n']}, not the {n_bg} backgrounds"
# Figure 5: an interval only from MIN_N_FOR_INTERVAL items, and an error bar only where there is an interval
if has_accents and not t4.empty:
    with_ci = bars["ci_low_pp"].notna()
    assert (bars.loc[with_ci, "n_items"] >= stats.MIN_N_FOR_INTERVAL).all(), "Figure 5: an interval below the threshold"
    drawn = sum(len(c.get_segments()) for ax in fig5.axes for c in ax.collections if isinstance(c, LineCollection))
    assert drawn == int(with_ci.sum()), f"Figure 5 draws {drawn} error bars for {int(with_ci.sum())} intervals"
# results/summary.json holds the clean, noisy and overall numbers of the condition tables (Table R1)
for rec in read_summary(ws):
    g = tables[rec["task"]][tables[rec["task"]]["model"] == rec["model"]]
    o = g[g["scope"] == "overall"].iloc[0]
    assert np.allclose([rec["noisy_pp"], rec["delta_pp"], rec["n_items"]],
                       [o[f"{TASK_FAMILIES[rec['task_family']].summary}_pp"], o["delta_pp"], o["n_items"]]), \
        f"summary.json {rec['model']}/{rec['task']} differs from conditions_{rec['task']}.csv"
# every number of the Findings is the one in the file it cites
CITED = {"table2_descriptor_correlations": ({"task": "task", "model": "model", "descriptor": "subject"}, "r_s"),
         "table4_accent_dwer_item_means": ({"model": "model", "accent_group": "subject"},
                                           "item_mean_delta_wer_pp"),
         "table5_prompt_steering_rer": ({"steer_task": "task", "model": "model"}, "rer"),
         "conditions_asr": ({"scope": "finding", "model": "model"}, "delta_pp"),
         "conditions_kws": ({"scope": "finding", "model": "model"}, "delta_pp")}
for r in found.itertuples():
    if r.source in CITED:
        keys, col = CITED[r.source]
        t = pd.read_csv(tabs / f"{r.source}.csv", keep_default_na=False, na_values=[""])
        sel = t[np.logical_and.reduce([t[k].astype(str) == str(getattr(r, a)) for k, a in keys.items()])]
        if r.finding == "snr":
            sel = sel[sel["snr_db"] == r.subject]
        assert len(sel) == 1 and np.isclose(sel[col].iloc[0], r.value, equal_nan=True), \
            f"Findings: {r.finding} {r.task} {r.model} {r.subject} is {r.value}, {r.source}.csv has {sel[col].tolist()}"
print(f"counts add up in {len(tables)} condition tables"
      + (f"; items × backgrounds × SNRs not checked for {', '.join(not_covered)}: stimuli were left out (a `limit` or failed run)"
         if not_covered else "; every run covered its manifest"))

# %% [markdown]
# ## Glossary
# <a id="glossary"></a>
#
# The terms of this report; the first use of each links here.

# %%
Markdown(rt.glossary_markdown())

# %% [markdown]
# ## How this was run
# <a id="how-this-was-run"></a>
#
# This notebook is the Results section, each table or figure in its own cell under its caption; `make` renders
# the executed copy into `results/report.html` (one self-contained page, code hidden) and `results/report.md`
# (`aiplib.analysis.report.render_report`). Run and saved in JupyterLab, it is the report's source too: `make
# report` re-renders `results/report.html` from the newer of it and the executed record of `make 09`.
# **Reads** `results/scores/`, `descriptors/`, `manifests/` and `inference/*/run_log.jsonl`. **Writes**
# `results/figures/` (PNG + PDF), `results/tables/` (Tables 2–5, `conditions_<task>.csv`),
# `results/summary.json` and `.csv`, `results/provenance.json` and a JSON sidecar next to every results file.
#
# **Condition tables of this run only.** A `conditions_<task>.csv` that an earlier run left under
# `results/tables/` for a task this run did not score is not read: its rows would belong to other
# scores.

# %%
Markdown(tables_text)

# %% [markdown]
# **Partial models in the paper's views.** A model that lacks stimuli of a task another model covers
# whole is kept with every scored row in the `paper` profile (the authors' rule: their tables
# average the rows there are); the `demo` and `custom` profiles leave it out of Figures 2–7 and Tables
# 2–5 (ours: a view pooled over unequal coverage would rest on the part the models share). The
# `partial_models` parameter (`keep`, `leave_out`) overrides the profile's rule.

# %%
Markdown(partial_text)
