"""The display form of the results notebook 09 shows: columns chosen, renamed and formatted, wrapped
in :class:`Table` (HTML for the notebook and ``report.html``, a pipe table for ``report.md``).

A missing or non-finite number is ``–``; percentages and percentage points (``pp``) to one decimal;
p-values to three decimals (two significant digits below 0.001); long responses cut to
:data:`MAX_WORDS` words with ``… +N words`` (:func:`cap_words`).
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis.conditions import condition_label
from aiplib.analysis.conditions.verdicts import COARSE_BELOW_ITEMS
from aiplib.analysis.provenance import model_records
from aiplib.analysis.stats import MIN_N_FOR_INTERVAL, worst_stimuli
from aiplib.core.tasks import TASK_FAMILIES

#: The descriptor definitions with their display names, units and formats (the columns
#: ``display_name, display_unit, display_format``), beside ``aiplib/battery/descriptors.py``.
DESCRIPTOR_INFO_CSV = Path(__file__).parents[1] / "battery" / "descriptor_info.csv"

#: Table 3's columns other than the descriptors, as the report heads them.
TABLE3_HEADERS = {
    "rank": "rank",
    "bg_id": "background id",
    "category": "category",
    "mean_degradation_pp": "mean of ASR ΔWER and KWS ΔAcc (pp)",
    "asr_delta_wer_pp": "ASR ΔWER (pp)",
    "kws_delta_acc_pp": "KWS ΔAcc (pp)",
    "asr_delta_wer_snr_balanced_pp": "ASR ΔWER, SNR-balanced (pp)",
    "kws_delta_acc_snr_balanced_pp": "KWS ΔAcc, SNR-balanced (pp)",
    "audible_snr_excess_db": "audible SNR above nominal (dB)",
}

#: Responses longer than this many words are cut in the worst-stimuli table (``… +N words``).
MAX_WORDS = 30


# ------------------------------------------------------------------------------ formatting
def _text(col: pd.Series) -> pd.Series:
    """A column as strings, missing values as ``""``."""
    return col.astype(object).where(col.notna(), "").astype(str)


def fmt(v, spec: str = ".1f", none: str = "–") -> str:
    """A number formatted with ``spec``; ``none`` for None / NaN / inf; a non-number as
    ``str(v)``."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return none if not math.isfinite(x) else format(x, spec)


def format_p(v) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if not math.isfinite(x) else (f"{x:.2g}" if x < 0.001 else f"{x:.3f}")


def format_ci(est, lo, hi, nd=1, signed=True) -> str:
    if not np.isfinite(float(est)):
        return "–"
    e = f"{float(est):+.{nd}f}" if signed else f"{float(est):.{nd}f}"
    return (
        f"{e} [{float(lo):.{nd}f}, {float(hi):.{nd}f}]"
        if np.isfinite(float(lo)) and np.isfinite(float(hi))
        else e
    )


def format_cis(
    t: pd.DataFrame, est: str, lo: str, hi: str, nd: int = 1, signed: bool = True
) -> list[str]:
    """``estimate [low, high]`` cells (:func:`format_ci`) of the columns ``est, lo, hi`` of
    ``t``."""
    return [format_ci(e, a, b, nd, signed) for e, a, b in zip(t[est], t[lo], t[hi])]


def cap_words(text, max_words: int = MAX_WORDS) -> str:
    """``text`` cut to its first ``max_words`` words and ``… +N words`` if longer; ``""`` for None /
    NaN (``cap_words("a b c d", 2) == "a b … +2 words"``)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    words, rest = str(text).split(), len(str(text).split()) - max_words
    return (
        str(text)
        if rest <= 0
        else " ".join(words[:max_words]) + f" … +{rest} word{'s' if rest != 1 else ''}"
    )


def _md_cell(v) -> str:
    s = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


class Table:
    """A table to show: HTML in the notebook and ``report.html``, a pipe table in ``report.md``.

    Parameters
    ----------
    df : pandas.DataFrame
        Already formatted (strings or numbers); the index is not shown.
    collapsed : str, optional
        Show the HTML inside ``<details>`` with this summary (long tables).
    """

    def __init__(self, df: pd.DataFrame, collapsed: str | None = None):
        self.df = df.reset_index(drop=True)
        self.collapsed = collapsed

    def __len__(self) -> int:
        return len(self.df)

    def _repr_html_(self) -> str:
        if self.df.empty:
            return "<p><em>(no rows)</em></p>"
        h = self.df.to_html(index=False, escape=True, na_rep="–", border=0, classes="tbl")
        for v in ("worse", "better", "same"):
            h = h.replace(f"<td>{v}</td>", f'<td class="{v}">{v}</td>')
        if self.collapsed:
            h = f"<details><summary>{html.escape(self.collapsed)}</summary>{h}</details>"
        return h

    def _repr_markdown_(self) -> str:
        if self.df.empty:
            return "_(no rows)_"
        lines = [
            "| " + " | ".join(_md_cell(v) for v in row) + " |"
            for row in [self.df.columns, *self.df.itertuples(index=False)]
        ]
        return "\n".join(
            [lines[0], "|" + "|".join("---" for _ in self.df.columns) + "|", *lines[1:]]
        )

    def __repr__(self) -> str:
        return self.df.to_string(index=False)


def show_figure(results, name: str, *, width: int = 860):
    """Display ``<results>/figures/<name>.png`` (``width`` in pixels) or say it was not made; the
    output's metadata ``aip_file`` lets ``report.md`` link the file instead of the image."""
    from IPython.display import Image, Markdown, display

    p = Path(results) / "figures" / f"{name}.png"
    if not p.is_file():
        display(Markdown(f"_{name} was not made for this run (see the log of stage 9)._"))
        return
    display(Image(filename=str(p), width=width), metadata={"aip_file": f"figures/{name}.png"})


