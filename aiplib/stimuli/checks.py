"""Stage 6: manipulation checks — does the mixing do what the manifest says? Achieved SNR and
background presence, determinism of seeds, offsets and bytes, digitally silent and subaudible
backgrounds, and a seeded set of inspection clips.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd

from aiplib.core.errors import AudioFileError
from aiplib.core.progress import track
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.io.audio import load_audio, write_wav
from aiplib.io.formats import (
    parse_bool,
    read_battery_csv,
    read_manifest,
    read_manifest_meta,
    write_json_atomic,
)
from aiplib.io.subaudible import subaudible_power
from aiplib.stimuli.families import materialize
from aiplib.stimuli.manifests import SEED_START
from aiplib.stimuli.mixing import BG_SILENCE_POWER, achieved_snr_db, bg_offset, row_snr_span

#: Audible-minus-nominal SNR (dB) from which stage 6 warns about a background (notebook 06's
#: threshold; a DC + sub-20 Hz share of 2.3 % of the power).
AUDIBLE_EXCESS_WARN_DB = 0.1


def active_fraction(y, *, frame: int = 512, floor_db: float = -30.0) -> float:
    """Share of 32 ms frames whose RMS is within ``floor_db`` dB of the loudest frame.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)]
    frame : int, samples (512 = 32 ms at 16 kHz)
    floor_db : float, dB below the loudest frame

    Returns
    -------
    float in [0, 1] (0 for an all-zero signal)
    """
    y = np.asarray(y, dtype=np.float64)
    n = y.size // frame
    if n == 0:
        return float(np.any(y != 0))
    rms = np.sqrt(np.mean(y[: n * frame].reshape(n, frame) ** 2, axis=1))
    if rms.max() == 0:
        return 0.0
    return float(np.mean(20 * np.log10(np.maximum(rms, 1e-12) / rms.max()) > floor_db))


def materialize_named(row, ws):
    """:func:`aiplib.stimuli.families.materialize`, its :class:`AudioFileError` naming the stimulus
    (and the row's files when the message names neither).
    """
    try:
        return materialize(row, ws)
    except AudioFileError as exc:
        msg = str(exc)
        speech = str(ws.path(str(row.get("speech_path", "")))) if row.get("speech_path") else ""
        bg = row.get("bg_path")
        bg = str(ws.path(str(bg))) if isinstance(bg, str) and bg and bg != "nan" else ""
        if (speech and speech in msg) or (bg and bg in msg):
            raise AudioFileError(f"{msg} (stimulus {row.get('id')!r})") from None
        files = ", ".join(f for f in (speech, bg) if f) or "no file named in the row"
        raise AudioFileError(f"stimulus {row.get('id')!r} ({files}): {msg}") from None


def _manifests(ws, families=tuple(TASK_FAMILIES)):
    return {f: read_manifest(ws, f) for f in families if ws.manifest_csv(f).is_file()}


def background_presence(ws, *, max_items: int = 3) -> pd.DataFrame:
    """Measure achieved SNR and background activity for every (background, SNR).

    Uses the first ``max_items`` items of each manifest. The background part of a stimulus is the
    mixture minus the (clip-scaled) clean speech, so the check measures what the model hears; the
    SNR is measured over the samples the mixer set it over
    (:func:`aiplib.stimuli.mixing.row_snr_span`: the whole clip, or its active part).

    Returns
    -------
    DataFrame, one row per (family, bg_id, snr_db): ``target_snr_db``, ``achieved_snr_db``
    (mean), ``max_abs_error_db``, ``bg_active_fraction`` (mean), ``clipped_share``, ``present``
    (background energy found in every stimulus). Also written to ``checks/bg_presence.csv``.
    """
    rows = []
    for fam, man in _manifests(ws).items():
        items = man["speech_id"].drop_duplicates().head(max_items)
        sub = man[man["speech_id"].isin(items)]
        clean = {
            r["speech_id"]: materialize_named(r, ws)[0]
            for r in sub[sub["condition"] == "clean"].to_dict("records")
        }
        noisy = sub[sub["condition"] != "clean"].to_dict("records")
        for r in track(noisy, f"background presence · {fam}", unit="stim"):
            y, info = materialize_named(r, ws)
            speech = clean[r["speech_id"]].astype(np.float64) * info.clip_scale
            resid = y.astype(np.float64) - speech
            a, b = row_snr_span(r, ws) or (0, len(speech))
            rows.append(
                dict(
                    family=fam,
                    bg_id=r["background_id"],
                    snr_db=r["snr_db"],
                    stimulus_id=r["id"],
                    measured_snr_db=achieved_snr_db(speech[a:b], resid[a:b]),
                    bg_active_fraction=active_fraction(resid),
                    clipped=info.clip_scale < 1.0,
                    bg_energy=float(np.dot(resid, resid)),
                )
            )
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    # a digitally silent segment (bg_active False) has no finite SNR: left out of the means and
    # errors
    df["measured_snr_db"] = df["measured_snr_db"].where(np.isfinite(df["measured_snr_db"]))
    df["err"] = (df["measured_snr_db"] - df["snr_db"]).abs()
    out = (
        df.groupby(["family", "bg_id", "snr_db"])
        .agg(
            n=("stimulus_id", "size"),
            achieved_snr_db=("measured_snr_db", "mean"),
            bg_active_fraction=("bg_active_fraction", "mean"),
            clipped_share=("clipped", "mean"),
            present=("bg_energy", lambda e: bool((e > 0).all())),
            max_abs_error_db=("err", "max"),
        )
        .reset_index()
    )
    out.insert(3, "target_snr_db", out["snr_db"])
    out.to_csv(ws.checks / "bg_presence.csv", index=False)
    return out


def determinism(ws, *, n_rows: int = 20, seed: int = 0) -> dict:
    """Materialise ``n_rows`` seeded rows per manifest twice and compare bytes; re-derive seeds
    (the row counter from :data:`aiplib.stimuli.manifests.SEED_START`) and offsets.

    Returns
    -------
    dict with ``n_rows``, ``identical_bytes`` (bool), ``seeds_match`` (bool), ``offsets_match``
    (bool) and the sha256 of each checked stimulus; written to ``checks/determinism.json``.
    """
    import soundfile as sf

    meta_seed = {}
    result = dict(n_rows=0, identical_bytes=True, seeds_match=True, offsets_match=True, stimuli={})
    for fam, man in _manifests(ws).items():
        start = meta_seed[fam] = read_manifest_meta(ws, fam).get("seed_start", SEED_START[fam])
        result["seeds_match"] &= man["seed"].tolist() == list(range(start, start + len(man)))
        for r in man.sample(n=min(n_rows, len(man)), random_state=seed).to_dict("records"):
            h1, h2 = (
                hashlib.sha256(materialize_named(r, ws)[0].tobytes()).hexdigest() for _ in range(2)
            )
            result["identical_bytes"] &= h1 == h2
            result["stimuli"][f"{fam}/{r['id']}"] = h1
            if r["condition"] != "clean" and "bg_offset" in r:
                n_bg = sf.info(str(ws.path(r["bg_path"]))).frames
                result["offsets_match"] &= bg_offset(
                    int(r["seed"]), n_bg, int(r["n_samples"])
                ) == int(r["bg_offset"])
            result["n_rows"] += 1
    result["seed_starts"] = meta_seed
    write_json_atomic(result, ws.checks / "determinism.json")
    return {k: v for k, v in result.items() if k != "stimuli"}


def inactive_backgrounds(ws) -> pd.DataFrame:
    """Share of noisy stimuli per background whose segment is digital silence (``bg_active`` False,
    measured at stage 5: mean power below :data:`aiplib.stimuli.mixing.BG_SILENCE_POWER`). Such
    stimuli are kept, as the authors' mixer makes them; the report offers the analysis without them.

    Returns
    -------
    DataFrame, one row per (family, bg_id): ``n_rows, n_inactive, inactive_share``; written to
    ``checks/bg_inactive.csv``.
    """
    frames = []
    for fam, man in _manifests(ws).items():
        noisy = man[man["condition"] != "clean"]
        if "bg_active" not in noisy.columns:
            continue
        inactive = ~noisy["bg_active"].fillna(True).astype(bool)
        g = inactive.groupby(noisy["background_id"].rename("bg_id"), sort=False)
        frames.append(g.agg(n_rows="size", n_inactive="sum").reset_index().assign(family=fam))
    cols = ["family", "bg_id", "n_rows", "n_inactive", "inactive_share"]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols[:-1])
    out["inactive_share"] = (out["n_inactive"] / out["n_rows"]).astype(float) if len(out) else []
    out = out[cols]
    out.attrs["bg_silence_power"] = BG_SILENCE_POWER
    out.to_csv(ws.checks / "bg_inactive.csv", index=False)
    return out


def write_inspection_clips(ws, *, n: int = 60, seed: int = 0) -> list:
    """Write ``n`` seeded stimuli (every background and SNR when ``n`` allows) as 16-bit WAVs under
    ``checks/inspection/`` with an ``index.csv``; clips of an earlier run not picked now are
    removed.

    Returns
    -------
    list of Path
    """
    out = ws.checks / "inspection"
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    for fam, man in _manifests(ws).items():
        noisy = man[man["condition"] != "clean"]
        frames.append(
            noisy.groupby(["background_id", "snr_db"])
            .sample(n=1, random_state=seed)
            .assign(family=fam)
        )
        frames.append(man[man["condition"] == "clean"].head(2).assign(family=fam))
    pool = pd.concat(frames, ignore_index=True)
    pick = pool.sample(n=min(n, len(pool)), random_state=seed).sort_values(["family", "id"])
    pick["reference"] = [_reference(r) for r in pick.to_dict("records")]
    written = [
        write_wav(
            out / f"{r['family']}_{r['id']}.wav", materialize_named(r, ws)[0], subtype="PCM_16"
        )
        for r in pick.to_dict("records")
    ]
    for old in set(out.glob("*.wav")) - set(written):
        old.unlink()
    pick[["family", "id", "speech_id", "background_id", "snr_db", "reference"]].to_csv(
        out / "index.csv", index=False
    )
    return written


def _reference(row: dict):
    """A manifest row's reference: its task family's reference column
    (:attr:`aiplib.core.tasks.TaskFamily.reference`), ``""`` when the column is absent."""
    return row.get(TASK_FAMILIES[row["family"]].reference, "")


def subaudible_backgrounds(ws) -> pd.DataFrame:
    """Per curated background, the share of its power a listener cannot hear (DC, below 20 Hz).

    When a share ``s`` of the power is inaudible, the audible SNR is the nominal one plus
    ``-10·log10(1 - s)`` dB.

    Returns
    -------
    DataFrame with ``bg_id, dc_db, subaudible_db`` (dB re the background's power),
    ``audible_share``, ``audible_snr_excess_db`` (dB), ``removed_at_curation`` (bool); written to
    ``checks/subaudible.csv`` (Table 3 of the report shows the excess beside each background).

    Warns
    -----
    UserWarning
        Naming each background whose excess is at least :data:`AUDIBLE_EXCESS_WARN_DB` (printed
        under ``make``).

    Raises
    ------
    AudioFileError
        If ``battery.csv`` is missing.
    """
    battery = read_battery_csv(ws.battery_csv)
    if battery is None:
        raise AudioFileError(f"{ws.battery_csv} is missing: run stage 3 first")
    rows = []
    for r in battery.to_dict("records"):
        y = load_audio(ws.path(r["path"]))
        p = subaudible_power(y, sr=16000)
        a = max(p["audible_share"], 1e-15)
        rows.append(
            dict(
                bg_id=r["bg_id"],
                dc_db=round(p["dc_db"], 2),
                subaudible_db=round(p["subaudible_db"], 2),
                audible_share=round(a, 6),
                audible_snr_excess_db=round(-10 * np.log10(a), 3),
                removed_at_curation=parse_bool(r.get("subaudible_removed")) is True,
            )
        )
    df = pd.DataFrame(rows)
    df.to_csv(ws.checks / "subaudible.csv", index=False)
    _warn_audible_excess(df)
    return df


def _warn_audible_excess(df: pd.DataFrame) -> None:
    """One UserWarning naming each background of ``df`` (:func:`subaudible_backgrounds`) whose
    audible SNR lies :data:`AUDIBLE_EXCESS_WARN_DB` dB or more above the nominal one."""
    if df.empty:
        return
    off = df[df["audible_snr_excess_db"] >= AUDIBLE_EXCESS_WARN_DB]
    if off.empty:
        return
    named = ", ".join(
        f"{r.bg_id} +{r.audible_snr_excess_db:.2f} dB ({r.subaudible_db:.1f} dB of its power "
        "below 20 Hz)"
        for r in off.itertuples()
    )
    warnings.warn(
        f"{len(off)} of {len(df)} backgrounds are heard at a higher SNR than their label, by the "
        f"inaudible DC / sub-20 Hz share of their power: {named} (checks/subaudible.csv; the "
        "audible_snr_excess_db column of Table 3)",
        UserWarning,
        stacklevel=2,
    )
