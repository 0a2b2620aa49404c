"""Notebook 10: listen to what the model heard — the explorer widget and the helpers behind it.

The helpers are plain functions over the workspace files (``manifests/``, ``bg/``, ``descriptors/``,
``inference/``, ``results/scores/``) so that the tests can check their values; :func:`explorer`
wires them into an ipywidgets interface. Nothing is written.

Audio
-----
Every stimulus is rebuilt from its manifest row with :func:`aiplib.mixing.materialize` (never read
from a bulk file). The players get **32-bit float WAV** bytes (:func:`wav_bytes`, IEEE float,
``subtype="FLOAT"``), so the samples the browser plays are exactly the float32 samples the model
was given: decoding the bytes gives back ``materialize(row)[0]`` bit for bit, with no 16-bit
quantisation. (Chromium, Firefox and Safari play float WAV.)

Widget classes
--------------
The explorer's parts carry stable CSS classes so that a browser test can find them:
``aip-explorer`` (the whole widget), ``aip-task``, ``aip-item``, ``aip-bg``, ``aip-snr``,
``aip-model`` (drop-downs), ``aip-clean-audio``, ``aip-background-audio``, ``aip-mixture-audio``
(``<audio>`` elements), ``aip-plot`` (waveform + log-mel image), ``aip-response`` (the result panel;
the model's response itself is in ``<span class="aip-response-text">``), ``aip-status``,
``aip-bg-info``, ``aip-bg-table``, ``aip-bg-sort``, ``aip-worst`` and ``aip-worst-case`` (buttons).
"""
from __future__ import annotations

import html
import io
import math
from pathlib import Path

import ipywidgets as W
import numpy as np
import pandas as pd

from .audio import SR, load_audio_cached, valid_audio
from .errors import AiplibParameterError
from .mixing import materialize, mix_components

__all__ = ["AUDIO_SUBTYPE", "MEL_SETTINGS", "task_family", "available_tasks", "available_models",
           "manifest_row", "stimulus_audio", "wav_bytes", "decode_wav", "log_mel", "mixture_figure_png",
           "lookup_response", "worst_cases", "background_table", "WORST_COLUMNS", "Explorer", "ExplorerWidget",
           "explorer"]

AUDIO_SUBTYPE = "FLOAT"
"""soundfile subtype of the WAV bytes given to the players: 32-bit IEEE float, lossless for float32."""

MEL_SETTINGS = dict(n_fft=400, hop_length=160, n_mels=64, fmin=0.0, fmax=8000.0, top_db=80.0)
"""Log-mel spectrogram of the explorer: 25 ms windows, 10 ms hop, 64 mel bands up to 8 kHz,
dB relative to the loudest bin, floored 80 dB below it."""

_DEGRADATION = {"asr": "delta_wer", "kws": "delta_acc"}
_BASE_TASKS = ("asr", "kws")
_NO_MODEL = ""


# ------------------------------------------------------------------------------------------- file cache
_CACHE: dict = {}