# ---------------------------------------------------------------------------- worst stimuli
def worst_display(
    scores: pd.DataFrame, family: str, n: int = 10, max_words: int = MAX_WORDS
) -> Table:
    """The ``n`` stimuli that got worst against their clean version, one per item, in the ranking
    of :func:`aiplib.analysis.stats.worst_stimuli` (the explorer's too): background @ SNR in one
      column
    (:func:`aiplib.analysis.conditions.condition_label`), WER in %, ΔWER in pp, texts capped
    (:func:`cap_words`), model only when several models were scored."""
    w = worst_stimuli(scores, family, n)
    if w.empty:
        return Table(pd.DataFrame())
    d = pd.DataFrame()
    if scores["model"].nunique() > 1:
        d["model"] = w["model"]
    d["background @ SNR"] = [condition_label(b, s) for b, s in zip(w["bg_id"], w["snr_db"])]
    d["item"] = w["item_id"]
    _WORST_COLUMNS[TASK_FAMILIES[family].measure_kind](d, w, max_words)
    d["clean response"] = [cap_words(t, max_words) for t in w["clean_response"]]
    d["noisy response"] = [cap_words(t, max_words) for t in w["response"]]
    d["stimulus"] = w["stimulus_id"]
    return Table(d)


def _worst_error_rate_columns(d: pd.DataFrame, w: pd.DataFrame, max_words: int) -> None:
    """Add ΔWER (pp), the clean → noisy WER (%) and the capped reference to ``d``."""
    d["ΔWER pp"] = [fmt(100 * v) for v in w["delta"]]
    d["WER % clean → noisy"] = [
        f"{fmt(100 * a)} → {fmt(100 * b)}" for a, b in zip(w["clean_score"], w["score"])
    ]
    d["reference"] = [cap_words(t, max_words) for t in w["reference"]]


def _worst_binary_columns(d: pd.DataFrame, w: pd.DataFrame, max_words: int) -> None:
    """Add the keyword label to ``d``."""
    d["label"] = w["reference"]


#: ``TaskFamily.measure_kind`` → the family's columns of :func:`worst_display`.
_WORST_COLUMNS = {
    "error_rate": _worst_error_rate_columns,
    "binary": _worst_binary_columns,
}


# ---------------------------------------------------------------------------- condition tables
def _error_rate_condition_columns(d: pd.DataFrame, t: pd.DataFrame) -> None:
    """Add the WER, CER, S / D / I, clean WER and the two ΔWER columns to ``d``."""
    for name, c in (("WER %", "wer_pp"), ("mean WER %", "mean_wer_pp"), ("CER %", "cer_pp")):
        d[name] = [fmt(v) for v in t[c]]
    d["S / D / I %"] = [
        f"{fmt(s)} / {fmt(dl)} / {fmt(i)}"
        for s, dl, i in zip(t["sub_pp"], t["del_pp"], t["ins_pp"])
    ]
    d["clean WER %"] = [fmt(v) for v in t["clean_wer_pp"]]
    d["ΔWER pp [95% CI]"] = format_cis(t, "delta_pp", "ci_low_pp", "ci_high_pp")
    d["corpus ΔWER pp [95% CI]"] = format_cis(
        t, "delta_corpus_pp", "corpus_ci_low_pp", "corpus_ci_high_pp"
    )


