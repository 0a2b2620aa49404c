"""The display form of the results notebook 09 shows: columns chosen, renamed and formatted, wrapped
in :class:`Table` (HTML for the notebook and ``report.html``, a pipe table for ``report.md``).

A missing or non-finite number is ``–``; percentages and percentage points (``pp``) to one decimal;
p-values to three decimals (two significant digits below 0.001); long responses cut to
:data:`MAX_WORDS` words with ``… +N words`` (:func:`cap_words`).
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis.conditions import condition_label
from aiplib.analysis.provenance import model_records
from aiplib.analysis.stats import AUTHORS_DESCRIPTOR_DECIMALS, worst_stimuli

# Responses longer than this many words are cut in the worst-stimuli table (``… +N words``).
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
    """``estimate [low, high]`` cells (:func:`format_ci`) of the columns ``est, lo, hi`` of ``t``."""
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
    if family == "asr":
        d["ΔWER pp"] = [fmt(100 * v) for v in w["delta"]]
        d["WER % clean → noisy"] = [
            f"{fmt(100 * a)} → {fmt(100 * b)}" for a, b in zip(w["clean_score"], w["score"])
        ]
        d["reference"] = [cap_words(t, max_words) for t in w["reference"]]
    else:
        d["label"] = w["reference"]
    d["clean response"] = [cap_words(t, max_words) for t in w["clean_response"]]
    d["noisy response"] = [cap_words(t, max_words) for t in w["response"]]
    d["stimulus"] = w["stimulus_id"]
    return Table(d)


# ---------------------------------------------------------------------------- condition tables
def condition_display(t: pd.DataFrame, scope, *, collapsed: str | None = None) -> Table:
    """The rows of ``scope`` (a name or list of :data:`aiplib.analysis.conditions.SCOPES`, e.g.
    ``["clean", "overall", "snr"]``) of one task's condition table ``t``
    (``conditions_<task>.csv``); ``collapsed``: the summary line of a collapsed HTML table."""
    scopes = [scope] if isinstance(scope, str) else list(scope)
    t = t[t["scope"].isin(scopes)]
    family = str(t["family"].iloc[0]) if len(t) else "asr"
    d = pd.DataFrame()
    if t["model"].nunique() > 1:
        d["model"] = t["model"].to_numpy()
    for name, c in (("condition", "condition"), ("items", "n_items"), ("stimuli", "n_stimuli")):
        d[name] = t[c].to_numpy()
    if family == "asr":
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
    else:
        d["acc %"] = [fmt(v) for v in t["acc_pp"]]
        d["clean acc %"] = [fmt(v) for v in t["clean_acc_pp"]]
        d["ΔAcc pp [95% CI]"] = format_cis(t, "delta_pp", "ci_low_pp", "ci_high_pp")
    d["worse / better / tie"] = [
        "–" if pd.isna(w) else f"{int(w)} / {int(b)} / {int(ti)}"
        for w, b, ti in zip(t["n_worse"], t["n_better"], t["n_ties"])
    ]
    d["test"] = _text(t["test"]).to_numpy()
    d["p"] = [format_p(v) for v in t["p_value"]]
    if "p_bh" in t:
        d["p (BH)"] = [format_p(v) for v in t["p_bh"]]
    d["verdict"] = _text(t["verdict"]).to_numpy()
    return Table(d, collapsed=collapsed)


def summary_table(tables: dict) -> Table:
    """One row per task and model: clean and noisy level, the overall change with its interval,
    verdict counts over the background × SNR conditions and the robust view."""
    rows = []
    for task, t in tables.items():
        fam = t["family"].iloc[0]
        val = "wer_pp" if fam == "asr" else "acc_pp"
        for model, g in t.groupby("model", sort=True):
            cl, ov, cs = (g[g["scope"] == s] for s in ("clean", "overall", "condition"))
            o = ov.iloc[0] if len(ov) else pd.Series(dtype=object)
            x = {
                c: o.get(c, math.nan)
                for c in (
                    val,
                    "delta_pp",
                    "ci_low_pp",
                    "ci_high_pp",
                    "delta_corpus_pp",
                    "corpus_ci_low_pp",
                    "corpus_ci_high_pp",
                    "p_value",
                    "n_loops",
                )
            }
            if o.empty:
                robust = "–"
            elif fam == "asr":
                robust = (
                    f"{fmt(o.get('mean_wer_capped_pp', math.nan))} / {fmt(o.get('median_wer_pp', math.nan))}; "
                    "loops " + ("–" if pd.isna(x["n_loops"]) else str(int(x["n_loops"])))
                )
            else:
                robust = f"{fmt(o.get('strict_acc_pp', math.nan))} / {fmt(o.get('non_answer_pp', math.nan))}"
            counts = cs["verdict"].value_counts()
            rows.append(
                {
                    "task": task,
                    "model": model,
                    "measure": "WER" if fam == "asr" else "accuracy",
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
                    "coarse conditions": str(
                        int((cs.get("coarse", pd.Series(dtype=object)).astype(str) == "True").sum())
                    ),
                    "robust (noisy): ASR capped mean / median WER %, loops; KWS strict acc / non-answers %": robust,
                }
            )
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


def table3_display(t3: pd.DataFrame) -> Table:
    """Table 3 (``table3_descriptor_values.csv``): each descriptor to the decimals the authors keep
    (:data:`aiplib.analysis.stats.AUTHORS_DESCRIPTOR_DECIMALS`: RMS variance to 6), the
    degradations (pp) and any other number to 2."""
    d = t3.copy()
    for c in d.columns:
        if not pd.api.types.is_float_dtype(d[c]):
            continue
        decimals = AUTHORS_DESCRIPTOR_DECIMALS.get(c, 2)
        d[c] = [fmt(v, f".{decimals}f") for v in d[c]]
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
                "change pp [95% CI] (+ = worse)": format_cis(top, "change_pp", "ci_low_pp", "ci_high_pp"),
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
            "_Not applicable (the model takes no task prompt, so a steering prompt would repeat its baseline decode): "
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


def provenance_lines(rec: dict) -> list[str]:
    """Readable lines of a run record (:func:`aiplib.analysis.provenance.collect_provenance`);
    absent values are said in words ("revision: not pinned")."""

    def say(v, absent="not recorded"):
        return absent if v is None or v == "" else v

    models = [
        f"{m}: revision {say(v.get('revision'), 'not pinned')}, weights {say(v.get('weights'))}"
        + (f" (sha256 {str(v.get('weights_sha256'))[:12]}…)" if v.get("weights_sha256") else "")
        + (
            f"; takes no task prompt (not applicable: {', '.join(v['not_applicable'])})"
            if v.get("not_applicable")
            else ""
        )
        for m, v in (rec.get("models") or {}).items()
    ]
    man = [
        f"manifests/{f}.csv sha256 {say(m.get('sha256'))} ("
        + ("seeds not recorded" if m.get("seed_start") is None else f"seeds from {m['seed_start']}")
        + (", rows not counted)" if m.get("n_rows") is None else f", {m['n_rows']} rows)")
        for f, m in (rec.get("manifests") or {}).items()
    ]
    n = rec.get("normalizer") or {}
    a = rec.get("analysis") or {}
    paths = []
    for m, v in (rec.get("models") or {}).items():
        for path in v.get("numerics") or []:
            paths.append(f"{m} numeric path: {numeric_path_text(path)}")
    prompts = [
        f"prompt of {t}: [{p.get('prompt_id')}] {p.get('text')}"
        if p.get("text") is not None
        else f"prompt of {t}: {p.get('prompt_set')} set, text in its source file (not fetched here)"
        for t, p in (rec.get("tasks") or {}).items()
    ]
    rules = []
    for task, r in (rec.get("answer_rules") or {}).items():
        cleanup = r.get("response_cleanup") or {}
        null_rule = r.get("null_answer") or {}
        n_cleaned = sum((r.get("n_cleaned") or {}).values())
        n_null = sum((r.get("n_null_as_text") or {}).values())
        rules.append(
            f"answers of {task}: clean-up {say(cleanup.get('name'))} ({n_cleaned} changed); "
            f'null answer {say(null_rule.get("name"))} ({n_null} read as "None")'
        )
    return [
        f"aiplib {say(rec.get('aiplib_version'))}; "
        + ", ".join(
            f"{k} {say(v, 'not installed')}"
            for k, v in (rec.get("versions") or {}).items()
            if k != "aiplib"
        ),
        f"normaliser {say(n.get('name'))} {say(n.get('version'), '')}".rstrip(),
        *rules,
        f"bootstrap seed {say(a.get('seed'))}, {say(a.get('n_resamples'), 'unrecorded')} resamples, level "
        f"{say(a.get('level'))}",
        *man,
        *models,
        *paths,
        *prompts,
        debian_packages_line(rec.get("debian_packages") or {}),
    ]


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
