"""Background curation: background specs → 30 s, −23 LUFS, 16 kHz mono 16-bit WAVs.

As the authors' ``scripts/03_curate_battery.py``: mono, 16 kHz, tiled end to end and cut to 30 s,
loudness-normalised to −23 LUFS (their ``BG_LUFS``; ITU-R BS.1770-4 through pyloudnorm) and
written as 16-bit PCM (:data:`BG_SUBTYPE`, as their ``sf.write``), so a background above full
scale after normalisation is clipped at ±1 (``clipped_samples``). ``battery.csv`` also records the
peak after normalisation and the share of digital silence (:func:`silent_shares`). Coloured noises
are shaped in the frequency domain (power ∝ 1/f pink, 1/f² brown, nothing below 20 Hz; Kasdin
1995, *Proc. IEEE* 83(5), "Discrete simulation of colored noise").
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core import DEFAULT_SEED
from aiplib.core.errors import AiplibParameterError, AudioFileError
from aiplib.core.progress import track
from aiplib.io.audio import (
    SR,
    load_audio,
    loop_or_cut,
    loudness_lufs,
    normalize_loudness,
    write_wav,
)
from aiplib.io.formats import BATTERY_COLUMNS, CATEGORIES, write_battery_csv
from aiplib.io.subaudible import (
    SUBAUDIBLE_LIMIT_DB,
    SUBAUDIBLE_REFUSE_DB,
    audible_excess_db,
    effective_bandwidth_hz,
    remove_subaudible_steep,
    subaudible_power,
)

log = logging.getLogger(__name__)

#: Loudness of every curated background in LUFS (the authors' ``BG_LUFS``, scripts/utils.py).
TARGET_LUFS = -23.0

#: Shortest run of exact-zero samples (s) that counts as digital silence in ``silent_share``.
SILENT_RUN_S = 0.010


#: Allowed values of a spec's ``combine``.
COMBINES = ("concat", "sum", "synthetic:white", "synthetic:pink", "synthetic:brown")

#: Keys every background spec must have.
REQUIRED_SPEC_KEYS = (
    "bg_id",
    "category",
    "description",
    "sources",
    "combine",
    "source_package",
    "licence",
    "attribution",
    "synthetic",
)

#: A valid ``bg_id``: letters, digits, ``_``, ``-``, ``.``, not starting with a punctuation mark.
_BG_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

#: Noise kind → exponent β of its power spectrum ∝ 1/f^β.
_NOISE_EXPONENT = {"white": 0.0, "pink": 1.0, "brown": 2.0}


def _check_spec(spec) -> None:
    """Raise AiplibParameterError naming the first malformed field of a background spec."""
    missing = [k for k in REQUIRED_SPEC_KEYS if k not in spec]
    if missing:
        raise AiplibParameterError(
            f"background spec {spec.get('bg_id', '?')!r} lacks {', '.join(missing)}"
        )
    bg_id = spec["bg_id"]
    if not isinstance(bg_id, str) or not _BG_ID.match(bg_id):
        raise AiplibParameterError(
            f"bg_id {bg_id!r} must be a non-empty name of letters, digits, '_', '-', '.'"
        )
    if spec["category"] not in CATEGORIES:
        raise AiplibParameterError(
            f"{bg_id}: category {spec['category']!r} is not one of {', '.join(CATEGORIES)}"
        )
    if spec["combine"] not in COMBINES:
        raise AiplibParameterError(
            f"{bg_id}: combine {spec['combine']!r} is not one of {', '.join(COMBINES)}"
        )
    if not spec["combine"].startswith("synthetic:") and not spec["sources"]:
        raise AiplibParameterError(
            f"{bg_id}: combine={spec['combine']!r} needs at least one source file"
        )
    if spec.get("subaudible", "keep") not in ("keep", "remove"):
        raise AiplibParameterError(
            f"{bg_id}: subaudible {spec['subaudible']!r} is not 'keep' or 'remove'"
        )


def _subaudible_step(y, spec, sr: int, record: dict, n: int) -> np.ndarray:
    """Measure the DC + sub-20 Hz power share (dB) of the ``n`` samples of a source stream the
    background uses and high-pass the stream when the spec says ``subaudible: "remove"`` and the
    share is at least :data:`aiplib.io.subaudible.SUBAUDIBLE_LIMIT_DB`
    (:func:`aiplib.io.subaudible.remove_subaudible_steep`: order 4, or order 16 when order 4 leaves
    1 % or more); ``record`` keeps the largest share and whether removed.

    Raises
    ------
    AudioFileError
        When even the order-16 high-pass leaves 10 % or more of the power below 20 Hz
        (:data:`aiplib.io.subaudible.SUBAUDIBLE_REFUSE_DB`), naming the
        background and the shares measured before and after (the audible SNR would exceed the
        nominal one by the excess given).
    """
    share = subaudible_power(loop_or_cut(y, n), sr=sr)["subaudible_db"]
    record["subaudible_db"] = max(record.get("subaudible_db", -np.inf), share)
    if spec.get("subaudible", "keep") == "remove" and share >= SUBAUDIBLE_LIMIT_DB:
        out, rec = remove_subaudible_steep(y, sr=sr, n=n)
        if rec["residual_db"] >= SUBAUDIBLE_REFUSE_DB:
            raise AudioFileError(
                f"{spec['bg_id']}: {share:.1f} dB of its power is DC or below 20 Hz and "
                f"{rec['residual_db']:.1f} dB is still there after a zero-phase 20 Hz high-pass of "
                f"order {rec['order']}, so its stimuli's audible SNR would be "
                f"{audible_excess_db(rec['residual_db']):.2f} dB above the nominal one; take the "
                "rumble out of the recording (it lies just below 20 Hz) or remove the file"
            )
        record["subaudible_removed"] = True
        log.info(
            "%s: removed DC and rumble below 20 Hz (%.1f dB of its power; %.1f dB left after the "
            "order-%d high-pass)",
            spec["bg_id"],
            share,
            rec["residual_db"],
            rec["order"],
        )
        return out
    if share >= SUBAUDIBLE_LIMIT_DB:  # kept (the paper profile: the authors' files as they are)
        log.warning(
            "%s: %.1f dB of its power is DC or below 20 Hz (kept: the profile uses its files as "
            "they are); the audible SNR of its stimuli is %.2f dB above the nominal one (stage 6, "
            "checks/subaudible.csv)",
            spec["bg_id"],
            share,
            audible_excess_db(share),
        )
    return y


def colored_noise(
    kind: str, n: int, *, seed: int = 0, sr: int = SR, f_min_hz: float = 20.0
) -> np.ndarray:
    """Gaussian white, pink (1/f) or brown (1/f²) noise [shape=(n,)], float32, zero-mean,
    peak-scaled to 0.5, seeded (``numpy.random.default_rng(seed)``) at ``sr`` Hz; components below
    ``f_min_hz`` (Hz) are removed (else brown noise's peaks are huge for its loudness).

    Raises
    ------
    AiplibParameterError
        If ``kind`` is unknown or ``n`` < 1.
    """
    if kind not in _NOISE_EXPONENT:
        raise AiplibParameterError(f"unknown noise kind {kind!r}; choose white, pink or brown")
    if n < 1:
        raise AiplibParameterError(f"noise length must be ≥ 1 sample, got {n}")
    spec = np.fft.rfft(np.random.default_rng(seed).standard_normal(n))
    f = np.fft.rfftfreq(n, d=1.0 / sr)
    keep = f >= f_min_hz
    spec[~keep] = 0.0
    spec[keep] *= f[keep] ** (-_NOISE_EXPONENT[kind] / 2.0)  # amplitude ∝ f^(-β/2) → power ∝ f^(-β)
    y = np.fft.irfft(spec, n=n)
    return (0.5 * y / np.max(np.abs(y))).astype(np.float32)


def silent_shares(y, *, sr: int = SR, min_run_s: float = SILENT_RUN_S) -> dict[str, float]:
    """How much of a background ``y`` [shape=(n,)] is digital silence (samples exactly 0.0).

    Returns
    -------
    dict
        ``silent_share``: fraction of the samples in runs of exact zeros at least ``min_run_s``
        (s, default 10 ms) long. ``silent_share_1s``: fraction of the 1 s windows ``y[o:o + sr]``,
        ``o`` in ``0 … n − sr``, that hold only zeros — the chance that a 1 s utterance mixed at a
        uniform offset (the authors' mixer) meets silence only (one window when ``n < sr``).

    Examples
    --------
    >>> y = np.r_[np.ones(16000), np.zeros(32000)].astype(np.float32)   # 1 s sound, 2 s zeros
    >>> s = silent_shares(y)
    >>> round(s["silent_share"], 4), s["silent_share_1s"] == 16001 / 32001
    (0.6667, True)
    """
    z = np.asarray(y) == 0
    n = z.size
    if n == 0:
        raise AiplibParameterError("silent_shares: empty waveform")
    edges = np.diff(np.r_[0, z.astype(np.int8), 0])
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    runs = ends - starts
    share = float(runs[runs >= max(1, int(round(min_run_s * sr)))].sum() / n)
    w = min(int(sr), n)
    loud = np.r_[0, np.cumsum(~z)]
    share_1s = float(np.mean(loud[w:] - loud[:-w] == 0))
    return {"silent_share": share, "silent_share_1s": share_1s}


def spec_seed(seed: int, bg_id: str) -> int:
    """Per-background seed: the first 4 bytes (big-endian) of sha256(f"{seed}:{bg_id}")."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{bg_id}".encode()).digest()[:4], "big")