def _binary_condition_columns(d: pd.DataFrame, t: pd.DataFrame) -> None:
    """Add the accuracy, clean accuracy and ΔAcc columns to ``d``."""
    d["acc %"] = [fmt(v) for v in t["acc_pp"]]
    d["clean acc %"] = [fmt(v) for v in t["clean_acc_pp"]]
    d["ΔAcc pp [95% CI]"] = format_cis(t, "delta_pp", "ci_low_pp", "ci_high_pp")


#: ``TaskFamily.measure_kind`` → the family's measure columns of :func:`condition_display`.
_CONDITION_COLUMNS = {
    "error_rate": _error_rate_condition_columns,
    "binary": _binary_condition_columns,
}


def _verdict_counts(t: pd.DataFrame) -> list[str]:
    """``worse / better / tie`` per row ("–" without a test)."""
    counts = []
    for w, b, ti in zip(t["n_worse"], t["n_better"], t["n_ties"]):
        if pd.isna(w):
            counts.append("–")
        else:
            counts.append(f"{int(w)} / {int(b)} / {int(ti)}")
    return counts


def condition_display(t: pd.DataFrame, scope, *, collapsed: str | None = None) -> Table:
    """The rows of ``scope`` (a name or list of :data:`aiplib.analysis.conditions.SCOPES`, e.g.
    ``["clean", "overall", "snr"]``) of one task's condition table ``t``
    (``conditions_<task>.csv``); ``collapsed``: the summary line of a collapsed HTML table."""
    scopes = [scope] if isinstance(scope, str) else list(scope)
    t = t[t["scope"].isin(scopes)]
    if len(t):
        family = str(t["family"].iloc[0])
    else:
        family = next(iter(TASK_FAMILIES))
    d = pd.DataFrame()
    if t["model"].nunique() > 1:
        d["model"] = t["model"].to_numpy()
    for name, c in (("condition", "condition"), ("items", "n_items"), ("stimuli", "n_stimuli")):
        d[name] = t[c].to_numpy()
    _CONDITION_COLUMNS[TASK_FAMILIES[family].measure_kind](d, t)
    d["worse / better / tie"] = _verdict_counts(t)
    d["test"] = _text(t["test"]).to_numpy()
    d["p"] = [format_p(v) for v in t["p_value"]]
    if "p_bh" in t:
        d["p (BH)"] = [format_p(v) for v in t["p_bh"]]
    d["verdict"] = _text(t["verdict"]).to_numpy()
    return Table(d, collapsed=collapsed)


#: Column of :func:`summary_table` holding the robust view.
_ROBUST_COLUMN = (
    "robust (noisy): ASR capped mean / median WER %, loops; KWS strict acc / non-answers %"
)

#: Overall-row values :func:`summary_table` reads (beside the family's measure).
_SUMMARY_VALUES = (
    "delta_pp",
    "ci_low_pp",
    "ci_high_pp",
    "delta_corpus_pp",
    "corpus_ci_low_pp",
    "corpus_ci_high_pp",
    "p_value",
    "n_loops",
)


def _error_rate_robust(overall: pd.Series) -> str:
    """Capped mean / median WER (%) and the loop count of the overall row."""
    capped = fmt(overall.get("mean_wer_capped_pp", math.nan))
    median = fmt(overall.get("median_wer_pp", math.nan))
    n_loops = overall.get("n_loops", math.nan)
    loops = "–" if pd.isna(n_loops) else str(int(n_loops))
    return f"{capped} / {median}; " + "loops " + loops


def _binary_robust(overall: pd.Series) -> str:
    """Strict accuracy / non-answers (%) of the overall row."""
    strict = fmt(overall.get("strict_acc_pp", math.nan))
    non_answers = fmt(overall.get("non_answer_pp", math.nan))
    return f"{strict} / {non_answers}"


#: ``TaskFamily.measure_kind`` → the robust view of :func:`summary_table`.
_ROBUST_TEXT = {"error_rate": _error_rate_robust, "binary": _binary_robust}


