"""The per-condition table of one task and the robust view of paired changes
(:mod:`aiplib.analysis.conditions`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
from aiplib.core.tasks import TASK_FAMILIES, TaskFamily, family_spec, task_family
from aiplib.io.formats import parse_bool
from aiplib.scoring.error_rates import char_counts


def _check_columns(df: pd.DataFrame, needed: set) -> None:
    """Raise :class:`AiplibParameterError` naming the score columns ``df`` lacks."""
    missing = needed - set(df.columns)
    if missing:
        raise AiplibParameterError(f"scores lack columns {sorted(missing)}")


def _join_clean(rows: pd.DataFrame, values: list[str]) -> np.ndarray:
    """Add ``clean_<value>`` (the item's clean row's value) for each of ``values`` to ``rows``;
    return the paired mask (a noisy row whose clean partner has a finite first value)."""
    key = ["model", "task", "item_id"]
    is_clean = rows["bg_id"] == "clean"
    clean_rows = rows[is_clean].drop_duplicates(key, keep="last").set_index(key)[values]
    clean_partner = clean_rows.reindex(pd.MultiIndex.from_frame(rows[key]))
    for column in values:
        rows[f"clean_{column}"] = clean_partner[column].to_numpy(dtype=float)
    has_partner = np.isfinite(rows[f"clean_{values[0]}"].to_numpy(dtype=float))
    return (~is_clean).to_numpy() & has_partner


def _on_pairs(rows: pd.DataFrame, paired: np.ndarray, column: str, fill: bool = False):
    """``column`` on paired rows (a missing clean value as 0 when ``fill``), else 0."""
    values = rows[column]
    if fill:
        values = values.fillna(0)
    return np.where(paired, values.to_numpy(float), 0.0)


def _error_rate_needs(spec: TaskFamily) -> set:
    """The score columns an error-rate (WER) table needs."""
    return {
        "errors",
        "ref_words",
        "substitutions",
        "deletions",
        "insertions",
        "wer",
        "ref_norm",
        "hyp_norm",
    }


def _error_rate_values(rows: pd.DataFrame, spec: TaskFamily) -> list[str]:
    """Add the character counts to WER rows; return the columns paired with the clean row."""
    ref_norm = rows["ref_norm"].fillna("").astype(str).tolist()
    hyp_norm = rows["hyp_norm"].fillna("").astype(str).tolist()
    char_errors, ref_chars = char_counts(ref_norm, hyp_norm)
    rows["char_errors"] = char_errors
    rows["ref_chars"] = ref_chars
    return ["errors", "wer"]


def _error_rate_pairs(rows: pd.DataFrame, paired: np.ndarray, spec: TaskFamily) -> None:
    """Add the paired WER columns (capped WER, loops, paired counts, per-row change ``d``)."""
    rows["wer_capped"] = np.minimum(rows["wer"].to_numpy(float), 1.0)
    clean_capped = np.minimum(rows["clean_wer"].fillna(0).to_numpy(float), 1.0)
    rows["p_d_capped"] = np.where(paired, rows["wer_capped"].to_numpy(float) - clean_capped, 0.0)
    loop, loop_known = _flag_sums(rows, "is_loop")
    rows["loop"] = loop
    rows["loop_n"] = loop_known
    rows["p_ref_words"] = _on_pairs(rows, paired, "ref_words")
    rows["p_errors"] = _on_pairs(rows, paired, "errors")
    rows["p_wer"] = _on_pairs(rows, paired, "wer")
    rows["p_clean_errors"] = _on_pairs(rows, paired, "clean_errors", True)
    rows["p_clean_wer"] = _on_pairs(rows, paired, "clean_wer", True)
    rows["d"] = rows["p_wer"] - rows["p_clean_wer"]


def _binary_needs(spec: TaskFamily) -> set:
    """The score columns an accuracy table needs (the 0/1 measure)."""
    return {spec.measure}


def _binary_values(rows: pd.DataFrame, spec: TaskFamily) -> list[str]:
    """The 0/1 measure as floats; return it as the column paired with the clean row."""
    rows[spec.measure] = pd.to_numeric(rows[spec.measure], errors="coerce").astype(float)
    return [spec.measure]


def _binary_pairs(rows: pd.DataFrame, paired: np.ndarray, spec: TaskFamily) -> None:
    """Add the paired accuracy columns (strict, non-answers, paired values, per-row change
    ``d``)."""
    strict, strict_known = _flag_sums(rows, "correct_strict")
    rows["strict"] = strict
    rows["strict_n"] = strict_known
    non_answer, non_answer_known = _flag_sums(rows, "non_answer")
    rows["non_answer"] = non_answer
    rows["non_answer_n"] = non_answer_known
    rows[f"p_{spec.measure}"] = _on_pairs(rows, paired, spec.measure)
    rows[f"p_clean_{spec.measure}"] = _on_pairs(rows, paired, f"clean_{spec.measure}", True)
    rows["d"] = rows[f"p_clean_{spec.measure}"] - rows[f"p_{spec.measure}"]


def _error_rate_sums(spec: TaskFamily) -> list[str]:
    """The per-row columns summed per item for a WER table."""
    return [
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


def _binary_sums(spec: TaskFamily) -> list[str]:
    """The per-row columns summed per item for an accuracy table."""
    return [
        "n",
        spec.measure,
        "paired",
        f"p_{spec.measure}",
        f"p_clean_{spec.measure}",
        "d",
        "strict",
        "strict_n",
        "non_answer",
        "non_answer_n",
    ]


def _error_rate_absolute(totals: dict, median: float, spec: TaskFamily) -> dict:
    """The absolute WER columns of one condition from its summed counts (pp)."""
    words = totals["ref_words"]
    return dict(
        wer_pp=percent(totals["errors"], words),
        mean_wer_pp=percent(totals["wer"], totals["n"]),
        cer_pp=percent(totals["char_errors"], totals["ref_chars"]),
        sub_pp=percent(totals["substitutions"], words),
        del_pp=percent(totals["deletions"], words),
        ins_pp=percent(totals["insertions"], words),
        mean_wer_capped_pp=percent(totals["wer_capped"], totals["n"]),
        median_wer_pp=100 * median,
        n_loops=totals["loop"] if totals["loop_n"] else math.nan,
    )


def _binary_absolute(totals: dict, median: float, spec: TaskFamily) -> dict:
    """The absolute accuracy columns of one condition (pp)."""
    return dict(
        acc_pp=percent(totals[spec.measure], totals["n"]),
        strict_acc_pp=percent(totals["strict"], totals["strict_n"]),
        non_answer_pp=percent(totals["non_answer"], totals["non_answer_n"]),
    )


def _error_rate_clean(totals: dict, pairs: dict, spec: TaskFamily) -> tuple[dict, None]:
    """The clean WER of the paired items (pp); no McNemar pairs."""
    clean = dict(
        clean_wer_pp=percent(totals["p_clean_errors"], totals["p_ref_words"]),
        clean_mean_wer_pp=percent(totals["p_clean_wer"], totals["paired"]),
    )
    return clean, None


def _binary_clean(totals: dict, pairs: dict, spec: TaskFamily) -> tuple[dict, tuple | None]:
    """The clean accuracy of the paired items (pp) and, with one pair per item, the paired
    outcomes for McNemar's test."""
    clean = {"clean_acc_pp": percent(totals[f"p_clean_{spec.measure}"], totals["paired"])}
    mcnemar = None
    if len(pairs["n"]) and bool((pairs["paired"] == 1).all()):
        clean_correct = pairs[f"p_clean_{spec.measure}"].astype(bool)
        noisy_correct = pairs[f"p_{spec.measure}"].astype(bool)
        mcnemar = (clean_correct, noisy_correct)
    return clean, mcnemar