def _flatten(sources) -> list[Path]:
    """The files of ``sources`` (paths, or nested lists of paths: one per talker), in order."""
    paths = []
    for s in sources:
        if isinstance(s, (list, tuple)):
            paths.extend(_flatten(s))
        else:
            paths.append(Path(s))
    return paths


def _load_checked(path: Path, sr: int) -> np.ndarray:
    """A source file at ``sr`` Hz; AudioFileError when it is silent."""
    y = load_audio(path, sr=sr)
    if not np.any(y):
        raise AudioFileError(f"{path}: the background source is silent (all samples are zero)")
    return y


def _stream(paths, sr: int, start_s: float = 0.0) -> np.ndarray:
    """Concatenate ``paths`` end to end, skipping ``start_s`` seconds of the first one."""
    parts = [_load_checked(p, sr) for p in paths]
    skip = int(round(start_s * sr))
    if skip:
        if skip >= parts[0].size:
            raise AiplibParameterError(
                f"{paths[0]}: start_s={start_s} s is past its end ({parts[0].size / sr:.2f} s)"
            )
        parts[0] = parts[0][skip:]
    return np.concatenate(parts)


def _name(paths) -> str:
    """The paths as one comma-separated string, for messages."""
    return ", ".join(str(p) for p in paths)


def _real_background(spec, n: int, target_lufs: float, sr: int, record: dict):
    """Build the un-normalised 30 s signal of a concat/sum spec; returns (y, source_duration_s,
    looped)."""
    start_s = float(spec.get("start_s", 0.0) or 0.0)
    if spec["combine"] == "concat":
        paths = _flatten(spec["sources"])
        y = _subaudible_step(_stream(paths, sr, start_s), spec, sr, record, n)
        return loop_or_cut(y, n), y.size / sr, y.size < n
    streams = []
    durations = []
    # "sum": each source (or list = one talker) normalised
    for i, src in enumerate(spec["sources"]):
        paths = _flatten([src])
        skip_s = 0.0
        if i == 0:
            skip_s = start_s
        y = _subaudible_step(_stream(paths, sr, skip_s), spec, sr, record, n)
        durations.append(y.size / sr)
        streams.append(
            normalize_loudness(loop_or_cut(y, n), target_lufs, sr=sr, name=_name(paths))[0]
        )
    return np.sum(streams, axis=0, dtype=np.float64), min(durations), min(durations) * sr < n


