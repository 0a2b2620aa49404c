"""Notebook 10, audio side: a stimulus's three signals, the players' WAV bytes, the spectrograms.

Every stimulus is rebuilt from its manifest row with :func:`aiplib.mixing.materialize` /
:func:`aiplib.mixing.mix_components` (never read from a bulk file).

No widget code here (:mod:`aiplib.widgets` draws the interface); every function is checked on
values by ``tests/test_widgets.py``.

The players get **32-bit float WAV** bytes (:func:`wav_bytes`, IEEE float), so the samples the
browser plays are exactly the float32 samples the model was given: decoding the bytes gives back
``materialize(row)[0]`` bit for bit, with no 16-bit quantisation. (Chromium, Firefox and Safari
play float WAV.)
"""
from __future__ import annotations

import io
import struct

import numpy as np

from .audio import SR, valid_audio
from .errors import AiplibParameterError
from .explore import _need_manifest
from .mixing import materialize, mix_components

__all__ = ["AUDIO_SUBTYPE", "MEL_SETTINGS", "manifest_row", "stimulus_audio", "wav_bytes", "decode_wav", "log_mel", "signals_figure_png"]

AUDIO_SUBTYPE = "FLOAT"
"""Subtype of the WAV bytes given to the players: 32-bit IEEE float, lossless for float32."""

MEL_SETTINGS = dict(n_fft=400, hop_length=160, n_mels=64, fmin=0.0, fmax=8000.0, top_db=80.0)
"""Log-mel spectrogram of the explorer: 25 ms windows, 10 ms hop, 64 mel bands up to 8 kHz,
dB relative to the loudest bin, floored 80 dB below it."""


def manifest_row(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The manifest row of one stimulus.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    family : {"asr", "kws"}
    item_id, bg_id : str
        ``bg_id`` is a background id of the battery, or ``"clean"``.
    snr_db : float, optional
        SNR in dB; ignored (and may be None) for ``bg_id == "clean"``.

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
    if bg_id != "clean":
        if snr_db is None:
            raise AiplibParameterError(f"snr_db is required for background {bg_id!r}")
        hit = sel[np.isclose(sel["snr_db"].astype(float), float(snr_db))]
        if hit.empty:
            raise AiplibParameterError(f"no {family} stimulus for item {item_id!r}, background {bg_id!r} "
                                       f"at {snr_db} dB; SNRs: {sorted(sel['snr_db'].astype(float).unique())}")
        sel = hit
    return sel.iloc[0].to_dict()


def stimulus_audio(ws, family: str, item_id: str, bg_id: str, snr_db=None) -> dict:
    """The three signals of one stimulus, mixed on the fly from the manifest.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    family : {"asr", "kws"}
    item_id, bg_id : str
        ``bg_id`` may be ``"clean"``.
    snr_db : float, optional
        SNR in dB (ignored for clean).

    Returns
    -------
    dict with keys
        ``row`` (dict, :func:`manifest_row`), ``stimulus_id`` (str), ``sr`` (16000 Hz),
        ``mixture`` (np.ndarray [shape=(n,)], float32: exactly ``materialize(row, ws)[0]``),
        ``clean`` (float32 (n,): ``materialize(clean_row, ws)[0]``, the item's speech at −23
        LUFS), ``background`` (float32 (n,): the background part *as mixed*,
        :func:`aiplib.mixing.mix_components`; None for clean), ``info`` (:class:`aiplib.mixing.MixInfo`).

    Notes
    -----
    The mixture is computed in float64 and cast to float32 (the authors' mixer), so
    ``clean + background`` equals the mixture to within float32 rounding.

    Raises
    ------
    FileNotFoundError, AiplibParameterError
        As :func:`manifest_row`.
    AudioFileError
        If a speech or background file is missing or unreadable.
    """
    row = manifest_row(ws, family, item_id, bg_id, snr_db)
    parts = mix_components(row, ws)
    clean = parts["mixture"] if bg_id == "clean" else materialize(manifest_row(ws, family, item_id, "clean"), ws)[0]
    return dict(row=row, stimulus_id=str(row["stimulus_id"]), sr=SR, mixture=parts["mixture"], clean=clean,
                background=None if bg_id == "clean" else parts["background"], info=parts["info"])


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
        If ``y`` fails :func:`aiplib.audio.valid_audio`.
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
        If ``signals`` is empty or a signal fails :func:`aiplib.audio.valid_audio`.
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
