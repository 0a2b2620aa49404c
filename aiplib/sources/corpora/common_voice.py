"""Mozilla Common Voice 17.0 [7]_ (English), streamed from the Hugging Face hub: accented ASR items.

Not downloaded as an archive in stage 1: stage 2 streams the ``validation`` split
(:func:`load_common_voice`) and keeps the first labelled clips (:func:`select_common_voice`, the
authors' rule), mapping each raw ``accent`` string to one of 11 accent groups
(:func:`accent_group`, ``aiplib/sources/corpora/cv_accent_groups.csv``).

.. [7] R. Ardila et al., "Common Voice: A Massively-Multilingual Speech Corpus", LREC 2020.
   Common Voice 17.0 via the Hugging Face mirror ``fsicoli/common_voice_17_0``. CC0 1.0.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

from aiplib.core.errors import AiplibError, MissingPackageError
from aiplib.io.audio import SR, load_audio
from aiplib.sources.download import CorpusError, set_cache_env

#: Hugging Face id of the Common Voice 17.0 mirror streamed in stage 2 (config ``en``): a
#: loading-script data set, so ``datasets<4`` (the authors used 3.5.1, pinned by the ``paper``
#: extra).
CV_DATASET = "fsicoli/common_voice_17_0"

#: The split the authors stream (their ``scripts/02_build_banks.py``).
CV_SPLIT = "validation"

#: ``cv_accent`` (a Common Voice 17 ``accent`` string, exactly) → ``accent_group``: the 11 groups of
#: the authors' README, labelled as ``accent_clean_map`` of their
#: ``scripts/generate_results_new_2.py``.
ACCENT_GROUPS_FILE = Path(__file__).with_name("cv_accent_groups.csv")

#: Accent-labelled Common Voice 17 clips in the ASR bank (authors' ``CV_N``).
N_COMMON_VOICE = 80


def read_accent_groups(path=None) -> dict:
    """Common Voice accent string → group label, in file order, from a CSV
    ``cv_accent,accent_group`` (default :data:`ACCENT_GROUPS_FILE`); CorpusError if a column is
    missing or an accent appears twice."""
    with open(path or ACCENT_GROUPS_FILE, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"cv_accent", "accent_group"} <= set(rows[0]):
        raise CorpusError(f"{path or ACCENT_GROUPS_FILE} needs the columns cv_accent,accent_group")
    out = {}
    for r in rows:
        key = r["cv_accent"].strip()
        if key in out:
            raise CorpusError(f"accent {key!r} is listed twice in {path or ACCENT_GROUPS_FILE}")
        out[key] = r["accent_group"].strip()
    return out


#: Common Voice accent string → one of the 11 accent groups (from :data:`ACCENT_GROUPS_FILE`).
CV_ACCENT_GROUPS = read_accent_groups()


def accent_group(value, groups=None) -> str | None:
    """The accent group (``groups``, default :data:`CV_ACCENT_GROUPS`) of a Common Voice ``accent``
    value (exact match after stripping spaces), ``None`` for an empty, unlisted or multi-accent
    value."""
    if groups is None:
        groups = CV_ACCENT_GROUPS
    if not value or not isinstance(value, str):
        return None
    return groups.get(value.strip())


def load_common_voice(*, split: str = CV_SPLIT, dataset_id: str = CV_DATASET, config: str = "en"):
    """Stream Common Voice 17 (English) from the Hugging Face hub [7]_, unshuffled, audio undecoded,
    as the authors did; returns a ``datasets.IterableDataset``.

    Raises
    ------
    MissingPackageError
        ``datasets`` is not installed, or is 4.0 or newer (with the ``pip install`` command).
    AiplibError
        The hub cannot be reached or refuses the data set (accept its terms, ``hf auth login``).
    """
    set_cache_env()
    fix = (
        "pip install 'datasets>=3.5,<4'` (or `pip install -e \".[paper]\"`; the authors used 3.5.1)"
    )
    try:
        import datasets
    except ImportError:
        raise MissingPackageError(
            f"stage 2 of the paper profile streams Common Voice with Hugging Face "
            f"`datasets`; install it with `{fix}"
        ) from None
    version = getattr(datasets, "__version__", "0")
    if int(re.match(r"\d*", str(version)).group() or 0) >= 4:
        raise MissingPackageError(
            f"{dataset_id} is a loading-script data set and datasets {version} no longer runs "
            f"loading scripts (removed in datasets 4.0); install a 3.x release with `{fix}"
        )
    try:
        ds = datasets.load_dataset(
            dataset_id, config, split=split, streaming=True, trust_remote_code=True
        )
    except Exception as exc:  # network, gating: all end here
        raise AiplibError(
            f"cannot stream {dataset_id} ({config}, {split}) from the Hugging Face hub: {exc}. "
            f"Check the network or HF_ENDPOINT, accept the data set's terms on its hub page "
            f"and log in with `hf auth login`."
        ) from None
    # a stream without that column / an old datasets: decode as given
    with contextlib.suppress(Exception):
        ds = ds.cast_column("audio", datasets.Audio(decode=False))
    return ds


def _mono(arr: np.ndarray) -> np.ndarray:
    """Mono mix of decoded samples: ``(n, channels)`` when the last axis has at most 8 entries,
    else ``(channels, n)``."""
    if arr.ndim <= 1:
        return arr
    if arr.shape[-1] <= 8:
        return arr.mean(axis=-1)
    return arr.mean(axis=0)


def _encoded_audio(record) -> bytes | None:
    """The encoded audio of a Common Voice record: its ``audio.bytes``, else the file at
    ``audio.path``; None when it carries neither."""
    a = record.get("audio")
    if not isinstance(a, dict):
        return None
    if a.get("bytes"):
        return a["bytes"]
    if a.get("path") and Path(a["path"]).is_file():
        return Path(a["path"]).read_bytes()
    return None


def _decode(raw: bytes, name: str):
    """``(samples, rate in Hz)`` of encoded audio: libsndfile at the native rate, else (an MP3 it
    cannot read) ffmpeg through :func:`aiplib.io.audio.load_audio` at 16 kHz."""
    try:
        arr, sr = sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)
        return arr.mean(axis=1), int(sr)
    except Exception:  # noqa: BLE001 - an MP3 libsndfile cannot read: ffmpeg through load_audio
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / name
            p.write_bytes(raw)
            return load_audio(p), SR


def _cv_native(record):
    """→ (samples at the native rate, float32 mono, native rate in Hz) of a Common Voice record.

    Raises :class:`CorpusError` when the record carries no audio.
    """
    a = record.get("audio")
    if isinstance(a, dict) and a.get("array") is not None:
        arr = _mono(np.asarray(a["array"], dtype=np.float32))
        return arr, int(a["sampling_rate"])
    path = (a or {}).get("path") or record.get("path") or "clip.mp3"
    name = Path(str(path)).name
    raw = _encoded_audio(record)
    if raw is None:
        raise CorpusError(f"Common Voice record {record.get('path')!r} carries no audio")
    return _decode(raw, name)


def _labelled(value) -> bool:
    """True for a given label: a non-empty string other than ``unknown``."""
    return bool(value) and isinstance(value, str) and value.strip().lower() != "unknown"


def _picked_clip(rec, k: int, accent: str, gender: str) -> dict:
    """The ``k``-th kept clip of the stream: its id, native samples and rate, and labels."""
    arr, sr = _cv_native(rec)
    return {
        "item_id": f"cv_{str(rec.get('client_id') or '')[:8]}_{k}",
        "arr": arr,
        "sr": sr,
        "text": rec.get("sentence", "") or "",
        "speaker": str(rec.get("client_id") or ""),
        "gender": gender,
        "age": rec.get("age") or "unknown",
        "accent": accent,
    }


def select_common_voice(dataset, out_dir, *, n: int = N_COMMON_VOICE, groups=None) -> list:
    """The authors' Common Voice rule (``scripts/02_build_banks.py``): the first ``n`` clips of
    ``dataset`` whose ``accent`` (or ``accents``) and ``gender`` are both given and not ``unknown``.

    The k-th kept clip is ``cv_<client_id[:8]>_<k>``, saved as ``<out_dir>/<id>.wav`` at its native
    rate (16-bit PCM, as their ``soundfile.write``).

    Returns
    -------
    list of dict
        In stream order: ``item_id, y`` (np.ndarray [shape=(samples,)], float32, 16 kHz, read back
        from the file), ``text, speaker, gender, age, accent``, ``accent_group`` (``groups``,
        default
        :data:`CV_ACCENT_GROUPS`; or None), ``source_file``.

    Raises
    ------
    CorpusError
        The stream ends before ``n`` labelled clips (the message gives the numbers).
    """
    picked = []
    for rec in dataset:
        if len(picked) >= n:
            break
        accent = rec.get("accent") or rec.get("accents") or ""
        gender = rec.get("gender") or ""
        if _labelled(accent) and _labelled(gender):
            picked.append(_picked_clip(rec, len(picked), accent, gender))
    if len(picked) < n:
        raise CorpusError(
            f"the Common Voice stream ended after {len(picked)} clip(s) with accent and gender "
            f"labels, {n} needed"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = []
    for c in picked:
        src = out_dir / f"{c.pop('item_id')}.wav"
        sf.write(str(src), c.pop("arr"), c.pop("sr"), subtype="PCM_16")
        kept.append(
            {
                "item_id": src.stem,
                "y": load_audio(src),
                **c,
                "accent_group": accent_group(c["accent"], groups),
                "source_file": src,
            }
        )
    return kept