def curate_background(
    spec, *, duration_s: float = 30.0, target_lufs: float = TARGET_LUFS, seed: int = 0, sr: int = SR
):
    """Make one background: combine its sources, loop or cut to ``duration_s`` (s), normalise to
    ``target_lufs`` (LUFS, ITU-R BS.1770-4 via pyloudnorm).

    Parameters
    ----------
    spec : dict
        ``bg_id, category, description, sources, combine, source_package, licence, attribution,
        synthetic``, optional ``start_s`` (s skipped at the start of the first source) and
        ``subaudible`` (``"remove"``: high-pass a stream with DC / sub-20 Hz power; ``"keep"``, the
        default). ``combine``: ``"concat"`` joins the sources end to end; ``"sum"`` normalises each
        source (or list of files, one talker) to ``target_lufs`` and adds them;
        ``"synthetic:white|pink|brown"`` generates noise seeded by ``seed``.

    Returns
    -------
    y : np.ndarray [shape=(round(duration_s * sr),)], float32
    info : dict
        ``source_duration_s`` (s, before looping; shortest talker for ``sum``), ``looped``,
        ``gain_db`` (dB), ``lufs_before``, ``lufs_after`` (LUFS), ``peak_after`` (max |y|; above 1
        a :class:`aiplib.io.audio.ClippingWarning`), :func:`silent_shares`, ``subaudible_db`` (dB re
        total power, before removal), ``subaudible_removed``, ``bandwidth_hz`` (Hz) and the spec's
        fields.

    Raises
    ------
    AiplibParameterError
        If the spec is malformed, ``duration_s`` ≤ 0, or the signal holds NaN/inf samples.
    AudioFileError
        If a source is missing, unreadable or silent (the message names the file).
    """
    _check_spec(spec)
    if not duration_s > 0:
        raise AiplibParameterError(f"duration_s must be > 0 s, got {duration_s}")
    n = int(round(duration_s * sr))
    record = {"subaudible_removed": False}
    if spec["combine"].startswith("synthetic:"):
        y = colored_noise(spec["combine"].split(":", 1)[1], n, seed=seed, sr=sr)
        record["subaudible_db"] = subaudible_power(y, sr=sr)["subaudible_db"]
        src_dur = duration_s
        looped = False
        name = f"{spec['bg_id']} ({spec['combine']})"
    else:
        y, src_dur, looped = _real_background(spec, n, target_lufs, sr, record)
        name = _name(_flatten(spec["sources"]))
    y, gain_db, before, peak = normalize_loudness(
        np.asarray(y, dtype=np.float32),
        target_lufs,
        sr=sr,
        name=f"{spec['bg_id']} ({name})",
        return_peak=True,
    )
    info = {k: spec[k] for k in REQUIRED_SPEC_KEYS if k not in ("sources", "combine")}
    info.update(
        source_duration_s=float(src_dur),
        looped=bool(looped),
        gain_db=gain_db,
        lufs_before=before,
        lufs_after=loudness_lufs(y, sr=sr, name=name),
        peak_after=peak,
        **silent_shares(y, sr=sr),
        subaudible_db=round(float(record["subaudible_db"]), 2),
        subaudible_removed=bool(record["subaudible_removed"]),
        bandwidth_hz=round(effective_bandwidth_hz(y, sr=sr), 1),
    )
    return y, info


