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
from aiplib.core.tasks import TASK_FAMILIES, task_family
from aiplib.explore import data
from aiplib.io.audio import SR, valid_audio
from aiplib.io.formats import DESCRIPTORS

CAP_WORDS = 40  # words of a response shown before the "… +N words" toggle

CSS = """<style>
.aip-explorer .aip-sub{background:#ffe0b2;border-bottom:2px solid #e65100}
.aip-explorer .aip-ins{background:#c8e6c9;border-bottom:2px solid #2e7d32}
.aip-explorer .aip-del::before{content:attr(data-w);text-decoration:line-through;color:#b71c1c}
.aip-explorer .aip-resp-table{width:100%;border-collapse:collapse;font-size:13px}
.aip-explorer .aip-resp-table th{text-align:left;white-space:nowrap;padding:2px 1em 2px 0;vertical-align:top;width:9em}
.aip-explorer .aip-resp-table td{overflow-wrap:anywhere;padding:2px 0} .aip-explorer details.aip-more{display:inline}
.aip-explorer details.aip-more summary{display:inline;cursor:pointer;color:#1565c0}
.aip-explorer .aip-bg-table-inner th{white-space:nowrap;position:sticky;top:0;background:#f4f4f4;padding:2px 6px;font-weight:600}
.aip-explorer .aip-bg-table-inner td{white-space:nowrap;padding:1px 6px}
.aip-explorer .aip-worst-case button, .aip-explorer button.aip-worst-case{font-family:monospace}</style>"""

# Log-mel spectrogram: 25 ms windows, 10 ms hop, 64 mel bands up to 8 kHz, floored 80 dB below the
# loudest bin.
MEL_SETTINGS = dict(n_fft=400, hop_length=160, n_mels=64, fmin=0.0, fmax=8000.0, top_db=80.0)


# -------------------------------------------------------------------------------- HTML fragments
def col_header(c: str) -> str:
    """Readable header of a background-table column (HTML)."""
    if c in DESCRIPTORS:
        label, unit = data.descriptor_label(c)
        return f"{html.escape(label)}<br><small>{html.escape(unit)}</small>"
    if c == "mean_degradation_pp":
        return "Figure 4 key<br><small>mean of ASR, KWS (pp)</small>"
    if c.endswith(("_delta_wer_pp", "_delta_acc_pp")):
        task, what = c.rsplit("_delta_", 1)[0], "ΔWER" if c.endswith("_wer_pp") else "ΔAcc"
        name = task.upper() if task in TASK_FAMILIES else task
        return f"{html.escape(name)} {what}<br><small>pp, pooled</small>"
    return html.escape(c.replace("_", " "))


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


def response_html(fam: str, row, result, msg: str) -> str:
    """Reference, clean response and response of a manifest ``row`` as an HTML table; ``result`` is
    :func:`aiplib.explore.data.lookup_response` (or None), ``msg`` shown when there is no
      response."""
    ref = html.escape(str(row["reference"]))
    if fam == "kws":
        ref += " (target)" if bool(row.get("is_target", True)) else " (non-target)"
    rows = [("Reference" if fam == "asr" else "Keyword (label)", ref)]

    def marked(text, cls):  # KWS responses unmarked, cut as ASR ones
        if fam == "asr":
            return diff_html(data.word_diff(row["reference"], text), cls=cls)
        return diff_html([("equal", "", w) for w in str(text).split()], cls=cls)

    found = result is not None and result["found"]
    if found and result["bg_id"] != "clean":
        cr = result["clean_response"]
        rows.append(("Clean response", "–" if cr is None else marked(cr, "aip-clean-text")))
    if not found:
        rows.append(
            (
                "Response",
                f"<span class='aip-response-text aip-no-response'>{html.escape(msg)}</span>",
            )
        )
    else:
        rows.append(("Response", marked(result["response"] or "", "aip-response-text")))
        if result.get("error"):
            rows.append(("Error", html.escape(result["error"])))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    legend = (
        ""
        if fam != "asr" or not found
        else "<div style='font-size:11px;color:#555'>responses as scored (normalised words): "
        "<span class='aip-sub'>substituted</span> <span class='aip-ins'>inserted</span> "
        "<span class='aip-del' data-w='deleted'></span> reference word</div>"
    )
    return f"<table class='aip-resp-table'>{body}</table>{legend}"


