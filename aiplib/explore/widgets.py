"""Notebook 10, interface side: the explorer widget (ipywidgets), drawn from :mod:`aiplib.explore.data`.

Everything shown is computed by :mod:`aiplib.explore.data` (stimuli, responses and their scores, the
worst cases, the background table in Figure 4's order) and :mod:`aiplib.explore.listen` (WAV bytes,
spectrograms); this module only lays it out and wires the controls. Nothing is written.

Layout, top to bottom: controls (the condition family first: ``background``, ``competing_speech``,
``channel``, whichever has manifests; choosing one switches the workspace view, so every list, file
and score below is that family's); the three players (clean utterance, background / distractor /
the channel transform's change as mixed, mixture or transformed speech, float32 WAVs rebuilt from the
manifest row, titled per family by :func:`aiplib.explore.listen.stimulus_labels`) and the condition's
details (distractor languages, transcript and same-voice flag; channel parameters); a full-width
block with the reference, the clean response and the response, each response marked word by word
against the reference (substituted, inserted and deleted words, as the S/D/I counts; long responses
cut after :data:`CAP_WORDS` words with a "… +N words" toggle); the metrics (WER, S/D/I, ΔWER or
the KWS flip); the clean | mixture spectrograms next to the worst cases (a compact table sorted by
clicking its headers, one row per item, loaded by one click on its "background @ SNR" button); the
chosen background's licence, sources and descriptors (with units) and all backgrounds in Figure 4's
order, sortable by any column.

Widget classes (for the browser test): ``aip-explorer`` (the whole widget), ``aip-family``, ``aip-task``,
``aip-item``, ``aip-bg``, ``aip-snr``, ``aip-model`` (drop-downs), ``aip-clean-audio``,
``aip-background-audio``, ``aip-mixture-audio`` (``<audio>``), ``aip-players``, ``aip-player-title``,
``aip-family-info``, ``aip-plot``,
``aip-response`` (the text block; the model's response words are in ``<span
class="aip-response-text">``), ``aip-metrics``, ``aip-status``, ``aip-mixinfo``, ``aip-bg-info``,
``aip-bg-table``, ``aip-bg-sort``, ``aip-worst`` (the table), ``aip-worst-sort`` (its header
buttons) and ``aip-worst-case`` (a row's button).
"""
from __future__ import annotations

import html
import math

import ipywidgets as W

from aiplib.analysis.report_tables import cap_words
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import task_family
from aiplib.explore.data import (
    _manifest,
    available_families,
    available_models,
    available_tasks,
    background_table,
    lookup_response,
    worst_cases,
)
from aiplib.explore.html import (
    CAP_WORDS,
    CSS,
    bg_info_html,
    bg_table_html,
    col_header,
    metrics_html,
    response_html,
)
from aiplib.explore.listen import PLAYER_LABELS, signals_figure_png, stimulus_audio, wav_bytes
from aiplib.io.audio import SR
from aiplib.io.formats import DESCRIPTORS

__all__ = ["Explorer", "ExplorerWidget", "explorer"]

_NO_MODEL = ""
_AS_RANKED = "(as ranked)"
_CHOOSER = {"background": ("Background", "clean (no background)", "background @ SNR", "mixture"),
            "competing_speech": ("Distractor", "clean (no distractor)", "distractor @ SNR", "target + distractor"),
            "channel": ("Channel", "clean (no transform)", "channel condition", "transformed")}
"""Per family: the condition chooser's title, its clean option, the worst-case column, the plot's title."""


