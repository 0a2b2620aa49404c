"""Notebook 10, audio side: a stimulus's three signals, the players' WAV bytes, the spectrograms.

Every stimulus is rebuilt from its manifest row with :func:`aiplib.stimuli.families.materialize` /
:func:`aiplib.stimuli.families.mix_components` (never read from a bulk file).

Every condition family works the same way (issue 14): on a family view
(:meth:`aiplib.core.workspace.Workspace.with_family`) the row comes from ``manifests/<cf>/<task>.csv``
and :func:`~aiplib.stimuli.families.mix_components` dispatches on it; :func:`stimulus_labels` says what the
three players hold in that family (clean / background, distractor or the transform's change /
mixture) and lists the condition's parameters.

No widget code here (:mod:`aiplib.explore.widgets` draws the interface); every function is checked on
values by ``tests/test_widgets.py``.

The players get **32-bit float WAV** bytes (:func:`wav_bytes`, IEEE float), so the samples the
browser plays are exactly the float32 samples the model was given: decoding the bytes gives back
``materialize(row)[0]`` bit for bit, with no 16-bit quantisation. (Chromium, Firefox and Safari
play float WAV.)
"""
from __future__ import annotations

import io
import json
import struct

import numpy as np

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import check_family
from aiplib.explore.data import _need_manifest
from aiplib.io.audio import SR, valid_audio
from aiplib.io.formats import parse_bool
from aiplib.stimuli.families import materialize, mix_components, row_family
from aiplib.stimuli.mixing import is_clean_row

__all__ = ["AUDIO_SUBTYPE", "MEL_SETTINGS", "PLAYER_LABELS", "manifest_row", "stimulus_labels", "stimulus_audio",
           "wav_bytes", "decode_wav", "log_mel", "signals_figure_png"]

AUDIO_SUBTYPE = "FLOAT"
"""Subtype of the WAV bytes given to the players: 32-bit IEEE float, lossless for float32."""

MEL_SETTINGS = dict(n_fft=400, hop_length=160, n_mels=64, fmin=0.0, fmax=8000.0, top_db=80.0)
"""Log-mel spectrogram of the explorer: 25 ms windows, 10 ms hop, 64 mel bands up to 8 kHz,
dB relative to the loudest bin, floored 80 dB below it."""


PLAYER_LABELS = {
    "background": ("Clean utterance", "Background segment (as mixed)", "Mixture (what the model heard)"),
    "competing_speech": ("Clean target", "Distractor (as mixed)", "Mixture: target + distractor (what the model heard)"),
    "channel": ("Clean utterance", "The transform's change (transformed − clean)",
                "Transformed speech (what the model heard)"),
}
"""Titles of the three players (clean, middle, mixture) per condition family;
:func:`stimulus_labels` adds each stimulus's details."""


