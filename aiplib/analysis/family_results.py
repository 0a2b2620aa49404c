"""Notebook 09's section "Beyond additive background": the tables of the condition families.

A family's scores pair every row with the item's clean row of the same family, so its statistics
are those of the background conditions (:func:`aiplib.analysis.conditions.condition_table`), with
the robust view beside the means; every table records ``n_resamples``, ``seed`` and ``level``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis import conditions as cond
from aiplib.analysis.conditions import KWS_ROBUST_COLUMNS, asr_robust, kws_robust
from aiplib.analysis.conditions.verdicts import pooled_ratio
from aiplib.analysis.report_tables import Table, format_ci, format_cis, format_p, fmt
from aiplib.analysis.stats import bootstrap_ci
from aiplib.core.errors import AiplibParameterError
from aiplib.io.formats import parse_bool
from aiplib.scoring.families import family_path, read_family_scores  # noqa: F401 - re-exported
from aiplib.scoring.family_columns import TABLE_FAMILIES
from aiplib.stimuli import competing as comp
from aiplib.stimuli.channel import CHANNEL_CONDITIONS
from aiplib.stimuli.channel import TABLE as CHANNEL_TABLE
from aiplib.stimuli.competing import LEAK_ASR_COLUMNS, LEAK_KWS_COLUMNS
from aiplib.stimuli.families import FAMILY_MODULES as REGISTRY


# ------------------------------------------------------------------------------ competing speech
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
        One row per stimulus: the ``by`` columns and, for ``task="asr"`` (or ``"kws"``),
        ``n_hyp_words``, ``n_leak_words``, ``n_leak_insertions`` (``kws_leak``).
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
    need = {"asr": ["n_hyp_words", "n_leak_words", "n_leak_insertions"], "kws": ["kws_leak"]}
    if task not in need:
        raise AiplibParameterError(f"task must be 'asr' or 'kws', got {task!r}")
    if missing := [c for c in [*by, *need[task]] if c not in scores.columns]:
        raise AiplibParameterError(f"leakage_summary: missing column(s) {missing}")
    kw = dict(n_resamples=n_resamples, seed=seed, level=level)
    rows = []
    for key, g in scores.groupby(list(by), sort=True, dropna=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)), n_items=len(g))
        if task == "asr":
            leak, words = g["n_leak_words"].to_numpy(float), g["n_hyp_words"].to_numpy(float)
            row["n_hyp_words"] = int(words.sum())
            r = (
                bootstrap_ci((leak, words), pooled_ratio, vectorized=True, **kw)
                if words.sum() > 0
                else None
            )
            ins = bootstrap_ci(
                g["n_leak_insertions"].to_numpy(float), np.mean, vectorized=True, **kw
            )
            row.update(
                zip(
                    ("leak_share", "leak_share_ci_low", "leak_share_ci_high"),
                    (r.estimate, r.ci_low, r.ci_high) if r else (math.nan,) * 3,
                ),
                leak_insertions_per_item=ins.estimate,
                leak_insertions_ci_low=ins.ci_low,
                leak_insertions_ci_high=ins.ci_high,
                note="; ".join(
                    x for x in ((r.note if r else "no hypothesis words"), ins.note) if x
                ),
            )
        else:
            k = bootstrap_ci(
                g["kws_leak"].astype(bool).to_numpy(float), np.mean, vectorized=True, **kw
            )
            row.update(
                kws_leak_rate=k.estimate,
                kws_leak_ci_low=k.ci_low,
                kws_leak_ci_high=k.ci_high,
                note=k.note,
            )
        row.update(level=level, n_resamples=int(n_resamples), seed=int(seed))
        rows.append(row)
    return pd.DataFrame(rows)


def _need(df, cols, what):
    if miss := [c for c in cols if c not in df.columns]:
        raise AiplibParameterError(f"{what}: score table lacks column(s) {miss}")


def _task_columns(scores, task, scope, key, values, tests, kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One task's columns of a family table, from :func:`aiplib.analysis.conditions.condition_table`
    in ``scope``: ``key``, ``values``, the paired change with its interval (ASR: then the robust
    view), ``tests``; renamed ``delta_wer_*``, ``asr_*`` or ``n_items_kws``, ``delta_acc_*``,
    ``kws_*``. Also returns the condition table (``bg_id`` as ``condition_id``)."""
    a = cond.condition_table(scores, task, scopes=(scope,), **kw).rename(
        columns={"bg_id": "condition_id"}
    )
    m = "wer" if task == "asr" else "acc"
    names = {
        "delta_pp": f"delta_{m}_pp",
        "ci_low_pp": f"delta_{m}_ci_low_pp",
        "ci_high_pp": f"delta_{m}_ci_high_pp",
        **({} if task == "asr" else {"n_items": "n_items_kws"}),
        **{c: f"{task}_{c}" for c in tests},
    }
    parts = [a[key + values + ["delta_pp", "ci_low_pp", "ci_high_pp"]]]
    parts += [asr_robust(a, scores, scope)] if task == "asr" else []
    return pd.concat([*parts, a[tests]], axis=1).rename(columns=names), a


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
            "same_voice_as_target": g["same_voice_as_target"].agg(
                lambda v: any(parse_bool(x) is True for x in v)
            ),
        }
    )


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
        same_voice_as_target`` and :data:`LEAK_ASR_COLUMNS`.
    kws : pandas.DataFrame, optional
        The KWS scores (:data:`LEAK_KWS_COLUMNS`); without them the KWS columns are NaN.
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
    key, scope = comp.TABLE["key"], comp.TABLE["scope"]
    t, a = _task_columns(
        asr, "asr", scope, key, ["n_items"], ["p_bh", "verdict"], {**kw, "min_diff_pp": min_diff_pp}
    )
    t["note"] = a["note"]
    noisy = asr[asr["bg_id"] != "clean"].rename(columns={"bg_id": "condition_id"})
    lk = leakage_summary(noisy, by=key, task="asr", **kw)
    t = (
        t.merge(
            lk[
                [
                    *key,
                    "leak_share",
                    "leak_share_ci_low",
                    "leak_share_ci_high",
                    "leak_insertions_per_item",
                ]
            ],
            on=key,
            how="left",
        )
        .merge(
            _leak_share(noisy, "floor_n_leak_words", "floor_n_hyp_words", key, "floor"),
            on=key,
            how="left",
        )
        .merge(
            _leak_share(noisy, "mismatch_n_leak_words", "n_hyp_words", key, "mism"),
            on=key,
            how="left",
        )
    )
    t = t.assign(
        leak_pct=100 * t.pop("leak_share"),
        leak_ci_low_pct=100 * t.pop("leak_share_ci_low"),
        leak_ci_high_pct=100 * t.pop("leak_share_ci_high"),
        leak_floor_pct=100 * t.pop("floor"),
        leak_mismatch_pct=100 * t.pop("mism").astype(float),
    )
    meta = _condition_meta(noisy)
    if kws is not None and not kws.empty:
        _need(kws, LEAK_KWS_COLUMNS, "competing_table (KWS)")
        ks, _ = _task_columns(
            kws,
            "kws",
            scope,
            key,
            ["n_items"],
            ["p_bh", "verdict"],
            {**kw, "min_diff_pp": min_diff_pp},
        )
        kn = kws[kws["bg_id"] != "clean"].rename(columns={"bg_id": "condition_id"})
        kl = leakage_summary(
            kn.assign(kws_leak=kn["kws_leak"].fillna(False)), by=key, task="kws", **kw
        )
        kl = kl[[*key, "kws_leak_rate", "kws_leak_ci_low", "kws_leak_ci_high"]].set_axis(
            [*key, "kws_leak_pct", "kws_leak_ci_low_pct", "kws_leak_ci_high_pct"], axis=1
        )
        kl.iloc[:, len(key) :] *= 100
        kf = pd.concat(
            [
                kn[kn[c].notna()]
                .assign(f=kn[c].astype(float))
                .groupby(key)["f"]
                .mean()
                .mul(100)
                .rename(f"{c}percent")
                for c in ("kws_leak_floor", "kws_leak_mismatch")
            ],
            axis=1,
        ).reset_index()
        ks = (
            ks.merge(kl, on=key, how="left")
            .merge(kf, on=key, how="left")
            .merge(kws_robust(kws, scope, **kw), on=key, how="left")
        )
        t = t.merge(ks, on=key, how="outer")
        meta = pd.concat([meta, _condition_meta(kn)])
        meta = meta[~meta.index.duplicated()]
    else:
        t[_KWS_COMPETING] = math.nan
    m = meta.reindex(t["condition_id"])
    t.insert(2, "setting", m["setting"].to_numpy())
    t.insert(3, "distractor_languages", m["distractor_languages"].to_numpy())
    t.insert(4, "same_voice_control", [parse_bool(v) is True for v in m["same_voice_as_target"]])
    t = t.assign(level=float(level), n_resamples=int(n_resamples), seed=int(seed))
    t["note"] = t.pop("note").fillna("")
    order = {
        c: i for i, c in enumerate(meta.index)
    }  # the manifest's order: single languages, then the cocktail
    s_order = {s: i for i, s in enumerate(comp.TABLE["setting_order"])}
    return (
        t.assign(_s=t["setting"].map(s_order).fillna(9), _c=t["condition_id"].map(order))
        .sort_values(["model", "_s", "_c", "snr_db"])
        .drop(columns=["_s", "_c"])
        .reset_index(drop=True)
    )


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
    """
    _need(asr, ["condition_params", "applied_to"], "channel_table")
    kw = dict(n_resamples=n_resamples, seed=seed, level=level, min_diff_pp=min_diff_pp)
    key, scope = CHANNEL_TABLE["key"], CHANNEL_TABLE["scope"]
    tests = ["test", "p_bh", "verdict"]
    t, a = _task_columns(asr, "asr", scope, key, ["n_items", "wer_pp", "clean_wer_pp"], tests, kw)
    t["note"] = a["note"].fillna("")
    if kws is not None and not kws.empty:
        k, _ = _task_columns(
            kws, "kws", scope, key, ["n_items", "acc_pp", "clean_acc_pp"], tests, kw
        )
        robust = kws_robust(kws, scope, n_resamples=n_resamples, seed=seed, level=level)
        t = t.merge(k.merge(robust, on=key, how="left"), on=key, how="outer")
    rows = pd.concat([d for d in (asr, kws) if d is not None])
    rows = rows[rows["bg_id"] != "clean"].drop_duplicates("bg_id").set_index("bg_id")
    t.insert(
        2, "parameters", [_params(v) for v in rows["condition_params"].reindex(t["condition_id"])]
    )
    t.insert(3, "applied_to", rows["applied_to"].reindex(t["condition_id"]).to_numpy())
    t.insert(4, "status", "run")
    if skipped is not None and len(skipped):
        sk = pd.DataFrame(
            {
                "model": "",
                "condition_id": skipped["condition"].astype(str),
                "parameters": "",
                "applied_to": "",
                "status": "skipped",
                "note": skipped["reason"].astype(str),
            }
        )
        t = pd.concat([t, sk], ignore_index=True)
    t = t.assign(level=float(level), n_resamples=int(n_resamples), seed=int(seed))
    t["note"] = t.pop("note").fillna("")
    names = list(
        dict.fromkeys(t["condition_id"])
    )  # the module's order first, then any other in table order
    names = [n for n in CHANNEL_CONDITIONS if n in names] + [
        n for n in names if n not in CHANNEL_CONDITIONS
    ]
    order = {n: i for i, n in enumerate(names)}
    return (
        t.assign(_o=t["condition_id"].map(order))
        .sort_values(["_o", "model"])
        .drop(columns="_o")
        .rename(columns={"condition_id": "condition"})
        .reset_index(drop=True)
    )


# ------------------------------------------------------------------------------ every condition
def conditions_listing(
    competing: pd.DataFrame | None = None,
    channel: pd.DataFrame | None = None,
    *,
    distractors: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every condition of the families with its parameters and source (the report's list): each
    family's ``conditions`` hook on its score or manifest rows ``competing`` / ``channel`` (default
    the demo's grid, ``available``), voices and sources from ``distractors`` (default the demo's).
    Columns ``family, condition, parameters, applied_to, source, status`` (``run`` / ``available`` /
    ``skipped: <reason>``).
    """
    rows = {comp.NAME: competing, "channel": channel}
    return pd.DataFrame(
        [
            r
            for f in TABLE_FAMILIES
            for r in REGISTRY[f].conditions(rows.get(f), distractors=distractors)
        ]
    )


