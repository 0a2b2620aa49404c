"""Notebook 09's section "Beyond additive background": the tables of the condition families.

A family's scores pair every row with the item's clean row of the same family, so its statistics
are those of the background conditions (:func:`aiplib.analysis.conditions.condition_table`), with
the robust view beside the means; every table records ``n_resamples``, ``seed`` and ``level``.
Each family with a table (:attr:`aiplib.core.tasks.ConditionFamily.table`) registers it in
:data:`FAMILY_TABLES`; its list of conditions is in :mod:`aiplib.analysis.family_conditions`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pandas as pd

from aiplib.analysis import conditions as cond
from aiplib.analysis.conditions import KWS_ROBUST_COLUMNS, asr_robust, kws_robust
from aiplib.analysis.conditions.verdicts import pooled_ratio
from aiplib.analysis.family_conditions import CONDITION_LISTINGS
from aiplib.analysis.report_tables import Table, fmt, format_ci, format_cis, format_p
from aiplib.analysis.stats import bootstrap_ci
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import CONDITION_FAMILIES, TASK_FAMILIES
from aiplib.io.formats import parse_bool
from aiplib.scoring.families import family_path, read_family_scores  # noqa: F401 - notebook 09
from aiplib.scoring.leakage import LEAK_ASR_COLUMNS, LEAK_KWS_COLUMNS
from aiplib.stimuli.channel import CHANNEL_CONDITIONS
from aiplib.stimuli.competing import SETTINGS

#: The competing-speech table pairs rows in the condition tables' scope ``condition``
#: (:func:`aiplib.analysis.conditions.condition_table`) ...
COMPETING_SCOPE = "condition"
#: ... and has one row per (model, condition, SNR).
COMPETING_KEY = ["model", "condition_id", "snr_db"]

#: The channel table pairs rows in the condition tables' scope ``background`` ...
CHANNEL_SCOPE = "background"
#: ... and has one row per (model, condition).
CHANNEL_KEY = ["model", "condition_id"]


# ------------------------------------------------------------------------------ per task family
@dataclass(frozen=True)
class _TaskLayout:
    """How one task family's columns sit in a family table.

    Attributes
    ----------
    n_items : str
        Name of its item count (the ASR count is the table's own ``n_items``).
    robust : callable or None
        ``robust(paired, scores, scope)``: its robust view placed after the change (ASR); None when
        it is merged later (KWS, :func:`aiplib.analysis.conditions.kws_robust`).
    robust_cells : tuple of (str, str, str)
        The robust view's display columns: (header, column, ``signed`` or ``count``).
    """

    n_items: str
    robust: Callable | None
    robust_cells: tuple


#: Scorer name (:attr:`aiplib.core.tasks.TaskFamily.scoring`) → its :class:`_TaskLayout`.
_LAYOUTS = {
    "wer": _TaskLayout(
        n_items="n_items",
        robust=asr_robust,
        robust_cells=(
            ("capped ΔWER pp", "delta_wer_capped_pp", "signed"),
            ("median ΔWER pp", "median_delta_wer_pp", "signed"),
            ("loops", "n_loops", "count"),
        ),
    ),
    "kws_first_word": _TaskLayout(
        n_items="n_items_kws",
        robust=None,
        robust_cells=(
            ("Δ strict acc pp", "delta_strict_acc_pp", "signed"),
            ("non-answers", "n_non_answers", "count"),
        ),
    ),
}


def _layout(task: str) -> _TaskLayout:
    """The :class:`_TaskLayout` of a task's family."""
    return _LAYOUTS[TASK_FAMILIES[task].scoring]


# ------------------------------------------------------------------------------ leakage
def _asr_leak_cells(g: pd.DataFrame, kw: dict) -> dict:
    """ASR leakage of one condition: ``n_hyp_words``, the pooled ``leak_share`` (items resampled in
    pairs) and ``leak_insertions_per_item``, each with its interval, and ``note``."""
    leak = g["n_leak_words"].to_numpy(float)
    words = g["n_hyp_words"].to_numpy(float)
    share = None  # no hypothesis words: no share
    if words.sum() > 0:
        share = bootstrap_ci((leak, words), pooled_ratio, vectorized=True, **kw)
    ins = bootstrap_ci(g["n_leak_insertions"].to_numpy(float), np.mean, vectorized=True, **kw)
    cells = dict(n_hyp_words=int(words.sum()))
    if share is None:
        cells.update(leak_share=math.nan, leak_share_ci_low=math.nan, leak_share_ci_high=math.nan)
        share_note = "no hypothesis words"
    else:
        cells.update(
            leak_share=share.estimate,
            leak_share_ci_low=share.ci_low,
            leak_share_ci_high=share.ci_high,
        )
        share_note = share.note
    cells.update(
        leak_insertions_per_item=ins.estimate,
        leak_insertions_ci_low=ins.ci_low,
        leak_insertions_ci_high=ins.ci_high,
        note="; ".join(x for x in (share_note, ins.note) if x),
    )
    return cells


def _kws_leak_cells(g: pd.DataFrame, kw: dict) -> dict:
    """KWS leakage of one condition: ``kws_leak_rate`` with its interval, and ``note``."""
    k = bootstrap_ci(g["kws_leak"].astype(bool).to_numpy(float), np.mean, vectorized=True, **kw)
    return dict(
        kws_leak_rate=k.estimate, kws_leak_ci_low=k.ci_low, kws_leak_ci_high=k.ci_high, note=k.note
    )


#: Scorer name → the score columns :func:`leakage_summary` needs.
_LEAK_NEEDS = {
    "wer": ["n_hyp_words", "n_leak_words", "n_leak_insertions"],
    "kws_first_word": ["kws_leak"],
}
#: Scorer name → the leakage cells of one condition.
_LEAK_CELLS = {"wer": _asr_leak_cells, "kws_first_word": _kws_leak_cells}


def leakage_summary(
    scores: pd.DataFrame,
    *,
    by=("setting", "distractor_languages", "target_snr_db"),
    task: str = "asr",
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> pd.DataFrame:
    """Leakage per condition with percentile bootstrap intervals over items.

    Parameters
    ----------
    scores : pandas.DataFrame
        One row per stimulus: the ``by`` columns and, for the ASR family (``task="asr"``),
        ``n_hyp_words``, ``n_leak_words``, ``n_leak_insertions``; for KWS ``kws_leak``.
    task : str
        A task family (a key of :data:`aiplib.core.tasks.TASK_FAMILIES`).
    n_resamples, seed, level
        Bootstrap settings (:func:`aiplib.analysis.stats.bootstrap_ci`).

    Returns
    -------
    pandas.DataFrame
        Per condition: the ``by`` columns, ``n_items``; ASR ``n_hyp_words``, ``leak_share`` (Σ leak
        words / Σ hypothesis words, items resampled in pairs) with ``leak_share_ci_low/high``,
        ``leak_insertions_per_item`` with ``leak_insertions_ci_low/high``; KWS ``kws_leak_rate``
        with ``kws_leak_ci_low/high``; then ``level, n_resamples, seed, note`` (why an interval is
        NaN).

    Raises
    ------
    AiplibParameterError
        If ``task`` is unknown or a column is missing.
    """
    if task not in TASK_FAMILIES:
        raise AiplibParameterError(f"task must be one of {', '.join(TASK_FAMILIES)}, got {task!r}")
    scoring = TASK_FAMILIES[task].scoring
    missing = [c for c in [*by, *_LEAK_NEEDS[scoring]] if c not in scores.columns]
    if missing:
        raise AiplibParameterError(f"leakage_summary: missing column(s) {missing}")
    kw = dict(n_resamples=n_resamples, seed=seed, level=level)
    rows = []
    for key, g in scores.groupby(list(by), sort=True, dropna=False):
        if not isinstance(key, tuple):
            key = (key,)
        row = dict(zip(by, key), n_items=len(g))
        row.update(_LEAK_CELLS[scoring](g, kw))
        row.update(level=level, n_resamples=int(n_resamples), seed=int(seed))
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ shared steps
def _need(df, cols, what):
    """Raise AiplibParameterError naming the columns of ``cols`` that ``df`` lacks."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise AiplibParameterError(f"{what}: score table lacks column(s) {missing}")


def _task_columns(scores, task, scope, key, values, tests, kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One task's columns of a family table, from :func:`aiplib.analysis.conditions.condition_table`
    in ``scope``: ``key``, ``values``, the paired change with its interval (ASR: then the robust
    view), ``tests``; renamed ``delta_wer_*``, ``asr_*`` or ``n_items_kws``, ``delta_acc_*``,
    ``kws_*`` (the task family's ``degradation_column``, :class:`_TaskLayout`). Also returns the
    condition table (``bg_id`` as ``condition_id``)."""
    a = cond.condition_table(scores, task, scopes=(scope,), **kw).rename(
        columns={"bg_id": "condition_id"}
    )
    change = TASK_FAMILIES[task].degradation_column
    layout = _layout(task)
    names = {
        "delta_pp": f"{change}_pp",
        "ci_low_pp": f"{change}_ci_low_pp",
        "ci_high_pp": f"{change}_ci_high_pp",
    }
    if layout.n_items != "n_items":
        names["n_items"] = layout.n_items
    for c in tests:
        names[c] = f"{task}_{c}"
    parts = [a[key + values + ["delta_pp", "ci_low_pp", "ci_high_pp"]]]
    if layout.robust is not None:
        parts.append(layout.robust(a, scores, scope))
    return pd.concat([*parts, a[tests]], axis=1).rename(columns=names), a


def _noisy(scores: pd.DataFrame) -> pd.DataFrame:
    """The noisy rows of a score table, ``bg_id`` as ``condition_id``."""
    return scores[scores["bg_id"] != "clean"].rename(columns={"bg_id": "condition_id"})


# ------------------------------------------------------------------------------ competing speech
def _leak_share(noisy: pd.DataFrame, leak: str, words: str, key: list, name: str) -> pd.DataFrame:
    """Σ ``leak`` / Σ ``words`` per ``key`` over the rows where ``leak`` is known (NaN without
    words)."""
    s = noisy[noisy[leak].notna()].groupby(key)[[leak, words]].sum()
    return (s[leak] / s[words].where(s[words] > 0)).rename(name).reset_index()


def _condition_meta(noisy: pd.DataFrame) -> pd.DataFrame:
    """Per ``condition_id`` (first-seen order): ``setting``, ``distractor_languages`` and
    ``same_voice_as_target``, True when *any* of its rows is a same-voice row (the flag is per
    item).
    """
    g = noisy.groupby("condition_id", sort=False)
    return pd.DataFrame(
        {
            "setting": g["setting"].first(),
            "distractor_languages": g["distractor_languages"].first(),
            "same_voice_as_target": g["same_voice_as_target"].agg(_any_true),
        }
    )


def _any_true(values) -> bool:
    """Whether any value reads as True (:func:`aiplib.io.formats.parse_bool`)."""
    return any(parse_bool(x) is True for x in values)


#: The KWS columns of the competing table, NaN when there are no KWS scores.
_KWS_COMPETING = [
    "n_items_kws",
    "delta_acc_pp",
    "delta_acc_ci_low_pp",
    "delta_acc_ci_high_pp",
    "kws_p_bh",
    "kws_verdict",
    "kws_leak_pct",
    "kws_leak_ci_low_pct",
    "kws_leak_ci_high_pct",
    "kws_leak_floor_pct",
    "kws_leak_mismatch_pct",
    *KWS_ROBUST_COLUMNS,
]


def _asr_leak_columns(t: pd.DataFrame, noisy: pd.DataFrame, kw: dict) -> pd.DataFrame:
    """``t`` with the ASR leakage (%): ``leak_insertions_per_item``, ``leak_pct`` with its
    interval, ``leak_floor_pct``, ``leak_mismatch_pct``."""
    key = COMPETING_KEY
    lk = leakage_summary(noisy, by=key, task="asr", **kw)
    shares = lk[
        [*key, "leak_share", "leak_share_ci_low", "leak_share_ci_high", "leak_insertions_per_item"]
    ]
    floor = _leak_share(noisy, "floor_n_leak_words", "floor_n_hyp_words", key, "floor")
    mismatch = _leak_share(noisy, "mismatch_n_leak_words", "n_hyp_words", key, "mism")
    t = (
        t.merge(shares, on=key, how="left")
        .merge(floor, on=key, how="left")
        .merge(mismatch, on=key, how="left")
    )
    return t.assign(
        leak_pct=100 * t.pop("leak_share"),
        leak_ci_low_pct=100 * t.pop("leak_share_ci_low"),
        leak_ci_high_pct=100 * t.pop("leak_share_ci_high"),
        leak_floor_pct=100 * t.pop("floor"),
        leak_mismatch_pct=100 * t.pop("mism").astype(float),
    )


def _kws_leak_rates(kn: pd.DataFrame, kw: dict) -> pd.DataFrame:
    """Per key, the KWS leak rate (%) with its interval (an unknown leak counts as none)."""
    key = COMPETING_KEY
    kl = leakage_summary(kn.assign(kws_leak=kn["kws_leak"].fillna(False)), by=key, task="kws", **kw)
    kl = kl[[*key, "kws_leak_rate", "kws_leak_ci_low", "kws_leak_ci_high"]].set_axis(
        [*key, "kws_leak_pct", "kws_leak_ci_low_pct", "kws_leak_ci_high_pct"], axis=1
    )
    kl.iloc[:, len(key) :] *= 100
    return kl


def _kws_leak_baselines(kn: pd.DataFrame) -> pd.DataFrame:
    """Per key, the KWS floor and mismatch leak rates (%) over the rows where they are known:
    ``kws_leak_floor_pct``, ``kws_leak_mismatch_pct``."""
    baselines = []
    for c in ("kws_leak_floor", "kws_leak_mismatch"):
        known = kn[kn[c].notna()].assign(f=kn[c].astype(float))
        rate = known.groupby(COMPETING_KEY)["f"].mean().mul(100)
        baselines.append(rate.rename(f"{c}_pct"))
    return pd.concat(baselines, axis=1).reset_index()


def _kws_competing_columns(kws: pd.DataFrame, kw: dict, min_diff_pp: float) -> pd.DataFrame:
    """The KWS columns of the competing table: ΔAcc with its interval and test, the leak rates (%)
    and the KWS robust view, per key."""
    _need(kws, LEAK_KWS_COLUMNS, "competing_table (KWS)")
    key = COMPETING_KEY
    tests = ["p_bh", "verdict"]
    ks, _ = _task_columns(
        kws, "kws", COMPETING_SCOPE, key, ["n_items"], tests, {**kw, "min_diff_pp": min_diff_pp}
    )
    kn = _noisy(kws)
    return (
        ks.merge(_kws_leak_rates(kn, kw), on=key, how="left")
        .merge(_kws_leak_baselines(kn), on=key, how="left")
        .merge(kws_robust(kws, COMPETING_SCOPE, **kw), on=key, how="left")
    )


def _competing_order(t: pd.DataFrame, meta: pd.DataFrame) -> pd.DataFrame:
    """Rows by model, then setting (:data:`aiplib.stimuli.competing.SETTINGS`), then the manifest's
    condition order (single languages, then the cocktail), then SNR."""
    order = {c: i for i, c in enumerate(meta.index)}
    s_order = {s: i for i, s in enumerate(SETTINGS)}
    return (
        t.assign(_s=t["setting"].map(s_order).fillna(9), _c=t["condition_id"].map(order))
        .sort_values(["model", "_s", "_c", "snr_db"])
        .drop(columns=["_s", "_c"])
        .reset_index(drop=True)
    )


def competing_table(
    asr: pd.DataFrame,
    kws: pd.DataFrame | None = None,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP,
) -> pd.DataFrame:
    """Per model × distractor condition × SNR: ΔWER, leakage and its baselines, ΔAcc, KWS leak rate.

    Parameters
    ----------
    asr : pandas.DataFrame
        Competing-speech ASR scores: the columns of
        :func:`aiplib.analysis.conditions.condition_table`, ``setting, distractor_languages,
        same_voice_as_target`` and :data:`aiplib.scoring.leakage.LEAK_ASR_COLUMNS`.
    kws : pandas.DataFrame, optional
        The KWS scores (:data:`aiplib.scoring.leakage.LEAK_KWS_COLUMNS`); without them the KWS
        columns are NaN.
    n_resamples, seed, level, min_diff_pp
        Bootstrap and verdict settings (recorded in every row).

    Returns
    -------
    pandas.DataFrame
        One row per (model, condition_id, snr_db in dB): ``setting, distractor_languages,
        same_voice_control, n_items``, ``delta_wer_pp`` with its interval, the ASR robust view,
        ``asr_p_bh, asr_verdict``; ``leak_pct`` with ``leak_ci_low_pct / _high_pct``,
        ``leak_floor_pct``, ``leak_mismatch_pct``, ``leak_insertions_per_item``; ``n_items_kws,
        delta_acc_pp`` with its interval, ``kws_p_bh, kws_verdict, kws_leak_pct`` with its interval,
        ``kws_leak_floor_pct, kws_leak_mismatch_pct``, the KWS robust view; ``level, n_resamples,
        seed, note`` (% and pp).

    Raises
    ------
    AiplibParameterError
        If a needed column is missing.
    """
    _need(
        asr,
        ["setting", "distractor_languages", "same_voice_as_target", *LEAK_ASR_COLUMNS],
        "competing_table",
    )
    kw = dict(n_resamples=n_resamples, seed=seed, level=level)
    key = COMPETING_KEY
    t, a = _task_columns(
        asr,
        "asr",
        COMPETING_SCOPE,
        key,
        ["n_items"],
        ["p_bh", "verdict"],
        {**kw, "min_diff_pp": min_diff_pp},
    )
    t["note"] = a["note"]
    noisy = _noisy(asr)
    t = _asr_leak_columns(t, noisy, kw)
    meta = _condition_meta(noisy)
    if kws is not None and not kws.empty:
        t = t.merge(_kws_competing_columns(kws, kw, min_diff_pp), on=key, how="outer")
        meta = pd.concat([meta, _condition_meta(_noisy(kws))])
        meta = meta[~meta.index.duplicated()]
    else:
        t[_KWS_COMPETING] = math.nan
    m = meta.reindex(t["condition_id"])
    t.insert(2, "setting", m["setting"].to_numpy())
    t.insert(3, "distractor_languages", m["distractor_languages"].to_numpy())
    t.insert(4, "same_voice_control", [parse_bool(v) is True for v in m["same_voice_as_target"]])
    t = t.assign(level=float(level), n_resamples=int(n_resamples), seed=int(seed))
    t["note"] = t.pop("note").fillna("")
    return _competing_order(t, meta)


def competing_figure_data(table: pd.DataFrame, *, model: str | None = None) -> pd.DataFrame:
    """The tidy table notebook 09 draws Figure F1 from: the rows of ``model`` (default the first in
    name order) of :func:`competing_table` ``table``: ``model, condition_id, snr_db`` (dB), ``line``
    (0, 1 … per condition in table order), ``same_voice_control``, ``label`` (``<condition> (same
    voice)`` for the control), then ``delta_wer_pp, delta_wer_ci_low_pp, delta_wer_ci_high_pp,
    leak_pct, leak_ci_low_pct, leak_ci_high_pct, leak_floor_pct`` (float), sorted by line then SNR.

    Raises
    ------
    AiplibParameterError
        If the table is empty.
    """
    if table.empty:
        raise AiplibParameterError("competing_figure_data: the table is empty")
    model = model or sorted(table["model"].unique())[0]
    t = table[table["model"] == model].copy()
    t["line"] = t.groupby("condition_id", sort=False).ngroup()
    t["same_voice_control"] = (
        t.groupby("condition_id", sort=False)["same_voice_control"].transform("first").astype(bool)
    )
    t["label"] = np.where(
        t["same_voice_control"], t["condition_id"] + " (same voice)", t["condition_id"]
    )
    values = [
        "delta_wer_pp",
        "delta_wer_ci_low_pp",
        "delta_wer_ci_high_pp",
        "leak_pct",
        "leak_ci_low_pct",
        "leak_ci_high_pct",
        "leak_floor_pct",
    ]
    t[values] = t[values].astype(float)
    return (
        t[["model", "condition_id", "snr_db", "line", "same_voice_control", "label", *values]]
        .sort_values(["line", "snr_db"], kind="stable")
        .reset_index(drop=True)
    )


# ------------------------------------------------------------------------------ channel
def _params(v) -> str:
    """``condition_params`` JSON as ``key=value, …`` (the ``transform`` first), text as written."""
    try:
        p = json.loads(v) if isinstance(v, str) else dict(v)
    except (ValueError, TypeError):
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
    return ", ".join(
        f"{k}={p[k]:g}" if isinstance(p[k], float) else f"{k}={p[k]}"
        for k in sorted(p, key=lambda k: (k != "transform", k))
    )


def _channel_meta(t: pd.DataFrame, asr: pd.DataFrame, kws: pd.DataFrame | None) -> None:
    """Insert ``parameters``, ``applied_to`` (from the score rows' first noisy row per condition)
    and ``status`` (``run``) into ``t`` after ``model, condition_id``."""
    rows = pd.concat([d for d in (asr, kws) if d is not None])
    rows = rows[rows["bg_id"] != "clean"].drop_duplicates("bg_id").set_index("bg_id")
    params = rows["condition_params"].reindex(t["condition_id"])
    t.insert(2, "parameters", [_params(v) for v in params])
    t.insert(3, "applied_to", rows["applied_to"].reindex(t["condition_id"]).to_numpy())
    t.insert(4, "status", "run")


def _skipped_rows(skipped: pd.DataFrame) -> pd.DataFrame:
    """The conditions that cannot run here as table rows (``status`` ``skipped``, the reason as
    ``note``)."""
    return pd.DataFrame(
        {
            "model": "",
            "condition_id": skipped["condition"].astype(str),
            "parameters": "",
            "applied_to": "",
            "status": "skipped",
            "note": skipped["reason"].astype(str),
        }
    )


def _channel_order(t: pd.DataFrame) -> pd.DataFrame:
    """Rows in :data:`aiplib.stimuli.channel.CHANNEL_CONDITIONS` order, then any other condition in
    table order; by model within a condition; ``condition_id`` renamed ``condition``."""
    seen = list(dict.fromkeys(t["condition_id"]))
    names = [n for n in CHANNEL_CONDITIONS if n in seen] + [
        n for n in seen if n not in CHANNEL_CONDITIONS
    ]
    order = {n: i for i, n in enumerate(names)}
    return (
        t.assign(_o=t["condition_id"].map(order))
        .sort_values(["_o", "model"])
        .drop(columns="_o")
        .rename(columns={"condition_id": "condition"})
        .reset_index(drop=True)
    )


def channel_table(
    asr: pd.DataFrame,
    kws: pd.DataFrame | None = None,
    *,
    skipped: pd.DataFrame | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP,
) -> pd.DataFrame:
    """Per model × channel condition: parameters, ΔWER / ΔAcc with intervals, exact test, verdict.

    Parameters
    ----------
    asr, kws : pandas.DataFrame
        Channel scores with ``condition_params`` and ``applied_to``; ``kws`` optional.
    skipped : pandas.DataFrame, optional
        ``manifests/channel/skipped.csv`` (``condition, reason``): rows with ``status`` ``skipped``.
    n_resamples, seed, level, min_diff_pp
        As :func:`aiplib.analysis.conditions.condition_table` (scope ``background``).

    Returns
    -------
    pandas.DataFrame
        ``model, condition, parameters, applied_to, status, n_items, wer_pp, clean_wer_pp,
        delta_wer_pp`` with its interval, the ASR robust view, ``asr_test, asr_p_bh, asr_verdict``;
        with ``kws``: ``n_items_kws, acc_pp, clean_acc_pp, delta_acc_pp`` with its interval,
        ``kws_test, kws_p_bh, kws_verdict`` and the KWS robust view; ``level, n_resamples, seed,
        note``.

    Raises
    ------
    AiplibParameterError
        If ``condition_params`` or ``applied_to`` is missing.
    """
    _need(asr, ["condition_params", "applied_to"], "channel_table")
    kw = dict(n_resamples=n_resamples, seed=seed, level=level, min_diff_pp=min_diff_pp)
    key = CHANNEL_KEY
    tests = ["test", "p_bh", "verdict"]
    t, a = _task_columns(
        asr, "asr", CHANNEL_SCOPE, key, ["n_items", "wer_pp", "clean_wer_pp"], tests, kw
    )
    t["note"] = a["note"].fillna("")
    if kws is not None and not kws.empty:
        k, _ = _task_columns(
            kws, "kws", CHANNEL_SCOPE, key, ["n_items", "acc_pp", "clean_acc_pp"], tests, kw
        )
        robust = kws_robust(kws, CHANNEL_SCOPE, n_resamples=n_resamples, seed=seed, level=level)
        t = t.merge(k.merge(robust, on=key, how="left"), on=key, how="outer")
    _channel_meta(t, asr, kws)
    if skipped is not None and len(skipped):
        t = pd.concat([t, _skipped_rows(skipped)], ignore_index=True)
    t = t.assign(level=float(level), n_resamples=int(n_resamples), seed=int(seed))
    t["note"] = t.pop("note").fillna("")
    return _channel_order(t)


# ------------------------------------------------------------------------------ every condition
def conditions_listing(
    competing: pd.DataFrame | None = None,
    channel: pd.DataFrame | None = None,
    *,
    distractors: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every condition of the families with a table, with its parameters and source (the report's
    list): each family's listing (:data:`aiplib.analysis.family_conditions.CONDITION_LISTINGS`) on
    its score or manifest rows ``competing`` / ``channel`` (default the demo's grid,
    ``available``), voices and sources from ``distractors`` (default the demo's). Columns ``family,
    condition, parameters, applied_to, source, status`` (``run`` / ``available`` / ``skipped:
    <reason>``).
    """
    rows = {"competing_speech": competing, "channel": channel}
    listed = []
    for family in FAMILY_TABLES:
        listed += CONDITION_LISTINGS[family](rows.get(family), distractors=distractors)
    return pd.DataFrame(listed)


# ------------------------------------------------------------------------------ notebook 09
#: What a cell of notebook 09's family section prints when its family has no scores.
NOT_RUN = "not run: make all SUITE=all"


def stage7_times(ws) -> pd.DataFrame | None:
    """The last stage-7 time of each family (``checks/stage7_families.csv``, rows with ``n_run >
    0``), or None when the file does not exist."""
    p = Path(ws.root) / "checks" / "stage7_families.csv"
    if not p.is_file():
        return None
    t = pd.read_csv(p, dtype=str, keep_default_na=False)
    if "n_run" in t.columns:
        t = t[pd.to_numeric(t["n_run"], errors="coerce").fillna(0) > 0]
    return t.drop_duplicates("condition_family", keep="last").reset_index(drop=True)


def family_table(
    condition_family: str,
    scores: dict,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP,
    skipped: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The table of a condition family (:data:`FAMILY_TABLES`) from its scores (``{"asr", "kws"}``:
    score tables, ``kws`` optional).

    The settings go to :func:`competing_table` or :func:`channel_table`; ``skipped`` (the channel's
    conditions that cannot run here) only when given.

    Raises
    ------
    KeyError
        For a family without a table (``background``).
    """
    settings = dict(n_resamples=n_resamples, seed=seed, level=level, min_diff_pp=min_diff_pp)
    if skipped is not None:
        settings["skipped"] = skipped
    return FAMILY_TABLES[condition_family].build(scores["asr"], scores.get("kws"), **settings)


def write_family_table(
    ws,
    condition_family: str,
    scores: dict,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP,
) -> pd.DataFrame:
    """:func:`family_table` (with ``manifests/<cf>/skipped.csv`` when present) written to
    ``results/tables/<table>.csv`` (:attr:`aiplib.core.tasks.ConditionFamily.table`); returns the
    table."""
    sk = family_path(ws, condition_family, "manifests", "skipped.csv")
    skipped = None
    if Path(sk).is_file():
        skipped = pd.read_csv(sk, dtype=str, keep_default_na=False)
    t = family_table(
        condition_family,
        scores,
        n_resamples=n_resamples,
        seed=seed,
        level=level,
        min_diff_pp=min_diff_pp,
        skipped=skipped,
    )
    Path(ws.tables_dir).mkdir(parents=True, exist_ok=True)
    name = CONDITION_FAMILIES[condition_family].table
    t.to_csv(Path(ws.tables_dir) / f"{name}.csv", index=False)
    return t


# ------------------------------------------------------------------------------ display
def _signed(v) -> str:
    """A signed value without interval."""
    return format_ci(v, math.nan, math.nan)


def _count(v) -> str:
    """A count."""
    return fmt(v, ".0f")


#: The kind of a robust display column → its formatter.
_CELL_FORMATS = {"signed": _signed, "count": _count}


def _robust_cells(t: pd.DataFrame, task: str) -> dict:
    """The robust view's display columns of a task (:class:`_TaskLayout`); "–" where not
    computed."""
    cells = {}
    for header, column, kind in _layout(task).robust_cells:
        if column in t:
            cells[header] = t[column].map(_CELL_FORMATS[kind])
        else:
            cells[header] = "–"
    return cells


def competing_display(t: pd.DataFrame):
    """:func:`competing_table` formatted for the report (a
    :class:`aiplib.analysis.report_tables.Table`)."""
    return Table(
        pd.DataFrame(
            {
                "model": t["model"],
                "distractor": t["condition_id"],
                "SNR (dB)": t["snr_db"].map(lambda v: f"{v:g}"),
                "control": np.where(t["same_voice_control"], "same voice", ""),
                "n": t["n_items"].map(lambda v: fmt(v, ".0f")),
                "ΔWER pp [95% CI]": format_cis(
                    t, "delta_wer_pp", "delta_wer_ci_low_pp", "delta_wer_ci_high_pp"
                ),
                **_robust_cells(t, "asr"),
                "ASR verdict": t["asr_verdict"],
                "leak % [95% CI]": format_cis(
                    t, "leak_pct", "leak_ci_low_pct", "leak_ci_high_pct", signed=False
                ),
                "floor %": t["leak_floor_pct"].map(fmt),
                "mismatch %": t["leak_mismatch_pct"].map(fmt),
                "ΔAcc pp [95% CI]": format_cis(
                    t, "delta_acc_pp", "delta_acc_ci_low_pp", "delta_acc_ci_high_pp"
                ),
                "KWS leak % [95% CI]": format_cis(
                    t, "kws_leak_pct", "kws_leak_ci_low_pct", "kws_leak_ci_high_pct", signed=False
                ),
                "KWS floor %": t["kws_leak_floor_pct"].map(fmt),
                **_robust_cells(t, "kws"),
            }
        )
    )


def channel_display(t: pd.DataFrame):
    """:func:`channel_table` formatted for the report."""
    return Table(
        pd.DataFrame(
            {
                "model": t["model"],
                "condition": t["condition"],
                "parameters": t["parameters"],
                "applied to": t["applied_to"],
                "n": t["n_items"].map(lambda v: fmt(v, ".0f")),
                "WER %": t["wer_pp"].map(fmt) if "wer_pp" in t else "",
                "ΔWER pp [95% CI]": format_cis(
                    t, "delta_wer_pp", "delta_wer_ci_low_pp", "delta_wer_ci_high_pp"
                ),
                **_robust_cells(t, "asr"),
                "p (BH)": t["asr_p_bh"].map(format_p),
                "ASR verdict": t["asr_verdict"].fillna(t["status"]),
                "ΔAcc pp [95% CI]": format_cis(
                    t, "delta_acc_pp", "delta_acc_ci_low_pp", "delta_acc_ci_high_pp"
                )
                if "delta_acc_pp" in t
                else "–",
                "KWS verdict": t["kws_verdict"].fillna("") if "kws_verdict" in t else "",
                **_robust_cells(t, "kws"),
                "note": t["note"],
            }
        )
    )


# ------------------------------------------------------------------------------ the registry
@dataclass(frozen=True)
class FamilyTable:
    """Notebook 09's table of one condition family.

    Attributes
    ----------
    scope : str
        The :func:`aiplib.analysis.conditions.condition_table` scope its rows pair in.
    key : list of str
        The columns of one row.
    build : callable
        ``build(asr, kws, *, n_resamples, seed, level, min_diff_pp[, skipped]) -> DataFrame``.
    display : callable
        ``display(table) -> aiplib.analysis.report_tables.Table``, formatted for the report.
    """

    scope: str
    key: list
    build: Callable
    display: Callable


#: Condition family name → its :class:`FamilyTable`, for the families with a table
#: (:attr:`aiplib.core.tasks.ConditionFamily.table`), in report order.
FAMILY_TABLES: Mapping[str, FamilyTable] = MappingProxyType(
    {
        "competing_speech": FamilyTable(
            COMPETING_SCOPE, COMPETING_KEY, competing_table, competing_display
        ),
        "channel": FamilyTable(CHANNEL_SCOPE, CHANNEL_KEY, channel_table, channel_display),
    }
)
assert tuple(FAMILY_TABLES) == tuple(f for f, c in CONDITION_FAMILIES.items() if c.table)

#: The condition families with a table of their own, in report order (notebook 09 reads it).
TABLE_FAMILIES = tuple(FAMILY_TABLES)
