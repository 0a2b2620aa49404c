"""Local synthetic voices: espeak-ng and flite read a text aloud, trimmed to the sound.

Used by the ``demo`` profile for its synthetic ASR sentences and KWS words (no network, no model
download: both engines are Debian packages, see :mod:`aiplib.sources.corpora.debian`).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from aiplib.core.errors import AiplibParameterError, AudioFileError, MissingPackageError
from aiplib.io.audio import SR, load_audio
from aiplib.sources.corpora import debian


def synthesize(text: str, voice: str, *, sr: int = SR) -> np.ndarray:
    """Read ``text`` aloud with ``voice``: ``"espeak:<voice>"`` (espeak-ng, e.g.
    ``espeak:en-us+f3``) or ``"flite:<voice>"`` (``kal``, ``kal16``, ``slt``, ``rms``, ``awb``);
    returns np.ndarray [shape=(n,)], float32, mono, resampled to ``sr`` Hz.

    Raises
    ------
    AiplibParameterError
        If the engine is unknown.
    MissingPackageError
        If espeak-ng or flite is not installed.
    AudioFileError
        If the engine fails or writes no audio.
    """
    engine, _, name = voice.partition(":")
    exe = {"espeak": "espeak-ng", "flite": "flite"}.get(engine)
    if exe is None or not name:
        raise AiplibParameterError(f"voice {voice!r} must be 'espeak:<voice>' or 'flite:<voice>'")
    if shutil.which(exe) is None:
        raise MissingPackageError(
            f"{exe} is needed for voice {voice!r}; install it with\n"
            f"    {debian.install_command([exe])}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tts.wav"
        cmd = (
            [exe, "-v", name, "-w", str(out), text]
            if engine == "espeak"
            else [exe, "-voice", name, "-t", text, "-o", str(out)]
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not out.is_file():
            raise AudioFileError(
                f"{exe} ({voice}) failed on {text!r}: {proc.stderr.strip()[-200:]}"
            )
        return load_audio(out, sr=sr)


def trim_silence(y, *, top_db: float = 40.0, margin_s: float = 0.1, sr: int = SR) -> np.ndarray:
    """``y`` [shape=(n,)] without leading and trailing silence (frames more than ``top_db`` dB below
    the loudest, ``librosa.effects.trim``), keeping ``margin_s`` s each side; float32 [shape=(m,)],
    m ≤ n.
    """
    import librosa  # noqa: PLC0415 - librosa is slow to import

    _, (start, end) = librosa.effects.trim(y, top_db=top_db)
    pad = int(round(margin_s * sr))
    return np.ascontiguousarray(y[max(0, start - pad) : min(y.size, end + pad)], dtype=np.float32)


def pad_to(y: np.ndarray, n: int) -> np.ndarray:
    """``y`` [shape=(m,)] centred in ``n`` samples of silence (float32, ``(n - m) // 2`` zeros
    before); ``y`` itself when ``m ≥ n``."""
    if y.size >= n:
        return y
    left = (n - y.size) // 2
    return np.pad(y, (left, n - y.size - left)).astype(np.float32)