def _summary_row(task: str, model, g: pd.DataFrame, spec) -> dict:
    """The summary line of one task and model from its condition-table rows ``g``."""
    val = f"{spec.summary}_pp"
    cl = g[g["scope"] == "clean"]
    ov = g[g["scope"] == "overall"]
    cs = g[g["scope"] == "condition"]
    o = ov.iloc[0] if len(ov) else pd.Series(dtype=object)
    x = {c: o.get(c, math.nan) for c in (val, *_SUMMARY_VALUES)}
    robust = "–" if o.empty else _ROBUST_TEXT[spec.measure_kind](o)
    counts = cs["verdict"].value_counts()
    n_coarse = int((cs.get("coarse", pd.Series(dtype=object)).astype(str) == "True").sum())
    return {
        "task": task,
        "model": model,
        "measure": spec.measure_label,
        "clean %": fmt(cl[val].iloc[0]) if len(cl) else "–",
        "noisy (all) %": fmt(x[val]),
        "mean per-item Δ pp [95% CI] (+ = worse)": format_ci(
            x["delta_pp"], x["ci_low_pp"], x["ci_high_pp"]
        ),
        "corpus Δ pp [95% CI]": format_ci(
            x["delta_corpus_pp"], x["corpus_ci_low_pp"], x["corpus_ci_high_pp"]
        ),
        "p": format_p(x["p_value"]),
        "verdict": o.get("verdict", ""),
        "conditions worse / same / better / n/a": " / ".join(
            str(int(counts.get(v, 0))) for v in ("worse", "same", "better", "n/a")
        ),
        "coarse conditions": str(n_coarse),
        _ROBUST_COLUMN: robust,
    }


def summary_table(tables: dict) -> Table:
    """One row per task and model: clean and noisy level, the overall change with its interval,
    verdict counts over the background × SNR conditions and the robust view."""
    rows = []
    for task, t in tables.items():
        spec = TASK_FAMILIES[t["family"].iloc[0]]
        for model, g in t.groupby("model", sort=True):
            rows.append(_summary_row(task, model, g, spec))
    return Table(pd.DataFrame(rows).fillna("–"))


# ----------------------------------------------------------------------------- Tables 2–5
def table2_display(t2: pd.DataFrame) -> Table:
    """Table 2 (``table2_descriptor_correlations.csv``): r_s to 3 decimals as the paper prints it,
    with its interval; the authors' p (scipy's t-approximation), ours (exact or permutation) and
    its p_BH (descriptors rounded as the authors); r_s of the unrounded descriptors beside."""
    return Table(
        pd.DataFrame(
            {
                "task": t2["task"],
                "model": t2["model"],
                "descriptor": t2["descriptor"],
                "n": t2["n"],
                "r_s [95% CI]": format_cis(t2, "r_s", "ci_low", "ci_high", 3),
                "p (t approx., as the authors)": [format_p(v) for v in t2["p"]],
                "p (exact / permutation)": [format_p(v) for v in t2["p_permutation"]],
                "p_BH": [format_p(v) for v in t2["p_bh"]],
                "r_s unrounded descriptors": [fmt(v, ".3f") for v in t2["r_s_unrounded"]],
                "note": _text(t2["note"]),
            }
        )
    )


def descriptor_labels() -> pd.DataFrame:
    """The display form of the nine descriptors, indexed by descriptor id: ``display_name`` (the
    paper's name, e.g. ``Spectral centroid``), ``display_unit`` (``Hz``, ``dB``…),
    ``display_format`` (a format spec, e.g. ``.0f``) and ``header`` (``Spectral centroid
    (Hz)``), read from :data:`DESCRIPTOR_INFO_CSV` (the file that defines them)."""
    info = pd.read_csv(DESCRIPTOR_INFO_CSV, dtype=str, keep_default_na=False)
    info = info.set_index("descriptor")
    info["header"] = info["display_name"] + " (" + info["display_unit"] + ")"
    return info[["display_name", "display_unit", "display_format", "header"]]


def descriptor_header(name: str) -> str:
    """A descriptor's name and unit as a table header or axis label (``zcr`` → ``Zero crossing
    rate (crossings/sample)``); an unknown name is returned as it is."""
    info = descriptor_labels()
    if name in info.index:
        return str(info.at[name, "header"])
    return name


def table3_display(t3: pd.DataFrame) -> Table:
    """Table 3 (``table3_descriptor_values.csv``) for a reader: the descriptors under the paper's
    names with their units (:func:`descriptor_labels`: ``Spectral centroid (Hz)`` to 0 decimals,
    RMS energy variance in powers of ten), the degradations in pp to 1 decimal under
    :data:`TABLE3_HEADERS`; any other column (one added later) keeps its name, numbers to 2
    decimals."""
    info = descriptor_labels()
    d = pd.DataFrame(index=t3.index)
    for c in t3.columns:
        v = t3[c]
        if c in info.index:
            d[info.at[c, "header"]] = [fmt(x, info.at[c, "display_format"]) for x in v]
        elif c in TABLE3_HEADERS:
            d[TABLE3_HEADERS[c]] = [fmt(x) for x in v] if pd.api.types.is_float_dtype(v) else v
        elif pd.api.types.is_float_dtype(v):
            d[c] = [fmt(x, ".2f") for x in v]
        else:
            d[c] = v
    return Table(d)


