"""Notebook 10, interface side: the ipywidgets explorer, its HTML fragments, the spectrogram figure.

Everything shown comes from :mod:`aiplib.explore.data`; nothing is written. Top to bottom: controls,
the three players, the responses marked word by word (as the S/D/I counts), metrics, spectrograms
beside the worst cases, the backgrounds in Figure 4's order. The browser test finds the parts by CSS
class: ``aip-explorer``, ``aip-<control>``, ``aip-<player>-audio``, ``aip-response-text``,
``aip-metrics``, ``aip-mixinfo``, ``aip-bg-info``, ``aip-bg-table``, ``aip-worst-case`` ….
"""

from __future__ import annotations

import contextlib
import html
import io
import math

import ipywidgets as W
import numpy as np

from aiplib.analysis.report_tables import cap_words, fmt
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import CONDITION_FAMILIES, DEFAULT_SUITE, TASK_FAMILIES, task_family
from aiplib.explore import data
from aiplib.io.audio import SR, valid_audio
from aiplib.io.formats import DESCRIPTORS

#: Words of a response shown before the "… +N words" toggle.
CAP_WORDS = 40

#: The explorer's style (responses, alignment marks, tables).
CSS = """<style>
.aip-explorer .aip-sub{background:#ffe0b2;border-bottom:2px solid #e65100}
.aip-explorer .aip-ins{background:#c8e6c9;border-bottom:2px solid #2e7d32}
.aip-explorer .aip-del::before{content:attr(data-w);text-decoration:line-through;color:#b71c1c}
.aip-explorer .aip-resp-table{width:100%;border-collapse:collapse;font-size:13px}
.aip-explorer .aip-resp-table th{text-align:left;white-space:nowrap;padding:2px 1em 2px 0;
  vertical-align:top;width:9em}
.aip-explorer .aip-resp-table td{overflow-wrap:anywhere;padding:2px 0}
.aip-explorer details.aip-more{display:inline}
.aip-explorer details.aip-more summary{display:inline;cursor:pointer;color:#1565c0}
.aip-explorer .aip-bg-table-inner th{white-space:nowrap;position:sticky;top:0;background:#f4f4f4;
  padding:2px 6px;font-weight:600}
.aip-explorer .aip-bg-table-inner td{white-space:nowrap;padding:1px 6px}
.aip-explorer .aip-worst-case button,
.aip-explorer button.aip-worst-case{font-family:monospace}</style>"""

#: Log-mel spectrogram: 25 ms windows, 10 ms hop, 64 mel bands up to 8 kHz, floored 80 dB below
#: the loudest bin.
MEL_SETTINGS = dict(n_fft=400, hop_length=160, n_mels=64, fmin=0.0, fmax=8000.0, top_db=80.0)


# -------------------------------------------------------------------------------- HTML fragments
def col_header(c: str) -> str:
    """Readable header of a background-table column (HTML)."""
    if c in DESCRIPTORS:
        label, unit = data.descriptor_label(c)
        return f"{html.escape(label)}<br><small>{html.escape(unit)}</small>"
    if c == "mean_degradation_pp":
        return "Figure 4 key<br><small>mean of ASR, KWS (pp)</small>"
    for spec in TASK_FAMILIES.values():
        suffix = f"_{spec.degradation_column}_pp"
        if c.endswith(suffix):
            task = c[: -len(suffix)]
            name = task.upper() if task in TASK_FAMILIES else task
            return f"{html.escape(name)} {spec.degradation_label}<br><small>pp, pooled</small>"
    return html.escape(c.replace("_", " "))


#: HTML of each alignment operation of a hypothesis word.
_MARK = {
    "equal": "{h}",
    "substitute": "<span class='aip-sub' title='reference: {r}'>{h}</span>",
    "insert": "<span class='aip-ins' title='inserted'>{h}</span>",
    "delete": "<span class='aip-del' data-w='{r}' title='deleted: {r}'></span>",
}


def diff_html(tokens, cap: int = CAP_WORDS, cls: str = "aip-response-text") -> str:
    """A response marked against its reference (:func:`aiplib.explore.data.word_diff` tokens), cut
    after ``cap`` response words. Substituted words are ``aip-sub``, inserted ``aip-ins``; a deleted
    reference word is an empty ``aip-del`` span drawn by :data:`CSS`, so the text of the ``cls``
    span is the (normalised) response itself."""
    shown, rest, n = [], [], 0
    for op, ref, hyp in tokens:
        n += op != "delete"
        (shown if n <= cap else rest).append(
            _MARK[op].format(r=html.escape(ref), h=html.escape(hyp))
        )
    out = f"<span class='{cls}'>{' '.join(shown)}</span>"
    if rest:
        out += (
            f" <details class='aip-more'><summary>… +{n - cap} words</summary>"
            f"<span class='aip-response-rest'>{' '.join(rest)}</span></details>"
        )
    return out


def _reference_cell(spec, row) -> str:
    """The reference of a manifest row, a keyword marked target or non-target (HTML)."""
    ref = html.escape(str(row["reference"]))
    if not spec.is_binary:
        return ref
    if bool(row.get("is_target", True)):
        return ref + " (target)"
    return ref + " (non-target)"


def _marked(spec, reference, text, cls: str) -> str:
    """A response as scored: words marked against the reference for an error rate, unmarked (cut
    as those) for a keyword answer."""
    if spec.is_binary:
        return diff_html([("equal", "", w) for w in str(text).split()], cls=cls)
    return diff_html(data.word_diff(reference, text), cls=cls)