def manifest_row(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The manifest row of one stimulus (in the condition family of ``ws``).

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Any family view: the row is read from ``ws.manifest_csv(family)``.
    family : {"asr", "kws"}
    item_id, bg_id : str
        ``bg_id`` is the row's ``background_id``: a background of the battery, a distractor
        condition (``talker_fr``, ``cocktail_fr_it_ru``), a channel condition (``telephone``), or
        ``"clean"``.
    snr_db : float, optional
        SNR in dB; ignored (and may be None) for ``bg_id == "clean"``, and may be None when the
        condition has one row per item (a channel condition, whose manifest SNR is the marker 99).

    Returns
    -------
    dict
        The manifest's fields plus ``stimulus_id, item_id, bg_id, snr_db, reference``.

    Raises
    ------
    FileNotFoundError
        If ``manifests/<family>.csv`` does not exist (run stage 5).
    AiplibParameterError
        If no row matches (the message lists the valid values).
    """
    m = _need_manifest(ws, family)
    sel = m[(m["item_id"] == str(item_id)) & (m["bg_id"] == str(bg_id))]
    if sel.empty:
        items, bgs = sorted(m["item_id"].unique()), sorted(m["bg_id"].unique())
        raise AiplibParameterError(f"no {family} stimulus for item {item_id!r}, background {bg_id!r}; "
                                   f"items: {', '.join(items[:10])}{' …' if len(items) > 10 else ''}; "
                                   f"backgrounds: {', '.join(bgs)}")
    if bg_id != "clean" and not (snr_db is None and len(sel) == 1):
        if snr_db is None:
            raise AiplibParameterError(f"snr_db is required for background {bg_id!r}")
        hit = sel[np.isclose(sel["snr_db"].astype(float), float(snr_db))]
        if hit.empty:
            raise AiplibParameterError(f"no {family} stimulus for item {item_id!r}, background {bg_id!r} "
                                       f"at {snr_db} dB; SNRs: {sorted(sel['snr_db'].astype(float).unique())}")
        sel = hit
    return sel.iloc[0].to_dict()


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and v != v) else str(v).strip()


def stimulus_labels(row, *, middle: bool = True) -> dict:
    """What the three players of one stimulus hold, and the condition's details, per family.

    Parameters
    ----------
    row : Mapping
        A manifest row (:func:`manifest_row`); its family is :func:`aiplib.stimuli.families.row_family`.
    middle : bool
        False when the middle signal is not shown (a channel transform that changed the length:
        ``mixture − speech`` is not defined); its title then says why.

    Returns
    -------
    dict with keys
        ``condition_family`` (str), ``clean``, ``background``, ``mixture`` (player titles, str;
        :data:`PLAYER_LABELS` with the stimulus's condition: the distractor's languages and the
        same-voice flag, the channel condition's name), ``notes`` (list of (name, text): competing
        speech — setting, languages, same voice as the target, the distractor transcript, the
        distractor utterance ids, looped; channel — condition, applied to, the parameters of
        ``condition_params``; empty for background and clean rows).

    Raises
    ------
    AiplibParameterError
        An unknown ``condition_family``.
    """

    cf = check_family(row_family(row))
    clean_t, mid_t, mix_t = PLAYER_LABELS[cf]
    out = dict(condition_family=cf, clean=clean_t, background=mid_t, mixture=mix_t, notes=[])
    if is_clean_row(row) or cf == "background":
        return out
    name = _text(row.get("background_id"))
    if cf == "competing_speech":
        langs, setting = _text(row.get("distractor_languages")), _text(row.get("setting"))
        same = parse_bool(row.get("same_voice_as_target")) is True
        out["background"] = (f"Distractor: {langs or name} ({setting or 'distractor'}"
                             f"{'; same voice as the target' if same else ''}), as mixed")
        out["notes"] = [("setting", setting), ("languages", langs),
                        ("same voice as the target", "yes: a same-voice, other-language control" if same else "no"),
                        ("distractor transcript", _text(row.get("distractor_text"))),
                        ("distractor utterances", _text(row.get("distractor_ids")).replace("|", ", ")),
                        ("looped", _text(row.get("looped")))]
    else:
        raw = _text(row.get("condition_params"))
        try:
            params = json.loads(raw) if raw else {}
        except ValueError:
            params = {"condition_params": raw}
        name = _text(row.get("channel_condition")) or name
        out["mixture"] = f"Transformed speech: {name} (what the model heard)"
        if not middle:
            out["background"] = f"No difference signal: {name} changes the length (parameters below)"
        out["notes"] = [("condition", name), ("applied to", _text(row.get("applied_to")) or "speech"),
                        ("parameters", ", ".join(f"{k} = {v}" for k, v in sorted(params.items())) or "none")]
    return out


def stimulus_audio(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The three signals of one stimulus, mixed on the fly from the manifest of ``ws``'s family.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Any condition-family view (:meth:`~aiplib.core.workspace.Workspace.with_family`).
    family : {"asr", "kws"}
    item_id, bg_id : str
        ``bg_id`` may be ``"clean"``.
    snr_db : float, optional
        SNR in dB (ignored for clean; optional for a channel condition).

    Returns
    -------
    dict with keys
        ``row`` (dict, :func:`manifest_row`), ``stimulus_id`` (str), ``sr`` (16000 Hz),
        ``condition_family`` (str), ``mixture`` (np.ndarray [shape=(n,)], float32: exactly
        ``materialize(row, ws)[0]``), ``clean`` (float32 (m,): ``materialize(clean_row, ws)[0]``,
        the item's speech at −23 LUFS; ``m = n`` except after a channel cut), ``background``
        (float32 (n,): the middle signal as in the mixture, :func:`aiplib.stimuli.families.mix_components`
        — the background segment, the scaled distractor, or the channel transform's change
        ``mixture − speech``; None for clean and for a transform that changed the length),
        ``info`` (:class:`aiplib.stimuli.mixing.MixInfo`), ``detail`` (the family's info dict, or None),
        ``labels`` (:func:`stimulus_labels`).

    Notes
    -----
    The mixture is computed in float64 and cast to float32 (the authors' mixer), so
    ``clean + background`` equals the mixture to within float32 rounding (not for competing
    speech or channel rows peak-scaled after the sum: then ``speech + background`` of
    :func:`~aiplib.stimuli.families.mix_components` does).

    Raises
    ------
    FileNotFoundError, AiplibParameterError
        As :func:`manifest_row`.
    AudioFileError
        If a speech, background or distractor file is missing or unreadable.
    """
    row = manifest_row(ws, family, item_id, bg_id, snr_db)
    parts = mix_components(row, ws)
    clean = parts["mixture"] if bg_id == "clean" else materialize(manifest_row(ws, family, item_id, "clean"), ws)[0]
    middle = bg_id != "clean" and parts["background"].shape == parts["mixture"].shape == clean.shape
    return dict(row=row, stimulus_id=str(row["stimulus_id"]), sr=SR, condition_family=ws.condition_family,
                mixture=parts["mixture"], clean=clean, background=parts["background"] if middle else None,
                info=parts["info"], detail=parts.get("detail"), labels=stimulus_labels(row, middle=middle or bg_id == "clean"))


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
        If ``y`` fails :func:`aiplib.io.audio.valid_audio`, ``sr`` is not positive, or ``subtype`` is
        unknown.
    """
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


def _mel_power(y, sr: int) -> np.ndarray:
    import librosa

    s = MEL_SETTINGS
    return librosa.feature.melspectrogram(y=y, sr=sr, n_fft=s["n_fft"], hop_length=s["hop_length"],
                                          n_mels=s["n_mels"], fmin=s["fmin"], fmax=min(s["fmax"], sr / 2),
                                          power=2.0)


def log_mel(y, *, sr: int = SR, ref_power: float | None = None) -> np.ndarray:
    """Log-mel power spectrogram with :data:`MEL_SETTINGS`.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int > 0, Hz
    ref_power : float > 0, optional
        Power that is 0 dB (default: the loudest bin of ``y``). Give the same value to two
        signals to compare their colours.

    Returns
    -------
    np.ndarray [shape=(n_mels, t)], float32
        dB relative to ``ref_power`` (maximum 0 dB by default), floored ``top_db`` below the
        loudest bin; ``t = 1 + n // hop_length`` frames (centred windows).

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.io.audio.valid_audio`.
    """
    import librosa

    y = valid_audio(np.asarray(y), name="log_mel input")
    mel = _mel_power(y, sr)
    ref = np.max if ref_power is None else float(ref_power)
    return librosa.power_to_db(mel, ref=ref, top_db=MEL_SETTINGS["top_db"]).astype(np.float32)


def signals_figure_png(signals: dict, *, sr: int = SR, title: str = "", dpi: int = 90) -> bytes:
    """Waveforms (top row) and log-mel spectrograms (bottom row) of signals side by side, as PNG.

    Parameters
    ----------
    signals : dict of str -> np.ndarray [shape=(n,)], float
        Column title -> samples, e.g. ``{"clean": clean, "mixture": mixture}``; one column each.
        The spectrograms share one dB scale: 0 dB is the loudest mel bin over all signals, so
        the background's energy shows as brighter cells in the mixture than in the clean column.
    sr : int > 0, Hz
    title : str
    dpi : int > 0

    Returns
    -------
    bytes
        A PNG image, ``4.6 × len(signals)`` by 3.6 inches at ``dpi``.

    Raises
    ------
    AiplibParameterError
        If ``signals`` is empty or a signal fails :func:`aiplib.io.audio.valid_audio`.
    """
    import librosa
    import librosa.display
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not signals:
        raise AiplibParameterError("signals_figure_png: no signals given")
    ys = {k: valid_audio(np.asarray(v), name=f"signals_figure_png input {k!r}") for k, v in signals.items()}
    mels = {k: _mel_power(y, sr) for k, y in ys.items()}
    ref = max(float(m.max()) for m in mels.values()) or 1.0
    s = MEL_SETTINGS
    fmax = min(s["fmax"], sr / 2)
    fig = Figure(figsize=(4.6 * len(ys), 3.6), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(ys), sharex="col", height_ratios=[1, 1.7], squeeze=False)
    img = None
    for j, (name, y) in enumerate(ys.items()):
        ax1, ax2 = axes[0, j], axes[1, j]
        t = np.arange(y.shape[0]) / sr
        ax1.plot(t, y, lw=0.5, color="#1f4e79")
        ax1.set_ylim(-1.0, 1.0)
        ax1.set_xlim(0, y.shape[0] / sr)
        ax1.set_title(name, fontsize=9)
        S = librosa.power_to_db(mels[name], ref=ref, top_db=None)
        S = np.maximum(S, -s["top_db"])
        img = librosa.display.specshow(S, sr=sr, hop_length=s["hop_length"], x_axis="time", y_axis="mel",
                                       fmin=s["fmin"], fmax=fmax, ax=ax2, cmap="magma",
                                       vmin=-s["top_db"], vmax=0.0)
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
