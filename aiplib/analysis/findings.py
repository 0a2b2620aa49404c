"""The report's Findings: the numbers they cite (:func:`findings`) and their sentences
(:func:`findings_lines`).

Every number of a sentence is a row of :func:`findings`, copied from the table its ``source``
names (``results/tables/<source>.csv``); notebook 09 shows the sentences under "Findings" and its
Checks cell compares each row with its file.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from aiplib.analysis import stats
from aiplib.analysis.conditions import COARSE_BELOW_ITEMS
from aiplib.core.tasks import BASE_TASKS, TASK_FAMILIES, task_family

#: Columns of :func:`findings`, in order.
FINDINGS_COLUMNS = [
    "finding",
    "task",
    "model",
    "subject",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "p",
    "verdict",
    "source",
    "clean_pp",
    "noisy_pp",
]


# ------------------------------------------------------------------------------ the numbers
def _condition_rows(tables: dict) -> list[dict]:
    """The ``overall`` and ``snr`` rows of the base tasks' condition tables."""
    rows = []
    for task in BASE_TASKS.values():
        t = tables.get(task)
        if t is None:
            continue
        level = f"{TASK_FAMILIES[task_family(task)].summary}_pp"
        clean = t[t["scope"] == "clean"].set_index("model")[level]
        for r in t[t["scope"].isin(["overall", "snr"])].itertuples():
            if r.scope == "snr":
                subject = r.snr_db
            else:
                subject = "all"
            rows.append(
                {
                    "finding": r.scope,
                    "task": task,
                    "model": r.model,
                    "subject": subject,
                    "value": r.delta_pp,
                    "ci_low": r.ci_low_pp,
                    "ci_high": r.ci_high_pp,
                    "n": r.n_items,
                    "p": r.p_value,
                    "verdict": r.verdict,
                    "source": f"conditions_{task}",
                    "clean_pp": clean.get(r.model, np.nan),
                    "noisy_pp": getattr(r, level),
                }
            )
    return rows


def _ranking_rows(ranking: pd.DataFrame) -> list[dict]:
    """The first and last ranked background of Figure 4, one row per task family each."""
    ranked = ranking[np.isfinite(ranking["mean_degradation_pp"].to_numpy(float))]
    if ranked.empty:
        return []
    rows = []
    for finding, bg in (("most_harmful", ranked.index[0]), ("least_harmful", ranked.index[-1])):
        r = ranking.loc[bg]
        for fam, task in BASE_TASKS.items():
            rows.append(
                {
                    "finding": finding,
                    "task": task,
                    "model": "pooled",
                    "subject": bg,
                    "value": r[f"{fam}_{TASK_FAMILIES[fam].degradation_column}_pp"],
                    "ci_low": r[f"{fam}_ci_low_pp"],
                    "ci_high": r[f"{fam}_ci_high_pp"],
                    "source": "figure4_background_ranking",
                }
            )
    return rows


