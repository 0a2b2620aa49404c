"""Stimulus manifests: one row per (item, background, SNR), plus the clean version of each item.

Each item gets ``1 + n_backgrounds × n_snrs`` rows (61 for the paper's 20 backgrounds × 3 SNRs).
Every row carries its own mixing seed, derived from the base seed and the stimulus id, so a row
materialises the same samples whatever else is in the manifest:

    seed      = int.from_bytes(sha256(f"{base_seed}:{stimulus_id}")[:4], "big")
    bg_offset = numpy.random.default_rng(seed).integers(0, n_bg - n_speech + 1)
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import AiplibParameterError

__all__ = ["SNRS_DB", "BASE_SEED", "FAMILIES", "MANIFEST_COLUMNS", "stimulus_id", "row_seed", "bg_offset",
           "read_item_bank", "build_manifest", "build_manifests", "read_manifest", "manifest_hash"]

SNRS_DB = (10, 5, 0)
"""The paper's SNRs in dB."""
BASE_SEED = 20240917
"""Default base seed of the manifests."""
FAMILIES = ("asr", "kws")
MANIFEST_COLUMNS = ["stimulus_id", "family", "item_id", "bg_id", "snr_db", "seed", "bg_offset", "speech_path",
                    "bg_path", "reference", "is_target", "accent_group", "duration_s", "n_samples"]


def stimulus_id(family: str, item_id: str, bg_id: str, snr_db) -> str:
    """Deterministic stimulus id, e.g. ``asr__ast_0001__rain__snr+05`` or ``asr__ast_0001__clean__clean``."""
    if bg_id == "clean":
        return f"{family}__{item_id}__clean__clean"
    return f"{family}__{item_id}__{bg_id}__snr{int(round(float(snr_db))):+03d}"


def row_seed(base_seed: int, stim_id: str) -> int:
    """32-bit seed of one stimulus: the first 4 bytes of sha256(f"{base_seed}:{stim_id}"), big-endian."""
    return int.from_bytes(hashlib.sha256(f"{int(base_seed)}:{stim_id}".encode()).digest()[:4], "big")


def bg_offset(seed: int, n_bg: int, n_speech: int) -> int:
    """Seeded start sample of the background segment (0 when the background is not longer)."""
    hi = max(int(n_bg) - int(n_speech), 0)
    return int(np.random.default_rng(int(seed)).integers(0, hi + 1))


def read_item_bank(ws, family: str) -> pd.DataFrame:
    """Read ``itembanks/<family>.jsonl`` as a DataFrame.

    Raises
    ------
    FileNotFoundError
        If the item bank has not been built (run stage 2).
    AiplibParameterError
        If item ids repeat or required fields are missing.
    """
    path = ws.itembanks / f"{family}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: item bank not found; run stage 02_build_item_banks first")
    df = pd.read_json(path, lines=True, dtype={"item_id": str})
    need = {"item_id", "path", "duration_s"} | ({"text"} if family == "asr" else {"label", "is_target"})
    missing = need - set(df.columns)
    if missing:
        raise AiplibParameterError(f"{path}: missing fields {sorted(missing)}")
    dup = df["item_id"][df["item_id"].duplicated()].tolist()
    if dup:
        raise AiplibParameterError(f"{path}: repeated item ids {dup[:5]}")
    return df


def _battery(ws) -> pd.DataFrame:
    path = ws.descriptors / "battery.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: background battery not found; run stage 03_curate_backgrounds first")
    return pd.read_csv(path, dtype={"bg_id": str})