def table4_display(t4: pd.DataFrame) -> Table:
    """Table 4, ours (``table4_accent_dwer_item_means.csv``): the mean of the items' mean ΔWER per
    model and accent group, with its interval."""
    return Table(
        pd.DataFrame(
            {
                "model": t4["model"],
                "accent group": t4["accent_group"],
                "items": t4["n_items"],
                "clean WER %": [fmt(v) for v in t4["clean_wer_pp"]],
                "mean of item ΔWER pp [95% CI]": format_cis(
                    t4, "item_mean_delta_wer_pp", "ci_low_pp", "ci_high_pp"
                ),
            }
        )
    )


def table4_authors_display(t4a: pd.DataFrame) -> Table:
    """Table 4, the authors' (``table4_accent_dwer.csv``): their accent labels, the flat mean ΔWER
    over the noisy rows."""
    return Table(
        pd.DataFrame(
            {
                "model": t4a["model"],
                "accent label": t4a["accent_label"],
                "items": t4a["n_items"],
                "noisy rows": t4a["n_rows"],
                "mean ΔWER pp": [fmt(v, ".2f") for v in t4a["mean_delta_wer_pp"]],
            }
        )
    )


def table5_display(t5: pd.DataFrame) -> Table:
    """Table 5 (``table5_prompt_steering_rer.csv``): Δ baseline, Δ steering and the authors'
    unpaired RER, our paired RER beside."""
    return Table(
        pd.DataFrame(
            {
                "model": t5["model"],
                "family": t5["family"],
                "items": t5["n_items"],
                "Δ baseline pp": [fmt(v) for v in t5["delta_base_pp"]],
                "Δ steering pp": [fmt(v) for v in t5["delta_steer_pp"]],
                "RER [95% CI]": format_cis(t5, "rer", "ci_low", "ci_high", 2, signed=False),
                "flag": _text(t5["base_flag"]) if "base_flag" in t5 else "",
                "rule": _text(t5["rule"]),
                "paired RER (ours) [95% CI]": format_cis(
                    t5, "rer_paired", "rer_paired_ci_low", "rer_paired_ci_high", 2, signed=False
                )
                if "rer_paired" in t5
                else "–",
                "pairs": t5["n_pairs"] if "n_pairs" in t5 else "–",
                "note": _text(t5["note"]),
            }
        )
    )


def comparison_display(c: pd.DataFrame) -> Table:
    """:func:`aiplib.analysis.comparison.compare_runs` rows of the clean, overall and per-SNR
    scopes."""
    top = c[c["scope"].isin(["clean", "overall", "snr"])]
    return Table(
        pd.DataFrame(
            {
                "task": top["task"],
                "model": top["model"],
                "condition": top["condition"],
                "pairs": top["n_pairs"],
                "previous %": [fmt(v) for v in top["a_pp"]],
                "this run %": [fmt(v) for v in top["b_pp"]],
                "change pp [95% CI] (+ = worse)": format_cis(
                    top, "change_pp", "ci_low_pp", "ci_high_pp"
                ),
                "test": top["test"],
                "p": [format_p(v) for v in top["p_value"]],
                "verdict": top["verdict"],
            }
        )
    )


def not_applicable_note(ws) -> str | None:
    """One Markdown line naming the models whose steering tasks are not applicable (they take no
    task prompt, :func:`aiplib.inference.runner.not_applicable`; read from
    ``inference/<model>/run_log.jsonl`` as
    :func:`aiplib.analysis.provenance.model_records`), or None when there are none."""
    found = {
        m: sorted(r["not_applicable"])
        for m, r in model_records(ws).items()
        if "not_applicable" in r
    }
    return (
        (
            "_Not applicable (the model takes no task prompt, so a steering prompt would repeat "
            "its baseline decode): "
            + "; ".join(f"{m} — {', '.join(t)}" for m, t in found.items())
            + "._"
        )
        if found
        else None
    )