def _descriptor_rows(table2: pd.DataFrame | None) -> list[dict]:
    """Per task, the pooled Table 2 row of the largest |r_s|."""
    if table2 is None:
        return []
    pooled = table2[(table2["model"] == "pooled") & np.isfinite(table2["r_s"].to_numpy(float))]
    rows = []
    for task, g in pooled.groupby("task", sort=False):
        r = g.loc[g["r_s"].abs().idxmax()]
        rows.append(
            {
                "finding": "descriptor",
                "task": task,
                "model": "pooled",
                "subject": r["descriptor"],
                "value": r["r_s"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
                "n": r["n"],
                "p": r["p_bh"],
                "source": "table2_descriptor_correlations",
            }
        )
    return rows


def _accent_rows(table4: pd.DataFrame | None) -> list[dict]:
    """Per model, the Table 4 accent groups of the largest and the smallest mean ΔWER."""
    if table4 is None:
        return []
    rows = []
    for model, g in table4.dropna(subset=["item_mean_delta_wer_pp"]).groupby("model"):
        v = g["item_mean_delta_wer_pp"]
        for finding, i in (("accent_high", v.idxmax()), ("accent_low", v.idxmin())):
            r = g.loc[i]
            rows.append(
                {
                    "finding": finding,
                    "task": BASE_TASKS["asr"],
                    "model": model,
                    "subject": r["accent_group"],
                    "value": r["item_mean_delta_wer_pp"],
                    "ci_low": r["ci_low_pp"],
                    "ci_high": r["ci_high_pp"],
                    "n": r["n_items"],
                    "source": "table4_accent_dwer_item_means",
                }
            )
    return rows


def _steering_rows(table5: pd.DataFrame | None) -> list[dict]:
    """The rows of Table 5 (the Residual Effect Ratio of the steering prompt)."""
    if table5 is None:
        return []
    rows = []
    for r in table5.itertuples():
        rows.append(
            {
                "finding": "steering",
                "task": r.steer_task,
                "model": r.model,
                "subject": r.family,
                "value": r.rer,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
                "n": r.n_items,
                "verdict": r.base_flag,
                "source": "table5_prompt_steering_rer",
            }
        )
    return rows


def findings(
    tables: dict,
    ranking: pd.DataFrame,
    *,
    table2: pd.DataFrame | None = None,
    table4: pd.DataFrame | None = None,
    table5: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The numbers the report's Findings cite, each copied from the table it names in ``source``.

    ``finding``: ``overall`` and ``snr`` (the ``overall`` / ``snr`` rows of the base tasks'
    condition tables, ``tables`` as :func:`aiplib.analysis.conditions.read_condition_tables` returns
    them); ``most_harmful`` / ``least_harmful`` (the first and last background of Figure 4's ranking
    with a value, one row per family); ``descriptor`` (per task, the pooled Table 2 row of largest
    |r_s|); ``accent_high`` / ``accent_low`` (per model, the Table 4 groups of largest and smallest
    mean ΔWER); ``steering`` (Table 5).

    Returns
    -------
    pandas.DataFrame [shape=(n_findings, 11)]
        Columns :data:`FINDINGS_COLUMNS`: ``subject`` (SNR in dB, background, descriptor or accent
        group), ``value, ci_low, ci_high`` (pp; r_s and RER without unit), ``n`` (items;
        backgrounds for r_s), ``p`` (the exact test; p_BH for r_s), ``verdict`` (Table 5: its
        ``base_flag``); for ``overall`` and ``snr`` the absolute levels beside the change,
        ``clean_pp`` (the clean row's) and ``noisy_pp`` (the row's own), in % (corpus WER, or
        accuracy), NaN elsewhere.
    """
    rows = _condition_rows(tables)
    rows += _ranking_rows(ranking)
    rows += _descriptor_rows(table2)
    rows += _accent_rows(table4)
    rows += _steering_rows(table5)
    return pd.DataFrame(rows, columns=FINDINGS_COLUMNS)


# ---------------------------------------------------------------------------- the wording
def _family_name(task: str) -> str:
    """``ASR`` / ``KWS``: the upper-case name of the task's family."""
    return task_family(task).upper()


def _measure_name(task: str) -> str:
    """``ASR ΔWER`` / ``KWS ΔAcc``: the family and its degradation label."""
    fam = task_family(task)
    return f"{fam.upper()} {TASK_FAMILIES[fam].degradation_label}"


def _has_ci(r) -> bool:
    """True when the row has both interval bounds."""
    return bool(np.isfinite(r.ci_low) and np.isfinite(r.ci_high))


def _val(r, nd: int = 1, unit: str = " pp") -> str:
    """The value (signed) with its interval when it has one."""
    if np.isfinite(r.value):
        text = f"{r.value:+.{nd}f}{unit}"
    else:
        text = "–"
    if _has_ci(r):
        text += f" [{r.ci_low:+.{nd}f}, {r.ci_high:+.{nd}f}]"
    return text


def _no_ci(rs) -> str:
    """``, no interval`` when no row has one, ``, no interval for some`` when only some have."""
    k = sum(not _has_ci(r) for r in rs)
    if k == 0:
        return ""
    if k == len(rs):
        return ", no interval"
    return ", no interval for some"


def _items(n, what: str = "item") -> str:
    """``1 item``, ``3 items``."""
    if int(n) == 1:
        return f"{int(n)} {what}"
    return f"{int(n)} {what}s"


def _pv(p) -> str:
    """A p-value to 2 significant digits below 0.001, else 3 decimals; ``–`` when absent."""
    if not np.isfinite(p):
        return "–"
    if p < 0.001:
        return f"{p:.2g}"
    return f"{p:.3f}"


class _Wording:
    """The rows of one findings table and whether more than one model was scored."""

    def __init__(self, found: pd.DataFrame, models: list[str]):
        self.found = found
        self.models = models
        self.several = len(models) > 1

    def rows(self, finding: str, task: str | None = None) -> list:
        """The rows of one finding (of one task when given), as named tuples."""
        f = self.found[self.found["finding"] == finding]
        if task is not None:
            f = f[f["task"] == task]
        return list(f.itertuples())

    def who(self, r) -> str:
        """`` for `model` `` when several models were scored."""
        if self.several:
            return f" for `{r.model}`"
        return ""


def _level_name(task: str) -> str:
    """``ASR WER`` / ``KWS accuracy``: the family and its measure, as the levels are named."""
    fam = task_family(task)
    return f"{fam.upper()} {TASK_FAMILIES[fam].measure_label}"


def _pct(v) -> str:
    """A level in % to 1 decimal (``–`` when absent)."""
    if v is None or not np.isfinite(v):
        return "–"
    return f"{v:.1f} %"


def _overall_clause(w: _Wording, r) -> str:
    """One task and model over every background and SNR: the levels clean and noisy beside the
    change."""
    spec = TASK_FAMILIES[task_family(r.task)]
    return (
        f"{_family_name(r.task)}: {spec.measure_label} {_pct(r.clean_pp)} clean, "
        f"{_pct(r.noisy_pp)} noisy, mean per-item {spec.degradation_label} {_val(r)}{w.who(r)} "
        f"({_items(r.n)}{_no_ci([r])}, p = {_pv(r.p)}, *{r.verdict}*)"
    )


def _overall_table(w: _Wording) -> str:
    """The Overall finding of several models as one compact Markdown table."""
    lines = [
        "| model | measure | clean % | noisy % | mean per-item Δ pp [95 % CI] | items | p "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in BASE_TASKS.values():
        for r in sorted(w.rows("overall", t), key=lambda x: x.model):
            lines.append(
                f"| `{r.model}` | {_level_name(t)} | {_pct(r.clean_pp)[:-2]} | "
                f"{_pct(r.noisy_pp)[:-2]} | {_val(r, unit='')} | {int(r.n)} | {_pv(r.p)} | "
                f"{r.verdict} |"
            )
    return "\n".join(lines)


def _overall_sentence(w: _Wording, n_resamples: int) -> list[str]:
    """**Overall.** the levels and the mean per-item change of each task and model (several models:
    a sentence and a compact table)."""
    rows = [r for t in BASE_TASKS.values() for r in w.rows("overall", t)]
    if not rows:
        return []
    how = (
        f"+ = worse; 95 % bootstrap intervals over items, {n_resamples} resamples; p of the exact "
        "test; clean and noisy levels are corpus WER or accuracy"
    )
    if w.several:
        return [
            "**Overall.** Over every background and SNR, each model's level clean and noisy and "
            f"its mean per-item change ({how}); the table below. ([Table R1](#table-r1))",
            _overall_table(w),
        ]
    over = "; ".join(_overall_clause(w, r) for r in rows)
    return [
        f"**Overall.** Over every background and SNR, {over} ({how}). One model was scored "
        f"(`{w.models[0]}`), so nothing here compares models. ([Table R1](#table-r1))"
    ]


def _snr_trend(rs: list, measure: str) -> str:
    """How one model's change moves from the highest SNR (first row) to the lowest (last), each
    value with its noisy level (``measure``: ``WER``, ``accuracy``)."""
    d = np.diff([r.value for r in rs])
    hi = rs[0]
    lo = rs[-1]
    if (d == 0).all():
        return f"is {_val(hi)} at every SNR"
    if (d >= 0).all() or (d <= 0).all():
        overlap = (
            _has_ci(hi) and _has_ci(lo) and hi.ci_low <= lo.ci_high and lo.ci_low <= hi.ci_high
        )
        if (d >= 0).all():
            way = "grows"
        else:
            way = "shrinks"
        text = (
            f"{way} as the SNR falls, from {_val(hi)} at {hi.subject:g} dB "
            f"({measure} {_pct(hi.noisy_pp)}) to {_val(lo)} at {lo.subject:g} dB "
            f"({measure} {_pct(lo.noisy_pp)})"
        )
        if overlap:
            text += " (the two intervals overlap)"
        return text
    steps = ", ".join(f"{_val(r)} at {r.subject:g} dB ({measure} {_pct(r.noisy_pp)})" for r in rs)
    return "does not change steadily with the SNR: " + steps


def _snr_groups(w: _Wording) -> list:
    """``(task, [rows of one model, highest SNR first])`` of every task and model with two SNRs or
    more."""
    groups = []
    found = w.found
    for t in BASE_TASKS.values():
        snr_rows = found[(found["finding"] == "snr") & (found["task"] == t)]
        for _model, g in snr_rows.groupby("model"):
            rs = list(g.sort_values("subject", ascending=False).itertuples())  # highest SNR first
            if len(rs) >= 2:
                groups.append((t, rs))
    return groups


def _snr_table(groups: list) -> str:
    """The SNR finding of several models as one compact Markdown table: per model and measure the
    clean level, then per SNR the noisy level and the change (pp) with its interval."""
    snrs = sorted({r.subject for _t, rs in groups for r in rs}, reverse=True)
    head = " | ".join(f"{s:g} dB: level % · Δ pp [95 % CI]" for s in snrs)
    lines = [f"| model | measure | clean % | {head} |", "|---|---|---|" + "---|" * len(snrs)]
    for t, rs in groups:  # task by task, models in order (as the Overall table)
        by = {r.subject: r for r in rs}
        cells = []
        for s in snrs:
            if s in by:
                cells.append(f"{_pct(by[s].noisy_pp)[:-2]} · {_val(by[s], unit='')}")
            else:
                cells.append("–")
        lines.append(
            f"| `{rs[0].model}` | {_level_name(t)} | {_pct(rs[0].clean_pp)[:-2]} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def _snr_sentence(w: _Wording) -> list[str]:
    """**SNR.** how each model's change moves with the SNR (several models: a compact table)."""
    groups = _snr_groups(w)
    if not groups:
        return []
    links = "([Tables R2](#table-r2), [R6](#table-r6), [Figure 7](#figure-7))"
    if w.several:
        return [
            "**SNR.** Per SNR (pooled over backgrounds), each model's noisy level and its mean "
            f"per-item change (+ = worse); the table below. {links}",
            _snr_table(groups),
        ]
    trend = [
        f"{_measure_name(t)}{w.who(rs[0])} "
        f"{_snr_trend(rs, TASK_FAMILIES[task_family(t)].measure_label)}{_no_ci(rs)}"
        for t, rs in groups
    ]
    return [f"**SNR.** {'; '.join(trend)}. {links}"]


def _backgrounds_sentence(w: _Wording, ranking: pd.DataFrame) -> str | None:
    """**Backgrounds.** the most and the least harmful background of Figure 4."""
    ranked = int(np.isfinite(ranking["mean_degradation_pp"].to_numpy(float)).sum())
    ends = {}
    for f in ("most_harmful", "least_harmful"):
        rs = w.rows(f)
        if rs:
            values = ", ".join(f"{_measure_name(r.task)} {_val(r)}" for r in rs)
            ends[f] = f"`{rs[0].subject}` ({values}{_no_ci(rs)})"
    if len(ends) != 2:
        return None
    return (
        f"**Backgrounds.** Of the {ranked} backgrounds ranked by the mean of ASR ΔWER and KWS ΔAcc "
        f"(pooled over models), {ends['most_harmful']} hurt most and {ends['least_harmful']} "
        "least (background ids as in Table 3). ([Figure 4](#figure-4), [Table 3](#table-3))"
    )


def _descriptor_sentence(w: _Wording) -> str | None:
    """**Descriptors.** the strongest rank correlation of each task."""
    desc = []
    for r in w.rows("descriptor"):
        desc.append(
            f"{_family_name(r.task)} `{r.subject}`, r_s = {_val(r, 3, '')} "
            f"({_items(r.n, 'background')}{_no_ci([r])}, p_BH = {_pv(r.p)})"
        )
    if not desc:
        return None
    return (
        "**Descriptors.** The descriptor with the strongest rank correlation with the mean "
        f"degradation (Spearman, across backgrounds, pooled over models): {'; '.join(desc)}. "
        "([Table 2](#table-2), [Figure 3](#figure-3))"
    )


def _accent_sentence(w: _Wording, table4: pd.DataFrame | None) -> str | None:
    """**Accents.** per model, the accent groups of the smallest and the largest ΔWER."""
    acc = []
    for hi, lo in zip(w.rows("accent_high"), w.rows("accent_low")):
        k = int((table4["model"] == hi.model).sum())
        if k > 1:
            acc.append(
                f"{_val(lo)} (`{lo.subject}`, {_items(lo.n)}{_no_ci([lo])}) to {_val(hi)} "
                f"(`{hi.subject}`, {_items(hi.n)}{_no_ci([hi])}) over {k} groups{w.who(hi)}"
            )
        else:
            acc.append(
                f"{_val(hi)} in its one group `{hi.subject}` ({_items(hi.n)}{_no_ci([hi])})"
                f"{w.who(hi)}"
            )
    if not acc:
        return None
    return (
        f"**Accents.** Mean of the items' ΔWER per accent group: {'; '.join(acc)}. "
        "([Table 4, ours](#table-4-ours), [Figure 5](#figure-5))"
    )


def _steering_clause(w: _Wording, r) -> str:
    """One model and family's RER with its interval, or why it is flagged."""
    if isinstance(r.verdict, str):
        flag = r.verdict
    else:
        flag = ""
    if flag or not np.isfinite(r.value):
        return (
            f"{_family_name(r.subject)} RER{w.who(r)} is flagged ({flag or 'not computable'}): "
            "the ratio does not measure a reduction"
        )
    if _has_ci(r):
        ci = f" [{r.ci_low:.2f}, {r.ci_high:.2f}]"
        if r.ci_high < 1 or r.ci_low > 1:
            side = ", its interval excludes 1"
        else:
            side = ", its interval includes 1"
    else:
        ci = ""
        side = ", no interval"
    if r.value < 1:
        below = "below"
    else:
        below = "at or above"
    return f"{_family_name(r.subject)} RER{w.who(r)} {r.value:.2f}{ci} ({below} 1{side})"


def _steering_sentence(w: _Wording) -> str | None:
    """**Steering prompt.** the Residual Effect Ratio of each family and model."""
    steer = [_steering_clause(w, r) for r in w.rows("steering")]
    if not steer:
        return None
    return (
        "**Steering prompt.** The Residual Effect Ratio Δ(steering) / Δ(baseline) (below 1: less "
        f"of the noise effect is left with the prompt): {'; '.join(steer)}. "
        "([Table 5](#table-5), [Figure 6](#figure-6))"
    )


def _sizes_clause(w: _Wording, ranking: pd.DataFrame) -> str:
    """The items of each task and the backgrounds ranked."""
    parts = []
    for t in BASE_TASKS.values():
        rs = w.rows("overall", t)
        if rs:
            parts.append(_items(max(r.n for r in rs), _family_name(t) + " item"))
    return ", ".join(parts) + f", {_items(len(ranking), 'background')}"


def _conditions_clause(tables: dict) -> str:
    """How many background × SNR conditions are coarse or have too few items for a verdict."""
    cnd = pd.concat([t[t["scope"] == "condition"] for t in tables.values()])
    if "coarse" in cnd:
        n_coarse = int((cnd["coarse"].astype(str) == "True").sum())
    else:
        n_coarse = 0
    n_na = int((cnd["verdict"] == "n/a").sum())
    return (
        f"{n_coarse} of {len(cnd)} background × SNR conditions have fewer than "
        f"{COARSE_BELOW_ITEMS} items (*coarse*), {n_na} too few for a verdict"
    )


def _partial_clause(failures: pd.DataFrame | None) -> str:
    """The model × task runs that left stimuli out, or that every run covers its manifest."""
    part = []
    if failures is not None:
        for r in failures.itertuples():
            if r.n_left_out > 0:
                part.append(
                    f"`{r.model}` × {r.task} left out {r.n_left_out} of {r.n_stimuli} stimuli"
                )
    if part:
        return f"a partial run: {'; '.join(part)}"
    return "every model × task covers its manifest"


def _coarse_sentence(w: _Wording, ranking, tables, table2, table4, failures) -> str:
    """**What is coarse.** sizes, coarse conditions, intervals missing, partial runs."""
    coarse = [_sizes_clause(w, ranking), _conditions_clause(tables)]
    if table4 is not None and len(table4):
        coarse.append(
            f"{int(table4['ci_low_pp'].isna().sum())} of {len(table4)} accent groups have no "
            f"interval (fewer than {stats.MIN_N_FOR_INTERVAL} items)"
        )
    if table2 is not None and table2["ci_low"].isna().all():
        coarse.append("no correlation has an interval (too few backgrounds)")
    coarse.append(_partial_clause(failures))
    if not w.several:
        coarse.append("one model")
    return f"**What is coarse.** {'; '.join(coarse)}."


def findings_lines(
    found: pd.DataFrame,
    *,
    tables: dict,
    ranking: pd.DataFrame,
    n_resamples: int,
    table2: pd.DataFrame | None = None,
    table4: pd.DataFrame | None = None,
    failures: pd.DataFrame | None = None,
) -> list[str]:
    """The Findings of the report, one Markdown sentence group per line, in reading order.

    Parameters
    ----------
    found : pandas.DataFrame
        :func:`findings` of the same tables.
    tables : dict
        Task → condition table (:func:`aiplib.analysis.conditions.read_condition_tables`); the
        models named are those of these tables.
    ranking : pandas.DataFrame
        Figure 4's ranking (:func:`aiplib.analysis.paper.background_ranking`).
    n_resamples : int
        The bootstrap resamples of every interval (named in the Overall sentence).
    table2, table4 : pandas.DataFrame or None
        Table 2 (descriptor correlations) and Table 4 (accent groups, ours) when made.
    failures : pandas.DataFrame or None
        ``results/tables/failures_by_model_task.csv`` (stage 8) when written.

    Returns
    -------
    list of str
        Overall, SNR, Backgrounds, Descriptors, Accents, Steering prompt (each when it has rows)
        and What is coarse (always); every number comes from a row of ``found``, each value
        to 1 decimal in pp (r_s to 3, RER to 2) with its 95 % interval in brackets, the Overall
        and SNR changes beside their absolute levels (%). With several models the Overall and SNR
        findings are each a sentence followed by a compact Markdown table (a line starting with
        ``|``; :func:`findings_markdown` sets it apart).
    """
    models = sorted({m for t in tables.values() for m in t["model"].unique()})
    w = _Wording(found, models)
    lines = _overall_sentence(w, n_resamples) + _snr_sentence(w)
    sentences = [
        _backgrounds_sentence(w, ranking),
        _descriptor_sentence(w),
        _accent_sentence(w, table4),
        _steering_sentence(w),
    ]
    lines += [s for s in sentences if s is not None]
    lines.append(_coarse_sentence(w, ranking, tables, table2, table4, failures))
    return lines


def findings_markdown(lines: list[str]) -> str:
    """The Findings as Markdown: each line of :func:`findings_lines` a bullet, a compact table (a
    line that starts with ``|``) set between the bullets as its own block."""
    blocks = []
    bullets = []
    for line in lines:
        if line.startswith("|"):
            if bullets:
                blocks.append("\n".join(bullets))
                bullets = []
            blocks.append(line)
        else:
            bullets.append(f"- {line}")
    if bullets:
        blocks.append("\n".join(bullets))
    return "\n\n".join(blocks)