def _cached(path: Path, reader):
    """``reader(path)``, re-read only when the file's size or mtime changed; None if it is missing."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        _CACHE.pop(str(path), None)
        return None
    key = (st.st_mtime_ns, st.st_size, reader.__name__)
    hit = _CACHE.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1]
    value = reader(path)
    _CACHE[str(path)] = (key, value)
    return value


def _read_manifest_file(path: Path) -> pd.DataFrame:
    """The manifest (authors' columns, all kept for :func:`materialize`) plus the explorer's names,
    those of the scores: ``stimulus_id`` = id, ``item_id`` = speech_id, ``bg_id`` =
    background_id, ``snr_db`` (NaN on clean rows), ``reference`` = transcript / keyword,
    ``accent_group`` (NaN when empty)."""
    from .manifests import read_manifest_csv

    df = read_manifest_csv(path)
    clean = (df["condition"] == "clean").to_numpy()
    df["stimulus_id"] = df["id"]
    df["item_id"] = df["speech_id"]
    df["bg_id"] = df["background_id"].where(~clean, "clean")
    df["snr_db"] = df["snr_db"].astype(float).where(~clean)
    df["reference"] = df["transcript"] if "transcript" in df.columns else df.get("keyword", "")
    acc = df["accent_group"] if "accent_group" in df.columns else df.get("accent", pd.Series("", index=df.index))
    df["accent_group"] = acc.replace("", np.nan)
    return df.set_index("stimulus_id", drop=False)


def _read_scores_file(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for c in ("snr_db", "wer", "delta_wer", "correct", "delta_acc"):
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def _read_results_file(path: Path) -> pd.DataFrame:
    from .inference import read_results

    df = read_results(path)  # the one JSONL reader (unreadable lines skipped and counted)
    df["stimulus_id"] = df["id"].astype(str)
    df["response"] = df["raw"]
    return df.set_index("stimulus_id", drop=False)


def _manifest(ws, family: str) -> pd.DataFrame | None:
    return _cached(Path(ws.manifests) / f"{family}.csv", _read_manifest_file)


def _scores(ws, task: str) -> pd.DataFrame | None:
    df = _cached(Path(ws.results) / "scores" / f"{task}.csv", _read_scores_file)
    return None if df is None or df.empty or "stimulus_id" not in df.columns else df


def _results(ws, model: str, task: str) -> pd.DataFrame | None:
    if not model:
        return None
    return _cached(Path(ws.inference) / model / f"{task}.jsonl", _read_results_file)


# ------------------------------------------------------------------------------------ what exists
def task_family(task: str) -> str:
    """``"asr"`` or ``"kws"`` for a task name (``asr``, ``kws``, ``asr_steer_p5`` …).

    Raises
    ------
    AiplibParameterError
        If the name starts with neither.
    """
    for fam in _BASE_TASKS:
        if task == fam or str(task).startswith(fam + "_"):
            return fam
    raise AiplibParameterError(f"task {task!r} belongs to neither the asr nor the kws family")


def available_tasks(ws) -> list[str]:
    """Tasks the explorer can show: ``asr`` / ``kws`` when their manifest exists, plus every task
    found in ``inference/*/<task>.jsonl`` or ``results/scores/<task>.csv`` whose family has a manifest.

    Returns
    -------
    list of str
        ``asr`` and ``kws`` first, the others sorted; empty if no manifest exists.
    """
    fams = [f for f in _BASE_TASKS if (Path(ws.manifests) / f"{f}.csv").is_file()]
    found = set()
    inf = Path(ws.inference)
    if inf.is_dir():
        found |= {p.stem for p in inf.glob("*/*.jsonl") if p.stem != "run_log"}
    sc = Path(ws.results) / "scores"
    if sc.is_dir():
        found |= {p.stem for p in sc.glob("*.csv")}
    extra = []
    for t in sorted(found - set(_BASE_TASKS)):
        try:
            if task_family(t) in fams:
                extra.append(t)
        except AiplibParameterError:
            continue
    return fams + extra


def available_models(ws, task: str) -> list[str]:
    """Models with results for ``task``: folders holding ``inference/<model>/<task>.jsonl``, plus the
    models named in ``results/scores/<task>.csv``.

    Returns
    -------
    list of str, sorted (empty when inference has not run for this task)
    """
    inf = Path(ws.inference)
    models = {p.parent.name for p in inf.glob(f"*/{task}.jsonl")} if inf.is_dir() else set()
    sc = _scores(ws, task)
    if sc is not None and "model" in sc.columns:
        models |= set(sc["model"].astype(str))
    return sorted(models)


# ------------------------------------------------------------------------------------------- audio
def manifest_row(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The manifest row of one stimulus.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    family : {"asr", "kws"}
    item_id : str
    bg_id : str
        A background id of the battery, or ``"clean"``.
    snr_db : float, optional
        SNR in dB; ignored (and may be None) for ``bg_id == "clean"``.

    Returns
    -------
    dict
        The row's fields (:func:`aiplib.manifests.manifest_columns`, plus the explorer's aliases).

    Raises
    ------
    FileNotFoundError
        If ``manifests/<family>.csv`` does not exist (run stage 5).
    AiplibParameterError
        If no row matches (the message lists the valid values).
    """
    m = _manifest(ws, family)
    if m is None:
        raise FileNotFoundError(f"{Path(ws.manifests) / f'{family}.csv'}: manifest not found; "
                                "run stage 05_build_manifests first")
    sel = m[(m["item_id"] == str(item_id)) & (m["bg_id"] == str(bg_id))]
    if sel.empty:
        items = sorted(m["item_id"].unique())
        bgs = sorted(m["bg_id"].unique())
        raise AiplibParameterError(f"no {family} stimulus for item {item_id!r}, background {bg_id!r}; "
                                   f"items: {', '.join(items[:10])}{' …' if len(items) > 10 else ''}; "
                                   f"backgrounds: {', '.join(bgs)}")
    if bg_id != "clean":
        if snr_db is None:
            raise AiplibParameterError(f"snr_db is required for background {bg_id!r}")
        hit = sel[np.isclose(sel["snr_db"].astype(float), float(snr_db))]
        if hit.empty:
            raise AiplibParameterError(f"no {family} stimulus for item {item_id!r}, background {bg_id!r} "
                                       f"at {snr_db} dB; SNRs: {sorted(float(x) for x in sel['snr_db'].astype(float).unique())}")
        sel = hit
    return sel.iloc[0].to_dict()


def stimulus_audio(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The three signals of one stimulus, mixed on the fly from the manifest.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    family : {"asr", "kws"}
    item_id : str
    bg_id : str
        Background id, or ``"clean"``.
    snr_db : float, optional
        SNR in dB (ignored for clean).

    Returns
    -------
    dict with keys
        ``row`` (dict, the manifest row), ``stimulus_id`` (str), ``sr`` (int, 16000 Hz),
        ``mixture`` (np.ndarray [shape=(n,)], float32: exactly ``materialize(row, ws)[0]``),
        ``clean`` (np.ndarray [shape=(n,)], float32: ``materialize(clean_row, ws)[0]``, the item's
        loudness-normalised speech, −23 LUFS), ``background`` (np.ndarray [shape=(n,)], float32, the
        background part *as mixed* (:func:`aiplib.mixing.mix_components`: the seeded segment times
        the SNR gain, divided by the peak when the sum was); None for clean), ``info``
        (:class:`aiplib.mixing.MixInfo`).

    Notes
    -----
    The mixture is computed in float64 and cast to float32 (the authors' mixer), so
    ``clean + background`` equals the mixture to within float32 rounding.

    Raises
    ------
    FileNotFoundError
        If the manifest is missing.
    AiplibParameterError
        If the stimulus is not in the manifest.
    AudioFileError
        If a speech or background file is missing or unreadable.
    """
    row = manifest_row(ws, family, item_id, bg_id, snr_db)
    mixture, info = materialize(row, ws)
    clean_row = row if bg_id == "clean" else manifest_row(ws, family, item_id, "clean")
    clean = mixture if bg_id == "clean" else materialize(clean_row, ws)[0]
    background = None
    if bg_id != "clean":
        background = mix_components(row, ws)["background"]
    return dict(row=row, stimulus_id=str(row["stimulus_id"]), sr=SR, mixture=mixture, clean=clean,
                background=background, info=info)


def wav_bytes(y, *, sr: int = SR, subtype: str = AUDIO_SUBTYPE) -> bytes:
    """A mono WAV file in memory, byte-for-byte deterministic.

    The RIFF header is written here (``fmt `` + ``fact`` + ``data`` chunks, no time-stamped
    ``PEAK`` chunk as libsndfile adds), so the same samples always give the same bytes.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
        Samples, nominally in [-1, 1].
    sr : int > 0
        Sample rate in Hz.
    subtype : {"FLOAT", "PCM_16"}
        ``"FLOAT"`` (default): 32-bit IEEE float (``WAVE_FORMAT_IEEE_FLOAT``), the float32 samples
        exactly. ``"PCM_16"``: half the size, ``int16 = clip(round(y × 32767), −32768, 32767)``;
        readers divide by 32768, so samples come back within 1/32768 (for |y| ≤ 1).

    Returns
    -------
    bytes
        RIFF/WAVE data: ``58 + 4·n`` bytes for FLOAT (18-byte ``fmt `` and a ``fact`` chunk),
        ``44 + 2·n`` for PCM_16; :func:`decode_wav` reads it back.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.audio.valid_audio`, ``sr`` is not positive, or ``subtype`` is
        unknown.
    """
    import struct

    y = valid_audio(np.asarray(y), name="wav_bytes input")
    sr = int(sr)
    if sr <= 0:
        raise AiplibParameterError(f"sample rate must be positive, got {sr}")
    if subtype == "FLOAT":
        data = y.astype("<f4", copy=False).tobytes()
        fmt = struct.pack("<HHIIHHH", 3, 1, sr, sr * 4, 4, 32, 0)  # IEEE float, cbSize 0
        extra = b"fact" + struct.pack("<II", 4, y.shape[0])
    elif subtype == "PCM_16":
        q = np.clip(np.round(y.astype(np.float64) * 32767.0), -32768, 32767).astype("<i2")
        data = q.tobytes()
        fmt = struct.pack("<HHIIHH", 1, 1, sr, sr * 2, 2, 16)
        extra = b""
    else:
        raise AiplibParameterError(f"unknown WAV subtype {subtype!r}; choose FLOAT or PCM_16")
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + extra
            + b"data" + struct.pack("<I", len(data)) + data)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def decode_wav(data: bytes):
    """Read WAV bytes (as made by :func:`wav_bytes`) back.

    Returns
    -------
    y : np.ndarray [shape=(n,)], float32
    sr : int, Hz
    """
    import soundfile as sf

    y, sr = sf.read(io.BytesIO(bytes(data)), dtype="float32", always_2d=False)
    return y, int(sr)