def numeric_path_text(path: dict) -> str:
    """One numeric path of :func:`aiplib.analysis.provenance.numeric_paths` in words: CPU, then what
    the backend recorded (CTranslate2's ISA and GEMM backends and its pin, torch's CPU kernels and
    threads, or who computed), then how many runs and rows took it."""
    if "not_recorded" in path:
        return f"not recorded ({path.get('rows', 0)} rows: {path['not_recorded']})"
    cpu = path.get("cpu_model") or "unknown"
    vendor = path.get("cpu_vendor") or "vendor unknown"
    parts = [f"CPU {cpu} ({vendor})"]
    ct2 = path.get("ctranslate2")
    if isinstance(ct2, dict) and "error" in ct2:
        parts.append(f"CTranslate2 backend not read ({ct2['error']})")
    elif isinstance(ct2, dict):
        parts.append(
            f"CTranslate2 ISA {ct2.get('isa', '?')}, "
            f"int8 GEMM {ct2.get('gemm_s8_backend', '?')}, "
            f"float GEMM {ct2.get('sgemm_backend', '?')}, MKL {ct2.get('use_mkl', '?')}"
        )
    if "reason" in path:
        pairs = sorted((path.get("variables") or {}).items())
        variables = ", ".join(f"{name}={value}" for name, value in pairs)
        parts.append(f"{path['reason']} ({variables or 'no variables set'})")
    torch = path.get("torch")
    if isinstance(torch, dict):
        parts.append(
            f"torch CPU kernels {torch.get('cpu_capability', '?')}, "
            f"{torch.get('num_threads', '?')} threads, device {torch.get('device', '?')}"
        )
    if "computed_by" in path:
        parts.append(f"computed by {path['computed_by']}")
    parts.append(f"{path.get('runs', 0)} run(s), {path.get('rows', 0)} rows")
    return "; ".join(parts)


def debian_packages_line(record: dict) -> str:
    """The Debian packages of :func:`aiplib.analysis.provenance.debian_packages` on one line:
    ``espeak-ng 1.51+dfsg-10+deb12u2 (.deb sha256 a11396a690f8…)``, … and where they were read."""
    packages = record.get("packages") or []
    if not packages:
        return f"Debian packages of the inputs: {record.get('source', 'not recorded')}"
    words = []
    for p in packages:
        version = p.get("version") or p.get("status")
        digest = p.get("deb_sha256") or ""
        where = f".deb sha256 {digest[:12]}…"
        if not digest:
            where = p.get("sha256_source")
        words.append(f"{p['package']} {version} ({where})")
    return f"Debian packages of the inputs, from {record.get('source')}: " + ", ".join(words)


def _say(value, absent: str = "not recorded"):
    """``value``, or ``absent`` when it is None or empty."""
    if value is None or value == "":
        return absent
    return value


def _model_line(model: str, record: dict) -> str:
    """One model of the run record: revision, weights (with their digest) and inapplicable tasks."""
    line = (
        f"{model}: revision {_say(record.get('revision'), 'not pinned')}, "
        f"weights {_say(record.get('weights'))}"
    )
    if record.get("weights_sha256"):
        line += f" (sha256 {str(record.get('weights_sha256'))[:12]}…)"
    if record.get("not_applicable"):
        tasks = ", ".join(record["not_applicable"])
        line += f"; takes no task prompt (not applicable: {tasks})"
    return line


def _manifest_line(family: str, record: dict) -> str:
    """One manifest of the run record: digest, first seed and row count."""
    if record.get("seed_start") is None:
        seeds = "seeds not recorded"
    else:
        seeds = f"seeds from {record['seed_start']}"
    if record.get("n_rows") is None:
        rows = ", rows not counted)"
    else:
        rows = f", {record['n_rows']} rows)"
    return f"manifests/{family}.csv sha256 {_say(record.get('sha256'))} (" + seeds + rows


def _prompt_line(task: str, prompt: dict) -> str:
    """The prompt of one task: its id and text, or the set whose file holds the text."""
    if prompt.get("text") is not None:
        return f"prompt of {task}: [{prompt.get('prompt_id')}] {prompt.get('text')}"
    return (
        f"prompt of {task}: {prompt.get('prompt_set')} set, text in its source file "
        "(not fetched here)"
    )


def _answer_rule_line(task: str, rules: dict) -> str:
    """The answer rules of one task and how many answers they changed."""
    cleanup = rules.get("response_cleanup") or {}
    null_rule = rules.get("null_answer") or {}
    n_cleaned = sum((rules.get("n_cleaned") or {}).values())
    n_null = sum((rules.get("n_null_as_text") or {}).values())
    return (
        f"answers of {task}: clean-up {_say(cleanup.get('name'))} ({n_cleaned} changed); "
        f'null answer {_say(null_rule.get("name"))} ({n_null} read as "None")'
    )


def _versions_line(rec: dict) -> str:
    """aiplib's version and the versions of the other packages."""
    others = []
    for name, version in (rec.get("versions") or {}).items():
        if name != "aiplib":
            others.append(f"{name} {_say(version, 'not installed')}")
    return f"aiplib {_say(rec.get('aiplib_version'))}; " + ", ".join(others)