def pct(v, spec: str = "+.1f", unit: str = "pp") -> str:
    """A fraction (2.222) in percent or percentage points, as the report writes it (``+222.2
    pp``)."""
    s = fmt(v * 100 if isinstance(v, (int, float)) else v, spec)
    return s if s == "–" else f"{s} {unit}"


def metrics_html(fam: str, result) -> str:
    """One line of metrics: WER, S/D/I, loop, ΔWER vs clean; or KWS first word, correct, the
    flip."""
    if result is None or not result["found"]:
        return ""
    noisy = result["bg_id"] != "clean"
    if fam == "asr":
        parts = [f"WER <b>{pct(result['wer'], '.1f', '%')}</b>"]
        if not math.isnan(result.get("substitutions", float("nan"))):
            parts.append(
                f"S {result['substitutions']:.0f} · D {result['deletions']:.0f} · "
                f"I {result['insertions']:.0f} of {result['ref_words']:.0f} reference words"
            )
        if result.get("is_loop"):
            parts.append("<b>looping response</b>")
        if noisy:
            parts += [
                f"clean WER {pct(result['clean_wer'], '.1f', '%')}",
                f"ΔWER vs clean <b>{pct(result['delta_wer'])}</b>",
            ]
    else:
        yn = {True: "correct", False: "wrong", None: "–"}
        parts = [
            f"first word <b>{html.escape(result['first_word'] or '–')}</b>",
            yn[result["correct"]],
        ]
        if noisy:
            flip = result["delta_acc"]
            parts += [
                f"clean: {yn[result['clean_correct']]}",
                "–"
                if isinstance(flip, float) and math.isnan(flip)
                else "<b>flip: correct → wrong</b>"
                if flip > 0
                else "recovered: wrong → correct"
                if flip < 0
                else "no change",
            ]
    return "<div style='font-size:14px;padding:2px 0'>" + " · ".join(parts) + "</div>"


def bg_info_html(table, bg_id: str) -> str:
    """Licence, source and descriptors (with units) of a background of
    :func:`~aiplib.explore.data.background_table`."""
    if bg_id == "clean":
        return "<i>clean: no background</i>"
    if bg_id not in table.index:
        return f"<i>{html.escape(bg_id)}: not in the battery table</i>"
    r = table.loc[bg_id]
    e = lambda k: html.escape(str(r[k]))  # noqa: E731
    head = (
        f"<b>{html.escape(bg_id)}</b> — {e('category')}: {e('description')}<br>licence <b>{e('licence')}</b>"
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
        f"{head}<table class='aip-descriptors' style='font-size:12px'><tr><th>descriptor</th><th>value</th>"
        f"<th>unit</th></tr>{cells}</table>"
    )


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
        cells = [f"<td><b>{html.escape(str(bg))}</b></td>"] + [
            f"<td>{html.escape(r[c])}</td>"
            if isinstance(r[c], str)
            else f"<td style='text-align:right'>{fmt(r[c], '.0f' if c == 'rank' else '+.1f' if c in deg else '.3g')}</td>"
            for c in cols
        ]
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
_NO_MODEL = ""
_AS_RANKED = "(as ranked)"
# Per family: the condition chooser's title, its clean option, the worst-case column, the plot's
# title.
_CHOOSER = {
    "background": ("Background", "clean (no background)", "background @ SNR", "mixture"),
    "competing_speech": (
        "Distractor",
        "clean (no distractor)",
        "distractor @ SNR",
        "target + distractor",
    ),
    "channel": ("Channel", "clean (no transform)", "channel condition", "transformed"),
}
_PLAYERS = ("clean", "background", "mixture")
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


