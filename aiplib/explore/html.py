"""Notebook 10, the explorer's HTML: response diff, metrics, background panel (no widget code).

Pure functions from :mod:`aiplib.explore.data` results to HTML strings; :mod:`aiplib.explore.widgets` puts
them into ``ipywidgets.HTML``. Marking as the S/D/I split (:func:`aiplib.explore.data.word_diff`):
``aip-sub`` substituted, ``aip-ins`` inserted response words; a deleted reference word is an empty
``<span class="aip-del" data-w="word">`` drawn by CSS (:data:`CSS`), so the text of ``<span
class="aip-response-text">`` is the (normalised) response itself.
"""
from __future__ import annotations

import html
import math

from aiplib.analysis.report_tables import fmt
from aiplib.core.tasks import FAMILIES
from aiplib.explore.data import descriptor_label, word_diff
from aiplib.io.formats import DESCRIPTORS

__all__ = ["CAP_WORDS", "CSS", "col_header", "diff_html", "plain_html", "response_html", "metrics_html",
           "bg_info_html", "bg_table_html"]

CAP_WORDS = 40
"""Words of a response shown before the "… +N words" toggle."""

CSS = """<style>
.aip-explorer .aip-sub{background:#ffe0b2;border-bottom:2px solid #e65100}
.aip-explorer .aip-ins{background:#c8e6c9;border-bottom:2px solid #2e7d32}
.aip-explorer .aip-del::before{content:attr(data-w);text-decoration:line-through;color:#b71c1c}
.aip-explorer .aip-resp-table{width:100%;border-collapse:collapse;font-size:13px}
.aip-explorer .aip-resp-table th{text-align:left;white-space:nowrap;padding:2px 1em 2px 0;vertical-align:top;width:9em}
.aip-explorer .aip-resp-table td{overflow-wrap:anywhere;padding:2px 0}
.aip-explorer details.aip-more{display:inline}
.aip-explorer details.aip-more summary{display:inline;cursor:pointer;color:#1565c0}
.aip-explorer .aip-bg-table-inner th{white-space:nowrap;position:sticky;top:0;background:#f4f4f4;padding:2px 6px;font-weight:600}
.aip-explorer .aip-bg-table-inner td{white-space:nowrap;padding:1px 6px}
.aip-explorer .aip-worst-case button, .aip-explorer button.aip-worst-case{font-family:monospace}
</style>"""


def col_header(c: str) -> str:
    """Readable header of a background-table column (HTML)."""

    if c in DESCRIPTORS:
        label, unit = descriptor_label(c)
        return f"{html.escape(label)}<br><small>{html.escape(unit)}</small>"
    if c == "mean_degradation_pp":
        return "Figure 4 key<br><small>mean of ASR, KWS (pp)</small>"
    if c.endswith("_delta_wer_pp") or c.endswith("_delta_acc_pp"):
        task = c.rsplit("_delta_", 1)[0]
        what = "ΔWER" if c.endswith("_wer_pp") else "ΔAcc"
        name = task.upper() if task in FAMILIES else task
        return f"{html.escape(name)} {what}<br><small>pp, pooled</small>"
    return html.escape(c.replace("_", " "))


def diff_html(tokens, cap: int = CAP_WORDS) -> str:
    """A response marked against its reference (:func:`aiplib.explore.data.word_diff`), cut after ``cap``
    response words; deleted reference words are shown by CSS only, so the span's text is the
    (normalised) response itself."""
    shown, rest, n = [], [], 0
    for op, ref, hyp in tokens:
        if op == "delete":
            part = f"<span class='aip-del' data-w='{html.escape(ref)}' title='deleted: {html.escape(ref)}'></span>"
        elif op == "substitute":
            part = f"<span class='aip-sub' title='reference: {html.escape(ref)}'>{html.escape(hyp)}</span>"
        elif op == "insert":
            part = f"<span class='aip-ins' title='inserted'>{html.escape(hyp)}</span>"
        else:
            part = html.escape(hyp)
        if op != "delete":
            n += 1
        (shown if n <= cap else rest).append(part)
    out = f"<span class='aip-response-text'>{' '.join(shown)}</span>"
    if rest:
        k = sum(1 for op, _, _ in tokens if op != "delete") - cap
        out += (f" <details class='aip-more'><summary>… +{k} words</summary>"
                f"<span class='aip-response-rest'>{' '.join(rest)}</span></details>")
    return out


def plain_html(text, cap: int = CAP_WORDS, cls: str = "aip-response-text") -> str:
    words = str(text or "").split()
    out = f"<span class='{cls}'>{html.escape(' '.join(words[:cap]))}</span>"
    if len(words) > cap:
        out += (f" <details class='aip-more'><summary>… +{len(words) - cap} words</summary>"
                f"{html.escape(' '.join(words[cap:]))}</details>")
    return out



