"""The per-condition table of one task and the robust view of paired changes
(:mod:`aiplib.analysis.conditions`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from aiplib.analysis import stats
from aiplib.analysis.conditions.verdicts import (
    ALL,
    DEFAULT_MIN_DIFF_PP,
    SCOPE_ORDER,
    SCOPES,
    condition_label,
    paired_change,
    pooled_ratio,
    verdict,
)
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import TASK_FAMILIES, family_spec, task_family
from aiplib.io.formats import parse_bool
from aiplib.scoring.error_rates import char_counts


def _prepare_rows(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """Per-row numeric columns for the sums, with each noisy row's clean partner joined."""
    asr = family == "asr"
    need = {"model", "task", "item_id", "bg_id", "snr_db"} | (
        {
            "errors",
            "ref_words",
            "substitutions",
            "deletions",
            "insertions",
            "wer",
            "ref_norm",
            "hyp_norm",
        }
        if asr
        else {"correct"}
    )
    if missing := need - set(df.columns):
        raise AiplibParameterError(f"scores lack columns {sorted(missing)}")
    r = df.assign(
        item_id=df["item_id"].astype(str),
        bg_id=df["bg_id"].astype(str),
        snr_db=pd.to_numeric(df["snr_db"], errors="coerce"),
    )
    if asr:
        r["char_errors"], r["ref_chars"] = char_counts(
            *(r[c].fillna("").astype(str).tolist() for c in ("ref_norm", "hyp_norm"))
        )
        values = ["errors", "wer"]
    else:
        r["correct"] = pd.to_numeric(r["correct"], errors="coerce").astype(float)
        values = ["correct"]
    key = ["model", "task", "item_id"]
    clean = r[r["bg_id"] == "clean"].drop_duplicates(key, keep="last").set_index(key)[values]
    cl = clean.reindex(pd.MultiIndex.from_frame(r[key]))
    for c in values:
        r[f"clean_{c}"] = cl[c].to_numpy(dtype=float)
    paired = (r["bg_id"] != "clean").to_numpy() & np.isfinite(
        r[f"clean_{values[0]}"].to_numpy(dtype=float)
    )
    r["paired"], r["n"] = paired.astype(float), 1.0

    def p(
        col, fill=False
    ):  # the column on paired rows (a missing clean value as 0 when ``fill``), else 0
        return np.where(paired, (r[col].fillna(0) if fill else r[col]).to_numpy(float), 0.0)

    if asr:
        r["wer_capped"] = np.minimum(r["wer"].to_numpy(float), 1.0)
        r["p_d_capped"] = np.where(
            paired,
            r["wer_capped"].to_numpy(float)
            - np.minimum(r["clean_wer"].fillna(0).to_numpy(float), 1.0),
            0.0,
        )
        r["loop"], r["loop_n"] = _flag_sums(r, "is_loop")
        r["p_ref_words"], r["p_errors"], r["p_wer"] = p("ref_words"), p("errors"), p("wer")
        r["p_clean_errors"], r["p_clean_wer"] = p("clean_errors", True), p("clean_wer", True)
        r["d"] = r["p_wer"] - r["p_clean_wer"]
    else:
        r["strict"], r["strict_n"] = _flag_sums(r, "correct_strict")
        r["non_answer"], r["non_answer_n"] = _flag_sums(r, "non_answer")
        r["p_correct"], r["p_clean_correct"] = p("correct"), p("clean_correct", True)
        r["d"] = r["p_clean_correct"] - r["p_correct"]
    return r


_ASR_SUMS = [
    "n",
    "errors",
    "ref_words",
    "substitutions",
    "deletions",
    "insertions",
    "wer",
    "char_errors",
    "ref_chars",
    "paired",
    "p_ref_words",
    "p_errors",
    "p_clean_errors",
    "p_wer",
    "p_clean_wer",
    "d",
    "wer_capped",
    "p_d_capped",
    "loop",
    "loop_n",
]
_KWS_SUMS = [
    "n",
    "correct",
    "paired",
    "p_correct",
    "p_clean_correct",
    "d",
    "strict",
    "strict_n",
    "non_answer",
    "non_answer_n",
]


def _as_flag(col: pd.Series) -> np.ndarray:
    """A boolean score column (bool, 0/1 or "True"/"False" text) as floats, NaN if unknown
    (:func:`aiplib.io.formats.parse_bool`)."""
    return np.array([np.nan if (f := parse_bool(v)) is pd.NA else float(f) for v in col])


