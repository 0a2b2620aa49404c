"""Silero VAD [1]_: the fraction of a background that sounds like speech (the ninth descriptor).

Settings are those of the authors' ``scripts/vad_classify_bg.py`` (the silero-vad defaults,
:data:`VAD_SETTINGS`). The model is the TorchScript file shipped in the ``silero-vad`` wheel, so
nothing is downloaded; torch's global thread count is left as the caller set it.

References
----------
.. [1] Silero Team (2021). Silero VAD: pre-trained enterprise-grade Voice Activity Detector (VAD),
   Number Detector and Language Classifier. https://github.com/snakers4/silero-vad
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

from aiplib.core.errors import AiplibParameterError, MissingPackageError
from aiplib.io.audio import SR, valid_audio

#: ``get_speech_timestamps`` settings of the authors' ``scripts/vad_classify_bg.py`` (the silero-vad
#: defaults) used by :func:`vad_speech_fraction`.
VAD_SETTINGS = {
    "model": "silero_vad.jit (TorchScript, shipped in the silero-vad wheel)",
    "threshold": "0.5 unless set (the authors' SILERO_SENSITIVITY)",
    "window_size_samples": 512,
    "min_speech_duration_ms": 250,
    "min_silence_duration_ms": 100,
    "speech_pad_ms": 30,
    "fraction": "sum(end - start) / n over the returned segments (the authors' vad_classify_bg.py)",
}


@functools.lru_cache(maxsize=1)
def load_vad_model():
    """Load (once, offline) the Silero VAD TorchScript model of the ``silero-vad`` wheel (stateful:
    one per thread); MissingPackageError if ``silero-vad`` or torch is not installed."""
    silero_vad = (
        _import_silero()
    )  # first: a missing torch is a MissingPackageError, not a bare import error
    with _torch_threads(None):  # restores the thread count whatever loading does
        return silero_vad.load_silero_vad(onnx=False)


def _import_silero():
    """Import ``silero_vad``, restoring the torch thread count its import sets to 1 (silero-vad
    6.2.3)."""
    try:
        with _torch_threads(None):
            import silero_vad
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingPackageError(
            "the VAD speech fraction needs silero-vad and torch; install them with "
            "`pip install silero-vad torch==2.13.0`"
        ) from exc
    return silero_vad


@contextlib.contextmanager
def _torch_threads(n):
    """Run with ``torch.set_num_threads(n)`` (``None``: unchanged) and restore the previous count
    after."""
    import torch

    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)


def vad_speech_fraction(
    y, *, sr: int = SR, threshold: float = 0.5, model=None, name: str = "audio"
) -> float:
    """Fraction in [0, 1] of the samples of ``y`` [shape=(n,)] that Silero VAD [1]_ marks as speech.

    ``sum(end - start) / n`` over the segments of ``silero_vad.get_speech_timestamps`` with
    :data:`VAD_SETTINGS` and ``threshold`` in (0, 1), clipped to ``[0, n)``; not rounded (the
      authors round
    to 4 decimals). ``sr``: 8 000 or 16 000 Hz (others refused, not resampled); ``model`` default
    :func:`load_vad_model`.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.io.audio.valid_audio`, ``sr`` is not 8000 or 16000, or
        ``threshold`` is not in (0, 1).
    MissingPackageError
        If silero-vad / torch are not installed.
    """
    y = valid_audio(np.asarray(y) if not isinstance(y, np.ndarray) else y, name=name)
    if sr not in (8000, 16000):
        raise AiplibParameterError(
            f"{name}: Silero VAD accepts 8000 or 16000 Hz only, got sr={sr}; resample first"
        )
    if not (0.0 < float(threshold) < 1.0):
        raise AiplibParameterError(f"VAD threshold must lie in (0, 1), got {threshold}")
    import torch

    get_speech_timestamps = _import_silero().get_speech_timestamps
    model = load_vad_model() if model is None else model
    wav = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
    keys = (
        "window_size_samples",
        "min_speech_duration_ms",
        "min_silence_duration_ms",
        "speech_pad_ms",
    )
    with _torch_threads(1), torch.no_grad():  # single-threaded
        stamps = get_speech_timestamps(
            wav,
            model,
            threshold=float(threshold),
            sampling_rate=sr,
            **{k: VAD_SETTINGS[k] for k in keys},
        )
    n = y.size
    speech = sum(max(0, min(n, int(s["end"])) - max(0, int(s["start"]))) for s in stamps)
    return float(speech / n)