def log_mel(y, *, sr: int = SR) -> np.ndarray:
    """Log-mel power spectrogram with :data:`MEL_SETTINGS`.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int > 0, Hz

    Returns
    -------
    np.ndarray [shape=(n_mels, t)], float32
        dB relative to the loudest bin (maximum 0 dB, minimum ``-top_db``);
        ``t = 1 + n // hop_length`` frames (centred windows).

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.audio.valid_audio`.
    """
    import librosa

    y = valid_audio(np.asarray(y), name="log_mel input")
    s = MEL_SETTINGS
    mel = librosa.feature.melspectrogram(y=y, sr=sr, n_fft=s["n_fft"], hop_length=s["hop_length"],
                                         n_mels=s["n_mels"], fmin=s["fmin"], fmax=min(s["fmax"], sr / 2),
                                         power=2.0)
    return librosa.power_to_db(mel, ref=np.max, top_db=s["top_db"]).astype(np.float32)


def mixture_figure_png(y, *, sr: int = SR, title: str = "", dpi: int = 100) -> bytes:
    """Waveform (top) and log-mel spectrogram (bottom) of a signal, as PNG bytes.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int > 0, Hz
    title : str
    dpi : int > 0

    Returns
    -------
    bytes
        A PNG image, 9 × 4.2 inches at ``dpi``.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.audio.valid_audio`.
    """
    import librosa.display
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    y = valid_audio(np.asarray(y), name="mixture_figure_png input")
    S = log_mel(y, sr=sr)
    fig = Figure(figsize=(9, 4.2), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=[1, 1.6])
    t = np.arange(y.shape[0]) / sr
    ax1.plot(t, y, lw=0.5, color="#1f4e79")
    ax1.set_ylabel("amplitude")
    ax1.set_ylim(-1.0, 1.0)
    ax1.set_xlim(0, y.shape[0] / sr)
    if title:
        ax1.set_title(title, fontsize=10)
    img = librosa.display.specshow(S, sr=sr, hop_length=MEL_SETTINGS["hop_length"], x_axis="time",
                                   y_axis="mel", fmin=MEL_SETTINGS["fmin"], fmax=min(MEL_SETTINGS["fmax"], sr / 2),
                                   ax=ax2, cmap="magma")
    ax2.set_yticks([t for t in (0, 250, 500, 1000, 2000, 4000, 8000) if t <= sr / 2])
    ax2.set_xlabel("time (s)")
    ax2.set_ylabel("frequency (Hz, mel scale)")
    fig.colorbar(img, ax=ax2, format="%+.0f dB", pad=0.01)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