def _flag_sums(r: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(flag as 0/1 with unknown → 0, 1 where known) of column ``name``; zeros if absent."""
    f = _as_flag(r[name]) if name in r.columns else np.full(len(r), np.nan)
    known = np.isfinite(f)
    return np.where(known, f, 0.0), known.astype(float)


def _by(scope) -> list[str]:
    return ["model", "task", *(SCOPES[scope] or ())]


def _scope_sources(rows: pd.DataFrame, scopes):
    """Yield (scope, group-by columns, its rows): the clean rows for ``"clean"``, else the noisy
    ones."""
    is_clean = rows["bg_id"] == "clean"
    clean_rows, noisy = rows[is_clean], rows[~is_clean]
    for scope in scopes:
        src = clean_rows if scope == "clean" else noisy
        if not src.empty:
            yield scope, _by(scope), src


def _scope_key(scope, by, gkey) -> dict:
    """{model, task, bg_id, snr_db} of one group (bg_id "clean" / ALL and snr_db NaN when not
    grouped on)."""
    k = dict(zip(by, gkey if isinstance(gkey, tuple) else (gkey,)))
    k.setdefault("bg_id", "clean" if scope == "clean" else ALL)
    k.setdefault("snr_db", math.nan)
    return k


def _row_medians(rows: pd.DataFrame, col: str, scopes) -> dict:
    """Median of ``col`` over the stimuli of every scope group: {(scope, *group key): median}."""
    return {
        (scope, *gkey): float(m)
        for scope, by, src in _scope_sources(rows, scopes)
        for gkey, m in src.groupby(by, sort=False)[col].median().items()
    }


def percent(a, b) -> float:
    return 100.0 * a / b if b else math.nan


def iter_scopes(rows: pd.DataFrame, sum_cols, scopes):
    """Yield (scope, {model, task, bg_id, snr_db}, {column: per-item sums [shape=(n_items,)]})."""
    for scope, by, src in _scope_sources(rows, scopes):
        items = src.groupby(by + ["item_id"], sort=True)[sum_cols].sum()
        cols = {c: items[c].to_numpy(dtype=float) for c in sum_cols}
        for gkey, idx in items.groupby(level=by, sort=True).indices.items():
            yield scope, _scope_key(scope, by, gkey), {c: a[idx] for c, a in cols.items()}


def condition_table(
    scores: pd.DataFrame,
    family: str,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = DEFAULT_MIN_DIFF_PP,
    scopes=tuple(SCOPES),
) -> pd.DataFrame:
    """The per-condition table of one task (every model), with intervals, tests and verdicts.

    Parameters
    ----------
    scores : pandas.DataFrame
        A ``results/scores/<task>.csv`` table (several models and tasks: each summarised apart).
    family : {"asr", "kws"}
    n_resamples, seed, level, min_diff_pp, scopes
        Bootstrap settings (recorded in every row), the minimum change (pp) for a
        ``worse``/``better`` verdict and the scopes (a subset of :data:`SCOPES`).

    Returns
    -------
    pandas.DataFrame
        One row per (scope, model, task, bg_id, snr_db): ``scope, model, task, family, bg_id,
        snr_db, condition, n_items, n_stimuli, n_pairs``; ASR ``wer_pp`` (corpus), ``mean_wer_pp``,
        ``cer_pp``, ``sub_pp, del_pp, ins_pp`` (summing to ``wer_pp``), ``clean_wer_pp,
        clean_mean_wer_pp``, ``mean_wer_capped_pp`` (mean of min(WER, 1)), ``median_wer_pp``,
        ``n_loops`` (NaN without ``is_loop``); KWS ``acc_pp, clean_acc_pp, strict_acc_pp,
        non_answer_pp`` (NaN without ``correct_strict`` / ``non_answer``); ``measure``, ``delta_pp``
        (mean paired change, + = worse), ``ci_low_pp, ci_high_pp, ci_usable``; ASR
        ``delta_corpus_pp, corpus_ci_low_pp, corpus_ci_high_pp, corpus_ci_usable, delta_capped_pp``;
        ``test, p_value, p_bh`` (Benjamini–Hochberg over the conditions of a task, model and scope),
        ``n_worse, n_better, n_ties, verdict, coarse, min_diff_pp, level, n_resamples, seed, note``.
        ``clean`` rows carry the absolute values only.

    Raises
    ------
    AiplibParameterError
        If ``family`` or a scope is unknown, or a needed column is missing.

    Notes
    -----
    ``delta_pp`` (ASR) is the mean over pairs of WER(noisy) − WER(clean) (Figures 4–5, Table 4);
    ``delta_corpus_pp`` = (Σ errors noisy − Σ errors clean) / Σ N over the same pairs. A verdict
    needs the interval to exclude 0, ``|delta_pp| >= min_diff_pp`` and ``p_bh <`` :data:`ALPHA`.
    Noisy rows without a clean partner count in the absolute values only (``note``).
    """
    family_spec(family)  # an unknown family raises
    if bad := [s for s in scopes if s not in SCOPES]:
        raise AiplibParameterError(f"unknown scopes {bad}; choose from {list(SCOPES)}")
    if scores.empty:
        return pd.DataFrame(columns=_columns(family))
    rows = _prepare_rows(scores, family)
    sum_cols = _ASR_SUMS if family == "asr" else _KWS_SUMS
    medians = _row_medians(rows, "wer", scopes) if family == "asr" else {}
    out = []
    for scope, k, g in iter_scopes(rows, sum_cols, scopes):
        tot = {c: float(g[c].sum()) for c in sum_cols}
        rec = dict(
            scope=scope,
            **k,
            family=family,
            condition=condition_label(k["bg_id"], k["snr_db"]),
            n_items=len(g["n"]),
            n_stimuli=int(tot["n"]),
            n_pairs=int(tot["paired"]),
            measure=TASK_FAMILIES[family].degradation_column,
            min_diff_pp=float(min_diff_pp),
            level=float(level),
            n_resamples=int(n_resamples),
            seed=int(seed),
        )
        if family == "asr":
            words, median = (
                tot["ref_words"],
                medians.get((scope, *(k[c] for c in _by(scope))), math.nan),
            )
            rec.update(
                wer_pp=percent(tot["errors"], words),
                mean_wer_pp=percent(tot["wer"], tot["n"]),
                cer_pp=percent(tot["char_errors"], tot["ref_chars"]),
                sub_pp=percent(tot["substitutions"], words),
                del_pp=percent(tot["deletions"], words),
                ins_pp=percent(tot["insertions"], words),
                mean_wer_capped_pp=percent(tot["wer_capped"], tot["n"]),
                median_wer_pp=100 * median,
                n_loops=tot["loop"] if tot["loop_n"] else math.nan,
            )
        else:
            rec.update(
                acc_pp=percent(tot["correct"], tot["n"]),
                strict_acc_pp=percent(tot["strict"], tot["strict_n"]),
                non_answer_pp=percent(tot["non_answer"], tot["non_answer_n"]),
            )
        notes = []
        if scope != "clean":
            pg, mc = {c: a[g["paired"] > 0] for c, a in g.items()}, None
            if family == "asr":
                rec.update(
                    clean_wer_pp=percent(tot["p_clean_errors"], tot["p_ref_words"]),
                    clean_mean_wer_pp=percent(tot["p_clean_wer"], tot["paired"]),
                )
            else:
                rec["clean_acc_pp"] = percent(tot["p_clean_correct"], tot["paired"])
                if len(pg["n"]) and bool((pg["paired"] == 1).all()):
                    mc = (pg["p_clean_correct"].astype(bool), pg["p_correct"].astype(bool))
            pc = paired_change(
                100 * pg["d"],
                pg["paired"],
                n_resamples=n_resamples,
                seed=seed,
                level=level,
                min_diff=min_diff_pp,
                mcnemar=mc,
            )
            rec.update(
                delta_pp=pc["estimate"],
                ci_low_pp=pc["ci_low"],
                ci_high_pp=pc["ci_high"],
                **{
                    c: pc[c]
                    for c in (
                        "ci_usable",
                        "test",
                        "p_value",
                        "n_worse",
                        "n_better",
                        "n_ties",
                        "verdict",
                        "coarse",
                    )
                },
            )
            notes.append(pc["note"])
            if family == "asr" and len(pg["n"]):
                b = stats.bootstrap_ci(
                    (100 * (pg["p_errors"] - pg["p_clean_errors"]), pg["p_ref_words"]),
                    pooled_ratio,
                    n_resamples=n_resamples,
                    seed=seed,
                    level=level,
                    vectorized=True,
                )
                rec.update(
                    delta_corpus_pp=b.estimate,
                    corpus_ci_low_pp=b.ci_low,
                    corpus_ci_high_pp=b.ci_high,
                    corpus_ci_usable=b.n_valid,
                    delta_capped_pp=percent(tot["p_d_capped"], tot["paired"]),
                )
            if unpaired := rec["n_stimuli"] - rec["n_pairs"]:
                notes.append(
                    f"{unpaired} noisy stimuli without a clean partner: in the absolute values only"
                )
        rec["note"] = "; ".join(n for n in notes if n)
        out.append(rec)
    t = pd.DataFrame(out).reindex(columns=_columns(family))
    t = (
        t.assign(_s=t["scope"].map(SCOPE_ORDER), _snr=-t["snr_db"].fillna(np.inf))
        .sort_values(["task", "model", "_s", "_snr", "bg_id"], kind="stable")
        .drop(columns=["_s", "_snr"])
        .reset_index(drop=True)
        .astype(dict.fromkeys(["n_worse", "n_better", "n_ties"], "Int64"))
    )
    # Benjamini–Hochberg across the conditions of one (task, model, scope): many conditions are
    # tested at once, so the adjusted p-value is the one to read against a 5 % false discovery rate.
    t["p_bh"] = t.groupby(["task", "model", "scope"], sort=False)["p_value"].transform(
        lambda p: stats.bh_adjust(p.to_numpy(float))
    )
    # the verdict needs the adjusted p: interval, minimum change and p_BH < ALPHA together
    tested = (t["scope"] != "clean") & (t["verdict"] != "n/a")
    t.loc[tested, "verdict"] = [
        verdict(e, lo, hi, min_diff_pp, q)
        for e, lo, hi, q in t.loc[
            tested, ["delta_pp", "ci_low_pp", "ci_high_pp", "p_bh"]
        ].itertuples(index=False)
    ]
    return t


def _columns(family: str) -> list[str]:
    asr = family == "asr"
    values = (
        [
            "wer_pp",
            "mean_wer_pp",
            "cer_pp",
            "sub_pp",
            "del_pp",
            "ins_pp",
            "clean_wer_pp",
            "clean_mean_wer_pp",
            "mean_wer_capped_pp",
            "median_wer_pp",
            "n_loops",
        ]
        if asr
        else ["acc_pp", "clean_acc_pp", "strict_acc_pp", "non_answer_pp"]
    )
    corpus = [
        "delta_corpus_pp",
        "corpus_ci_low_pp",
        "corpus_ci_high_pp",
        "corpus_ci_usable",
        "delta_capped_pp",
    ]
    return [
        "scope",
        "model",
        "task",
        "family",
        "bg_id",
        "snr_db",
        "condition",
        "n_items",
        "n_stimuli",
        "n_pairs",
        *values,
        "measure",
        "delta_pp",
        "ci_low_pp",
        "ci_high_pp",
        "ci_usable",
        *(corpus if asr else []),
        "test",
        "p_value",
        "p_bh",
        "n_worse",
        "n_better",
        "n_ties",
        "verdict",
        "coarse",
        "min_diff_pp",
        "level",
        "n_resamples",
        "seed",
        "note",
    ]


def condition_tables(scores: dict, **kwargs) -> dict[str, pd.DataFrame]:
    """:func:`condition_table` for every task of ``scores`` (task → table; ``kwargs`` passed on)."""
    return {
        task: condition_table(df, task_family(task), **kwargs)
        for task, df in scores.items()
        if not df.empty
    }


# ------------------------------------------------------------------ the robust view of paired
# changes
ASR_ROBUST_COLUMNS = ["delta_wer_capped_pp", "median_delta_wer_pp", "n_loops"]
"""ASR robust columns of the family tables (pp, pp, count)."""

KWS_ROBUST_COLUMNS = [
    "delta_strict_acc_pp",
    "delta_strict_acc_ci_low_pp",
    "delta_strict_acc_ci_high_pp",
    "n_non_answers",
]
"""KWS robust columns of the family tables (pp ×3, count)."""


def _noisy_groups(scores: pd.DataFrame, by: list[str]):
    n = scores[scores["bg_id"].astype(str) != "clean"]
    n = n.assign(bg_id=n["bg_id"].astype(str), snr_db=pd.to_numeric(n["snr_db"], errors="coerce"))
    return n, [n[c] for c in by]


def _aligned(values: pd.Series | None, paired: pd.DataFrame, by: list[str]) -> np.ndarray:
    """``values`` (indexed on ``by``) in the row order of ``paired`` (``bg_id`` as
    ``condition_id``)."""
    if values is None:
        return np.full(len(paired), math.nan)
    keys = pd.MultiIndex.from_frame(paired[[c if c != "bg_id" else "condition_id" for c in by]])
    return values.reindex(keys).to_numpy(dtype=float)


def asr_robust(paired: pd.DataFrame, scores: pd.DataFrame, scope: str) -> pd.DataFrame:
    """The ASR robust view of paired changes, beside the mean ΔWER (which one looping hypothesis,
    WER 5, can carry past +100 pp).

    Parameters
    ----------
    paired : pandas.DataFrame [shape=(n_rows, ...)]
        :func:`condition_table` of ``scores`` in ``scope`` (:data:`SCOPES`), ``bg_id`` as
          ``condition_id``.
    scores : pandas.DataFrame
        The ASR score rows (``model, bg_id, snr_db``, ``delta_wer`` as a fraction; without it
        ``median_delta_wer_pp`` is NaN).
    scope : {"condition", "background"}

    Returns
    -------
    pandas.DataFrame [shape=(n_rows, 3)]
        :data:`ASR_ROBUST_COLUMNS`, index of ``paired``: ``delta_wer_capped_pp`` (mean of
        min(WER_noisy, 1) − min(WER_clean, 1), pp), ``median_delta_wer_pp`` (median ``delta_wer`` of
        the noisy stimuli, pp) and ``n_loops``.
    """
    by = ["model", *SCOPES[scope]]
    n, keys = _noisy_groups(scores, by)
    med = (
        100 * pd.to_numeric(n["delta_wer"], errors="coerce").groupby(keys).median()
        if "delta_wer" in n
        else None
    )
    return pd.DataFrame(
        {
            "delta_wer_capped_pp": paired["delta_capped_pp"].to_numpy(dtype=float),
            "median_delta_wer_pp": _aligned(med, paired, by),
            "n_loops": paired["n_loops"].to_numpy(dtype=float),
        },
        index=paired.index,
    )


def kws_robust(
    scores: pd.DataFrame, scope: str, *, n_resamples: int = 2000, seed: int = 0, level: float = 0.95
) -> pd.DataFrame:
    """The KWS robust view per (model, condition) of ``scope`` from the KWS score rows ``scores``
    (``correct_strict`` and ``non_answer``; an absent one gives NaN columns); ``n_resamples, seed,
    level`` bootstrap the strict change (:func:`condition_table` on ``correct_strict``).

    Returns
    -------
    pandas.DataFrame
        ``model, condition_id`` (and ``snr_db`` in scope ``condition``), :data:`KWS_ROBUST_COLUMNS`:
        ``delta_strict_acc_pp`` (mean paired change of the strict accuracy, non-answers wrong, + =
        worse) with its interval, ``n_non_answers`` among the noisy responses.
    """
    by = ["model", *SCOPES[scope]]
    key = [c if c != "bg_id" else "condition_id" for c in by]
    n, keys = _noisy_groups(scores, by)
    out = n[by].drop_duplicates().rename(columns={"bg_id": "condition_id"}).reset_index(drop=True)
    if "correct_strict" in scores.columns:
        f = _as_flag(scores["correct_strict"])
        known = scores[np.isfinite(f)].assign(correct=f[np.isfinite(f)])
        s = condition_table(
            known, "kws", scopes=(scope,), n_resamples=n_resamples, seed=seed, level=level
        )
        s = s.rename(
            columns={
                "bg_id": "condition_id",
                "delta_pp": "delta_strict_acc_pp",
                "ci_low_pp": "delta_strict_acc_ci_low_pp",
                "ci_high_pp": "delta_strict_acc_ci_high_pp",
            }
        )
        out = out.merge(s[key + KWS_ROBUST_COLUMNS[:3]], on=key, how="left")
    else:
        out = out.assign(**dict.fromkeys(KWS_ROBUST_COLUMNS[:3], math.nan))
    cnt = (
        pd.Series(_as_flag(n["non_answer"]), index=n.index).groupby(keys).sum(min_count=1)
        if "non_answer" in n.columns
        else None
    )
    out["n_non_answers"] = _aligned(cnt, out, by)
    return out[key + KWS_ROBUST_COLUMNS]