def _bootstrap_line(analysis: dict) -> str:
    """The bootstrap settings of the analysis."""
    return (
        f"bootstrap seed {_say(analysis.get('seed'))}, "
        f"{_say(analysis.get('n_resamples'), 'unrecorded')} resamples, level "
        f"{_say(analysis.get('level'))}"
    )


def provenance_lines(rec: dict) -> list[str]:
    """Readable lines of a run record (:func:`aiplib.analysis.provenance.collect_provenance`);
    absent values are said in words ("revision: not pinned"). The models that produced rows come
    first, then apart those whose load failed, each with its one-line reason
    (:func:`_model_lines`)."""
    man = [_manifest_line(f, m) for f, m in (rec.get("manifests") or {}).items()]
    n = rec.get("normalizer") or {}
    prompts = [_prompt_line(t, p) for t, p in (rec.get("tasks") or {}).items()]
    rules = [_answer_rule_line(t, r) for t, r in (rec.get("answer_rules") or {}).items()]
    return [
        _versions_line(rec),
        f"normaliser {_say(n.get('name'))} {_say(n.get('version'), '')}".rstrip(),
        *rules,
        _bootstrap_line(rec.get("analysis") or {}),
        *man,
        *_model_lines(rec),
        *prompts,
        debian_packages_line(rec.get("debian_packages") or {}),
    ]


def _model_lines(rec: dict) -> list[str]:
    """The run record's model lines: one per model that produced rows (:func:`_model_line`), one per
    model whose load failed (``models_not_loaded``: "<id>: not loaded, no rows (<reason>)"), then
    the numeric path of each run that decoded rows."""
    model_records = rec.get("models") or {}
    lines = [_model_line(m, v) for m, v in model_records.items()]
    for model, reason in (rec.get("models_not_loaded") or {}).items():
        lines.append(f"{model}: not loaded, no rows ({reason})")
    for model, record in model_records.items():
        for path in record.get("numerics") or []:
            lines.append(f"{model} numeric path: {numeric_path_text(path)}")
    return lines


def window_warnings(models: dict) -> list[str]:
    """One warning line per model whose last stage-7 run decoded on the embedded Whisper's opt-in
    15/20/30 s encoder window (``decoding_path == "window"`` in
    :func:`aiplib.analysis.provenance.model_records`); [] when every model used Whisper's 30 s
      window.

    The window changes the measured noise effect on recordings it was not tuned on
    (docs/BENCHMARKS.md, "The embedded Whisper's encoder window"), so a report made from its rows
    says so under its Findings.
    """
    lines = []
    for model_id, record in models.items():
        if record.get("decoding_path") != "window":
            continue
        lines.append(
            f"**Decoding.** `{model_id}` was decoded on the 15/20/30 s encoder window "
            "(`decoding window`), not Whisper's 30 s window: it changes the measured noise "
            'effect on recordings it was not tuned on (docs/BENCHMARKS.md, "The embedded '
            "Whisper's encoder window\"); compare it with 30 s runs only with care."
        )
    return lines


# ------------------------------------------------------------------------------- glossary
#: The report's glossary: ``(anchor, term, pattern, definition)``; the first use of each term in
#: the report links to its entry (:func:`link_first_uses`, the regular expression ``pattern``).
GLOSSARY = (
    ("glossary-snr", "SNR", r"\bSNRs?\b",
     "signal-to-noise ratio in dB: the speech's power over the background's in the mixture "
     "(10, 5, 0 dB: the lower, the louder the background). *Clean* stimuli have no background."),
    ("glossary-wer", "WER", r"\bWER\b",
     "word error rate: (substitutions + deletions + insertions) / reference words, in %. *Corpus "
     "WER* pools the counts of all utterances; *mean WER* averages each utterance's WER."),
    ("glossary-delta-wer", "ΔWER", r"ΔWER",
     "WER(noisy) − WER(clean) of the same item, in percentage points; positive means the "
     "background hurt. The *mean per-item* change averages each item's change first."),
    ("glossary-delta-acc", "ΔAcc", r"ΔAcc",
     "keyword-spotting accuracy clean − noisy of the same item, in percentage points; positive "
     "means the background hurt."),
    ("glossary-pp", "pp", r"\bpp\b",
     "percentage points: the difference of two percentages (30 % → 45 % is +15 pp)."),
    ("glossary-ci", "95 % interval", r"95 % (?:bootstrap )?intervals?",
     "a percentile bootstrap interval: the items (or backgrounds) are resampled with replacement "
     f"and the middle 95 % of the recomputed values kept; none below {MIN_N_FOR_INTERVAL} items."),
    ("glossary-verdict", "verdict", r"\bverdicts?\b",
     "*worse* / *better* when the interval excludes 0, the change reaches the minimum change and "
     "the BH-adjusted exact p is below 0.05; *same* otherwise; *n/a* with too few items."),
    ("glossary-coarse", "coarse", r"\bcoarse\b",
     f"a row resting on fewer than {COARSE_BELOW_ITEMS} items: its interval is wide and its "
     "verdict fragile."),
    ("glossary-background-id", "background id", r"\bbackground ids?\b",
     "the name of a background recording (Table 3 gives its category): in the demo `moh_…` is "
     "music on hold, `*_noise` a synthetic noise control, `babble_…` / `hubbub_…` several "
     "talkers; in the paper's battery, ESC-50, MS-SNSD, MUSAN and NOISEX-92 clip names."),
    ("glossary-r-s", "r_s", r"\br_s\b",
     "Spearman's rank correlation across backgrounds between a descriptor and the mean "
     "degradation (−1 to +1; +1: the higher the descriptor, the more harm)."),
    ("glossary-p-bh", "p_BH", r"\bp_BH\b|\bp \(BH\)",
     "a p-value adjusted by Benjamini–Hochberg for the many tests of a table (the false "
     "discovery rate); below 0.05 counts as significant."),
    ("glossary-rer", "RER", r"\bRER\b",
     "Residual Effect Ratio Δ(steering prompt) / Δ(baseline prompt): below 1, the steering "
     "prompt left less of the noise effect; flagged when Δ(baseline) ≤ 0 or < 1 pp."),
)