# ----------------------------------------------------------------------------------------- results
def _nan(v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return v


def lookup_response(ws, model: str, task: str, stimulus_id: str) -> dict:
    """What ``model`` answered for one stimulus, with its score and the clean comparison.

    Reads ``results/scores/<task>.csv`` when it holds the stimulus; otherwise the raw
    ``inference/<model>/<task>.jsonl`` (last successful row per stimulus), scored here with
    :func:`aiplib.scoring.wer` / :func:`aiplib.scoring.kws_correct` against the manifest reference.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    model : str
        Model id (an ``inference/`` folder name).
    task : str
        ``asr``, ``kws``, ``asr_steer_p5`` …
    stimulus_id : str

    Returns
    -------
    dict with keys
        ``found`` (bool: a row exists), ``source`` (``"scores"``, ``"inference"`` or None),
        ``model``, ``task``, ``family``, ``stimulus_id``, ``item_id``, ``bg_id``, ``snr_db`` (dB, NaN
        for clean), ``reference`` (transcript or keyword label, from the manifest), ``response``
        (str or None; ``"__ERROR__"`` for a failed generation), ``error`` (str or None),
        ``clean_response`` (the same item's clean response, or None), and per family
        ASR: ``wer``, ``clean_wer``, ``delta_wer`` = WER(noisy) − WER(clean) (floats, NaN when
        unknown); KWS: ``first_word``, ``correct``, ``clean_correct`` (bool or None) and
        ``delta_acc`` = correct(clean) − correct(noisy) (−1, 0, 1 or NaN).

    Raises
    ------
    FileNotFoundError
        If the family's manifest is missing.
    AiplibParameterError
        If ``stimulus_id`` is not in the manifest or the task name is unknown.
    """
    fam = task_family(task)
    man = _manifest(ws, fam)
    if man is None:
        raise FileNotFoundError(f"{Path(ws.manifests) / f'{fam}.csv'}: manifest not found; "
                                "run stage 05_build_manifests first")
    if stimulus_id not in man.index:
        raise AiplibParameterError(f"stimulus {stimulus_id!r} is not in manifests/{fam}.csv")
    mrow = man.loc[stimulus_id]
    item_id, bg_id = str(mrow["item_id"]), str(mrow["bg_id"])
    clean_id = f"{item_id}_clean"
    out = dict(found=False, source=None, model=model, task=task, family=fam, stimulus_id=stimulus_id,
               item_id=item_id, bg_id=bg_id, snr_db=_nan(mrow["snr_db"]), reference=str(mrow["reference"]),
               response=None, error=None, clean_response=None)
    if fam == "asr":
        out.update(wer=float("nan"), clean_wer=float("nan"), delta_wer=float("nan"))
    else:
        out.update(first_word=None, correct=None, clean_correct=None, delta_acc=float("nan"))

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
                out["wer"] = _nan(r.get("wer"))
                out["clean_wer"] = _nan(c.get("wer")) if c is not None else float("nan")
                out["delta_wer"] = _nan(r.get("delta_wer")) if bg_id != "clean" else float("nan")
            else:
                out["first_word"] = str(r.get("first_word", ""))
                out["correct"] = bool(_nan(r.get("correct")) == 1)
                out["clean_correct"] = None if c is None else bool(_nan(c.get("correct")) == 1)
                out["delta_acc"] = _nan(r.get("delta_acc")) if bg_id != "clean" else float("nan")
            return out

    res = _results(ws, model, task)
    if res is None or stimulus_id not in res.index:
        return out
    from . import scoring

    def _ok(row) -> bool:
        return row is not None and row["response"] != scoring.ERROR_RESPONSE and not _present(row["error"])

    r = res.loc[stimulus_id]
    c = res.loc[clean_id] if clean_id in res.index else None
    out.update(found=True, source="inference", response=str(r["response"]),
               error=str(r["error"]) if _present(r["error"]) else None)
    out["clean_response"] = str(c["response"]) if _ok(c) else None
    ref = out["reference"]
    if fam == "asr":
        if _ok(r):
            out["wer"] = float(scoring.wer(ref, out["response"]))
        if _ok(c):
            out["clean_wer"] = float(scoring.wer(ref, out["clean_response"]))
        if bg_id != "clean":
            out["delta_wer"] = out["wer"] - out["clean_wer"]
    else:
        is_target = str(mrow.get("is_target", "True")).strip().lower() in ("true", "1", "yes")
        if _ok(r):
            out["first_word"] = scoring.kws_first_word(out["response"])
            out["correct"] = bool(scoring.kws_correct(out["response"], ref, is_target))
        if _ok(c):
            out["clean_correct"] = bool(scoring.kws_correct(out["clean_response"], ref, is_target))
        if bg_id != "clean" and out["correct"] is not None and out["clean_correct"] is not None:
            out["delta_acc"] = float(int(out["clean_correct"]) - int(out["correct"]))
    return out


def _present(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v)) and str(v) != ""


WORST_COLUMNS = ["model", "task", "stimulus_id", "item_id", "bg_id", "snr_db", "reference", "response",
                 "score", "delta"]