def _error_rate_corpus(totals: dict, pairs: dict, settings: _Settings) -> dict:
    """The corpus ΔWER (pooled over the paired items) with its bootstrap interval, and the capped
    change (pp); empty without pairs."""
    if not len(pairs["n"]):
        return {}
    boot = stats.bootstrap_ci(
        (100 * (pairs["p_errors"] - pairs["p_clean_errors"]), pairs["p_ref_words"]),
        pooled_ratio,
        n_resamples=settings.n_resamples,
        seed=settings.seed,
        level=settings.level,
        vectorized=True,
    )
    return dict(
        delta_corpus_pp=boot.estimate,
        corpus_ci_low_pp=boot.ci_low,
        corpus_ci_high_pp=boot.ci_high,
        corpus_ci_usable=boot.n_valid,
        delta_capped_pp=percent(totals["p_d_capped"], totals["paired"]),
    )


def _no_corpus(totals: dict, pairs: dict, settings: _Settings) -> dict:
    """No corpus change for a binary measure."""
    return {}


def _error_rate_medians(rows: pd.DataFrame, scopes, spec: TaskFamily) -> dict:
    """The median per-utterance WER of every scope group."""
    return _row_medians(rows, spec.measure, scopes)


def _no_medians(rows: pd.DataFrame, scopes, spec: TaskFamily) -> dict:
    """No medians for a binary measure."""
    return {}