def build_manifest(ws, family: str, *, snrs=SNRS_DB, base_seed: int = BASE_SEED,
                   overwrite: bool = False) -> pd.DataFrame:
    """Build (or read back) ``manifests/<family>.csv``.

    Parameters
    ----------
    ws : Workspace
    family : {"asr", "kws"}
    snrs : sequence of float, dB
    base_seed : int
        Recorded in every row's ``seed`` (through :func:`row_seed`) and in ``<family>.json``.
    overwrite : bool
        Rebuild even if the manifest exists. An existing manifest is otherwise kept as it is.

    Returns
    -------
    pandas.DataFrame with :data:`MANIFEST_COLUMNS`, ``n_items × (1 + n_bg × len(snrs))`` rows.

    Raises
    ------
    FileNotFoundError
        If the item bank or battery is missing.
    """
    import soundfile as sf

    if family not in FAMILIES:
        raise AiplibParameterError(f"unknown family {family!r}; choose one of {FAMILIES}")
    out = ws.manifests / f"{family}.csv"
    if out.is_file() and not overwrite:
        return read_manifest(ws, family)
    items = read_item_bank(ws, family)
    battery = _battery(ws)
    bg_len = {r.bg_id: sf.info(str(ws.path(r.path))).frames for r in battery.itertuples()}
    rows = []
    for it in items.itertuples():
        n = int(sf.info(str(ws.path(it.path))).frames)
        ref = it.text if family == "asr" else it.label
        is_target = bool(getattr(it, "is_target", True)) if family == "kws" else True
        accent = getattr(it, "accent_group", None)
        common = dict(family=family, item_id=it.item_id, speech_path=it.path, reference=ref, is_target=is_target,
                      accent_group=accent, duration_s=round(n / 16000, 4), n_samples=n)
        sid = stimulus_id(family, it.item_id, "clean", None)
        rows.append(dict(stimulus_id=sid, bg_id="clean", snr_db=np.nan, seed=row_seed(base_seed, sid),
                         bg_offset=0, bg_path="", **common))
        for bg in battery.itertuples():
            for snr in snrs:
                sid = stimulus_id(family, it.item_id, bg.bg_id, snr)
                seed = row_seed(base_seed, sid)
                rows.append(dict(stimulus_id=sid, bg_id=bg.bg_id, snr_db=float(snr), seed=seed,
                                 bg_offset=bg_offset(seed, bg_len[bg.bg_id], n), bg_path=bg.path, **common))
    df = pd.DataFrame(rows, columns=MANIFEST_COLUMNS)
    if df["stimulus_id"].duplicated().any():
        raise AiplibParameterError(f"{out}: stimulus ids repeat; check item and background ids")
    tmp = out.with_name(out.name + ".part")
    df.to_csv(tmp, index=False)
    tmp.replace(out)
    meta = dict(family=family, base_seed=int(base_seed), snrs_db=[float(s) for s in snrs], n_items=len(items),
                n_backgrounds=len(battery), rows_per_item=1 + len(battery) * len(snrs), n_rows=len(df),
                manifest_sha256=manifest_hash(ws, family))
    (ws.manifests / f"{family}.json").write_text(json.dumps(meta, indent=2))
    return df


def build_manifests(ws, *, families=FAMILIES, **kwargs) -> dict:
    """:func:`build_manifest` for each family whose item bank exists; returns {family: DataFrame}."""
    out = {}
    for fam in families:
        if not (ws.itembanks / f"{fam}.jsonl").is_file():
            warnings.warn(f"no item bank for {fam!r}; its manifest is skipped")
            continue
        out[fam] = build_manifest(ws, fam, **kwargs)
    return out


def read_manifest(ws, family: str) -> pd.DataFrame:
    """Read ``manifests/<family>.csv``.

    Raises
    ------
    FileNotFoundError
        If it has not been built (run stage 05_build_manifests).
    """
    path = ws.manifests / f"{family}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: manifest not found; run stage 05_build_manifests first")
    df = pd.read_csv(path, dtype={"stimulus_id": str, "item_id": str, "bg_id": str, "bg_path": str,
                                  "reference": str, "accent_group": str}, keep_default_na=False,
                     na_values={"snr_db": [""], "accent_group": [""]})
    df["bg_path"] = df["bg_path"].fillna("")
    return df


def manifest_hash(ws, family: str) -> str:
    """sha256 of ``manifests/<family>.csv`` (hex): identifies the stimuli a run used."""
    return hashlib.sha256(Path(ws.manifests / f"{family}.csv").read_bytes()).hexdigest()