def worst_cases(ws, task: str, n: int = 10, *, model: str | None = None) -> pd.DataFrame:
    """The stimuli that hurt most: largest ΔWER (ASR family) or KWS flips (correct when clean,
    wrong with the background), from ``results/scores/<task>.csv``.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    task : str
    n : int > 0
        How many rows to return at most.
    model : str, optional
        Only this model (default: all models of the task).

    Returns
    -------
    pandas.DataFrame [shape=(≤ n, 10)]
        Columns ``model, task, stimulus_id, item_id, bg_id, snr_db (dB), reference (transcript or
        label), response, score (WER, or correct 0/1), delta (ΔWER, or Δacc = 1 for a flip)``.
        ASR: noisy rows with ΔWER > 0, largest first; ties go to the higher SNR (a loss at 10 dB is
        more telling than at 0 dB), then model and stimulus id. KWS: rows with Δacc > 0, higher SNR
        first, then model and stimulus id. Empty (with these columns) if there are no scores yet.

    Raises
    ------
    AiplibParameterError
        If ``n < 1`` or the task name is unknown.
    """
    if int(n) < 1:
        raise AiplibParameterError(f"n must be at least 1, got {n}")
    fam = task_family(task)
    sc = _scores(ws, task)
    col = _DEGRADATION[fam]
    if sc is None or col not in sc.columns:
        return pd.DataFrame(columns=WORST_COLUMNS)
    df = sc[(sc["bg_id"] != "clean") & (sc[col] > 0)]
    if model is not None:
        df = df[df["model"].astype(str) == model]
    df = df.sort_values([col, "snr_db", "model", "stimulus_id"], ascending=[False, False, True, True],
                        kind="stable").head(int(n))
    ref_col = "reference" if fam == "asr" else "label"
    out = pd.DataFrame({
        "model": df["model"].astype(str), "task": task, "stimulus_id": df["stimulus_id"],
        "item_id": df["item_id"].astype(str), "bg_id": df["bg_id"].astype(str), "snr_db": df["snr_db"],
        "reference": df[ref_col] if ref_col in df.columns else "",
        "response": df["response"] if "response" in df.columns else "",
        "score": df["wer" if fam == "asr" else "correct"], "delta": df[col]})
    return out.reset_index(drop=True)[WORST_COLUMNS]


def background_table(ws) -> pd.DataFrame:
    """All backgrounds with their licence, source, nine descriptors and mean degradation.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        Reads ``descriptors/battery.csv``, ``descriptors/acoustic_descriptors.csv`` and
        ``results/scores/*.csv`` (each when it exists).

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, k)]
        Index ``bg_id``. Columns ``category, description, licence, source_package, source_file,
        attribution`` (from the battery, "" when missing), the nine
        :data:`aiplib.descriptors.DESCRIPTORS` (NaN when not computed yet), and one column per
        scored task, ``<task>_delta_wer`` or ``<task>_delta_acc``: the mean over models, items and
        SNRs of the per-stimulus ΔWER / Δacc (fractions; positive = worse than clean). Sorted by the
        first degradation column, most harmful first (battery order when there are no scores).
        Empty if neither the battery nor the manifests exist.
    """
    from .descriptors import DESCRIPTORS

    bat_path = Path(ws.descriptors) / "battery.csv"
    info_cols = ["category", "description", "licence", "source_package", "source_file", "attribution"]
    if bat_path.is_file():
        bat = pd.read_csv(bat_path, dtype=str, keep_default_na=False).set_index("bg_id")
    else:
        ids = set()
        for fam in _BASE_TASKS:
            m = _manifest(ws, fam)
            if m is not None:
                ids |= set(m.loc[m["bg_id"] != "clean", "bg_id"])
        bat = pd.DataFrame(index=pd.Index(sorted(ids), name="bg_id"))
    table = pd.DataFrame(index=bat.index.astype(str))
    table.index.name = "bg_id"
    for c in info_cols:
        table[c] = bat[c] if c in bat.columns else ""
    desc_path = Path(ws.descriptors) / "acoustic_descriptors.csv"
    desc = pd.read_csv(desc_path, dtype={"bg_id": str}).set_index("bg_id") if desc_path.is_file() else None
    for c in DESCRIPTORS:
        table[c] = desc[c].reindex(table.index).astype(float) if desc is not None and c in desc else np.nan
    deg_cols = []
    for task in available_tasks(ws):
        sc = _scores(ws, task)
        col = _DEGRADATION[task_family(task)]
        if sc is None or col not in sc.columns:
            continue
        noisy = sc[sc["bg_id"] != "clean"]
        name = f"{task}_{col}"
        table[name] = noisy.groupby("bg_id")[col].mean().reindex(table.index)
        deg_cols.append(name)
    if deg_cols:
        table = table.sort_values(deg_cols[0], ascending=False, kind="stable", na_position="last")
    return table


# ------------------------------------------------------------------------------------------ widget
def _fmt(v, spec: str = ".3f", none: str = "–") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec)


def _snr_label(snr) -> str:
    return f"{float(snr):g} dB"