@dataclass(frozen=True)
class _Settings:
    """Bootstrap settings and the minimum change (pp) of one condition table."""

    n_resamples: int
    seed: int
    level: float
    min_diff_pp: float


@dataclass(frozen=True)
class _Pooling:
    """How a measure kind (``TaskFamily.measure_kind``) is pooled into a condition table: each
    field is a step of :func:`condition_table` (see the functions registered in
    :data:`_POOLINGS`)."""

    needs: Callable
    row_values: Callable
    pair_values: Callable
    sums: Callable
    medians: Callable
    absolute: Callable
    clean: Callable
    corpus: Callable
    value_columns: tuple[str, ...]
    corpus_columns: tuple[str, ...]


#: ``TaskFamily.measure_kind`` → how its condition table is pooled.
_POOLINGS = {
    "error_rate": _Pooling(
        needs=_error_rate_needs,
        row_values=_error_rate_values,
        pair_values=_error_rate_pairs,
        sums=_error_rate_sums,
        medians=_error_rate_medians,
        absolute=_error_rate_absolute,
        clean=_error_rate_clean,
        corpus=_error_rate_corpus,
        value_columns=(
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
        ),
        corpus_columns=(
            "delta_corpus_pp",
            "corpus_ci_low_pp",
            "corpus_ci_high_pp",
            "corpus_ci_usable",
            "delta_capped_pp",
        ),
    ),
    "binary": _Pooling(
        needs=_binary_needs,
        row_values=_binary_values,
        pair_values=_binary_pairs,
        sums=_binary_sums,
        medians=_no_medians,
        absolute=_binary_absolute,
        clean=_binary_clean,
        corpus=_no_corpus,
        value_columns=("acc_pp", "clean_acc_pp", "strict_acc_pp", "non_answer_pp"),
        corpus_columns=(),
    ),
}


def _prepare_rows(df: pd.DataFrame, family: str) -> pd.DataFrame:
    """Per-row numeric columns for the sums, with each noisy row's clean partner joined."""
    spec = TASK_FAMILIES[family]
    pooling = _POOLINGS[spec.measure_kind]
    _check_columns(df, {"model", "task", "item_id", "bg_id", "snr_db"} | pooling.needs(spec))
    rows = df.assign(
        item_id=df["item_id"].astype(str),
        bg_id=df["bg_id"].astype(str),
        snr_db=pd.to_numeric(df["snr_db"], errors="coerce"),
    )
    values = pooling.row_values(rows, spec)
    paired = _join_clean(rows, values)
    rows["paired"] = paired.astype(float)
    rows["n"] = 1.0
    pooling.pair_values(rows, paired, spec)
    return rows


def _as_flag(col: pd.Series) -> np.ndarray:
    """A boolean score column (bool, 0/1 or "True"/"False" text) as floats, NaN if unknown
    (:func:`aiplib.io.formats.parse_bool`)."""
    flags = []
    for value in col:
        flag = parse_bool(value)
        flags.append(np.nan if flag is pd.NA else float(flag))
    return np.array(flags)