#: soundfile subtype of ``bg/<bg_id>.wav``: 16-bit PCM (the authors' files).
BG_SUBTYPE = "PCM_16"


def _as_stored(out: Path, y: np.ndarray, info: dict, sr: int) -> dict:
    """``info`` with the silence columns of the file as written and ``clipped_samples`` (|y| > 1,
    clipped in the file, which is then quieter than ``lufs_after``)."""
    stored = load_audio(out, sr=sr)
    n_clip = int(np.count_nonzero(np.abs(y) > 1.0))
    if n_clip:
        log.warning(
            "%s: %d samples above full scale after loudness normalisation are clipped in the "
            "16-bit file (peak %.3f; the file measures %.2f LUFS), as in the authors' battery",
            out.name,
            n_clip,
            float(np.max(np.abs(y))),
            loudness_lufs(stored, sr=sr, name=str(out)),
        )
    return dict(info, clipped_samples=n_clip, **silent_shares(stored, sr=sr))


def _resolve(ws, sources):
    """``sources`` (nested lists kept) as absolute paths, relative ones read from ``ws.root``."""
    resolved = []
    for s in sources:
        if isinstance(s, (list, tuple)):
            resolved.append(_resolve(ws, s))
        else:
            resolved.append(str(ws.path(s)))
    return resolved