def _pick(wanted, current, valid, default):
    """``wanted`` if valid, else ``current`` if valid, else ``default``: a control's new value."""
    return wanted if wanted in valid else current if current in valid else default


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
        self.base, self.families = ws.with_family("background"), data.available_families(ws)
        cf = (
            ws.condition_family
            if ws.condition_family in self.families
            else (self.families or ["background"])[0]
        )
        self.ws, self.n_worst, self.state, self.worst_buttons = (
            ws.with_family(cf),
            int(n_worst),
            {},
            [],
        )
        self.tasks = data.available_tasks(self.ws)
        self._busy = False
        self._worst_sort, self._worst_key, self._bg_cache = ("delta", False), None, None
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
            for k, label in zip(_PLAYERS, data.PLAYER_LABELS["background"])
        }
        self.player_boxes = {
            k: W.VBox([self.player_titles[k], self.players[k]]).add_class(f"aip-{k}-player")
            for k in _PLAYERS
        }
        self.status, self.mixinfo, self.bg_info = (
            _html("aip-status"),
            _html("aip-mixinfo"),
            _html("aip-bg-info"),
        )
        self.family_info, self.response, self.metrics, self.bg_table = (
            _html(c, width="100%")
            for c in ("aip-family-info", "aip-response", "aip-metrics", "aip-bg-table")
        )
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
        if not self.tasks:
            self.status.value = (
                "<span style='color:#a00'>No manifests yet in "
                f"<code>{html.escape(str(ws.manifests))}</code>: run notebooks 01–05 first.</span>"
            )
            self.state = {"message": "no manifests yet: run notebooks 01-05 first"}
            for w in self.controls.values():
                w.disabled = True
            self._render_bg_table()
            return
        on = {
            "family": lambda: self._set_family(self.controls["family"].value),
            "task": lambda: self._set_task(self.controls["task"].value),
        }
        for name, w in self.controls.items():
            w.observe(
                lambda ch, act=on.get(name, self._refresh): self._busy or act(), names="value"
            )
        for w in (self.bg_sort, self.bg_ascending):
            w.observe(lambda ch: self._busy or self._render_bg_table(), names="value")
        with self._quiet():
            self.controls["family"].options = [(f.replace("_", " "), f) for f in self.families]
            self.controls["family"].disabled = len(self.families) < 2
        self._set_family(cf)  # selects cf in the family control
        self._render_bg_table()

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
            c["bg"].description = _CHOOSER[cf][0]
            c["snr"].layout.display = (
                "none" if cf == "channel" else None
            )  # channel: no SNR (the marker 99)
        self.bg_panel.layout.display = None if cf == "background" else "none"
        self._set_task(_pick(task, c["task"].value, self.tasks, self.tasks[0]), **kwargs)

    def _set_task(self, task, *, item_id=None, bg_id=None, snr_db=None, model=None):
        man = data.manifest(self.ws, task_family(task))
        c = self.controls
        with self._quiet():
            c["task"].value = task
            items = man.loc[man["bg_id"] == "clean", ["item_id", "reference"]]
            if items.empty:
                items = man[["item_id", "reference"]].drop_duplicates("item_id")
            c["item"].options = [
                (f"{i} — {r[:40]}{'…' if len(r) > 40 else ''}", i)
                for i, r in zip(items["item_id"], items["reference"].astype(str))
            ]
            ids = list(items["item_id"])
            c["item"].value = _pick(item_id, c["item"].value, ids, ids[0])
            noisy = man[man["bg_id"] != "clean"].drop_duplicates("bg_id")
            bgs = names = noisy["bg_id"].tolist()
            if (
                "distractor_languages" in noisy.columns
            ):  # competing speech: say the languages, flag the voice
                same = noisy["same_voice_as_target"].astype(str).str.lower() == "true"
                names = [
                    f"{b} ({lang}{', same voice' if sv else ''})"
                    for b, lang, sv in zip(bgs, noisy["distractor_languages"], same)
                ]
            cur_bg = bg_id if bg_id is not None else c["bg"].value  # before new options reset it
            c["bg"].options = [(_CHOOSER[self.ws.condition_family][1], "clean")] + list(
                zip(names, bgs)
            )
            c["bg"].value = _pick(cur_bg, None, ["clean", *bgs], bgs[0] if bgs else "clean")
            snrs = sorted({float(s) for s in man["snr_db"].dropna()}, reverse=True)
            c["snr"].options = [(f"{s:g} dB", s) for s in snrs]
            if snrs:
                c["snr"].value = _pick(
                    c["snr"].value if snr_db is None else float(snr_db), None, snrs, snrs[0]
                )
            models = data.available_models(self.ws, task)
            c["model"].options = models or [("(no results yet)", _NO_MODEL)]
            c["model"].value = (
                _pick(model, c["model"].value, models, models[0]) if models else _NO_MODEL
            )
            c["model"].disabled = not models
        self._render_worst(task)
        self._refresh()

    def select(
        self, *, condition_family=None, task=None, item_id=None, bg_id=None, snr_db=None, model=None
    ) -> dict:
        """Show one stimulus and return :attr:`state`; controls not given keep their value
        (``snr_db`` in dB). Raises ``AiplibParameterError`` if a value is not among the control's
        options."""
        c = self.controls
        if snr_db is not None and math.isnan(float(snr_db)):
            snr_db = None  # a condition without an SNR (channel)
        switch = condition_family is not None and condition_family != self.ws.condition_family
        if switch and condition_family not in self.families:
            raise AiplibParameterError(
                f"condition family {condition_family!r} has no manifests here; "
                f"choose one of {', '.join(self.families)}"
            )
        tasks = (
            data.available_tasks(self.base.with_family(condition_family)) if switch else self.tasks
        )
        task = task or c["task"].value
        if task not in tasks:
            raise AiplibParameterError(f"unknown task {task!r}; choose one of {', '.join(tasks)}")
        kw = dict(task=task, item_id=item_id, bg_id=bg_id, snr_db=snr_db, model=model)
        self._set_family(condition_family, **kw) if switch else self._set_task(**kw)
        for name, val in (("item", item_id), ("bg", bg_id), ("model", model)):
            if val is not None and c[name].value != val:
                valid = [str(o[1]) if isinstance(o, tuple) else str(o) for o in c[name].options]
                raise AiplibParameterError(
                    f"{name} {val!r} is not available; choose one of {', '.join(valid)}"
                )
        if (
            snr_db is not None
            and bg_id != "clean"
            and not math.isclose(float(c["snr"].value), float(snr_db))
        ):
            raise AiplibParameterError(f"SNR {snr_db} dB is not available")
        return self.state

    # --------------------------------------------------------------------------------------- render
    def _refresh(self):
        c = self.controls
        task, item_id, bg_id, snr, model = (
            c[k].value for k in ("task", "item", "bg", "snr", "model")
        )
        fam, cf = task_family(task), self.ws.condition_family
        c["snr"].disabled = bg_id == "clean"
        try:
            audio = data.stimulus_audio(
                self.ws, fam, item_id, bg_id, None if bg_id == "clean" else snr
            )
        except Exception as exc:  # a missing audio file: say so in the widget, keep it usable
            self.state = {"stimulus_id": None, "audio": None, "result": None, "message": str(exc)}
            self.status.value = f"<span style='color:#a00'>{html.escape(str(exc))}</span>"
            return
        sid, labels = audio["stimulus_id"], audio["labels"]
        noisy, middle = bg_id != "clean", audio["background"] is not None
        for k in _PLAYERS:
            self.players[k].value = b"" if audio[k] is None else data.wav_bytes(audio[k])
            self.player_titles[k].value = f"<b>{html.escape(labels[k])}</b>"
        self.players["background"].layout.display = None if middle else "none"
        self.player_boxes["background"].layout.display = None if noisy else "none"
        self.family_info.value = (
            ""
            if not labels["notes"]
            else (
                "<table style='font-size:13px'>"
                + "".join(
                    f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top'>{html.escape(k)}</th>"
                    f"<td>{html.escape(v)}</td></tr>"
                    for k, v in labels["notes"]
                )
                + "</table>"
            )
        )
        info = audio["info"]
        achieved = round(info.achieved_snr_db, 2) + 0.0  # no "-0.00"
        snr_txt = (
            "clean"
            if not noisy
            else f"channel condition {bg_id}, no noise added"
            if cf == "channel"
            else f"target {info.target_snr_db:g} dB, achieved {achieved:.2f} dB"
        )
        self.mixinfo.value = (
            f"<code>{html.escape(sid)}</code> · {audio['mixture'].shape[0] / SR:.2f} s · {snr_txt}"
            f" · peak {info.peak:.3f} · clip scale {info.clip_scale:.3f}"
            + ("" if info.bg_offset is None else f" · offset {info.bg_offset} samples")
            + ("" if info.bg_active is not False else " · background segment is digital silence")
        )
        sigs = (
            {"clean": audio["clean"], _CHOOSER[cf][3]: audio["mixture"]}
            if noisy
            else {"clean": audio["clean"]}
        )
        self.plot.value = signals_figure_png(sigs, title=sid)
        result = data.lookup_response(self.ws, model, task, sid) if model else None
        where = "" if cf == "background" else f" in the {cf} family"
        if not model:
            msg = (
                f"no inference results yet for {task}{where} — the mixtures play; "
                "run notebook 07 (inference) and 08 (scores)"
                + ("" if cf == "background" else f" with {cf} in the suite")
                + " to see responses"
            )
        elif not result["found"]:
            msg = f"no response from {model} for {sid} yet (inference incomplete?)"
        else:
            msg = (
                ""
                if result["source"] == "scores"
                else (
                    f"scores not written yet for {task}{where}: WER / correctness computed here from "
                    f"{self.ws.rel(self.ws.inference_jsonl(model, task))}"
                )
            )
        self.status.value = f"<i>{html.escape(msg)}</i>" if msg else ""
        self.response.value = response_html(fam, audio["row"], result, msg)
        self.metrics.value = metrics_html(fam, result)
        self.state = {"stimulus_id": sid, "audio": audio, "result": result, "message": msg}
        if cf == "background":
            self.bg_info.value = bg_info_html(self._bg_frame(), bg_id)
            self._render_bg_table()

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
        sel = (
            self.controls["bg"].value
            if self.tasks and self.ws.condition_family == "background"
            else None
        )
        self.bg_table.value = bg_table_html(table, cols, deg, sel)

    def _render_worst(self, task):
        sc_path = self.ws.scores_csv(task)
        models = data.available_models(self.ws, task)
        key = (
            str(sc_path),
            task,
            sc_path.stat().st_mtime_ns if sc_path.is_file() else None,
            tuple(models),
            self._worst_sort,
        )
        if self._worst_key == key:  # same task, files, order: keep
            return
        self._worst_key = key
        fam, cf = task_family(task), self.ws.condition_family
        wc = data.worst_cases(self.ws, task, self.n_worst)
        col, asc = self._worst_sort
        if col != "delta" or asc:
            by = {"condition": ["bg_id", "snr_db"], "item": ["item_id"], "model": ["model"]}.get(
                col, ["delta"]
            )
            wc = wc.sort_values(by, ascending=asc, kind="stable").reset_index(drop=True)
        self.worst_cases = wc
        what = (
            "largest ΔWER, one row per item"
            if fam == "asr"
            else "KWS flips (correct clean → wrong noisy)"
        )
        where = "" if cf == "background" else f"{cf.replace('_', ' ')} · "
        self.worst_title.value = f"<b>Worst cases — {html.escape(where + task)}: {what}</b>"
        if wc.empty:
            hint = (
                "none: no stimulus did worse than clean"
                if sc_path.is_file()
                else "no scores yet: run notebook 08 (scores)"
                if models
                else "no inference results yet: run notebooks 07 and 08"
            )
            self.worst_title.value += f"<br><i>{hint}</i>"
            self.worst.children, self.worst_buttons = [], []
            return
        several = wc["model"].nunique() > 1
        heads = [
            ("condition", _CHOOSER[cf][2]),
            ("item", "item"),
            ("delta", "ΔWER" if fam == "asr" else "Δ"),
        ] + ([("model", "model")] if several else [])
        cells = [
            _button(
                label + ((" ▲" if asc else " ▼") if k == col else ""),
                "aip-worst-sort",
                f"sort by {label}",
                lambda _b, k=k: self._sort_worst(k),
            )
            for k, label in heads
        ]
        self.worst_buttons = [
            _button(
                r.condition,
                "aip-worst-case",
                f"{r.stimulus_id}: {cap_words(r.response, 25)}",
                lambda _b, r=r: self.select(
                    condition_family=cf,
                    task=r.task,
                    item_id=r.item_id,
                    bg_id=r.bg_id,
                    snr_db=r.snr_db,
                    model=r.model,
                ),
            )
            for r in wc.itertuples()
        ]
        for r, b in zip(wc.itertuples(), self.worst_buttons):
            delta = pct(r.delta) if fam == "asr" else "flip"
            cells += [
                b,
                W.HTML(f"<code>{html.escape(r.item_id)}</code>"),
                W.HTML(delta),
                *([W.HTML(html.escape(r.model))] if several else []),
            ]
        self.worst.layout.grid_template_columns = f"repeat({len(heads)}, max-content)"
        self.worst.children = cells

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
            f"<p>AIP-Speech explorer (interactive in JupyterLab): {html.escape(self.ws.condition_family)} "
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