def response_html(fam, row, result, msg) -> str:
    ref = html.escape(str(row["reference"]))
    if fam == "kws":
        ref += " (target)" if bool(row.get("is_target", True)) else " (non-target)"
    rows = [("Reference" if fam == "asr" else "Keyword (label)", ref)]
    found = result is not None and result["found"]
    if found and result["bg_id"] != "clean":
        cr = result["clean_response"]
        rows.append(("Clean response", "–" if cr is None else (
            diff_html(word_diff(row["reference"], cr)).replace("aip-response-text", "aip-clean-text")
            if fam == "asr" else plain_html(cr, cls="aip-clean-text"))))
    if not found:
        rows.append(("Response", f"<span class='aip-response-text aip-no-response'>{html.escape(msg)}</span>"))
    else:
        resp = result["response"] or ""
        rows.append(("Response", diff_html(word_diff(row["reference"], resp)) if fam == "asr"
                     else plain_html(resp)))
        if result.get("error"):
            rows.append(("Error", html.escape(result["error"])))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    legend = ("" if fam != "asr" or not found else
              "<div style='font-size:11px;color:#555'>responses as scored (normalised words): "
              "<span class='aip-sub'>substituted</span> <span class='aip-ins'>inserted</span> "
              "<span class='aip-del' data-w='deleted'></span> reference word</div>")
    return f"<table class='aip-resp-table'>{body}</table>{legend}"

def metrics_html(fam, result) -> str:
    if result is None or not result["found"]:
        return ""
    noisy = result["bg_id"] != "clean"
    if fam == "asr":
        parts = [f"WER <b>{fmt(result['wer'], '.3f')}</b>"]
        if not math.isnan(result.get("substitutions", float("nan"))):
            parts.append(f"S {result['substitutions']:.0f} · D {result['deletions']:.0f} · "
                         f"I {result['insertions']:.0f} of {result['ref_words']:.0f} reference words")
        if result.get("is_loop"):
            parts.append("<b>looping response</b>")
        if noisy:
            parts += [f"clean WER {fmt(result['clean_wer'], '.3f')}",
                      f"ΔWER vs clean <b>{fmt(result['delta_wer'], '+.3f')}</b>"]
    else:
        yn = {True: "correct", False: "wrong", None: "–"}
        parts = [f"first word <b>{html.escape(result['first_word'] or '–')}</b>", yn[result["correct"]]]
        if noisy:
            flip = result["delta_acc"]
            parts += [f"clean: {yn[result['clean_correct']]}",
                      "–" if isinstance(flip, float) and math.isnan(flip) else
                      "<b>flip: correct → wrong</b>" if flip > 0 else
                      "recovered: wrong → correct" if flip < 0 else "no change"]
    return "<div style='font-size:14px;padding:2px 0'>" + " · ".join(parts) + "</div>"


def bg_info_html(table, bg_id) -> str:

    if bg_id == "clean":
        return "<i>clean: no background</i>"
    if bg_id not in table.index:
        return f"<i>{html.escape(bg_id)}: not in the battery table</i>"
    r = table.loc[bg_id]
    e = lambda k: html.escape(str(r[k]))  # noqa: E731
    head = (f"<b>{html.escape(bg_id)}</b> — {e('category')}: {e('description')}<br>licence <b>{e('licence')}</b>"
            f"; source {e('source_package')} <code title='{e('source_file')}'>{e('sources')}</code>"
            f"{'; ' + e('attribution') if r['attribution'] else ''}")
    cells = "".join(
        f"<tr><td>{html.escape(lab)}</td><td style='text-align:right'>{fmt(r[d], '.4g')}</td>"
        f"<td style='color:#555'>{html.escape(unit)}</td></tr>"
        for d in DESCRIPTORS for lab, unit in [descriptor_label(d)])
    return (f"{head}<table class='aip-descriptors' style='font-size:12px'><tr><th>descriptor</th><th>value</th>"
            f"<th>unit</th></tr>{cells}</table>")


def bg_table_html(table, cols, deg, selected=None) -> str:
    """All backgrounds as an HTML table, in the order of ``table``; the ``selected`` row highlighted.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`aiplib.explore.data.background_table` (possibly re-sorted).
    cols : list of str
        Columns shown after the background id.
    deg : list of str
        Those of ``cols`` that are degradations in pp (shown signed, one decimal).
    """
    head = "".join(f"<th title='{html.escape(c)}'>{col_header(c)}</th>" for c in ["background", *cols])
    body = []
    for bg, r in table.iterrows():
        style = " style='background:#ffe9a8'" if bg == selected else ""
        cells = [f"<td><b>{html.escape(str(bg))}</b></td>"]
        for c in cols:
            v = r[c]
            cells.append(f"<td>{html.escape(str(v))}</td>" if isinstance(v, str) else
                         f"<td style='text-align:right'>{fmt(v, '.0f' if c == 'rank' else '+.1f' if c in deg else '.3g')}</td>")
        body.append(f"<tr class='aip-bg-row' data-bg='{html.escape(str(bg))}'{style}>{''.join(cells)}</tr>")
    note = "" if deg else "<i>no scores yet: run notebook 08 to rank the backgrounds</i>"
    return (f"{note}<div style='max-height:340px;overflow:auto;font-size:11px'>"
            f"<table class='aip-bg-table-inner'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")