def _flag_sums(r: pd.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(flag as 0/1 with unknown → 0, 1 where known) of column ``name``; zeros if absent."""
    if name in r.columns:
        flags = _as_flag(r[name])
    else:
        flags = np.full(len(r), np.nan)
    known = np.isfinite(flags)
    return np.where(known, flags, 0.0), known.astype(float)


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
    family : str
        A task family of :data:`aiplib.core.tasks.TASK_FAMILIES`.
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
    bad = [s for s in scopes if s not in SCOPES]
    if bad:
        raise AiplibParameterError(f"unknown scopes {bad}; choose from {list(SCOPES)}")
    if scores.empty:
        return pd.DataFrame(columns=_columns(family))
    spec = TASK_FAMILIES[family]
    pooling = _POOLINGS[spec.measure_kind]
    settings = _Settings(n_resamples=n_resamples, seed=seed, level=level, min_diff_pp=min_diff_pp)
    rows = _prepare_rows(scores, family)
    sum_cols = pooling.sums(spec)
    medians = pooling.medians(rows, scopes, spec)
    records = []
    for scope, key, per_item_sums in iter_scopes(rows, sum_cols, scopes):
        totals = {c: float(per_item_sums[c].sum()) for c in sum_cols}
        median = medians.get((scope, *(key[c] for c in _by(scope))), math.nan)
        record = _base_record(scope, key, per_item_sums, totals, spec, settings)
        record.update(pooling.absolute(totals, median, spec))
        notes = []
        if scope != "clean":
            notes = _add_paired_change(record, per_item_sums, totals, spec, settings)
        record["note"] = "; ".join(n for n in notes if n)
        records.append(record)
    table = _sorted_table(pd.DataFrame(records).reindex(columns=_columns(family)))
    return _with_verdicts(table, min_diff_pp)


def _base_record(scope, key: dict, per_item_sums: dict, totals: dict, spec, settings) -> dict:
    """The identity, counts and settings of one condition row."""
    return dict(
        scope=scope,
        **key,
        family=spec.name,
        condition=condition_label(key["bg_id"], key["snr_db"]),
        n_items=len(per_item_sums["n"]),
        n_stimuli=int(totals["n"]),
        n_pairs=int(totals["paired"]),
        measure=spec.degradation_column,
        min_diff_pp=float(settings.min_diff_pp),
        level=float(settings.level),
        n_resamples=int(settings.n_resamples),
        seed=int(settings.seed),
    )


#: Columns of :func:`aiplib.analysis.conditions.verdicts.paired_change` copied as they are.
_CHANGE_COLUMNS = (
    "ci_usable",
    "test",
    "p_value",
    "n_worse",
    "n_better",
    "n_ties",
    "verdict",
    "coarse",
)


def _add_paired_change(
    record: dict, per_item_sums: dict, totals: dict, spec: TaskFamily, settings: _Settings
) -> list[str]:
    """Add the clean values of the paired items, the mean paired change with its interval, test
    and verdict, and (WER) the corpus change to ``record``; return its notes."""
    pooling = _POOLINGS[spec.measure_kind]
    is_pair = per_item_sums["paired"] > 0
    pairs = {c: a[is_pair] for c, a in per_item_sums.items()}
    clean, mcnemar = pooling.clean(totals, pairs, spec)
    record.update(clean)
    change = paired_change(
        100 * pairs["d"],
        pairs["paired"],
        n_resamples=settings.n_resamples,
        seed=settings.seed,
        level=settings.level,
        min_diff=settings.min_diff_pp,
        mcnemar=mcnemar,
    )
    record["delta_pp"] = change["estimate"]
    record["ci_low_pp"] = change["ci_low"]
    record["ci_high_pp"] = change["ci_high"]
    for column in _CHANGE_COLUMNS:
        record[column] = change[column]
    notes = [change["note"]]
    record.update(pooling.corpus(totals, pairs, settings))
    unpaired = record["n_stimuli"] - record["n_pairs"]
    if unpaired:
        notes.append(
            f"{unpaired} noisy stimuli without a clean partner: in the absolute values only"
        )
    return notes


def _sorted_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rows by task, model, scope (:data:`SCOPE_ORDER`), SNR (high first) and background; the
    test counts as nullable integers."""
    counts = {"n_worse": "Int64", "n_better": "Int64", "n_ties": "Int64"}
    return (
        table.assign(_s=table["scope"].map(SCOPE_ORDER), _snr=-table["snr_db"].fillna(np.inf))
        .sort_values(["task", "model", "_s", "_snr", "bg_id"], kind="stable")
        .drop(columns=["_s", "_snr"])
        .reset_index(drop=True)
        .astype(counts)
    )


def _bh_adjusted(p_values: pd.Series) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values of one group."""
    return stats.bh_adjust(p_values.to_numpy(float))


def _with_verdicts(table: pd.DataFrame, min_diff_pp: float) -> pd.DataFrame:
    """Add ``p_bh`` and the final verdicts to a sorted condition table."""
    # Benjamini–Hochberg across the conditions of one (task, model, scope): many conditions are
    # tested at once, so the adjusted p-value is the one to read against a 5 % false discovery rate.
    groups = table.groupby(["task", "model", "scope"], sort=False)["p_value"]
    table["p_bh"] = groups.transform(_bh_adjusted)
    # the verdict needs the adjusted p: interval, minimum change and p_BH < ALPHA together
    tested = (table["scope"] != "clean") & (table["verdict"] != "n/a")
    tested_values = table.loc[tested, ["delta_pp", "ci_low_pp", "ci_high_pp", "p_bh"]]
    table.loc[tested, "verdict"] = [
        verdict(estimate, low, high, min_diff_pp, p_bh)
        for estimate, low, high, p_bh in tested_values.itertuples(index=False)
    ]
    return table


def _columns(family: str) -> list[str]:
    """The columns of a condition table of ``family``, in order."""
    pooling = _POOLINGS[TASK_FAMILIES[family].measure_kind]
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
        *pooling.value_columns,
        "measure",
        "delta_pp",
        "ci_low_pp",
        "ci_high_pp",
        "ci_usable",
        *pooling.corpus_columns,
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


def condition_tables(
    scores: dict,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = DEFAULT_MIN_DIFF_PP,
    scopes=tuple(SCOPES),
) -> dict[str, pd.DataFrame]:
    """:func:`condition_table` for every task of ``scores`` (task → score rows; an empty frame is
    skipped): task → table, with the settings of :func:`condition_table`.

    Raises
    ------
    AiplibParameterError
        As :func:`condition_table`.
    """
    tables = {}
    for task, df in scores.items():
        if df.empty:
            continue
        tables[task] = condition_table(
            df,
            task_family(task),
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            min_diff_pp=min_diff_pp,
            scopes=scopes,
        )
    return tables


# ------------------------------------------------------------------ the robust view of paired
# changes
#: ASR robust columns of the family tables (pp, pp, count).
ASR_ROBUST_COLUMNS = ["delta_wer_capped_pp", "median_delta_wer_pp", "n_loops"]

#: KWS robust columns of the family tables (pp ×3, count).
KWS_ROBUST_COLUMNS = [
    "delta_strict_acc_pp",
    "delta_strict_acc_ci_low_pp",
    "delta_strict_acc_ci_high_pp",
    "n_non_answers",
]


def _family_of_kind(measure_kind: str) -> TaskFamily:
    """The task family whose measure is of ``measure_kind`` (``error_rate`` or ``binary``)."""
    for spec in TASK_FAMILIES.values():
        if spec.measure_kind == measure_kind:
            return spec
    raise AiplibParameterError(f"no task family measures {measure_kind!r}")


def _noisy_groups(scores: pd.DataFrame, by: list[str]):
    """The noisy rows of ``scores`` (``bg_id`` as text, ``snr_db`` numeric) and their group-by
    columns ``by``."""
    noisy = scores[scores["bg_id"].astype(str) != "clean"]
    noisy = noisy.assign(
        bg_id=noisy["bg_id"].astype(str), snr_db=pd.to_numeric(noisy["snr_db"], errors="coerce")
    )
    return noisy, [noisy[c] for c in by]


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
    noisy, keys = _noisy_groups(scores, by)
    degradation = _family_of_kind("error_rate").degradation_column
    med = None
    if degradation in noisy:
        changes = pd.to_numeric(noisy[degradation], errors="coerce")
        med = 100 * changes.groupby(keys).median()
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
    noisy, keys = _noisy_groups(scores, by)
    out = noisy[by].drop_duplicates().rename(columns={"bg_id": "condition_id"})
    out = out.reset_index(drop=True)
    if "correct_strict" in scores.columns:
        spec = _family_of_kind("binary")
        strict = _as_flag(scores["correct_strict"])
        is_known = np.isfinite(strict)
        known = scores[is_known].assign(**{spec.measure: strict[is_known]})
        s = condition_table(
            known, spec.name, scopes=(scope,), n_resamples=n_resamples, seed=seed, level=level
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
        for column in KWS_ROBUST_COLUMNS[:3]:
            out[column] = math.nan
    cnt = None
    if "non_answer" in noisy.columns:
        non_answers = pd.Series(_as_flag(noisy["non_answer"]), index=noisy.index)
        cnt = non_answers.groupby(keys).sum(min_count=1)
    out["n_non_answers"] = _aligned(cnt, out, by)
    return out[key + KWS_ROBUST_COLUMNS]
