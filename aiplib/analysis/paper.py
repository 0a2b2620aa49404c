"""Stage 9: the tidy tables behind Figures 2–7, Tables 2–5 and the Findings (notebook 09 draws and
writes them).

Inputs are ``results/scores/<task>.csv`` (stage 8), ``descriptors/acoustic_descriptors.csv`` and
``descriptors/battery.csv`` (:func:`load_inputs`). Definitions follow the authors'
``scripts/generate_results_new_2.py`` (IvLabs/AIP-Speech); degradation is positive when noise
hurts (ΔWER = WER(noisy) − WER(clean), ΔAcc = acc(clean) − acc(noisy)), in percentage points in
columns ending ``_pp``. Every interval is a 95 % percentile bootstrap over items (backgrounds for
correlations), its ``seed`` and ``n_resamples`` written into the table. No matplotlib here.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from aiplib.analysis import stats
from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.tasks import BASE_TASKS, TASK_FAMILIES, task_file
from aiplib.io.formats import DESCRIPTORS, load_scores, read_battery_csv, read_descriptor_table

#: Steering-prompt task of each family (the authors' prompt 5): ``{"asr": "asr_steer_p5", "kws":
#: "kws_steer_p5"}``.
STEER_TASKS = {
    t["family"]: name for name, t in task_file()["tasks"].items() if t["variant"] == "p5"
}

#: Models left out of Figure 7b, as in the paper (matched lower-cased, ``-`` / ``.`` read as ``_``).
FIG7_KWS_EXCLUDE = ("qwen2_audio_7b",)


def _error_rate_family():
    """The task family measured by an error rate (WER): Table 4 and Figure 5 are about it."""
    for spec in TASK_FAMILIES.values():
        if spec.measure_kind == "error_rate":
            return spec
    raise AiplibError("tasks.yaml has no task family measured by an error rate")


#: The WER task family (:func:`table4_accent_dwer`, :func:`table4_accent_dwer_authors`).
_WER_FAMILY = _error_rate_family()

#: ``results/figures/<name>.png`` / ``.pdf``, as the paper's README names them.
FIGURE_NAMES = (
    "figure2_descriptor_regressions",
    "figure3_descriptor_correlations",
    "figure4_background_ranking",
    "figure5_accent_degradation",
    "figure6_prompt_steering_rer",
    "figure7_snr_performance",
)

#: ``results/tables/<name>.csv``. The names of the authors' README hold their arithmetic:
#: ``table4_accent_dwer`` is their flat mean per accent label (:func:`table4_accent_dwer_authors`);
#: ours, the mean of item means per accent group with intervals (:func:`table4_accent_dwer`), is
#: ``table4_accent_dwer_item_means`` (its ``pooled`` and ``unspecified`` rows in
#: ``table4_accent_dwer_item_means_pooled_unspecified``).
TABLE_NAMES = (
    "table2_descriptor_correlations",
    "table3_descriptor_values",
    "table4_accent_dwer",
    "table4_accent_dwer_item_means",
    "table4_accent_dwer_item_means_pooled_unspecified",
    "table5_prompt_steering_rer",
)

#: Columns of :func:`table2_descriptor_correlations`, in order: ``p`` is the authors' (scipy's
#: t-approximation), ``p_permutation`` ours (exact, permutation or asymptotic: ``p_method``),
#: ``p_bh`` its Benjamini–Hochberg adjustment.
TABLE2_COLUMNS = [
    "task",
    "family",
    "model",
    "descriptor",
    "n",
    "r_s",
    "p",
    "p_permutation",
    "p_method",
    "n_permutations",
    "ci_low",
    "ci_high",
    "ci_usable",
    "p_bh",
    "level",
    "n_resamples",
    "seed",
    "note",
    "r_s_unrounded",
]

#: Columns of :func:`table5_prompt_steering_rer`, in order.
TABLE5_COLUMNS = [
    "model",
    "family",
    "base_task",
    "steer_task",
    "n_items",
    "n_base_rows",
    "n_steer_rows",
    "delta_base_pp",
    "delta_steer_pp",
    "rer",
    "base_flag",
    "ci_low",
    "ci_high",
    "ci_usable",
    "rule",
    "n_pairs",
    "delta_base_paired_pp",
    "delta_steer_paired_pp",
    "rer_paired",
    "rer_paired_ci_low",
    "rer_paired_ci_high",
    "rer_paired_ci_usable",
    "level",
    "n_resamples",
    "seed",
    "note",
]

#: Columns ``accent`` (a raw accent of the ASR manifest) and ``label`` (the name on the authors'
#: accent figure: their ``accent_clean_map``).
AUTHORS_ACCENT_LABELS_FILE = Path(__file__).resolve().parent / "authors_accent_labels.csv"


#: What Figures 2–7 and Tables 2–5 do with a *partial model* (one that lacks stimuli of a task
#: another model covers whole), per profile: ``keep`` every scored row of it (the authors' rule:
#: their tables average whatever rows exist), or ``leave_out`` the model (ours: a view pooled over
#: unequal coverage would rest on the part the models share). Notebook 09's ``partial_models``
#: parameter overrides it.
PARTIAL_MODEL_RULES = {"paper": "keep", "demo": "leave_out", "custom": "leave_out"}


def partial_models_left_out(coverage: pd.DataFrame, rule: str) -> list[str]:
    """The models the paper's views leave out under ``rule`` (:data:`PARTIAL_MODEL_RULES`).

    ``coverage`` holds the background rows of ``results/tables/coverage.csv`` (stage 8: ``model,
    task, complete``). Under ``leave_out`` a model is left out (every task of it) when it is
    incomplete on a task that another model covers whole; under ``keep`` none is. Sorted names.

    Raises
    ------
    AiplibParameterError
        If ``rule`` is neither ``keep`` nor ``leave_out``.
    """
    if rule not in ("keep", "leave_out"):
        raise AiplibParameterError(f"partial_models must be 'keep' or 'leave_out', got {rule!r}")
    if rule == "keep" or coverage.empty:
        return []
    complete = coverage["complete"].astype(bool)
    tasks_covered_whole = set(coverage.loc[complete, "task"])
    partial = coverage[~complete]
    left_out = partial.loc[partial["task"].isin(tasks_covered_whole), "model"]
    return sorted(set(left_out))


def load_inputs(ws) -> tuple[dict, pd.DataFrame | None, pd.DataFrame | None]:
    """``(scores, descriptors, battery)`` of a workspace; descriptors and battery indexed by
    ``bg_id`` (None when missing). The battery gains stage 6's ``audible_snr_excess_db`` (dB,
    ``checks/subaudible.csv``, :func:`aiplib.stimuli.checks.subaudible_backgrounds`) when stage 6
    wrote it.

    Raises
    ------
    AiplibError
        If ``results/scores/asr.csv`` or ``kws.csv`` is missing (run stage 8 first).
    """
    scores = load_scores(ws)
    missing = [t for t in BASE_TASKS.values() if t not in scores]
    if missing:
        raise AiplibError(
            f"stage 9 needs results/scores/{{{','.join(missing)}}}.csv under "
            f"{ws.results}; run stage 8 (scoring) first"
        )
    return (
        scores,
        read_descriptor_table(ws.descriptor_csv, index=True),
        _with_audible_excess(ws, read_battery_csv(ws.battery_csv, index=True)),
    )


#: Column of Table 3 and of the battery (from stage 6's ``checks/subaudible.csv``): how many dB the
#: audible SNR of a background's stimuli lies above the nominal one (its DC / sub-20 Hz share).
AUDIBLE_EXCESS_COLUMN = "audible_snr_excess_db"


def _with_audible_excess(ws, battery):
    """``battery`` (indexed by ``bg_id``) with :data:`AUDIBLE_EXCESS_COLUMN` joined from
    ``checks/subaudible.csv`` when both exist."""
    path = ws.checks / "subaudible.csv"
    if battery is None or not path.is_file():
        return battery
    sub = pd.read_csv(path, dtype={"bg_id": str})
    if AUDIBLE_EXCESS_COLUMN not in sub.columns:
        return battery
    excess = sub.set_index("bg_id")[AUDIBLE_EXCESS_COLUMN].astype(float)
    return battery.assign(**{AUDIBLE_EXCESS_COLUMN: excess.reindex(battery.index)})


def categories(bg_ids, battery) -> list[str]:
    """The battery category of each background (``unknown`` without a battery)."""
    if battery is None or "category" not in battery.columns:
        return ["unknown"] * len(bg_ids)
    return [battery["category"].get(b, "unknown") or "unknown" for b in bg_ids]


def _norm_id(s) -> str:
    return re.sub(r"[-.]", "_", str(s).lower())


# ---------------------------------------------------------------- Table 2, Figures 2 and 3
def _spearmanr(y: pd.Series, x: pd.Series) -> tuple[float, float]:
    """scipy's Spearman ρ and t-approximation p on the common finite backgrounds; NaN with fewer
    than 3 or a constant column."""
    both = pd.concat(
        [s.set_axis(s.index.astype(str)).astype(float) for s in (x, y)], axis=1, join="inner"
    )
    both = both[np.isfinite(both).all(axis=1)]
    if len(both) < 3 or both.nunique().min() < 2:
        return float("nan"), float("nan")
    res = spearmanr(both.iloc[:, 0], both.iloc[:, 1])
    return float(res.statistic), float(res.pvalue)


def table2_descriptor_correlations(
    scores: dict, descriptors: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Table 2: Spearman ρ of each descriptor vs the mean degradation per background.

    The degradation is the authors' flat mean over a background's noisy rows
    (:func:`aiplib.analysis.stats.degradation_by_background`) and the descriptors are rounded as
    theirs first (:func:`aiplib.analysis.stats.round_descriptors`). ``p`` is theirs
    (``scipy.stats.spearmanr``'s t-approximation); ``p_permutation`` is ours (exact or permutation
    up to 20 backgrounds, ``p_method``) and ``p_bh`` its Benjamini–Hochberg adjustment.

    ``scores`` needs ``"asr"`` and ``"kws"``; ``descriptors`` is indexed by ``bg_id``, unrounded;
    ``n_resamples, seed`` are those of the bootstrap over backgrounds.

    Returns
    -------
    pandas.DataFrame [shape=(2 · (n_models + 1) · n_descriptors, 19)]
        :data:`TABLE2_COLUMNS`: :func:`aiplib.analysis.stats.descriptor_correlations`'s columns on
        the rounded descriptors (``model``: ``pooled`` first; its ``p`` renamed ``p_permutation``,
        ``p_bh`` across the descriptors of a task and model), the authors' ``p`` and
        ``r_s_unrounded``.
    """
    rounded = stats.round_descriptors(descriptors)
    frames = []
    for fam, task in BASE_TASKS.items():
        full = stats.degradation_by_background(scores[task], fam)
        deg = full[
            ["pooled"] + [c for c in full.columns if c != "pooled"]
        ]  # attrs (partial, method) kept
        t = stats.descriptor_correlations(
            deg, rounded.reset_index(), n_resamples=n_resamples, seed=seed
        )
        t = t.rename(columns={"p": "p_permutation"})
        t["r_s_unrounded"] = [
            _spearmanr(deg[m], descriptors[d])[0] for m, d in zip(t["model"], t["descriptor"])
        ]
        t["p"] = [_spearmanr(deg[m], rounded[d])[1] for m, d in zip(t["model"], t["descriptor"])]
        t["family"] = fam
        t["task"] = task
        frames.append(t[TABLE2_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def top_descriptors(table2: pd.DataFrame, k: int = 3) -> list[str]:
    """Figure 2's ``k`` descriptors: largest mean of |r_s(ASR)| and |r_s(KWS)| (pooled), rounded to
    3 decimals as the authors (:func:`aiplib.analysis.stats.rank_by_mean_abs_rs`); NaN in either
    task is never picked."""
    pooled = table2[table2["model"] == "pooled"]
    descs = list(dict.fromkeys(pooled["descriptor"]))
    tasks = list(dict.fromkeys(pooled["task"]))
    r = pooled.pivot(index="descriptor", columns="task", values="r_s").reindex(descs)
    if len(tasks) < 2:
        return []
    return list(stats.rank_by_mean_abs_rs(r[tasks[0]], r[tasks[1]]).index[:k])


def descriptor_points(
    scores: dict, descriptors: pd.DataFrame, table2: pd.DataFrame, *, battery=None, k: int = 3
) -> pd.DataFrame:
    """Figure 2's points, one row per (family, top descriptor, background): ``family, task,
    descriptor, bg_id, category, x`` (the descriptor, rounded as the authors), ``y_pp`` (pooled flat
    mean degradation) and the descriptor's pooled Table 2 ``r_s, ci_low, ci_high, p_bh``."""
    top = top_descriptors(table2, k)
    rounded = stats.round_descriptors(descriptors)
    pooled = table2[table2["model"] == "pooled"].set_index(["task", "descriptor"])
    rows = []
    for fam, task in BASE_TASKS.items():
        deg = stats.degradation_by_background(scores[task], fam)["pooled"] * 100
        common = deg.index.intersection(rounded.index)
        for desc in top:
            r = pooled.loc[(task, desc)]
            rows.append(
                pd.DataFrame(
                    {
                        "family": fam,
                        "task": task,
                        "descriptor": desc,
                        "bg_id": list(common),
                        "category": categories(list(common), battery),
                        "x": rounded.loc[common, desc].to_numpy(float),
                        "y_pp": deg.loc[common].to_numpy(float),
                        "r_s": r["r_s"],
                        "ci_low": r["ci_low"],
                        "ci_high": r["ci_high"],
                        "p_bh": r["p_bh"],
                    }
                )
            )
    cols = [
        "family",
        "task",
        "descriptor",
        "bg_id",
        "category",
        "x",
        "y_pp",
        "r_s",
        "ci_low",
        "ci_high",
        "p_bh",
    ]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=cols)


def table3_descriptor_values(
    ranking: pd.DataFrame, descriptors: pd.DataFrame, *, battery=None
) -> pd.DataFrame:
    """Table 3: each background's descriptors (as stored, unrounded) beside its degradation, in the
    authors' order: ascending by ``mean_degradation_pp``, the mean of ASR ΔWER and KWS ΔAcc over the
    tasks the background has (their rule: a background missing one task takes the other's value),
    ties in Figure 4's order.

    ``ranking`` is :func:`background_ranking`'s table (index ``bg_id``); ``descriptors`` indexed by
    ``bg_id``.

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, 8 + n_descriptors)]
        ``rank`` (Figure 4's), ``bg_id, category, mean_degradation_pp`` (over the tasks present),
        ``asr_delta_wer_pp, kws_delta_acc_pp`` (the authors' flat mean),
        ``asr_/kws_…_snr_balanced_pp`` (ours, when the ranking has them),
        ``audible_snr_excess_db`` (dB the audible SNR lies above the nominal one, stage 6's
        ``checks/subaudible.csv``; when ``battery`` has it), the descriptors.
    """
    descs = [c for c in DESCRIPTORS if c in descriptors.columns] or list(descriptors.columns)
    deg = ["asr_delta_wer_pp", "kws_delta_acc_pp"]
    deg += [
        c
        for c in ("asr_delta_wer_snr_balanced_pp", "kws_delta_acc_snr_balanced_pp")
        if c in ranking.columns
    ]
    t = ranking[["rank", *deg]].copy()
    t.insert(
        1,
        "mean_degradation_pp",
        ranking[["asr_delta_wer_pp", "kws_delta_acc_pp"]].mean(axis=1, skipna=True),
    )
    t.insert(1, "category", categories(list(t.index), battery))
    if battery is not None and AUDIBLE_EXCESS_COLUMN in battery.columns:
        t[AUDIBLE_EXCESS_COLUMN] = battery[AUDIBLE_EXCESS_COLUMN].reindex(t.index).to_numpy(float)
        deg.append(AUDIBLE_EXCESS_COLUMN)
    t = t.join(descriptors[descs], how="left")
    t = t.sort_values("mean_degradation_pp", ascending=True, kind="stable", na_position="last")
    return t.reset_index()[["rank", "bg_id", "category", "mean_degradation_pp", *deg, *descs]]


# --------------------------------------------------------------------------------- Figure 4
def _item_bg_means(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """Per (bg_id, item_id) the mean over SNRs and models, items every model has there."""
    noisy = df[(df["bg_id"] != "clean") & df[col].notna()]
    per_model = noisy.groupby(["bg_id", "item_id", "model"])[col].mean().unstack("model")
    per_model = per_model[per_model.notna().all(axis=1)]
    return per_model.mean(axis=1).rename(col).reset_index()


def background_ranking(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Figure 4: degradation per background for ASR and KWS, pooled over models, in the paper's
    order.

    Backgrounds are sorted by the mean of ASR ΔWER and KWS ΔAcc (pp), largest first, those
    without both last (the authors' ranking). The point values are the authors' flat mean over
    the background's noisy rows of every model together; ``*_snr_balanced_pp`` (ours) averages
    items per SNR, then SNRs, then models (NaN when a model lacks the background, named in
    ``note``). Intervals bootstrap the items (each item's mean over models and SNRs, items every
    model has), NaN below :data:`aiplib.analysis.stats.MIN_N_FOR_INTERVAL` items.

    Shape (n_backgrounds, 15), index ``bg_id``: ``rank`` (1 = most harmful),
    ``mean_degradation_pp``, then per family ``asr_delta_wer_pp, asr_ci_low_pp, asr_ci_high_pp,
    asr_ci_usable, asr_delta_wer_snr_balanced_pp`` (KWS: ``kws_delta_acc_…``), ``n_resamples, seed,
    note``.
    """
    out, notes = {}, {}
    for fam, task in BASE_TASKS.items():
        col = TASK_FAMILIES[fam].degradation_column
        deg = stats.degradation_by_background(scores[task], fam)
        balanced = stats.degradation_by_background(scores[task], fam, method="snr_balanced")
        for bg, missing in deg.attrs.get("partial", {}).items():
            notes.setdefault(bg, []).append(
                f"{fam.upper()}: no rows of models {', '.join(missing)} (flat mean over the "
                "others; SNR-balanced value not pooled)"
            )
        point = deg["pooled"] * 100
        lo, hi, use = {}, {}, {}
        for bg, g in _item_bg_means(scores[task], col).groupby("bg_id"):
            if not np.isfinite(point.get(bg, np.nan)):
                continue
            b = stats.bootstrap_ci(
                g[col].to_numpy(float) * 100,
                np.mean,
                n_resamples=n_resamples,
                seed=seed,
                vectorized=True,
            )
            lo[bg], hi[bg], use[bg] = b.ci_low, b.ci_high, b.n_valid
            if b.note:
                notes.setdefault(bg, []).append(f"{fam.upper()}: {b.note}")
        out[f"{fam}_{col}_pp"] = point
        out.update(
            {
                f"{fam}_{k}": pd.Series(v, dtype=float)
                for k, v in (("ci_low_pp", lo), ("ci_high_pp", hi), ("ci_usable", use))
            }
        )
        out[f"{fam}_{col}_snr_balanced_pp"] = balanced["pooled"] * 100
    t = pd.DataFrame(out).rename_axis("bg_id")
    t.insert(0, "mean_degradation_pp", (t["asr_delta_wer_pp"] + t["kws_delta_acc_pp"]) / 2)
    t = t.sort_values("mean_degradation_pp", ascending=False, kind="stable", na_position="last")
    t.insert(0, "rank", np.arange(1, len(t) + 1))
    t[["asr_ci_usable", "kws_ci_usable"]] = (
        t[["asr_ci_usable", "kws_ci_usable"]].fillna(0).astype(int)
    )
    t["n_resamples"], t["seed"] = int(n_resamples), int(seed)
    t["note"] = ["; ".join(notes.get(bg, [])) for bg in t.index]
    return t


# ------------------------------------------------------------------------ Table 4, Figure 5
@lru_cache(maxsize=1)
def authors_accent_labels() -> dict:
    """The authors' accent label table (:data:`AUTHORS_ACCENT_LABELS_FILE`) as {accent: label}."""
    with open(AUTHORS_ACCENT_LABELS_FILE, newline="", encoding="utf-8") as fh:
        return {r["accent"]: r["label"] for r in csv.DictReader(fh)}


def authors_accent_label(accent) -> str | None:
    """The authors' label of a raw accent; a string not in their table is kept as it is; None for a
    missing or empty accent."""
    if accent is None or (isinstance(accent, float) and np.isnan(accent)) or str(accent) == "":
        return None
    return authors_accent_labels().get(str(accent), str(accent))


def table4_accent_dwer_authors(scores: dict) -> pd.DataFrame:
    """Table 4 the authors' way (their ``generate_accent_degradation_plot``;
    ``table4_accent_dwer.csv``, the name of their README): mean ΔWER over the noisy rows per model
    and accent label (:func:`authors_accent_label`), no interval.

    ``scores["asr"]`` needs ``accent`` (or ``accent_group``) and ``delta_wer``. Columns ``model,
    accent_label, accent`` (the raw strings, ``;``-joined), ``n_items, n_rows, mean_delta_wer_pp``,
    sorted by model and label.
    """
    delta = _WER_FAMILY.degradation_column
    df = scores[BASE_TASKS[_WER_FAMILY.name]]
    raw = df["accent"] if "accent" in df.columns else df["accent_group"]
    df = df.assign(_accent=raw.map(lambda v: None if authors_accent_label(v) is None else str(v)))
    df["accent_label"] = df["_accent"].map(authors_accent_label)
    noisy = df[(df["bg_id"] != "clean") & df[delta].notna() & df["accent_label"].notna()]
    cols = ["model", "accent_label", "accent", "n_items", "n_rows", "mean_delta_wer_pp"]
    if noisy.empty:
        return pd.DataFrame(columns=cols)
    g = noisy.groupby(["model", "accent_label"])
    t = pd.DataFrame(
        {
            "accent": g["_accent"].agg(lambda a: ";".join(sorted(set(a)))),
            "n_items": g["item_id"].nunique(),
            "n_rows": g.size(),
            "mean_delta_wer_pp": 100 * g[delta].mean(),
        }
    ).reset_index()
    return t[cols].sort_values(["model", "accent_label"], kind="stable").reset_index(drop=True)


def table4_accent_dwer(
    scores: dict, *, n_resamples: int = 2000, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 4, ours: mean ΔWER per model and accent group (each item averaged over backgrounds and
    SNRs first) with a bootstrap CI over items.

    Returns ``(table4, supplement)`` (``table4_accent_dwer_item_means.csv`` and its
    ``_pooled_unspecified``): accent groups of single models; ``pooled`` (items every model ran,
    averaged over models) per group and ``unspecified`` (no accent group) per model. Columns
    ``model, accent_group, n_items, clean_wer_pp`` (corpus WER of the clean rows),
    ``item_mean_delta_wer_pp`` (the mean of the items' means, pp), ``ci_low_pp, ci_high_pp,
    ci_usable, level, n_resamples, seed, note``.
    """
    delta = _WER_FAMILY.degradation_column
    df = scores[BASE_TASKS[_WER_FAMILY.name]].copy()
    df["accent_group"] = df["accent_group"].fillna("unspecified")
    noisy = df[(df["bg_id"] != "clean") & df[delta].notna()]
    clean = df[df["bg_id"] == "clean"]
    per_item = noisy.groupby(["model", "accent_group", "item_id"])[delta].mean().reset_index()
    wide = per_item.pivot_table(index=["accent_group", "item_id"], columns="model", values=delta)
    complete = wide.notna().all(axis=1)
    pooled = wide[complete].mean(axis=1).rename(delta).reset_index()
    pooled.insert(0, "model", "pooled")
    dropped = wide[~complete].groupby(level="accent_group").size().to_dict()
    rows = []
    for (model, group), g in pd.concat([pooled, per_item]).groupby(
        ["model", "accent_group"], sort=False
    ):
        b = stats.bootstrap_ci(
            g[delta].to_numpy(float) * 100,
            np.mean,
            n_resamples=n_resamples,
            seed=seed,
            vectorized=True,
        )
        c = clean[clean["accent_group"] == group]
        if model != "pooled":
            c = c[c["model"] == model]
        cw = 100 * c["errors"].sum() / c["ref_words"].sum() if c["ref_words"].sum() else np.nan
        notes = [b.note] if b.note else []
        if model == "pooled" and dropped.get(group):
            notes.append(f"{dropped[group]} item(s) not run by every model left out")
        rows.append(
            {
                "model": model,
                "accent_group": group,
                "n_items": len(g),
                "clean_wer_pp": cw,
                "item_mean_delta_wer_pp": b.estimate,
                "ci_low_pp": b.ci_low,
                "ci_high_pp": b.ci_high,
                "ci_usable": b.n_valid,
                "level": b.level,
                "n_resamples": b.n_resamples,
                "seed": b.seed,
                "note": "; ".join(notes),
            }
        )
    t = pd.DataFrame(rows)
    t = (
        t.assign(_o=t["model"] != "pooled")
        .sort_values(["_o", "model", "accent_group"], kind="stable")
        .drop(columns="_o")
    )
    main = (t["model"] != "pooled") & (t["accent_group"] != "unspecified")
    return t[main].reset_index(drop=True), t[~main].reset_index(drop=True)


def accent_bars(table4: pd.DataFrame, authors: pd.DataFrame | None = None) -> pd.DataFrame:
    """Figure 5's bars: ``panel`` (``authors``: :func:`table4_accent_dwer_authors`, no interval;
    ``ours``:
    :func:`table4_accent_dwer`), ``model, group, n_items, value_pp, ci_low_pp, ci_high_pp``; the
      interval is
    NaN where the group has fewer than :data:`aiplib.analysis.stats.MIN_N_FOR_INTERVAL` items or
    none was given."""
    frames = []
    if authors is not None and len(authors):
        frames.append(
            pd.DataFrame(
                {
                    "panel": "authors",
                    "model": authors["model"],
                    "group": authors["accent_label"],
                    "n_items": authors["n_items"],
                    "value_pp": authors["mean_delta_wer_pp"],
                    "ci_low_pp": np.nan,
                    "ci_high_pp": np.nan,
                }
            )
        )
    few = table4["n_items"] < stats.MIN_N_FOR_INTERVAL
    frames.append(
        pd.DataFrame(
            {
                "panel": "ours",
                "model": table4["model"],
                "group": table4["accent_group"],
                "n_items": table4["n_items"],
                "value_pp": table4["item_mean_delta_wer_pp"],
                "ci_low_pp": table4["ci_low_pp"].mask(few),
                "ci_high_pp": table4["ci_high_pp"].mask(few),
            }
        )
    )
    return pd.concat(frames, ignore_index=True)


# ------------------------------------------------------------------------ Table 5, Figure 6
def _authors_rer(fam: str, b: pd.DataFrame, s: pd.DataFrame, *, n_resamples: int, seed: int):
    """The authors' unpaired RER of one model and its item bootstrap (both tasks' rows of an item
    resampled together)."""
    db, nb = stats.unpaired_delta(b, fam)
    ds, ns = stats.unpaired_delta(s, fam)
    sb, ss = stats.unpaired_item_sums(b, fam), stats.unpaired_item_sums(s, fam)
    items = sb.index.union(ss.index)
    sb, ss = sb.reindex(items, fill_value=0.0), ss.reindex(items, fill_value=0.0)
    arrays = tuple(
        t[c].to_numpy(float)
        for t in (sb, ss)
        for c in ("clean_sum", "clean_n", "noisy_sum", "noisy_n")
    )

    def stat(*a, axis=-1, _fam=fam):
        d_base = stats.delta_from_sums(*a[:4], family=_fam, axis=axis)
        d_steer = stats.delta_from_sums(*a[4:], family=_fam, axis=axis)
        return stats.rer(d_steer, d_base, task_family=_fam, usable_only=True)

    res = stats.bootstrap_ci(arrays, stat, n_resamples=n_resamples, seed=seed, vectorized=True)
    return db, ds, nb, ns, len(items), res


def _paired_rer(fam: str, g: pd.DataFrame, col: str, *, n_resamples: int, seed: int):
    """Our paired RER of one model's (baseline, steering) row pairs and its item bootstrap."""
    it = g.groupby("item_id").agg(
        sb=(f"{col}_base", "sum"), ss=(f"{col}_steer", "sum"), n=(f"{col}_base", "size")
    )

    def stat(sb, ss, n, axis=-1, _fam=fam):
        return stats.rer(
            ss.sum(axis) / n.sum(axis),
            sb.sum(axis) / n.sum(axis),
            task_family=_fam,
            usable_only=True,
        )

    pres = (
        stats.bootstrap_ci(
            (it["sb"].to_numpy(float), it["ss"].to_numpy(float), it["n"].to_numpy(float)),
            stat,
            n_resamples=n_resamples,
            seed=seed,
            vectorized=True,
        )
        if len(it)
        else None
    )
    pdb, pds = g[f"{col}_base"].mean(), g[f"{col}_steer"].mean()  # NaN without pairs
    lo, hi, usable = (pres.ci_low, pres.ci_high, pres.n_valid) if pres else (np.nan, np.nan, 0)
    return {
        "n_pairs": len(g),
        "delta_base_paired_pp": 100 * pdb,
        "delta_steer_paired_pp": 100 * pds,
        "rer_paired": stats.rer(pds, pdb, task_family=fam),
        "rer_paired_ci_low": lo,
        "rer_paired_ci_high": hi,
        "rer_paired_ci_usable": usable,
    }, pres


def table5_prompt_steering_rer(
    scores: dict, *, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Table 5: Residual Effect Ratio of the steering prompt per model, ASR and KWS.

    ``rer`` is the authors' (``generate_prompt_rer_plot``): each task's Δ on its own rows, unpaired
    (:func:`aiplib.analysis.stats.unpaired_delta`), ``RER = Δ_steer / (Δ_base + 1e-9)``, KWS 1.0
    when both |Δ| < 1 pp (:func:`aiplib.analysis.stats.rer`). Its CI (ours) resamples items; a
    resample with Δ_base below 1 pp is unusable. ``rer_paired`` (ours) uses the noisy stimuli both
    tasks scored, paired on (model, stimulus_id). ``base_flag``
    (:func:`aiplib.analysis.stats.rer_flag`) marks a Δ_base that is not clearly positive.

    Columns :data:`TABLE5_COLUMNS` (``rule``: ``ratio`` or ``kws_both_below_1pp``); empty without a
    steering task.
    """
    rows = []
    for fam, steer_task in STEER_TASKS.items():
        base_task = BASE_TASKS[fam]
        if steer_task not in scores or base_task not in scores:
            continue
        rows += _table5_family_rows(fam, scores, n_resamples=n_resamples, seed=seed)
    return pd.DataFrame(rows, columns=TABLE5_COLUMNS)


def _noisy_deltas(df: pd.DataFrame, col: str, columns: list[str]) -> pd.DataFrame:
    """``columns`` of the noisy rows of ``df`` with a degradation ``col``."""
    keep = (df["bg_id"] != "clean") & df[col].notna()
    return df.loc[keep, columns]


def _table5_family_rows(fam: str, scores: dict, *, n_resamples: int, seed: int) -> list[dict]:
    """The Table 5 rows of one task family: one per model scored on both its tasks."""
    base_task = BASE_TASKS[fam]
    steer_task = STEER_TASKS[fam]
    col = TASK_FAMILIES[fam].degradation_column
    keys = ["model", "stimulus_id"]
    base_all = scores[base_task]
    steer_all = scores[steer_task]
    b = _noisy_deltas(base_all, col, keys + ["item_id", col])
    s = _noisy_deltas(steer_all, col, keys + [col])
    pairs = b.merge(s, on=keys, suffixes=("_base", "_steer"))
    rows = []
    for model in sorted(set(base_all["model"].astype(str)) & set(steer_all["model"].astype(str))):
        authors = _authors_rer(
            fam,
            base_all[base_all["model"].astype(str) == model],
            steer_all[steer_all["model"].astype(str) == model],
            n_resamples=n_resamples,
            seed=seed,
        )
        paired = _paired_rer(
            fam,
            pairs[pairs["model"].astype(str) == model],
            col,
            n_resamples=n_resamples,
            seed=seed,
        )
        rows.append(_table5_row(fam, model, authors, paired))
    return rows


def _table5_row(fam: str, model: str, authors: tuple, paired: tuple) -> dict:
    """One Table 5 row from :func:`_authors_rer` and :func:`_paired_rer` of one model."""
    db, ds, nb, ns, n_items, res = authors
    paired_columns, pres = paired
    # accuracy: both changes below 1 pp read as no effect (RER 1.0)
    small = (
        TASK_FAMILIES[fam].is_binary
        and abs(ds) < stats.RER_KWS_SMALL
        and abs(db) < stats.RER_KWS_SMALL
    )
    rule = "kws_both_below_1pp" if small else "ratio"
    notes = [res.note]
    if pres and pres.note:
        notes.append(f"paired: {pres.note}")
    return {
        "model": model,
        "family": fam,
        "base_task": BASE_TASKS[fam],
        "steer_task": STEER_TASKS[fam],
        "n_items": n_items,
        "n_base_rows": nb,
        "n_steer_rows": ns,
        "delta_base_pp": 100 * db,
        "delta_steer_pp": 100 * ds,
        "rer": stats.rer(ds, db, task_family=fam),
        "base_flag": "" if rule != "ratio" else stats.rer_flag(db),
        "ci_low": res.ci_low,
        "ci_high": res.ci_high,
        "ci_usable": res.n_valid,
        "rule": rule,
        **paired_columns,
        "level": res.level,
        "n_resamples": res.n_resamples,
        "seed": res.seed,
        "note": "; ".join(n for n in notes if n),
    }


# --------------------------------------------------------------------------------- Figure 7
def snr_curves(scores: dict, *, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Figure 7: mean per-utterance WER and KWS accuracy per model and condition (clean, then SNRs
    high → low), the mean over every stimulus of the condition, as the authors; corpus WER beside.

    Columns ``family, model, condition`` (``clean`` or e.g. ``10 dB``), ``snr_db`` (NaN for clean),
    ``value_pp`` (%), ``ci_low_pp, ci_high_pp, ci_usable`` (bootstrap over items), ``corpus_wer_pp``
    (ASR: Σ errors / Σ reference words; NaN for KWS), ``n_items``, ``in_figure`` (False for the KWS
    rows of :data:`FIG7_KWS_EXCLUDE`).
    """
    rows = []
    excl = {_norm_id(m) for m in FIG7_KWS_EXCLUDE}
    for fam, task in BASE_TASKS.items():
        df = scores[task]
        snrs = sorted(df["snr_db"].dropna().unique(), reverse=True)
        conds = [("clean", np.nan)] + [(f"{s:g} dB", s) for s in snrs]
        spec = TASK_FAMILIES[fam]
        value = spec.measure
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
                    n_resamples=n_resamples,
                    seed=seed,
                    vectorized=True,
                )
                corpus = _corpus_wer_pp(sel, spec)
                rows.append(
                    {
                        "family": fam,
                        "model": model,
                        "condition": cond,
                        "snr_db": snr,
                        "value_pp": res.estimate,
                        "ci_low_pp": res.ci_low,
                        "ci_high_pp": res.ci_high,
                        "ci_usable": res.n_valid,
                        "corpus_wer_pp": corpus,
                        "n_items": len(it),
                        "in_figure": not (spec.is_binary and _norm_id(model) in excl),
                    }
                )
    return pd.DataFrame(rows)


def _corpus_wer_pp(rows: pd.DataFrame, spec) -> float:
    """Σ errors / Σ reference words of ``rows`` in % (NaN without pooled counts or words)."""
    if not spec.pooled:
        return np.nan
    errors, ref_words = spec.pooled
    if not rows[ref_words].sum():
        return np.nan
    return 100 * rows[errors].sum() / rows[ref_words].sum()


# ------------------------------------------------------------------------------ file output
#: PNG text key holding the smallest font size (pt) of a figure's visible text
#: (:func:`save_figure`; read back with PIL's ``Image.open(png).info``).
MIN_FONT_KEY = "aip:min_font_pt"


def figure_min_font_pt(fig) -> float:
    """The smallest font size (pt) of the visible, non-empty text of a matplotlib figure (titles,
    labels, tick labels, legend, annotations); NaN when it holds no text. Shown ``W`` px wide, a
    figure ``w`` inches wide draws ``f`` pt as ``f · W / (72 · w)`` px, whatever its dpi."""
    sizes = [
        float(a.get_fontsize())
        for a in fig.findobj(match=lambda a: hasattr(a, "get_fontsize") and hasattr(a, "get_text"))
        if a.get_visible() and str(a.get_text()).strip()
    ]
    return min(sizes) if sizes else float("nan")


def save_figure(fig, out_dir, name: str, *, formats=("png", "pdf"), dpi: int = 200) -> list[Path]:
    """Write a matplotlib figure as ``<out_dir>/<name>.<fmt>`` for each format; return the paths.
    PDFs carry no creation date, so the same data gives the same bytes; the PNG carries its dpi
    and, under :data:`MIN_FONT_KEY`, the smallest font size of its text
    (:func:`figure_min_font_pt`, pt), so its readability at a given display width can be checked
    from the file."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    min_pt = figure_min_font_pt(fig)
    for fmt in formats:
        if fmt == "pdf":
            meta = {"CreationDate": None}
        elif fmt == "png":
            meta = {MIN_FONT_KEY: f"{min_pt:g}"}
        else:
            meta = {}
        fig.savefig(out_dir / f"{name}.{fmt}", format=fmt, dpi=dpi, metadata=meta)
    return [out_dir / f"{name}.{fmt}" for fmt in formats]
