"""Notebook 10, data side: what the explorer shows, computed by the same functions as stages 8–9.

Plain functions over the workspace files (``manifests/``, ``descriptors/``, ``inference/``,
``results/scores/``), no widget code (:mod:`aiplib.explore.widgets` draws the interface, :mod:`aiplib.explore.listen`
rebuilds a stimulus's signals and makes the WAV bytes and spectrograms). Nothing is written. What is reused, not re-implemented:

* manifests: :func:`aiplib.io.formats.read_manifest_csv` and :func:`aiplib.io.formats.manifest_view` (``item_id``,
  ``bg_id``, ``snr_db``, ``reference``); inference rows: :func:`aiplib.io.formats.read_results`;
  score files: :func:`aiplib.io.formats.load_scores`;
* a row scored here (scores not written yet) goes through :func:`aiplib.core.textnorm.score_asr_row` /
  :func:`aiplib.core.textnorm.score_kws_row`, the functions of stage 8;
* the background ranking is Figure 4's (:func:`aiplib.analysis.paper.background_ranking`);
* condition labels are :func:`aiplib.analysis.conditions.condition_label` (``"bg03 @ 0 dB"``);
* the word diff is jiwer's alignment of the paper-normalised text, the one behind the S/D/I counts.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis.conditions import condition_label
from aiplib.analysis.paper import background_ranking
from aiplib.analysis.stats import degradation_by_background, worst_stimuli
from aiplib.battery.descriptors import DESCRIPTOR_INFO
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import BASE_TASKS, CONDITION_FAMILIES, DEGRADATION_COLUMN, FAMILIES, task_family
from aiplib.core.textnorm import normalize_text, score_asr_row, score_kws_row
from aiplib.inference.shards import is_shard_file
from aiplib.io.formats import (
    DESCRIPTORS,
    is_error_row,
    manifest_view,
    parse_bool,
    read_battery_csv,
    read_descriptor_table,
    read_manifest_csv,
    read_results,
    read_scores,
)

__all__ = ["available_families", "available_tasks", "available_models", "lookup_response",
           "word_diff", "WORST_COLUMNS", "worst_cases", "background_table",
           "descriptor_label", "summarise_sources", "under_papermill"]

_CACHE: dict = {}


def _cached(path: Path, name: str, reader):
    """``reader(path)``, re-read only when the file's size or mtime changed; None if it is missing."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        _CACHE.pop((str(path), name), None)
        return None
    key = (st.st_mtime_ns, st.st_size)
    hit = _CACHE.get((str(path), name))
    if hit is not None and hit[0] == key:
        return hit[1]
    value = reader(path)
    _CACHE[(str(path), name)] = (key, value)
    return value


def _read_manifest(path: Path, family: str) -> pd.DataFrame:
    """The manifest (every column, for :func:`aiplib.stimuli.families.materialize`) indexed by stimulus id,
    with scoring's names added: ``stimulus_id, item_id, bg_id`` ("clean" on clean rows),
    ``snr_db`` (dB, NaN on clean rows), ``reference`` (transcript or keyword)."""

    raw = read_manifest_csv(path).drop_duplicates("id", keep="last").set_index("id", drop=False)
    view = manifest_view(raw, family)
    for c in ("stimulus_id", "item_id", "bg_id", "snr_db", "reference"):
        raw[c] = view[c].reindex(raw.index)
    raw.index.name = "stimulus_id"
    return raw


def _manifest(ws, family: str) -> pd.DataFrame | None:
    return _cached(ws.manifest_csv(family), f"manifest:{family}",
                   lambda p: _read_manifest(p, family))


def _scores(ws, task: str) -> pd.DataFrame | None:

    df = _cached(ws.scores_csv(task), "scores", read_scores)
    return None if df is None or df.empty or "stimulus_id" not in df.columns else df


def _results(ws, model: str, task: str) -> pd.DataFrame | None:

    if not model:
        return None
    return _cached(ws.inference_jsonl(model, task), "results",
                   lambda p: read_results(p).set_index("id", drop=False))


def _need_manifest(ws, family: str) -> pd.DataFrame:
    m = _manifest(ws, family)
    if m is None:
        raise FileNotFoundError(f"{ws.manifest_csv(family)}: manifest not found; "
                                "run stage 05_build_manifests first")
    return m