#: The legend under a word-marked response (an error-rate family).
_DIFF_LEGEND = (
    "<div style='font-size:11px;color:#555'>responses as scored (normalised words): "
    "<span class='aip-sub'>substituted</span> <span class='aip-ins'>inserted</span> "
    "<span class='aip-del' data-w='deleted'></span> reference word</div>"
)


def response_html(fam: str, row, result, msg: str) -> str:
    """Reference, clean response and response of a manifest ``row`` as an HTML table; ``result`` is
    :func:`aiplib.explore.data.lookup_response` (or None), ``msg`` shown when there is no
    response."""
    spec = TASK_FAMILIES[fam]
    rows = [(spec.reference_label, _reference_cell(spec, row))]
    found = result is not None and result["found"]
    if found and result["bg_id"] != "clean":
        cr = result["clean_response"]
        if cr is None:
            rows.append(("Clean response", "–"))
        else:
            rows.append(("Clean response", _marked(spec, row["reference"], cr, "aip-clean-text")))
    if not found:
        no_response = f"<span class='aip-response-text aip-no-response'>{html.escape(msg)}</span>"
        rows.append(("Response", no_response))
    else:
        text = result["response"] or ""
        rows.append(("Response", _marked(spec, row["reference"], text, "aip-response-text")))
        if result.get("error"):
            rows.append(("Error", html.escape(result["error"])))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    legend = ""
    if found and not spec.is_binary:
        legend = _DIFF_LEGEND
    return f"<table class='aip-resp-table'>{body}</table>{legend}"


def pct(v, spec: str = "+.1f", unit: str = "pp") -> str:
    """A fraction (2.222) in percent or percentage points, as the report writes it (``+222.2
    pp``)."""
    s = fmt(v * 100 if isinstance(v, (int, float)) else v, spec)
    return s if s == "–" else f"{s} {unit}"


def _error_rate_metrics(spec, result, noisy: bool) -> list[str]:
    """WER, S/D/I, loop and the change from clean of an error-rate result (HTML parts)."""
    measure = spec.measure
    label = spec.measure_label
    parts = [f"{label} <b>{pct(result[measure], '.1f', '%')}</b>"]
    if not math.isnan(result.get("substitutions", float("nan"))):
        parts.append(
            f"S {result['substitutions']:.0f} · D {result['deletions']:.0f} · "
            f"I {result['insertions']:.0f} of {result['ref_words']:.0f} reference words"
        )
    if result.get("is_loop"):
        parts.append("<b>looping response</b>")
    if noisy:
        parts.append(f"clean {label} {pct(result['clean_' + measure], '.1f', '%')}")
        parts.append(
            f"{spec.degradation_label} vs clean <b>{pct(result[spec.degradation_column])}</b>"
        )
    return parts


#: How a binary (keyword) answer is shown: correct, wrong, unknown.
_ANSWER_WORDS = {True: "correct answer", False: "wrong answer", None: "–"}


def _flip_text(flip) -> str:
    """The clean-to-noisy change of a binary answer (+1 a flip to wrong, −1 a recovery)."""
    if isinstance(flip, float) and math.isnan(flip):
        return "–"
    if flip > 0:
        return "<b>flip: correct → wrong</b>"
    if flip < 0:
        return "recovered: wrong → correct"
    return "no change"


def _binary_metrics(spec, result, noisy: bool) -> list[str]:
    """First word, correct or wrong, and the flip of a keyword result (HTML parts)."""
    parts = [
        f"first word <b>{html.escape(result['first_word'] or '–')}</b>",
        _ANSWER_WORDS[result[spec.measure]],
    ]
    if noisy:
        parts.append(f"clean: {_ANSWER_WORDS[result['clean_' + spec.measure]]}")
        parts.append(_flip_text(result[spec.degradation_column]))
    return parts


#: The metrics line's parts per ``TaskFamily.measure_kind``.
_METRICS = {"error_rate": _error_rate_metrics, "binary": _binary_metrics}


def metrics_html(fam: str, result) -> str:
    """One line of metrics: WER, S/D/I, loop, ΔWER vs clean; or KWS first word, correct or wrong,
    the flip."""
    if result is None or not result["found"]:
        return ""
    spec = TASK_FAMILIES[fam]
    noisy = result["bg_id"] != "clean"
    parts = _METRICS[spec.measure_kind](spec, result, noisy)
    return "<div style='font-size:14px;padding:2px 0'>" + " · ".join(parts) + "</div>"


def bg_info_html(table, bg_id: str) -> str:
    """Licence, source and descriptors (with units) of a background of
    :func:`~aiplib.explore.data.background_table`."""
    if bg_id == "clean":
        return "<i>clean: no background</i>"
    if bg_id not in table.index:
        return f"<i>{html.escape(bg_id)}: not in the battery table</i>"
    r = table.loc[bg_id]

    def e(k):
        return html.escape(str(r[k]))

    head = (
        f"<b>{html.escape(bg_id)}</b> — {e('category')}: {e('description')}<br>"
        f"licence <b>{e('licence')}</b>"
        f"; source {e('source_package')} <code title='{e('source_file')}'>{e('sources')}</code>"
        f"{'; ' + e('attribution') if r['attribution'] else ''}"
    )
    cells = "".join(
        f"<tr><td>{html.escape(lab)}</td><td style='text-align:right'>{fmt(r[d], '.4g')}</td>"
        f"<td style='color:#555'>{html.escape(unit)}</td></tr>"
        for d in DESCRIPTORS
        for lab, unit in [data.descriptor_label(d)]
    )
    return (
        f"{head}<table class='aip-descriptors' style='font-size:12px'><tr><th>descriptor</th>"
        f"<th>value</th><th>unit</th></tr>{cells}</table>"
    )