class Explorer:
    """Builds and drives the notebook-10 interface; :attr:`widget` is what the notebook displays.

    Use :func:`explorer`. Tests drive it through :meth:`select` and read :attr:`state`.

    Attributes
    ----------
    ws : aiplib.core.workspace.Workspace
        The view of the chosen condition family (:meth:`~aiplib.core.workspace.Workspace.with_family`).
    base : aiplib.core.workspace.Workspace
        The ``background`` view (the battery's table).
    families : list of str
        Condition families with manifests (:func:`aiplib.explore.data.available_families`).
    widget : ExplorerWidget
    controls : dict of str -> ipywidgets.Dropdown
        ``family, task, item, bg, snr, model``.
    players : dict of str -> ipywidgets.Audio
        ``clean, background, mixture``; values are float32 WAV bytes (:func:`aiplib.explore.listen.wav_bytes`).
    worst_cases : pandas.DataFrame
        The rows of the worst-case table (:func:`aiplib.explore.data.worst_cases`), in display order.
    worst_buttons : list of ipywidgets.Button
        One per row of :attr:`worst_cases`, labelled with its condition (``"bg03 @ 0 dB"``).
    state : dict
        The last refresh: ``stimulus_id``, ``audio`` (:func:`aiplib.explore.data.stimulus_audio`),
        ``result`` (:func:`aiplib.explore.data.lookup_response`), ``message`` (status line, plain text).
    """

    def __init__(self, ws, *, n_worst: int = 10):
        self.base = ws.with_family("background")
        self.families = available_families(ws)
        cf = ws.condition_family if ws.condition_family in self.families else (
            self.families[0] if self.families else "background")
        self.ws = ws.with_family(cf)
        self.n_worst = int(n_worst)
        self.state: dict = {}
        self._busy = False
        self._worst_sort = ("delta", False)
        self.worst_buttons: list = []
        self.tasks = available_tasks(self.ws)

        def dd(name, desc, width="auto"):  # add_class returns the widget
            return W.Dropdown(description=desc, options=[], layout=W.Layout(width=width),
                              style={"description_width": "initial"}).add_class(f"aip-{name}")

        self.controls = {"family": dd("family", "Condition family", "270px"),
                         "task": dd("task", "Task", "150px"), "item": dd("item", "Item", "320px"),
                         "bg": dd("bg", "Background", "260px"), "snr": dd("snr", "SNR", "130px"),
                         "model": dd("model", "Model", "260px")}
        self.players, self.player_titles, boxes = {}, {}, []
        for key, label in zip(("clean", "background", "mixture"), PLAYER_LABELS["background"]):
            a = self.players[key] = W.Audio(value=b"", format="wav", autoplay=False, controls=True,
                                            loop=False).add_class(f"aip-{key}-audio")
            self.player_titles[key] = W.HTML(f"<b>{html.escape(label)}</b>", layout=W.Layout(max_width="420px")
                                             ).add_class("aip-player-title")
            boxes.append(W.VBox([self.player_titles[key], a]).add_class(f"aip-{key}-player"))
        self.player_boxes = dict(zip(("clean", "background", "mixture"), boxes))

        def html_w(cls, **layout):
            return W.HTML(layout=W.Layout(**layout)).add_class(cls)

        self.status = html_w("aip-status")
        self.mixinfo = html_w("aip-mixinfo")
        self.family_info = html_w("aip-family-info", width="100%")
        self.response = html_w("aip-response", width="100%")
        self.metrics = html_w("aip-metrics", width="100%")
        self.bg_info = html_w("aip-bg-info")
        self.bg_table = html_w("aip-bg-table", width="100%")
        self.worst_title = W.HTML()
        self.plot = W.Image(format="png", layout=W.Layout(max_width="860px", width="auto")).add_class("aip-plot")
        self.bg_sort = W.Dropdown(description="Sort by", options=[], style={"description_width": "initial"},
                                  layout=W.Layout(width="320px")).add_class("aip-bg-sort")
        self.bg_ascending = W.Checkbox(value=False, description="ascending", indent=False).add_class("aip-bg-sort-asc")
        self.worst = W.GridBox([], layout=W.Layout(grid_template_columns="repeat(4, max-content)",
                                                   grid_gap="2px 12px", align_items="center")).add_class("aip-worst")

        players = W.HBox(boxes, layout=W.Layout(flex_flow="row wrap")).add_class("aip-players")
        worst_panel = W.VBox([self.worst_title, self.worst],
                             layout=W.Layout(min_width="380px")).add_class("aip-worst-panel")
        self.bg_panel = W.VBox([W.HTML("<b>Background</b>"), self.bg_info,
                                W.HTML("<b>All backgrounds, in Figure 4's order (most harmful first)</b>"),
                                W.HBox([self.bg_sort, self.bg_ascending]), self.bg_table],
                               layout=W.Layout(width="100%")).add_class("aip-bg-panel")
        title = W.HTML(CSS + "<h3 style='margin:0'>Listen and explore — profile "
                       f"<code>{html.escape(ws.profile)}</code></h3>")
        self.widget = ExplorerWidget([
            title, self.status,
            W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap")),
            players, self.mixinfo, self.family_info, self.response, self.metrics,
            W.HBox([self.plot, worst_panel], layout=W.Layout(flex_flow="row wrap", align_items="flex-start",
                                                             grid_gap="16px")),
            self.bg_panel,
        ]).add_class("aip-explorer")
        self.widget.explorer = self

        if not self.tasks:
            self.status.value = ("<span style='color:#a00'>No manifests yet in "
                                 f"<code>{html.escape(str(ws.manifests))}</code>: run notebooks 01–05 first.</span>")
            self.state = {"message": "no manifests yet: run notebooks 01-05 first"}
            for w in self.controls.values():
                w.disabled = True
            self._render_bg_table()
            return
        for name, w in self.controls.items():
            w.observe(lambda ch, name=name: self._on_change(name), names="value")
        self.bg_sort.observe(lambda ch: self._render_bg_table(), names="value")
        self.bg_ascending.observe(lambda ch: self._render_bg_table(), names="value")
        self._busy = True
        self.controls["family"].options = [(f.replace("_", " "), f) for f in self.families]
        self.controls["family"].value = cf
        self.controls["family"].disabled = len(self.families) < 2
        self._busy = False
        self._set_family(cf)
        self._render_bg_table()

    # -------------------------------------------------------------------------------- control logic
    def _set_family(self, cf, **kwargs):
        """Switch the workspace view to condition family ``cf`` and show its first (or the given) task."""
        c = self.controls
        self.ws = self.base.with_family(cf)
        self.tasks = available_tasks(self.ws)
        chooser = _CHOOSER[cf]
        self._busy = True
        try:
            c["family"].value = cf
            c["task"].options = self.tasks
            c["bg"].description = chooser[0]
            c["snr"].layout.display = "none" if cf == "channel" else None  # channel: no SNR (the marker 99)
        finally:
            self._busy = False
        self.bg_panel.layout.display = None if cf == "background" else "none"
        task = kwargs.pop("task", None)
        self._set_task(task if task in self.tasks else (c["task"].value if c["task"].value in self.tasks
                                                        else self.tasks[0]), **kwargs)

    def _set_task(self, task, *, item_id=None, bg_id=None, snr_db=None, model=None):
        man = _manifest(self.ws, task_family(task))
        c = self.controls
        self._busy = True
        try:
            c["task"].value = task
            items = man.loc[man["bg_id"] == "clean", ["item_id", "reference"]]
            if items.empty:
                items = man[["item_id", "reference"]].drop_duplicates("item_id")
            opts = [(f"{i} — {r[:40]}{'…' if len(r) > 40 else ''}", i)
                    for i, r in zip(items["item_id"], items["reference"].astype(str))]
            c["item"].options = opts
            ids = [o[1] for o in opts]
            c["item"].value = item_id if item_id in ids else (c["item"].value if c["item"].value in ids else ids[0])
            noisy = man[man["bg_id"] != "clean"].drop_duplicates("bg_id")
            bgs = noisy["bg_id"].tolist()
            if "distractor_languages" in noisy.columns:   # competing speech: say the languages, flag the voice
                same = noisy["same_voice_as_target"].astype(str).str.lower() == "true"
                names = [f"{b} ({lang}{', same voice' if sv else ''})"
                         for b, lang, sv in zip(bgs, noisy["distractor_languages"], same)]
            else:
                names = bgs
            cur_bg = bg_id if bg_id is not None else c["bg"].value   # before new options reset it
            c["bg"].options = [(_CHOOSER[self.ws.condition_family][1], "clean")] + list(zip(names, bgs))
            c["bg"].value = cur_bg if cur_bg in ["clean", *bgs] else (bgs[0] if bgs else "clean")
            snrs = sorted({float(s) for s in man["snr_db"].dropna()}, reverse=True)
            c["snr"].options = [(f"{s:g} dB", s) for s in snrs]
            cur = snr_db if snr_db is not None else c["snr"].value
            if snrs:
                c["snr"].value = float(cur) if cur is not None and float(cur) in snrs else snrs[0]
            models = available_models(self.ws, task)
            if models:
                c["model"].options = models
                c["model"].value = model if model in models else (
                    c["model"].value if c["model"].value in models else models[0])
                c["model"].disabled = False
            else:
                c["model"].options = [("(no results yet)", _NO_MODEL)]
                c["model"].value = _NO_MODEL
                c["model"].disabled = True
        finally:
            self._busy = False
        self._render_worst(task)
        self._refresh()

    def _on_change(self, name):
        if self._busy:
            return
        if name == "family":
            self._set_family(self.controls["family"].value)
        elif name == "task":
            self._set_task(self.controls["task"].value)
        else:
            self._refresh()

    def select(self, *, condition_family=None, task=None, item_id=None, bg_id=None, snr_db=None,
               model=None) -> dict:
        """Show one stimulus (unspecified controls keep their value) and return :attr:`state`.

        Parameters
        ----------
        condition_family : str, optional
            One of :attr:`families` (switches the workspace view).
        task, item_id, bg_id : str, optional
        snr_db : float, optional, dB
        model : str, optional

        Raises
        ------
        AiplibParameterError
            If a value is not among the control's options.
        """
        c = self.controls
        if snr_db is not None and math.isnan(float(snr_db)):
            snr_db = None                                    # a condition without an SNR (channel)
        switch = condition_family is not None and condition_family != self.ws.condition_family
        if switch and condition_family not in self.families:
            raise AiplibParameterError(f"condition family {condition_family!r} has no manifests here; "
                                       f"choose one of {', '.join(self.families)}")
        tasks = available_tasks(self.base.with_family(condition_family)) if switch else self.tasks
        task = task or c["task"].value
        if task not in tasks:
            raise AiplibParameterError(f"unknown task {task!r}; choose one of {', '.join(tasks)}")
        kw = dict(task=task, item_id=item_id, bg_id=bg_id, snr_db=snr_db, model=model)
        self._set_family(condition_family, **kw) if switch else self._set_task(**kw)
        for name, val in (("item", item_id), ("bg", bg_id), ("model", model)):
            if val is not None and c[name].value != val:
                valid = [str(o[1]) if isinstance(o, tuple) else str(o) for o in c[name].options]
                raise AiplibParameterError(f"{name} {val!r} is not available; choose one of {', '.join(valid)}")
        if snr_db is not None and bg_id != "clean" and not math.isclose(float(c["snr"].value), float(snr_db)):
            raise AiplibParameterError(f"SNR {snr_db} dB is not available")
        return self.state

    # --------------------------------------------------------------------------------------- render
    def _refresh(self):
        c = self.controls
        task, item_id, bg_id = c["task"].value, c["item"].value, c["bg"].value
        snr, model = c["snr"].value, c["model"].value
        fam, cf = task_family(task), self.ws.condition_family
        c["snr"].disabled = bg_id == "clean"
        try:
            audio = stimulus_audio(self.ws, fam, item_id, bg_id, None if bg_id == "clean" else snr)
        except Exception as exc:  # a missing audio file: say so in the widget, keep it usable
            self.state = {"stimulus_id": None, "audio": None, "result": None, "message": str(exc)}
            self.status.value = f"<span style='color:#a00'>{html.escape(str(exc))}</span>"
            return
        sid, labels = audio["stimulus_id"], audio["labels"]
        self.players["mixture"].value = wav_bytes(audio["mixture"])
        self.players["clean"].value = wav_bytes(audio["clean"])
        noisy, middle = bg_id != "clean", audio["background"] is not None
        self.players["background"].value = wav_bytes(audio["background"]) if middle else b""
        self.players["background"].layout.display = None if middle else "none"
        self.player_boxes["background"].layout.display = None if noisy else "none"
        for key, w in self.player_titles.items():
            w.value = f"<b>{html.escape(labels[key])}</b>"
        self.family_info.value = "" if not labels["notes"] else (
            "<table style='font-size:13px'>" + "".join(
                f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top'>{html.escape(k)}</th>"
                f"<td>{html.escape(v)}</td></tr>" for k, v in labels["notes"]) + "</table>")
        info = audio["info"]
        achieved = round(info.achieved_snr_db, 2) + 0.0  # no "-0.00"
        snr_txt = ("clean" if not noisy else f"channel condition {bg_id}, no noise added" if cf == "channel"
                   else f"target {info.target_snr_db:g} dB, achieved {achieved:.2f} dB")
        self.mixinfo.value = (f"<code>{html.escape(sid)}</code> · {audio['mixture'].shape[0] / SR:.2f} s · {snr_txt}"
                              f" · peak {info.peak:.3f} · clip scale {info.clip_scale:.3f}"
                              + ("" if info.bg_offset is None else f" · offset {info.bg_offset} samples")
                              + ("" if info.bg_active is not False else " · background segment is digital silence"))
        sigs = {"clean": audio["clean"], _CHOOSER[cf][3]: audio["mixture"]} if noisy else {"clean": audio["clean"]}
        self.plot.value = signals_figure_png(sigs, title=sid)
        result = lookup_response(self.ws, model, task, sid) if model else None
        where = "" if cf == "background" else f" in the {cf} family"
        if not model:
            msg = (f"no inference results yet for {task}{where} — the mixtures play; "
                   "run notebook 07 (inference) and 08 (scores)"
                   + ("" if cf == "background" else f" with {cf} in the suite") + " to see responses")
        elif not result["found"]:
            msg = f"no response from {model} for {sid} yet (inference incomplete?)"
        else:
            msg = "" if result["source"] == "scores" else (
                f"scores not written yet for {task}{where}: WER / correctness computed here from "
                f"{self.ws.rel(self.ws.inference_jsonl(model, task))}")
        self.status.value = f"<i>{html.escape(msg)}</i>" if msg else ""
        self.response.value = response_html(fam, audio["row"], result, msg)
        self.metrics.value = metrics_html(fam, result)
        self.state = {"stimulus_id": sid, "audio": audio, "result": result, "message": msg}
        if cf == "background":
            self.bg_info.value = bg_info_html(self._bg_frame(), bg_id)
            if getattr(self, "_table_selected", None) != bg_id:
                self._render_bg_table()

    def _bg_frame(self):
        files = list(self.base.scores_dir.glob("*.csv")) + [
            p for p in (self.base.battery_csv, self.base.descriptor_csv) if p.is_file()]
        stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in files))
        if getattr(self, "_bg_cache", None) is None or self._bg_cache[0] != stamp:
            self._bg_cache = (stamp, background_table(self.base))
        return self._bg_cache[1]

    def _render_bg_table(self):

        if getattr(self, "_rendering_table", False):  # setting the sort options fires the observer
            return
        self._rendering_table = True
        try:
            table = self._bg_frame()
            deg = [c for c in table.columns if c.endswith("_pp")]
            cols = (["rank"] if "rank" in table.columns else []) + deg + ["category"] + list(DESCRIPTORS)
            options = [("Figure 4 order", _AS_RANKED)] + [
                (col_header(c).replace("<br><small>", " (").replace("</small>", ")"), c) for c in cols[1:]]
            if list(self.bg_sort.options) != options:
                keep = self.bg_sort.value
                self.bg_sort.options = options
                self.bg_sort.value = keep if keep in [o[1] for o in options] else _AS_RANKED
            by = self.bg_sort.value
            if by and by != _AS_RANKED:
                table = table.sort_values(by, ascending=bool(self.bg_ascending.value), kind="stable",
                                          na_position="last")
            elif self.bg_ascending.value:
                table = table.iloc[::-1]
            sel = self.controls["bg"].value if self.tasks and self.ws.condition_family == "background" else None
            self.bg_table.value = bg_table_html(table, cols, deg, sel)
            self._table_selected = sel
        finally:
            self._rendering_table = False

    def _render_worst(self, task, *, force=False):
        sc_path = self.ws.scores_csv(task)
        key = (str(sc_path), task, sc_path.stat().st_mtime_ns if sc_path.is_file() else None,
               tuple(available_models(self.ws, task)), self._worst_sort)
        if getattr(self, "_worst_key", None) == key and not force:  # same task, files, order: keep
            return
        self._worst_key = key
        fam = task_family(task)
        wc = worst_cases(self.ws, task, self.n_worst)
        col, asc = self._worst_sort
        if col != "delta" or asc:
            by = {"condition": ["bg_id", "snr_db"], "item": ["item_id"], "model": ["model"]}.get(col, ["delta"])
            wc = wc.sort_values(by, ascending=asc, kind="stable").reset_index(drop=True)
        self.worst_cases = wc
        cf = self.ws.condition_family
        what = "largest ΔWER, one row per item" if fam == "asr" else "KWS flips (correct clean → wrong noisy)"
        where = "" if cf == "background" else f"{cf.replace('_', ' ')} · "
        self.worst_title.value = f"<b>Worst cases — {html.escape(where + task)}: {what}</b>"
        if wc.empty:
            hint = ("none: no stimulus did worse than clean" if sc_path.is_file() else
                    "no scores yet: run notebook 08 (scores)" if available_models(self.ws, task) else
                    "no inference results yet: run notebooks 07 and 08")
            self.worst_title.value += f"<br><i>{hint}</i>"
            self.worst.children, self.worst_buttons = [], []
            return
        several = wc["model"].nunique() > 1
        heads = [("condition", _CHOOSER[cf][2]), ("item", "item"),
                 ("delta", "ΔWER" if fam == "asr" else "Δ")] + ([("model", "model")] if several else [])
        cells = []
        for key_, label in heads:
            arrow = (" ▲" if asc else " ▼") if key_ == col else ""
            b = W.Button(description=label + arrow, layout=W.Layout(width="auto"),
                         tooltip=f"sort by {label}")
            b.add_class("aip-worst-sort")
            b.on_click(lambda _b, k=key_: self._sort_worst(k))
            cells.append(b)
        self.worst_buttons = []
        for r in wc.itertuples():
            b = W.Button(description=r.condition, tooltip=f"{r.stimulus_id}: {cap_words(r.response, 25)}",
                         layout=W.Layout(width="auto"))
            b.add_class("aip-worst-case")
            b.on_click(lambda _b, r=r, cf=cf: self.select(condition_family=cf, task=r.task, item_id=r.item_id,
                                                          bg_id=r.bg_id, snr_db=r.snr_db, model=r.model))
            self.worst_buttons.append(b)
            cells += [b, W.HTML(f"<code>{html.escape(r.item_id)}</code>"),
                      W.HTML(f"{r.delta:+.2f}" if fam == "asr" else "flip")]
            if several:
                cells.append(W.HTML(html.escape(r.model)))
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
        r = s.get("result") or {}
        return (f"<p>AIP-Speech explorer (interactive in JupyterLab): {html.escape(self.ws.condition_family)} "
                f"<code>{html.escape(s['stimulus_id'])}</code>, "
                f"model {html.escape(str(self.controls['model'].value) or '–')}, response "
                f"<q>{html.escape(cap_words(r.get('response') or s.get('message', ''), CAP_WORDS))}</q></p>")


class ExplorerWidget(W.VBox):
    """The explorer's top-level box: a ``VBox`` whose text and HTML representations are a short
    summary (the default repr would spell out every child, WAV bytes included)."""

    def __repr__(self) -> str:
        ex = getattr(self, "explorer", None)
        state = ex.state if ex is not None else {}
        return f"Explorer({state.get('stimulus_id') or state.get('message', '')})"

    def _repr_mimebundle_(self, **kwargs):
        data = super()._repr_mimebundle_(**kwargs) or {}
        ex = getattr(self, "explorer", None)
        if ex is not None:
            data["text/html"] = ex.summary_html()
        return data


def explorer(ws, *, n_worst: int = 10):
    """The notebook-10 interface for a workspace (what it shows, top to bottom: the module docstring).

    The controls list what exists in the workspace; without inference results the mixtures still
    play and the status line says so.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
    n_worst : int > 0
        Rows of the worst-case table.

    Returns
    -------
    ExplorerWidget
        An ``ipywidgets.VBox`` with CSS class ``aip-explorer``; its ``explorer`` attribute is the
        :class:`Explorer`. Outside a live kernel (nbval, a static viewer) it shows as a short HTML summary.
    """
    return Explorer(ws, n_worst=n_worst).widget