# ------------------------------------------------------------------------------------ what exists
def available_families(ws) -> list[str]:
    """Condition families the explorer can show: those with a manifest (``manifests/asr.csv`` /
    ``kws.csv`` for ``background``, ``manifests/<cf>/…`` for the others), in
    :data:`aiplib.core.tasks.CONDITION_FAMILIES` order (``background`` first).

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Any view of the workspace.

    Returns
    -------
    list of str
        Empty when no family has a manifest (stage 5 not run).
    """

    return [cf for cf in CONDITION_FAMILIES if any(ws.with_family(cf).manifest_csv(f).is_file() for f in FAMILIES)]


def available_tasks(ws) -> list[str]:
    """Tasks the explorer can show: ``asr`` / ``kws`` when their manifest exists, plus every task
    found in ``inference/*/<task>.jsonl`` or ``results/scores/<task>.csv`` whose family has one.

    Returns
    -------
    list of str
        ``asr`` and ``kws`` first, the others sorted; empty if no manifest exists.
    """
    fams = [f for f in FAMILIES if ws.manifest_csv(f).is_file()]
    inf, sc = Path(ws.inference), ws.scores_dir
    found = ({p.stem for p in inf.glob("*/*.jsonl") if p.stem != "run_log" and not is_shard_file(p)}
             if inf.is_dir() else set())
    found |= {p.stem for p in sc.glob("*.csv")} if sc.is_dir() else set()
    extra = []
    for t in sorted(found - set(BASE_TASKS.values())):
        try:
            if task_family(t) in fams:
                extra.append(t)
        except AiplibParameterError:
            continue
    return fams + extra


def available_models(ws, task: str) -> list[str]:
    """Models with results for ``task``: folders holding ``inference/<model>/<task>.jsonl``, plus
    the models named in ``results/scores/<task>.csv``. Sorted; empty before inference."""
    inf = Path(ws.inference)
    models = {p.parent.name for p in inf.glob(f"*/{task}.jsonl")} if inf.is_dir() else set()
    sc = _scores(ws, task)
    if sc is not None and "model" in sc.columns:
        models |= set(sc["model"].astype(str))
    return sorted(models)