def _bg_cell(v, c: str, deg) -> str:
    """One cell of the background table: text as is, numbers right-aligned (rank as an integer,
    degradations signed to 0.1 pp, descriptors to 3 significant digits)."""
    if isinstance(v, str):
        return f"<td>{html.escape(v)}</td>"
    if c == "rank":
        spec = ".0f"
    elif c in deg:
        spec = "+.1f"
    else:
        spec = ".3g"
    return f"<td style='text-align:right'>{fmt(v, spec)}</td>"


def bg_table_html(table, cols, deg, selected=None) -> str:
    """The rows of :func:`~aiplib.explore.data.background_table` (in ``table``'s order) as HTML,
    columns ``cols`` (those in ``deg``: degradations in pp, signed), the ``selected`` row
    highlighted."""
    head = "".join(
        f"<th title='{html.escape(c)}'>{col_header(c)}</th>" for c in ["background", *cols]
    )
    body = []
    for bg, r in table.iterrows():
        style = " style='background:#ffe9a8'" if bg == selected else ""
        cells = [f"<td><b>{html.escape(str(bg))}</b></td>"]
        for c in cols:
            cells.append(_bg_cell(r[c], c, deg))
        body.append(
            f"<tr class='aip-bg-row' data-bg='{html.escape(str(bg))}'{style}>{''.join(cells)}</tr>"
        )
    note = "" if deg else "<i>no scores yet: run notebook 08 to rank the backgrounds</i>"
    return (
        f"{note}<div style='max-height:340px;overflow:auto;font-size:11px'>"
        f"<table class='aip-bg-table-inner'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


# ---------------------------------------------------------------------------------- spectrograms
def log_mel_spectrograms(signals: dict, *, sr: int = SR) -> dict:
    """Log-mel power spectrograms of signals on one dB scale, as the explorer's figures draw them.

    ``signals`` maps a name to samples [shape=(n,)] at ``sr`` Hz. Each spectrogram has the
    :data:`MEL_SETTINGS` (mel bands up to ``min(fmax, sr / 2)`` Hz, hop in samples) and is in dB
    re the loudest mel bin of any of the signals (0 dB), floored ``top_db`` dB below it.

    Returns ``{name: array [shape=(n_mels, 1 + n // hop_length)], float}``.
    """
    import librosa

    s = MEL_SETTINGS
    fmax = min(s["fmax"], sr / 2)
    mels = {}
    for name, y in signals.items():
        mels[name] = librosa.feature.melspectrogram(
            y=y,
            sr=sr,
            n_fft=s["n_fft"],
            hop_length=s["hop_length"],
            n_mels=s["n_mels"],
            fmin=s["fmin"],
            fmax=fmax,
            power=2.0,
        )
    ref = max(float(m.max()) for m in mels.values()) or 1.0
    spectrograms = {}
    for name, mel in mels.items():
        db = librosa.power_to_db(mel, ref=ref, top_db=None)
        spectrograms[name] = np.maximum(db, -s["top_db"])
    return spectrograms


def signals_figure_png(signals: dict, *, sr: int = SR, title: str = "", dpi: int = 90) -> bytes:
    """Waveforms (top row) and log-mel spectrograms (bottom row) of signals side by side, as PNG
    bytes.

    ``signals`` maps a column title to samples [shape=(n,)] at ``sr`` Hz; the spectrograms share one
    dB scale (0 dB = the loudest mel bin of any signal). The figure is ``4.6 × len(signals)`` by 3.6
    inches.

    Raises
    ------
    AiplibParameterError
        If ``signals`` is empty or a signal fails :func:`aiplib.io.audio.valid_audio`.
    """
    import librosa.display
    from matplotlib.figure import Figure

    if not signals:
        raise AiplibParameterError("signals_figure_png: no signals given")
    ys = {
        k: valid_audio(np.asarray(v), name=f"signals_figure_png input {k!r}")
        for k, v in signals.items()
    }
    s = MEL_SETTINGS
    fmax = min(MEL_SETTINGS["fmax"], sr / 2)
    spectrograms = log_mel_spectrograms(ys, sr=sr)
    fig = Figure(figsize=(4.6 * len(ys), 3.6), dpi=dpi, layout="constrained")
    axes = fig.subplots(2, len(ys), sharex="col", height_ratios=[1, 1.7], squeeze=False)
    for j, (name, y) in enumerate(ys.items()):
        ax1, ax2 = axes[0, j], axes[1, j]
        ax1.plot(np.arange(y.shape[0]) / sr, y, lw=0.5, color="#1f4e79")
        ax1.set(ylim=(-1.0, 1.0), xlim=(0, y.shape[0] / sr))
        ax1.set_title(name, fontsize=9)
        img = librosa.display.specshow(
            spectrograms[name],
            sr=sr,
            hop_length=s["hop_length"],
            x_axis="time",
            y_axis="mel",
            fmin=s["fmin"],
            fmax=fmax,
            ax=ax2,
            cmap="magma",
            vmin=-s["top_db"],
            vmax=0.0,
        )
        ax2.set_yticks([f for f in (0, 250, 500, 1000, 2000, 4000, 8000) if f <= fmax])
        ax2.set_xlabel("time (s)", fontsize=8)
        ax1.set_ylabel("amplitude" if j == 0 else "", fontsize=8)
        ax2.set_ylabel("frequency (Hz, mel scale)" if j == 0 else "", fontsize=8)
    fig.colorbar(img, ax=axes[1, :].tolist(), format="%+.0f dB", pad=0.01)
    if title:
        fig.suptitle(title, fontsize=9)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


# ---------------------------------------------------------------------------------------- widget
#: The model chooser's value for "no model chosen".
_NO_MODEL = ""
#: The worst-stimuli chooser's value that keeps the ranking's order.
_AS_RANKED = "(as ranked)"
#: Per condition family: the condition chooser's clean option, the worst-case column, the plot's
#: title (the chooser's title is the family's ``label``).
_CHOOSER = {
    "background": ("clean (no background)", "background @ SNR", "mixture"),
    "competing_speech": ("clean (no distractor)", "distractor @ SNR", "target + distractor"),
    "channel": ("clean (no transform)", "channel condition", "transformed"),
}


def _is_paper_family(cf: str) -> bool:
    """True for the paper's condition family (no table of its own): its backgrounds are the
    battery, with descriptors and Figure 4's ranking."""
    return CONDITION_FAMILIES[cf].table is None


def _family_words(cf: str) -> str:
    """`` in the <family> family`` for a family other than the paper's, else empty."""
    if _is_paper_family(cf):
        return ""
    return f" in the {cf} family"


#: The three audio players, in order.
_PLAYERS = ("clean", "background", "mixture")
#: The choosers: (name, title, width).
_CONTROLS = (
    ("family", "Condition family", "270px"),
    ("task", "Task", "150px"),
    ("item", "Item", "320px"),
    ("bg", "Background", "260px"),
    ("snr", "SNR", "130px"),
    ("model", "Model", "260px"),
)


def _html(cls, **layout):
    return W.HTML(layout=W.Layout(**layout)).add_class(cls)


def _button(text, cls, tooltip, on_click):
    b = W.Button(description=text, tooltip=tooltip, layout=W.Layout(width="auto")).add_class(cls)
    b.on_click(on_click)
    return b


def _shown(visible: bool):
    """A widget layout's ``display``: None (shown) or ``"none"`` (hidden)."""
    if visible:
        return None
    return "none"


def _pick(wanted, current, valid, default):
    """``wanted`` if valid, else ``current`` if valid, else ``default``: a control's new value."""
    return wanted if wanted in valid else current if current in valid else default


def _notes_html(notes) -> str:
    """A competing-speech or channel row's (name, text) notes as a small table (HTML)."""
    if not notes:
        return ""
    rows = []
    for k, v in notes:
        rows.append(
            "<tr><th style='text-align:left;padding-right:1em;vertical-align:top'>"
            f"{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
        )
    return "<table style='font-size:13px'>" + "".join(rows) + "</table>"


def _mix_line(audio, cf: str, bg_id: str) -> str:
    """The stimulus id, duration, SNR asked and achieved, peak, clip scale and offset (HTML)."""
    info = audio["info"]
    if bg_id == "clean":
        snr_txt = "clean"
    elif not CONDITION_FAMILIES[cf].has_snr:
        snr_txt = f"channel condition {bg_id}, no noise added"
    else:
        achieved = round(info.achieved_snr_db, 2) + 0.0  # no "-0.00"
        snr_txt = f"target {info.target_snr_db:g} dB, achieved {achieved:.2f} dB"
    duration = audio["mixture"].shape[0] / SR
    line = (
        f"<code>{html.escape(audio['stimulus_id'])}</code> · {duration:.2f} s · {snr_txt}"
        f" · peak {info.peak:.3f} · clip scale {info.clip_scale:.3f}"
    )
    if info.bg_offset is not None:
        line += f" · offset {info.bg_offset} samples"
    if info.bg_active is False:
        line += " · background segment is digital silence"
    return line


def _figure_signals(audio, cf: str, bg_id: str) -> dict:
    """The signals of the figure: the clean one, and the mixture under the family's title."""
    if bg_id == "clean":
        return {"clean": audio["clean"]}
    return {"clean": audio["clean"], _CHOOSER[cf][2]: audio["mixture"]}


def _no_worst_hint(has_scores: bool, has_models: bool) -> str:
    """Why the worst-case table is empty."""
    if has_scores:
        return "none: no stimulus did worse than clean"
    if has_models:
        return "no scores yet: run notebook 08 (scores)"
    return "no inference results yet: run notebooks 07 and 08"


def _worst_delta(spec, delta) -> str:
    """A worst case's change: the ΔWER in pp, or ``flip`` for a binary answer."""
    if spec.is_binary:
        return "flip"
    return pct(delta)


class Explorer:
    """Builds and drives the notebook-10 interface (use :func:`explorer`); tests call
    :meth:`select`.

    Attributes
    ----------
    ws, base : the chosen condition family's workspace view; the ``background`` view
    families : condition families with manifests
    widget : ExplorerWidget
    controls : dict of ipywidgets.Dropdown, ``family, task, item, bg, snr, model``
    players : dict of ipywidgets.Audio, ``clean, background, mixture`` (float32 WAV bytes)
    worst_cases : the worst-case table's rows (:func:`aiplib.explore.data.worst_cases`), as shown
    worst_buttons : one ipywidgets.Button per row, labelled with its condition (``"bg03 @ 0 dB"``)
    state : the last refresh, ``stimulus_id``, ``audio``
      (:func:`aiplib.explore.data.stimulus_audio`),
        ``result`` (:func:`aiplib.explore.data.lookup_response`), ``message`` (the status line)
    """

    def __init__(self, ws, *, n_worst: int = 10):
        self.base = ws.with_family(DEFAULT_SUITE[0])
        self.families = data.available_families(ws)
        cf = _pick(ws.condition_family, None, self.families, (self.families or DEFAULT_SUITE)[0])
        self.ws = ws.with_family(cf)
        self.n_worst = int(n_worst)
        self.state = {}
        self.worst_buttons = []
        self.tasks = data.available_tasks(self.ws)
        self._busy = False
        self._worst_sort = ("delta", False)
        self._worst_key = None
        self._bg_cache = None
        self._build_widgets(ws)
        if not self.tasks:
            self._show_no_manifests(ws)
            return
        self._observe()
        with self._quiet():
            self.controls["family"].options = [(f.replace("_", " "), f) for f in self.families]
            self.controls["family"].disabled = len(self.families) < 2
        self._set_family(cf)  # selects cf in the family control
        self._render_bg_table()

    def _build_widgets(self, ws):
        """The controls, players and panels, and the top-level widget holding them."""
        self.controls = {
            k: W.Dropdown(
                description=d,
                options=[],
                layout=W.Layout(width=w),
                style={"description_width": "initial"},
            ).add_class(f"aip-{k}")
            for k, d, w in _CONTROLS
        }
        self.players = {
            k: W.Audio(
                value=b"", format="wav", autoplay=False, controls=True, loop=False
            ).add_class(f"aip-{k}-audio")
            for k in _PLAYERS
        }
        self.player_titles = {
            k: W.HTML(f"<b>{html.escape(label)}</b>", layout=W.Layout(max_width="420px")).add_class(
                "aip-player-title"
            )
            for k, label in zip(_PLAYERS, data.PLAYER_LABELS[DEFAULT_SUITE[0]])
        }
        self.player_boxes = {
            k: W.VBox([self.player_titles[k], self.players[k]]).add_class(f"aip-{k}-player")
            for k in _PLAYERS
        }
        self.status = _html("aip-status")
        self.mixinfo = _html("aip-mixinfo")
        self.bg_info = _html("aip-bg-info")
        self.family_info = _html("aip-family-info", width="100%")
        self.response = _html("aip-response", width="100%")
        self.metrics = _html("aip-metrics", width="100%")
        self.bg_table = _html("aip-bg-table", width="100%")
        self.worst_title = W.HTML()
        self.plot = W.Image(
            format="png", layout=W.Layout(max_width="860px", width="auto")
        ).add_class("aip-plot")
        self.bg_sort = W.Dropdown(
            description="Sort by",
            options=[],
            style={"description_width": "initial"},
            layout=W.Layout(width="320px"),
        ).add_class("aip-bg-sort")
        self.bg_ascending = W.Checkbox(
            value=False, description="ascending", indent=False
        ).add_class("aip-bg-sort-asc")
        self.worst = W.GridBox(
            [],
            layout=W.Layout(
                grid_template_columns="repeat(4, max-content)",
                grid_gap="2px 12px",
                align_items="center",
            ),
        ).add_class("aip-worst")
        self.bg_panel = W.VBox(
            [
                W.HTML("<b>Background</b>"),
                self.bg_info,
                W.HTML("<b>All backgrounds, in Figure 4's order (most harmful first)</b>"),
                W.HBox([self.bg_sort, self.bg_ascending]),
                self.bg_table,
            ],
            layout=W.Layout(width="100%"),
        ).add_class("aip-bg-panel")
        self.widget = ExplorerWidget(
            [
                W.HTML(
                    f"{CSS}<h3 style='margin:0'>Listen and explore — profile "
                    f"<code>{html.escape(ws.profile)}</code></h3>"
                ),
                self.status,
                W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap")),
                W.HBox(
                    list(self.player_boxes.values()), layout=W.Layout(flex_flow="row wrap")
                ).add_class("aip-players"),
                self.mixinfo,
                self.family_info,
                self.response,
                self.metrics,
                W.HBox(
                    [
                        self.plot,
                        W.VBox(
                            [self.worst_title, self.worst], layout=W.Layout(min_width="380px")
                        ).add_class("aip-worst-panel"),
                    ],
                    layout=W.Layout(
                        flex_flow="row wrap", align_items="flex-start", grid_gap="16px"
                    ),
                ),
                self.bg_panel,
            ]
        ).add_class("aip-explorer")
        self.widget.explorer = self

    def _show_no_manifests(self, ws):
        """No manifests yet: say so and disable the controls."""
        self.status.value = (
            "<span style='color:#a00'>No manifests yet in "
            f"<code>{html.escape(str(ws.manifests))}</code>: run notebooks 01–05 first.</span>"
        )
        self.state = {"message": "no manifests yet: run notebooks 01-05 first"}
        for w in self.controls.values():
            w.disabled = True
        self._render_bg_table()

    def _observe(self):
        """Connect the controls: family and task switch the view, the others refresh it."""

        def on_family(change):
            if not self._busy:
                self._set_family(self.controls["family"].value)

        def on_task(change):
            if not self._busy:
                self._set_task(self.controls["task"].value)

        def on_other(change):
            if not self._busy:
                self._refresh()

        def on_sort(change):
            if not self._busy:
                self._render_bg_table()

        handlers = {"family": on_family, "task": on_task}
        for name, w in self.controls.items():
            w.observe(handlers.get(name, on_other), names="value")
        for w in (self.bg_sort, self.bg_ascending):
            w.observe(on_sort, names="value")

    # -------------------------------------------------------------------------------- control logic
    @contextlib.contextmanager
    def _quiet(self):
        """Set controls without their observers refreshing the view."""
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def _set_family(self, cf, *, task=None, **kwargs):
        """Switch the workspace view to condition family ``cf`` and show its first (or the given)
        task."""
        c = self.controls
        self.ws = self.base.with_family(cf)
        self.tasks = data.available_tasks(self.ws)
        with self._quiet():
            c["family"].value = cf
            c["task"].options = self.tasks
            c["bg"].description = CONDITION_FAMILIES[cf].label
            c["snr"].layout.display = _shown(CONDITION_FAMILIES[cf].has_snr)  # else marker 99
        self.bg_panel.layout.display = _shown(_is_paper_family(cf))
        self._set_task(_pick(task, c["task"].value, self.tasks, self.tasks[0]), **kwargs)

    def _set_task(self, task, *, item_id=None, bg_id=None, snr_db=None, model=None):
        """Show ``task``: fill the item, condition, SNR and model choosers (keeping the given or
        current values where valid), then the worst cases and the stimulus."""
        man = data.manifest(self.ws, task_family(task))
        with self._quiet():
            self.controls["task"].value = task
            self._set_items(man, item_id)
            self._set_conditions(man, bg_id)
            self._set_snrs(man, snr_db)
            self._set_models(task, model)
        self._render_worst(task)
        self._refresh()

    def _set_items(self, man, item_id):
        """The item chooser: each item of the manifest with the start of its reference."""
        c = self.controls["item"]
        items = man.loc[man["bg_id"] == "clean", ["item_id", "reference"]]
        if items.empty:
            items = man[["item_id", "reference"]].drop_duplicates("item_id")
        options = []
        for i, r in zip(items["item_id"], items["reference"].astype(str)):
            more = "…" if len(r) > 40 else ""
            options.append((f"{i} — {r[:40]}{more}", i))
        c.options = options
        ids = list(items["item_id"])
        c.value = _pick(item_id, c.value, ids, ids[0])

    def _set_conditions(self, man, bg_id):
        """The condition chooser: clean, then every condition (a distractor with its languages
        and whether it is the target's voice)."""
        c = self.controls["bg"]
        noisy = man[man["bg_id"] != "clean"].drop_duplicates("bg_id")
        bgs = noisy["bg_id"].tolist()
        names = bgs
        if "distractor_languages" in noisy.columns:
            same = noisy["same_voice_as_target"].astype(str).str.lower() == "true"
            names = []
            for b, lang, sv in zip(bgs, noisy["distractor_languages"], same):
                voice = ", same voice" if sv else ""
                names.append(f"{b} ({lang}{voice})")
        current = c.value if bg_id is None else bg_id  # before new options reset it
        clean_option = _CHOOSER[self.ws.condition_family][0]
        c.options = [(clean_option, "clean")] + list(zip(names, bgs))
        c.value = _pick(current, None, ["clean", *bgs], bgs[0] if bgs else "clean")

    def _set_snrs(self, man, snr_db):
        """The SNR chooser: the manifest's SNRs, highest first (dB)."""
        c = self.controls["snr"]
        snrs = sorted({float(v) for v in man["snr_db"].dropna()}, reverse=True)
        c.options = [(f"{v:g} dB", v) for v in snrs]
        if not snrs:
            return
        wanted = c.value
        if snr_db is not None:
            wanted = float(snr_db)
        c.value = _pick(wanted, None, snrs, snrs[0])

    def _set_models(self, task, model):
        """The model chooser: the models with results for ``task`` (disabled when none)."""
        c = self.controls["model"]
        models = data.available_models(self.ws, task)
        if models:
            c.options = models
            c.value = _pick(model, c.value, models, data.most_complete_model(self.ws, task, models))
        else:
            c.options = [("(no results yet)", _NO_MODEL)]
            c.value = _NO_MODEL
        c.disabled = not models

    def select(
        self, *, condition_family=None, task=None, item_id=None, bg_id=None, snr_db=None, model=None
    ) -> dict:
        """Show one stimulus and return :attr:`state`; controls not given keep their value
        (``snr_db`` in dB). Raises ``AiplibParameterError`` if a value is not among the control's
        options."""
        if snr_db is not None and math.isnan(float(snr_db)):
            snr_db = None  # a condition without an SNR (channel)
        switch = condition_family is not None and condition_family != self.ws.condition_family
        task = self._check_selection(condition_family, switch, task)
        kw = dict(task=task, item_id=item_id, bg_id=bg_id, snr_db=snr_db, model=model)
        if switch:
            self._set_family(condition_family, **kw)
        else:
            self._set_task(**kw)
        self._check_selected(item_id=item_id, bg_id=bg_id, snr_db=snr_db, model=model)
        return self.state

    def _check_selection(self, condition_family, switch: bool, task):
        """The task to show (the current one when None), checked against the family's tasks."""
        if switch and condition_family not in self.families:
            raise AiplibParameterError(
                f"condition family {condition_family!r} has no manifests here; "
                f"choose one of {', '.join(self.families)}"
            )
        tasks = self.tasks
        if switch:
            tasks = data.available_tasks(self.base.with_family(condition_family))
        task = task or self.controls["task"].value
        if task not in tasks:
            raise AiplibParameterError(f"unknown task {task!r}; choose one of {', '.join(tasks)}")
        return task

    def _check_selected(self, *, item_id, bg_id, snr_db, model):
        """Raise when a value asked for is not what the controls now show."""
        c = self.controls
        for name, val in (("item", item_id), ("bg", bg_id), ("model", model)):
            if val is not None and c[name].value != val:
                valid = [str(o[1]) if isinstance(o, tuple) else str(o) for o in c[name].options]
                raise AiplibParameterError(
                    f"{name} {val!r} is not available; choose one of {', '.join(valid)}"
                )
        if snr_db is None or bg_id == "clean":
            return
        if not math.isclose(float(c["snr"].value), float(snr_db)):
            raise AiplibParameterError(f"SNR {snr_db} dB is not available")

    # --------------------------------------------------------------------------------------- render
    def _refresh(self):
        """Show the chosen stimulus: players, notes, mixing line, figure, response and metrics."""
        c = self.controls
        task = c["task"].value
        bg_id = c["bg"].value
        model = c["model"].value
        fam = task_family(task)
        cf = self.ws.condition_family
        c["snr"].disabled = bg_id == "clean"
        snr = None
        if bg_id != "clean":
            snr = c["snr"].value
        try:
            audio = data.stimulus_audio(self.ws, fam, c["item"].value, bg_id, snr)
        except Exception as exc:  # a missing audio file: say so in the widget, keep it usable
            self.state = {"stimulus_id": None, "audio": None, "result": None, "message": str(exc)}
            self.status.value = f"<span style='color:#a00'>{html.escape(str(exc))}</span>"
            return
        sid = audio["stimulus_id"]
        self._show_players(audio, noisy=bg_id != "clean")
        self.family_info.value = _notes_html(audio["labels"]["notes"])
        self.mixinfo.value = _mix_line(audio, cf, bg_id)
        self.plot.value = signals_figure_png(_figure_signals(audio, cf, bg_id), title=sid)
        result = None
        if model:
            result = data.lookup_response(self.ws, model, task, sid)
        msg = self._status_message(task, model, sid, result)
        if msg:
            self.status.value = f"<i>{html.escape(msg)}</i>"
        else:
            self.status.value = ""
        self.response.value = response_html(fam, audio["row"], result, msg)
        self.metrics.value = metrics_html(fam, result)
        self.state = {"stimulus_id": sid, "audio": audio, "result": result, "message": msg}
        if _is_paper_family(cf):
            self.bg_info.value = bg_info_html(self._bg_frame(), bg_id)
            self._render_bg_table()

    def _show_players(self, audio, *, noisy: bool):
        """Load the three players and their titles; hide the middle one when it has no signal."""
        labels = audio["labels"]
        for k in _PLAYERS:
            if audio[k] is None:
                self.players[k].value = b""
            else:
                self.players[k].value = data.wav_bytes(audio[k])
            self.player_titles[k].value = f"<b>{html.escape(labels[k])}</b>"
        self.players["background"].layout.display = _shown(audio["background"] is not None)
        self.player_boxes["background"].layout.display = _shown(noisy)

    def _status_message(self, task, model, sid, result) -> str:
        """The status line: what is missing, or where the response's score comes from."""
        cf = self.ws.condition_family
        where = _family_words(cf)
        if not model:
            suite = ""
            if not _is_paper_family(cf):
                suite = f" with {cf} in the suite"
            return (
                f"no inference results yet for {task}{where} — the mixtures play; "
                "run notebook 07 (inference) and 08 (scores)" + suite + " to see responses"
            )
        if not result["found"]:
            return f"no response from {model} for {sid} yet (inference incomplete?)"
        if result["source"] == "scores":
            return ""
        return (
            f"scores not written yet for {task}{where}: WER / correctness computed here from "
            f"{self.ws.rel(self.ws.inference_jsonl(model, task))}"
        )

    def _bg_frame(self):
        files = [
            *self.base.scores_dir.glob("*.csv"),
            self.base.battery_csv,
            self.base.descriptor_csv,
        ]
        stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in files if p.is_file()))
        if self._bg_cache is None or self._bg_cache[0] != stamp:
            self._bg_cache = (stamp, data.background_table(self.base))
        return self._bg_cache[1]

    def _render_bg_table(self):
        table = self._bg_frame()
        deg = [c for c in table.columns if c.endswith("_pp")]
        cols = (
            (["rank"] if "rank" in table.columns else []) + deg + ["category"] + list(DESCRIPTORS)
        )
        options = [("Figure 4 order", _AS_RANKED)] + [
            (col_header(c).replace("<br><small>", " (").replace("</small>", ")"), c)
            for c in cols[1:]
        ]
        if list(self.bg_sort.options) != options:
            keep = self.bg_sort.value
            with self._quiet():  # setting the options fires the observer
                self.bg_sort.options = options
                self.bg_sort.value = keep if keep in [o[1] for o in options] else _AS_RANKED
        by = self.bg_sort.value
        if by and by != _AS_RANKED:
            table = table.sort_values(
                by, ascending=bool(self.bg_ascending.value), kind="stable", na_position="last"
            )
        elif self.bg_ascending.value:
            table = table.iloc[::-1]
        sel = None
        if self.tasks and _is_paper_family(self.ws.condition_family):
            sel = self.controls["bg"].value
        self.bg_table.value = bg_table_html(table, cols, deg, sel)

    def _render_worst(self, task):
        """The worst-case table of ``task`` (kept when task, files and order are unchanged)."""
        sc_path = self.ws.scores_csv(task)
        models = data.available_models(self.ws, task)
        stamp = None
        if sc_path.is_file():
            stamp = sc_path.stat().st_mtime_ns
        key = (str(sc_path), task, stamp, tuple(models), self._worst_sort)
        if self._worst_key == key:  # same task, files, order: keep
            return
        self._worst_key = key
        wc = self._sorted_worst(data.worst_cases(self.ws, task, self.n_worst))
        self.worst_cases = wc
        spec = TASK_FAMILIES[task_family(task)]
        self.worst_title.value = self._worst_title(task, spec)
        if wc.empty:
            hint = _no_worst_hint(sc_path.is_file(), bool(models))
            self.worst_title.value += f"<br><i>{hint}</i>"
            self.worst.children = []
            self.worst_buttons = []
            return
        heads = self._worst_heads(wc, spec)
        cells = self._worst_sort_buttons(heads)
        self.worst_buttons = [self._worst_button(r) for r in wc.itertuples()]
        several = wc["model"].nunique() > 1
        for r, b in zip(wc.itertuples(), self.worst_buttons):
            cells += [b, W.HTML(f"<code>{html.escape(r.item_id)}</code>")]
            cells.append(W.HTML(_worst_delta(spec, r.delta)))
            if several:
                cells.append(W.HTML(html.escape(r.model)))
        self.worst.layout.grid_template_columns = f"repeat({len(heads)}, max-content)"
        self.worst.children = cells

    def _sorted_worst(self, wc):
        """The worst cases in the chosen order (the ranking's when sorted by Δ, descending)."""
        col, asc = self._worst_sort
        if col == "delta" and not asc:
            return wc
        by = {"condition": ["bg_id", "snr_db"], "item": ["item_id"], "model": ["model"]}
        return wc.sort_values(by.get(col, ["delta"]), ascending=asc, kind="stable").reset_index(
            drop=True
        )

    def _worst_title(self, task, spec) -> str:
        """``Worst cases — <family · task>: <what is ranked>`` (HTML)."""
        cf = self.ws.condition_family
        if spec.is_binary:
            what = f"{spec.name.upper()} flips (correct clean → wrong noisy)"
        else:
            what = f"largest {spec.degradation_label}, one row per item"
        where = ""
        if not _is_paper_family(cf):
            where = f"{cf.replace('_', ' ')} · "
        return f"<b>Worst cases — {html.escape(where + task)}: {what}</b>"

    def _worst_heads(self, wc, spec) -> list[tuple[str, str]]:
        """The worst-case columns: (sort key, title)."""
        delta = "Δ"
        if not spec.is_binary:
            delta = spec.degradation_label
        heads = [
            ("condition", _CHOOSER[self.ws.condition_family][1]),
            ("item", "item"),
            ("delta", delta),
        ]
        if wc["model"].nunique() > 1:
            heads.append(("model", "model"))
        return heads

    def _worst_sort_buttons(self, heads) -> list:
        """One sort button per column, the sorted one marked ▲ or ▼."""
        col, asc = self._worst_sort
        buttons = []
        for k, label in heads:
            mark = ""
            if k == col:
                mark = " ▲" if asc else " ▼"

            def sort_by(_b, k=k):
                self._sort_worst(k)

            buttons.append(_button(label + mark, "aip-worst-sort", f"sort by {label}", sort_by))
        return buttons

    def _worst_button(self, r):
        """A worst case's button: its condition; clicking shows the stimulus."""
        cf = self.ws.condition_family

        def show(_b):
            self.select(
                condition_family=cf,
                task=r.task,
                item_id=r.item_id,
                bg_id=r.bg_id,
                snr_db=r.snr_db,
                model=r.model,
            )

        tooltip = f"{r.stimulus_id}: {cap_words(r.response, 25)}"
        return _button(r.condition, "aip-worst-case", tooltip, show)

    def _sort_worst(self, col):
        cur, asc = self._worst_sort
        self._worst_sort = (col, not asc) if cur == col else (col, col != "delta")
        self._render_worst(self.controls["task"].value)

    def summary_html(self) -> str:
        """A static HTML summary of the current selection (shown where widgets cannot render)."""
        s = self.state
        if not s.get("stimulus_id"):
            return f"<p>AIP-Speech explorer: {html.escape(s.get('message', ''))}</p>"
        response = (s.get("result") or {}).get("response") or s.get("message", "")
        return (
            "<p>AIP-Speech explorer (interactive in JupyterLab): "
            f"{html.escape(self.ws.condition_family)} "
            f"<code>{html.escape(s['stimulus_id'])}</code>, model "
            f"{html.escape(str(self.controls['model'].value) or '–')}, response "
            f"<q>{html.escape(cap_words(response, CAP_WORDS))}</q></p>"
        )


class ExplorerWidget(W.VBox):
    """The explorer's top-level ``VBox``; its text and HTML representations are a short summary
    (the default repr would spell out every child, WAV bytes included)."""

    explorer: Explorer | None = None

    def __repr__(self) -> str:
        state = self.explorer.state if self.explorer is not None else {}
        return f"Explorer({state.get('stimulus_id') or state.get('message', '')})"

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        if self.explorer is not None:
            bundle["text/html"] = self.explorer.summary_html()
        return bundle


def explorer(ws, *, n_worst: int = 10):
    """The notebook-10 interface for a workspace (``n_worst`` rows of worst cases): an
    :class:`ExplorerWidget` whose ``explorer`` is the :class:`Explorer`; outside a live kernel it
    shows a short HTML summary."""
    return Explorer(ws, n_worst=n_worst).widget