class Explorer:
    """Builds and drives the notebook-10 interface; :attr:`widget` is what the notebook displays.

    Use :func:`explorer`, which returns the widget (an ``ipywidgets.VBox``) with this object as its
    ``explorer`` attribute. Tests drive it through :meth:`select` and read :attr:`state`.

    Attributes
    ----------
    ws : aiplib.workspace.Workspace
    widget : ipywidgets.VBox
    controls : dict of str -> ipywidgets.Dropdown
        ``task, item, bg, snr, model``.
    players : dict of str -> ipywidgets.Audio
        ``clean, background, mixture``; values are float32 WAV bytes (:func:`wav_bytes`).
    state : dict
        The last refresh: ``stimulus_id``, ``audio`` (from :func:`stimulus_audio`), ``result`` (from
        :func:`lookup_response`) and ``message`` (the status line, plain text).
    """

    def __init__(self, ws, *, n_worst: int = 10):
        self.ws = ws
        self.n_worst = int(n_worst)
        self.state: dict = {}
        self._busy = False
        self.tasks = available_tasks(ws)

        def dd(name, desc, width="auto"):
            w = W.Dropdown(description=desc, options=[], layout=W.Layout(width=width),
                           style={"description_width": "initial"})
            w.add_class(f"aip-{name}")
            return w

        self.controls = {"task": dd("task", "Task", "150px"), "item": dd("item", "Item", "300px"),
                         "bg": dd("bg", "Background", "260px"), "snr": dd("snr", "SNR", "130px"),
                         "model": dd("model", "Model", "260px")}
        self.players = {}
        boxes = []
        for key, label in (("clean", "Clean utterance"), ("background", "Background segment (as mixed)"),
                           ("mixture", "Mixture (what the model heard)")):
            a = W.Audio(value=b"", format="wav", autoplay=False, controls=True, loop=False)
            a.add_class(f"aip-{key}-audio")
            self.players[key] = a
            cap = W.HTML(f"<b>{label}</b>")
            box = W.VBox([cap, a])
            box.add_class(f"aip-{key}-player")
            boxes.append(box)
        self.player_boxes = dict(zip(("clean", "background", "mixture"), boxes))
        self.status = W.HTML()
        self.status.add_class("aip-status")
        self.plot = W.Image(format="png", layout=W.Layout(width="760px"))
        self.plot.add_class("aip-plot")
        self.response = W.HTML()
        self.response.add_class("aip-response")
        self.mixinfo = W.HTML()
        self.mixinfo.add_class("aip-mixinfo")
        self.bg_info = W.HTML()
        self.bg_info.add_class("aip-bg-info")
        self.bg_sort = W.Dropdown(description="Sort by", options=[], style={"description_width": "initial"},
                                  layout=W.Layout(width="280px"))
        self.bg_sort.add_class("aip-bg-sort")
        self.bg_ascending = W.Checkbox(value=False, description="ascending", indent=False)
        self.bg_ascending.add_class("aip-bg-sort-asc")
        self.bg_table = W.HTML()
        self.bg_table.add_class("aip-bg-table")
        self.worst_title = W.HTML()
        self.worst = W.VBox([])
        self.worst.add_class("aip-worst")

        title = W.HTML("<h3 style='margin:0'>Listen and explore — profile "
                       f"<code>{html.escape(ws.profile)}</code></h3>")
        bg_panel = W.VBox([W.HTML("<b>Background</b>"), self.bg_info,
                           W.HTML("<b>All backgrounds by mean degradation</b>"),
                           W.HBox([self.bg_sort, self.bg_ascending]), self.bg_table],
                          layout=W.Layout(width="58%"))
        bg_panel.add_class("aip-bg-panel")
        worst_panel = W.VBox([self.worst_title, self.worst], layout=W.Layout(width="40%"))
        worst_panel.add_class("aip-worst-panel")
        self.widget = ExplorerWidget([
            title, self.status,
            W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap")),
            W.HBox(boxes, layout=W.Layout(flex_flow="row wrap", justify_content="flex-start")),
            self.mixinfo,
            W.HBox([self.plot, self.response], layout=W.Layout(align_items="flex-start")),
            W.HBox([bg_panel, worst_panel], layout=W.Layout(align_items="flex-start")),
        ])
        self.widget.add_class("aip-explorer")
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
        self.controls["task"].options = self.tasks
        self.controls["task"].value = self.tasks[0]
        self._busy = False
        self._set_task(self.tasks[0])
        self._render_bg_table()

    # -------------------------------------------------------------------------------- control logic
    def _set_task(self, task, *, item_id=None, bg_id=None, snr_db=None, model=None):
        fam = task_family(task)
        man = _manifest(self.ws, fam)
        self._busy = True
        try:
            c = self.controls
            c["task"].value = task
            items = man.loc[man["bg_id"] == "clean", ["item_id", "reference"]]
            if items.empty:
                items = man[["item_id", "reference"]].drop_duplicates("item_id")
            opts = [(f"{i} — {r[:40]}{'…' if len(r) > 40 else ''}", i)
                    for i, r in zip(items["item_id"], items["reference"].astype(str))]
            c["item"].options = opts
            ids = [o[1] for o in opts]
            c["item"].value = item_id if item_id in ids else (c["item"].value if c["item"].value in ids else ids[0])
            bgs = list(dict.fromkeys(man.loc[man["bg_id"] != "clean", "bg_id"]))
            c["bg"].options = [("clean (no background)", "clean")] + [(b, b) for b in bgs]
            cur_bg = bg_id if bg_id is not None else c["bg"].value
            c["bg"].value = cur_bg if cur_bg in ["clean", *bgs] else (bgs[0] if bgs else "clean")
            snrs = sorted({float(s) for s in man["snr_db"].dropna()}, reverse=True)
            c["snr"].options = [(_snr_label(s), s) for s in snrs]
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
        if name == "task":
            self._set_task(self.controls["task"].value)
        else:
            self._refresh()

    def select(self, *, task=None, item_id=None, bg_id=None, snr_db=None, model=None) -> dict:
        """Show one stimulus (unspecified controls keep their value) and return :attr:`state`.

        Parameters
        ----------
        task, item_id, bg_id : str, optional
        snr_db : float, optional, dB
        model : str, optional

        Raises
        ------
        AiplibParameterError
            If a value is not among the control's options.
        """
        c = self.controls
        task = task or c["task"].value
        if task not in self.tasks:
            raise AiplibParameterError(f"unknown task {task!r}; choose one of {', '.join(self.tasks)}")
        self._set_task(task, item_id=item_id, bg_id=bg_id, snr_db=snr_db, model=model)
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
        fam = task_family(task)
        c["snr"].disabled = bg_id == "clean"
        try:
            audio = stimulus_audio(self.ws, fam, item_id, bg_id, None if bg_id == "clean" else snr)
        except Exception as exc:  # a missing audio file: say so in the widget, keep it usable
            self.state = {"stimulus_id": None, "audio": None, "result": None, "message": str(exc)}
            self.status.value = f"<span style='color:#a00'>{html.escape(str(exc))}</span>"
            return
        sid = audio["stimulus_id"]
        self.players["mixture"].value = wav_bytes(audio["mixture"])
        self.players["clean"].value = wav_bytes(audio["clean"])
        if audio["background"] is None:
            self.players["background"].value = b""
            self.player_boxes["background"].layout.display = "none"
        else:
            self.players["background"].value = wav_bytes(audio["background"])
            self.player_boxes["background"].layout.display = None
        info = audio["info"]
        n = audio["mixture"].shape[0]
        achieved = round(info.achieved_snr_db, 2) + 0.0  # no "-0.00"
        snr_txt = "clean" if bg_id == "clean" else f"target {info.target_snr_db:g} dB, achieved {achieved:.2f} dB"
        self.mixinfo.value = (f"<code>{html.escape(sid)}</code> · {n / SR:.2f} s · {snr_txt} · "
                              f"peak {info.peak:.3f} · clip scale {info.clip_scale:.3f}"
                              + ("" if info.bg_offset is None else f" · offset {info.bg_offset} samples")
                              + ("" if info.bg_active is not False else " · background segment is digital silence"))
        self.plot.value = mixture_figure_png(audio["mixture"], title=f"mixture {sid}")
        result = lookup_response(self.ws, model, task, sid) if model else None
        if not model:
            msg = (f"no inference results yet for {task} — the mixtures play; "
                   "run notebook 07 (inference) and 08 (scores) to see responses")
        elif not result["found"]:
            msg = f"no response from {model} for {sid} yet (inference incomplete?)"
        else:
            msg = "" if result["source"] == "scores" else (
                f"scores not written yet for {task}: WER / correctness computed here from inference/{model}")
        self.status.value = f"<i>{html.escape(msg)}</i>" if msg else ""
        self.response.value = self._response_html(fam, audio["row"], result, msg)
        self.bg_info.value = self._bg_info_html(bg_id)
        self.state = {"stimulus_id": sid, "audio": audio, "result": result, "message": msg}
        self._highlight_bg(bg_id)

    def _response_html(self, fam, row, result, msg) -> str:
        ref_name = "Reference" if fam == "asr" else "Keyword (label)"
        ref = html.escape(str(row["reference"]))
        if fam == "kws":
            ref += " (target)" if str(row.get("is_target", "True")).lower() in ("true", "1") else " (non-target)"
        rows = [(ref_name, ref)]
        if result is None or not result["found"]:
            rows.append(("Response", f"<span class='aip-response-text aip-no-response'>{html.escape(msg)}</span>"))
        else:
            resp = html.escape(result["response"] or "")
            rows.append(("Response", f"<span class='aip-response-text'>{resp}</span>"))
            if result.get("error"):
                rows.append(("Error", html.escape(result["error"])))
            if fam == "asr":
                rows.append(("WER", _fmt(result["wer"])))
                if result["bg_id"] != "clean":
                    rows.append(("Clean response", html.escape(result["clean_response"] or "–")))
                    rows.append(("Clean WER", _fmt(result["clean_wer"])))
                    rows.append(("ΔWER vs clean", f"<b>{_fmt(result['delta_wer'], '+.3f')}</b>"))
            else:
                yn = {True: "correct", False: "wrong", None: "–"}
                rows.append(("First word", html.escape(result["first_word"] or "–")))
                rows.append(("Correct", yn[result["correct"]]))
                if result["bg_id"] != "clean":
                    rows.append(("Clean response", html.escape(result["clean_response"] or "–")))
                    rows.append(("Clean", yn[result["clean_correct"]]))
                    flip = result["delta_acc"]
                    txt = "–" if isinstance(flip, float) and math.isnan(flip) else (
                        "<b>flip: correct → wrong</b>" if flip > 0 else
                        "recovered: wrong → correct" if flip < 0 else "no change")
                    rows.append(("Δ vs clean", txt))
        body = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{k}</th><td>{v}</td></tr>"
                       for k, v in rows)
        return f"<table class='aip-response-table'>{body}</table>"

    def _bg_info_html(self, bg_id) -> str:
        if bg_id == "clean":
            return "<i>clean: no background</i>"
        table = self._bg_frame()
        if bg_id not in table.index:
            return f"<i>{html.escape(bg_id)}: not in the battery table</i>"
        from .descriptors import DESCRIPTORS

        r = table.loc[bg_id]
        head = (f"<b>{html.escape(bg_id)}</b> — {html.escape(str(r['category']))}: "
                f"{html.escape(str(r['description']))}<br>licence <b>{html.escape(str(r['licence']))}</b>; "
                f"source {html.escape(str(r['source_package']))} <code>{html.escape(str(r['source_file']))}</code>"
                f"{'; ' + html.escape(str(r['attribution'])) if r['attribution'] else ''}")
        cells = "".join(f"<tr><td>{d}</td><td style='text-align:right'>{_fmt(r[d], '.4g')}</td></tr>"
                        for d in DESCRIPTORS)
        return f"{head}<table class='aip-descriptors'>{cells}</table>"

    def _bg_frame(self) -> pd.DataFrame:
        key = "_bg_table"
        stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in
                             list((Path(self.ws.results) / "scores").glob("*.csv"))
                             + [p for p in (Path(self.ws.descriptors) / "battery.csv",
                                            Path(self.ws.descriptors) / "acoustic_descriptors.csv") if p.is_file()]))
        hit = getattr(self, key, None)
        if hit is None or hit[0] != stamp:
            hit = (stamp, background_table(self.ws))
            setattr(self, key, hit)
        return hit[1]

    def _render_bg_table(self):
        if getattr(self, "_rendering_table", False):  # setting the sort options fires the observer
            return
        self._rendering_table = True
        try:
            self._render_bg_table_now()
        finally:
            self._rendering_table = False

    def _render_bg_table_now(self):
        from .descriptors import DESCRIPTORS

        table = self._bg_frame()
        deg = [c for c in table.columns if c.endswith("_delta_wer") or c.endswith("_delta_acc")]
        sortable = ["(as ranked)"] + deg + ["category"] + list(DESCRIPTORS)
        if list(self.bg_sort.options) != sortable:
            keep = self.bg_sort.value
            self.bg_sort.options = sortable
            self.bg_sort.value = keep if keep in sortable else sortable[0]
        by = self.bg_sort.value
        if by and by != "(as ranked)":
            table = table.sort_values(by, ascending=bool(self.bg_ascending.value), kind="stable", na_position="last")
        elif self.bg_ascending.value:
            table = table.iloc[::-1]
        cols = deg + ["category"] + list(DESCRIPTORS)
        head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in ["bg_id", *cols])
        sel = self.controls["bg"].value if self.tasks else None
        body = []
        for bg, r in table.iterrows():
            style = " style='background:#ffe9a8'" if bg == sel else ""
            cells = [f"<td>{html.escape(str(bg))}</td>"]
            for c in cols:
                v = r[c]
                cells.append(f"<td>{html.escape(str(v))}</td>" if isinstance(v, str) else
                             f"<td style='text-align:right'>{_fmt(v, '+.3f' if c in deg else '.3g')}</td>")
            body.append(f"<tr class='aip-bg-row' data-bg='{html.escape(str(bg))}'{style}>{''.join(cells)}</tr>")
        note = "" if deg else "<i>no scores yet: run notebook 08 to rank the backgrounds</i>"
        self.bg_table.value = (f"{note}<div style='max-height:320px;overflow:auto;font-size:11px'>"
                               f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
        self._table_selected = sel

    def _highlight_bg(self, bg_id):
        if getattr(self, "_table_selected", None) != bg_id:
            self._render_bg_table()

    def _render_worst(self, task):
        sc_path = Path(self.ws.results) / "scores" / f"{task}.csv"
        key = (task, sc_path.stat().st_mtime_ns if sc_path.is_file() else None,
               tuple(available_models(self.ws, task)))
        if getattr(self, "_worst_key", None) == key:  # same task and files: keep the buttons
            return
        self._worst_key = key
        fam = task_family(task)
        wc = worst_cases(self.ws, task, self.n_worst)
        self.worst_cases = wc
        what = "largest ΔWER" if fam == "asr" else "KWS flips (correct clean → wrong noisy)"
        self.worst_title.value = f"<b>Worst cases — {html.escape(task)}: {what}</b>"
        if wc.empty:
            if (Path(self.ws.results) / "scores" / f"{task}.csv").is_file():
                hint = "none: no stimulus did worse than clean"
            elif available_models(self.ws, task):
                hint = "no scores yet: run notebook 08 (scores)"
            else:
                hint = "no inference results yet: run notebooks 07 and 08"
            self.worst_title.value += f"<br><i>{hint}</i>"
        buttons = []
        for r in wc.itertuples():
            delta = f"ΔWER {r.delta:+.2f}" if fam == "asr" else "flip"
            b = W.Button(description=f"{delta} · {r.model} · {r.item_id} · {r.bg_id} @ {r.snr_db:g} dB",
                         tooltip=f"{r.stimulus_id}: {r.response}", layout=W.Layout(width="auto"))
            b.add_class("aip-worst-case")
            b.on_click(lambda _b, r=r: self.select(task=r.task, item_id=r.item_id, bg_id=r.bg_id,
                                                   snr_db=r.snr_db, model=r.model))
            buttons.append(b)
        self.worst.children = buttons

    def summary_html(self) -> str:
        """A static HTML summary of the current selection (shown where widgets cannot render)."""
        s = self.state
        if not s.get("stimulus_id"):
            return f"<p>AIP-Speech explorer: {html.escape(s.get('message', ''))}</p>"
        r = s.get("result") or {}
        return (f"<p>AIP-Speech explorer (interactive in JupyterLab): <code>{html.escape(s['stimulus_id'])}</code>, "
                f"model {html.escape(str(self.controls['model'].value) or '–')}, response "
                f"<q>{html.escape(str(r.get('response') or s.get('message', '')))}</q></p>")


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
    """The notebook-10 interface for a workspace.

    Choose task, item, background, SNR and model (from what exists in the workspace); play the
    clean utterance, the background part and the mixture (rebuilt from the manifest row, float32
    WAV); see the mixture's waveform and log-mel spectrogram, the reference, the model's response,
    its WER or correctness and the change against clean; the chosen background's licence, source
    and nine descriptors, a sortable table of all backgrounds by mean degradation, and the worst
    cases, each loaded by one click. Without inference results the mixtures still play and the
    status line says so.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    n_worst : int > 0
        Number of worst cases listed.

    Returns
    -------
    ExplorerWidget
        An ``ipywidgets.VBox`` with CSS class ``aip-explorer``; its ``explorer`` attribute is the :class:`Explorer`.
        Outside a live kernel (papermill, nbval, a static viewer) it shows as a short HTML summary.
    """
    return Explorer(ws, n_worst=n_worst).widget