def _row(ws, spec, info, out: Path) -> dict:
    """The ``battery.csv`` row of one curated background (:data:`BATTERY_COLUMNS`)."""
    files = []
    if not spec["combine"].startswith("synthetic:"):
        files = _flatten(spec["sources"])
    row = dict(
        info,
        bg_id=spec["bg_id"],
        path=ws.rel(out),
        source_file=";".join(ws.rel(p) for p in files) or spec["combine"],
    )
    return {c: row[c] for c in BATTERY_COLUMNS}


def _write_if_changed(out: Path, y: np.ndarray) -> None:
    """Write ``out`` as :data:`BG_SUBTYPE`, leaving an existing file with the same bytes
    untouched."""
    tmp = out.with_name(out.name + ".tmp.wav")
    write_wav(tmp, y, subtype=BG_SUBTYPE)
    if out.is_file() and out.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        tmp.replace(out)


def curate_battery(
    ws,
    specs,
    *,
    duration_s: float = 30.0,
    target_lufs: float = TARGET_LUFS,
    seed: int = DEFAULT_SEED,
):
    """Curate every spec (:func:`curate_background`; relative sources read from ``ws.root``; seed
    :func:`spec_seed` ``(seed, bg_id)``) into ``bg/<bg_id>.wav`` (16-bit PCM, not rewritten when
    its bytes do not change) and write and return ``descriptors/battery.csv``
    (:data:`aiplib.io.formats.BATTERY_COLUMNS`).

    Raises
    ------
    AiplibParameterError
        On duplicate ``bg_id`` or a malformed spec.
    AudioFileError
        If a source is missing, unreadable or silent.
    """
    ids = [s.get("bg_id") for s in specs]
    dups = [b for i, b in enumerate(ids) if b in ids[:i]]
    if dups:
        raise AiplibParameterError(
            f"duplicate bg_id in the background specs: {', '.join(map(str, dups))}"
        )
    for s in specs:
        _check_spec(s)
    ws.ensure()
    # of an older version: no stamp now
    (ws.descriptors / "battery.stamp.json").unlink(missing_ok=True)
    rows = []
    # tqdm bar, or [progress] lines under make
    for spec in track(specs, "curating backgrounds", unit="bg"):
        out = ws.bg / f"{spec['bg_id']}.wav"
        spec = dict(spec, sources=_resolve(ws, spec["sources"]))
        y, info = curate_background(
            spec,
            duration_s=duration_s,
            target_lufs=target_lufs,
            seed=spec_seed(seed, spec["bg_id"]),
        )
        _write_if_changed(out, y)
        rows.append(_row(ws, spec, _as_stored(out, y, info, SR), out))
    df = pd.DataFrame(rows, columns=BATTERY_COLUMNS)
    write_battery_csv(df, ws.battery_csv)
    return df