# ------------------------------------------------------------------------------ notebook 09
NOT_RUN = "not run: make all SUITE=all"
"""What a cell of notebook 09's family section prints when its family has no scores."""


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


_TABLES = {"condition": competing_table, "background": channel_table}
"""A family's table by the scope its ``TABLE`` declares: per condition × SNR (with leakage) or per
condition."""


def family_table(condition_family: str, scores: dict, **kw) -> pd.DataFrame:
    """The table of a condition family (its module's ``TABLE``) from its scores (``{"asr",
    "kws"}``).

    ``kw`` goes to :func:`competing_table` (scope ``condition``) or :func:`channel_table` (scope
    ``background``; ``skipped`` lists the conditions that cannot run here).
    """
    spec = REGISTRY[condition_family].TABLE
    return _TABLES[spec["scope"]](scores["asr"], scores.get("kws"), **kw)


def write_family_table(ws, condition_family: str, scores: dict, **kw) -> pd.DataFrame:
    """:func:`family_table` (with ``manifests/<cf>/skipped.csv`` when present) written to
    ``results/tables/<TABLE name>.csv``; returns the table."""
    sk = family_path(ws, condition_family, "manifests", "skipped.csv")
    if Path(sk).is_file():
        kw["skipped"] = pd.read_csv(sk, dtype=str, keep_default_na=False)
    t = family_table(condition_family, scores, **kw)
    Path(ws.tables_dir).mkdir(parents=True, exist_ok=True)
    t.to_csv(Path(ws.tables_dir) / f"{REGISTRY[condition_family].TABLE['name']}.csv", index=False)
    return t


# ------------------------------------------------------------------------------ display
def _robust_cells(t: pd.DataFrame, task: str = "asr") -> dict:
    """The robust view's display columns; "–" where not computed."""

    def col(c, f):
        return t[c].map(f) if c in t else "–"

    signed, count = (lambda v: format_ci(v, math.nan, math.nan)), (lambda v: fmt(v, ".0f"))
    if task == "asr":
        return {
            "capped ΔWER pp": col("delta_wer_capped_pp", signed),
            "median ΔWER pp": col("median_delta_wer_pp", signed),
            "loops": col("n_loops", count),
        }
    return {
        "Δ strict acc pp": col("delta_strict_acc_pp", signed),
        "non-answers": col("n_non_answers", count),
    }


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
                **_robust_cells(t),
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
                **_robust_cells(t),
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