#: Spans :func:`link_first_uses` never links inside: code, links, HTML tags, headings, math.
_PROTECTED = re.compile(r"`[^`\n]*`|\[[^\]\n]*\]\([^)\n]*\)|<[^>\n]+>|^#+ .*$|\$[^$\n]*\$", re.M)


def glossary_markdown() -> str:
    """The glossary section's body: one Markdown bullet per :data:`GLOSSARY` entry, each with the
    anchor its first use in the report links to."""
    return "\n".join(
        f'- <a id="{anchor}"></a>**{term}**: {text}' for anchor, term, _p, text in GLOSSARY
    )


def link_first_uses(text: str, pending: dict) -> str:
    """``text`` (Markdown) with the first use of each term still in ``pending`` (anchor → compiled
    pattern) linked to its glossary entry; linked terms are removed from ``pending``. Code spans,
    links, HTML tags, headings and math are left alone."""
    out = []
    last = 0
    for m in _PROTECTED.finditer(text):
        out.append(_link_plain(text[last : m.start()], pending))
        out.append(m.group(0))
        last = m.end()
    out.append(_link_plain(text[last:], pending))
    return "".join(out)


def _link_plain(text: str, pending: dict) -> str:
    """One unprotected stretch of :func:`link_first_uses`: the earliest pending term first."""
    first = None
    for anchor, pat in pending.items():
        m = pat.search(text)
        if m is not None and (first is None or m.start() < first[1].start()):
            first = (anchor, m)
    if first is None:
        return text
    anchor, m = first
    del pending[anchor]
    link = f"[{m.group(0)}](#{anchor})"
    return text[: m.start()] + link + _link_plain(text[m.end() :], pending)


def glossary_patterns() -> dict:
    """Anchor → compiled pattern of every :data:`GLOSSARY` term (what :func:`link_first_uses`
    takes)."""
    return {anchor: re.compile(p) for anchor, _t, p, _d in GLOSSARY}


# ------------------------------------------------------------------------------ captions
def figure7_caption(curves: pd.DataFrame) -> str:
    """Figure 7's caption for the models of this run: the models drawn, and those left out of panel
    (b) (``in_figure`` False, :data:`aiplib.analysis.paper.FIG7_KWS_EXCLUDE`) only when the run has
    one."""
    models = sorted(curves["model"].unique()) if len(curves) else []
    out = sorted(set(curves.loc[~curves["in_figure"].astype(bool), "model"])) if len(curves) else []
    drawn = ", ".join(f"`{m}`" for m in models) or "none"
    text = (
        '<a id="figure-7"></a>**Figure 7 · Mean per-utterance WER (ASR) and accuracy (KWS) per '
        f"SNR**, one line per model ({drawn}), 95 % bootstrap bands over items; the clean stimuli "
        "are the leftmost point. As the authors: the mean over every stimulus of the condition "
        "(all backgrounds)"
    )
    if out:
        text += f"; panel (b) leaves out {', '.join(f'`{m}`' for m in out)} (as the paper)"
    return text + ". `figures/figure7_snr_performance.pdf`"