# ----------------------------------------------------------------------------------------- results
def _nan(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _present(v) -> bool:
    return v is not None and v is not pd.NA and not (isinstance(v, float) and math.isnan(v)) and str(v) != ""


_ASR_KEYS = ("wer", "substitutions", "deletions", "insertions", "ref_words", "is_loop")


def lookup_response(ws, model: str, task: str, stimulus_id: str) -> dict:
    """What ``model`` answered for one stimulus, with its score and the clean comparison.

    Reads ``results/scores/<task>.csv`` when it holds the stimulus; otherwise the raw
    ``inference/<model>/<task>.jsonl`` (:func:`aiplib.io.formats.read_results`: last successful
    row per stimulus), scored here with stage 8's :func:`aiplib.core.textnorm.score_asr_row` /
    :func:`aiplib.core.textnorm.score_kws_row` against the manifest reference.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
    model : str
        Model id (an ``inference/`` folder name).
    task : str
        ``asr``, ``kws``, ``asr_steer_p5`` …
    stimulus_id : str

    Returns
    -------
    dict with keys
        ``found`` (bool), ``source`` (``"scores"``, ``"inference"`` or None), ``model, task,
        family, stimulus_id, item_id, bg_id``, ``snr_db`` (dB, NaN for clean), ``reference``
        (transcript or keyword label), ``response`` (str or None; ``"__ERROR__"`` for a failed
        generation), ``error`` (str or None), ``clean_response`` (or None), and per family —
        ASR: ``wer, clean_wer, delta_wer`` = WER(noisy) − WER(clean) (fractions, NaN when
        unknown), ``substitutions, deletions, insertions, ref_words`` (of the noisy row, NaN when
        unknown), ``is_loop`` (bool or None); KWS: ``first_word``, ``correct``,
        ``clean_correct`` (bool or None), ``delta_acc`` = correct(clean) − correct(noisy) (−1, 0,
        1 or NaN).

    Raises
    ------
    FileNotFoundError
        If the family's manifest is missing.
    AiplibParameterError
        If ``stimulus_id`` is not in the manifest or the task name is unknown.
    """

    fam = task_family(task)
    man = _need_manifest(ws, fam)
    if stimulus_id not in man.index:
        raise AiplibParameterError(f"stimulus {stimulus_id!r} is not in manifests/{fam}.csv")
    mrow = man.loc[stimulus_id]
    item_id, bg_id = str(mrow["item_id"]), str(mrow["bg_id"])
    clean_id = str(man.index[(man["item_id"] == item_id) & (man["bg_id"] == "clean")][0]) \
        if ((man["item_id"] == item_id) & (man["bg_id"] == "clean")).any() else f"{item_id}_clean"
    out = dict(found=False, source=None, model=model, task=task, family=fam, stimulus_id=stimulus_id,
               item_id=item_id, bg_id=bg_id, snr_db=_nan(mrow["snr_db"]), reference=str(mrow["reference"]),
               response=None, error=None, clean_response=None)
    if fam == "asr":
        out.update(wer=float("nan"), clean_wer=float("nan"), delta_wer=float("nan"), is_loop=None,
                   substitutions=float("nan"), deletions=float("nan"), insertions=float("nan"),
                   ref_words=float("nan"))
    else:
        out.update(first_word=None, correct=None, clean_correct=None, delta_acc=float("nan"))
    noisy = bg_id != "clean"

    sc = _scores(ws, task)
    if sc is not None and model:
        sub = sc[(sc["model"].astype(str) == model) & sc["stimulus_id"].isin([stimulus_id, clean_id])]
        sub = sub.drop_duplicates("stimulus_id", keep="last").set_index("stimulus_id")
        if stimulus_id in sub.index:
            r = sub.loc[stimulus_id]
            c = sub.loc[clean_id] if clean_id in sub.index else None
            out.update(found=True, source="scores", response=str(r.get("response", "")))
            out["clean_response"] = None if c is None else str(c.get("response", ""))
            if fam == "asr":
                for k in _ASR_KEYS[:-1]:
                    out[k] = _nan(r.get(k))
                loop = parse_bool(r.get("is_loop"))
                out["is_loop"] = None if loop is pd.NA else loop
                out["clean_wer"] = _nan(c.get("wer")) if c is not None else float("nan")
                out["delta_wer"] = _nan(r.get("delta_wer")) if noisy else float("nan")
            else:
                out["first_word"] = str(r.get("first_word", ""))
                out["correct"] = bool(_nan(r.get("correct")) == 1)
                out["clean_correct"] = None if c is None else bool(_nan(c.get("correct")) == 1)
                out["delta_acc"] = _nan(r.get("delta_acc")) if noisy else float("nan")
            return out

    res = _results(ws, model, task)
    if res is None or stimulus_id not in res.index:
        return out

    def ok(row) -> bool:
        return row is not None and not is_error_row(row)

    r = res.loc[stimulus_id]
    c = res.loc[clean_id] if clean_id in res.index else None
    out.update(found=True, source="inference", response=str(r["raw"]),
               error=str(r["error"]) if _present(r["error"]) else None)
    out["clean_response"] = str(c["raw"]) if ok(c) else None
    ref = out["reference"]
    if fam == "asr":
        if ok(r):
            s = score_asr_row(ref, out["response"])
            out.update({k: (bool(s[k]) if k == "is_loop" else float(s[k])) for k in _ASR_KEYS})
        if ok(c):
            out["clean_wer"] = float(score_asr_row(ref, out["clean_response"])["wer"])
        if noisy:
            out["delta_wer"] = out["wer"] - out["clean_wer"]
    else:
        is_target = bool(mrow.get("is_target", True))
        if ok(r):
            s = score_kws_row(out["response"], ref, is_target)
            out["first_word"], out["correct"] = s["first_word"], bool(s["correct"])
        if ok(c):
            out["clean_correct"] = bool(score_kws_row(out["clean_response"], ref, is_target)["correct"])
        if noisy and out["correct"] is not None and out["clean_correct"] is not None:
            out["delta_acc"] = float(int(out["clean_correct"]) - int(out["correct"]))
    return out


def word_diff(reference: str, response: str) -> list[tuple[str, str, str]]:
    """Word-level alignment of a response against its reference, as WER counts it.

    Both sides are normalised as the paper (:func:`aiplib.core.textnorm.normalize_text`) and aligned
    by jiwer's ``process_words`` — the alignment behind the S/D/I counts of the score files.

    Parameters
    ----------
    reference, response : str
        Raw text (``None`` counts as empty).

    Returns
    -------
    list of (op, ref_word, hyp_word)
        In order; ``op`` is ``"equal"``, ``"substitute"``, ``"delete"`` (``hyp_word`` = "") or
        ``"insert"`` (``ref_word`` = ""). The number of each op equals the row's hits,
        substitutions, deletions and insertions.
    """
    import jiwer


    r, h = normalize_text(reference).split(), normalize_text(response).split()
    if not r or not h:
        return [("delete", w, "") for w in r] + [("insert", "", w) for w in h]
    out = []
    for ch in jiwer.process_words(" ".join(r), " ".join(h)).alignments[0]:
        rw, hw = r[ch.ref_start_idx:ch.ref_end_idx], h[ch.hyp_start_idx:ch.hyp_end_idx]
        if ch.type in ("equal", "substitute"):
            out += [(ch.type, a, b) for a, b in zip(rw, hw)]
        elif ch.type == "delete":
            out += [("delete", a, "") for a in rw]
        else:
            out += [("insert", "", b) for b in hw]
    return out


WORST_COLUMNS = ["model", "task", "stimulus_id", "item_id", "bg_id", "snr_db", "condition", "reference",
                 "response", "score", "delta"]


def worst_cases(ws, task: str, n: int = 10, *, model: str | None = None, one_per_item: bool = True
                ) -> pd.DataFrame:
    """The stimuli that hurt most, from ``results/scores/<task>.csv``: the report's ranking
    (:func:`aiplib.analysis.stats.worst_stimuli`, largest ΔWER or the KWS flips, ties to the higher SNR),
    with each stimulus's condition label.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Any condition-family view: its ``results/scores/<cf>/<task>.csv``. In the ``channel``
        family the label is the condition's name alone (its manifest SNR, 99, is a marker).
    task : str
    n : int > 0
        How many rows at most.
    model : str, optional
        Only this model (default: all models of the task).
    one_per_item : bool
        Keep only each item's worst stimulus (default), so the list shows ``n`` different items.

    Returns
    -------
    pandas.DataFrame [shape=(≤ n, 11)]
        Columns ``model, task, stimulus_id, item_id, bg_id, snr_db (dB), condition`` (e.g.
        ``"bg03 @ 0 dB"``, ``"talker_fr @ -5 dB"``, :func:`aiplib.analysis.conditions.condition_label`;
        ``"telephone"`` for a channel condition), ``reference`` (transcript
        or label), ``response``, ``score`` (WER, or correct 0/1), ``delta`` (ΔWER, or Δacc = 1 for
        a flip), in :func:`aiplib.analysis.stats.worst_stimuli`'s order. Empty (with these columns)
        before scores exist.

    Raises
    ------
    AiplibParameterError
        If ``n < 1`` or the task name is unknown.
    """

    w = worst_stimuli(_scores(ws, task), task_family(task), n, model=model, one_per_item=one_per_item)
    w["task"] = task
    channel = getattr(ws, "condition_family", "background") == "channel"
    w["condition"] = [str(b) if channel else condition_label(b, s) for b, s in zip(w["bg_id"], w["snr_db"])]
    return w[WORST_COLUMNS]


# ------------------------------------------------------------------------------------- backgrounds
def descriptor_label(name: str) -> tuple[str, str]:
    """Readable name and unit of a descriptor: ``("centroid", "Hz")``, ``("flux", "dB per frame")``.

    The unit is :data:`aiplib.battery.descriptors.DESCRIPTOR_INFO`'s, without its parenthesised remark.
    """

    unit = DESCRIPTOR_INFO.get(name, ("",))[0].split(" (")[0]
    label = {"zcr": "zero-crossing rate", "vad_speech_fraction": "speech (VAD)"}.get(
        name, name.replace("spectral_", "").replace("_", " "))
    return label, unit


def summarise_sources(source_file) -> str:
    """``"57 files: bg/src/a.wav, …"`` for a battery's ``;``-joined ``source_file`` (one: the path)."""
    files = [f for f in str(source_file or "").split(";") if f]
    if len(files) <= 1:
        return files[0] if files else ""
    return f"{len(files)} files: {files[0]}, …"


def _ranking(ws) -> pd.DataFrame:
    """Figure 4's ranking when ASR and KWS are scored; else the one family's pooled degradation."""

    scores = {t: _scores(ws, t) for t in BASE_TASKS.values()}
    scores = {t: s for t, s in scores.items() if s is not None}
    if len(scores) == 2:
        return background_ranking(scores)[["rank", "mean_degradation_pp", "asr_delta_wer_pp", "kws_delta_acc_pp"]]
    if not scores:
        return pd.DataFrame(columns=["rank"])
    (task, sc), = scores.items()
    fam = task_family(task)
    name = f"{task}_{DEGRADATION_COLUMN[fam]}_pp"  # Figure 4's column names: asr_delta_wer_pp, kws_delta_acc_pp
    t = (degradation_by_background(sc, fam)[["pooled"]] * 100).rename(columns={"pooled": name})
    t = t.sort_values(name, ascending=False, kind="stable", na_position="last")
    t.insert(0, "rank", np.arange(1, len(t) + 1))
    return t


def background_table(ws) -> pd.DataFrame:
    """All backgrounds with licence, source, the descriptors and their degradation, in Figure 4 order.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Reads ``descriptors/battery.csv``, ``descriptors/acoustic_descriptors.csv`` and
        ``results/scores/*.csv`` (each when it exists).

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, k)]
        Index ``bg_id``. Columns ``category, description, licence, source_package, source_file,
        attribution`` (battery; "" when missing), ``sources`` (:func:`summarise_sources`), the
        descriptors (:data:`aiplib.io.formats.DESCRIPTORS`, NaN before stage 4), ``rank``
        (Figure 4: 1 = most harmful), ``mean_degradation_pp`` (Figure 4's key, when ASR and KWS are
        scored), ``asr_delta_wer_pp`` / ``kws_delta_acc_pp`` (pooled over models, pp, as Figure 4)
        and ``<task>_delta_wer_pp`` / ``<task>_delta_acc_pp`` for the other scored tasks
        (:func:`aiplib.analysis.stats.degradation_by_background`, pooled). Rows in the order of
        :func:`aiplib.analysis.paper.background_ranking` (with one family scored: that family's pooled
        value, largest first); unranked backgrounds follow in battery order.
    """

    bat = read_battery_csv(ws.battery_csv, index=True)
    if bat is None:
        ids = set()
        for fam in FAMILIES:
            m = _manifest(ws, fam)
            if m is not None:
                ids |= set(m.loc[m["bg_id"] != "clean", "bg_id"])
        bat = pd.DataFrame(index=pd.Index(sorted(ids), name="bg_id"))
    table = pd.DataFrame(index=pd.Index(bat.index.astype(str), name="bg_id"))
    for c in ("category", "description", "licence", "source_package", "source_file", "attribution"):
        table[c] = bat[c] if c in bat.columns else ""
    table["sources"] = table["source_file"].map(summarise_sources)
    desc = read_descriptor_table(ws.descriptor_csv, index=True)
    for c in DESCRIPTORS:
        table[c] = desc[c].reindex(table.index).astype(float) if desc is not None and c in desc else np.nan
    rank = _ranking(ws)
    for c in rank.columns:
        table[c] = rank[c].reindex(table.index)
    for task in available_tasks(ws):
        if task in BASE_TASKS.values() or _scores(ws, task) is None:
            continue
        fam = task_family(task)
        deg = degradation_by_background(_scores(ws, task), fam, task=task)
        table[f"{task}_{DEGRADATION_COLUMN[fam]}_pp"] = (deg["pooled"] * 100).reindex(table.index)
    order = list(rank.index.intersection(table.index)) + [b for b in table.index if b not in rank.index]
    return table.loc[order]


def under_papermill() -> bool:
    """True when this kernel was started by papermill (the parent process runs papermill).

    jupyter_client sets ``JPY_PARENT_PID`` for every kernel it launches; under ``make`` that is the
    ``papermill`` command line. Notebook 10 then prints static tables instead of building the
    widget, whose state (WAV bytes) nbclient would store in the executed notebook.
    """

    pid = os.environ.get("JPY_PARENT_PID", "")
    try:
        cmd = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except (ValueError, OSError):
        return False
    return b"papermill" in cmd
