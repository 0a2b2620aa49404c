"""Stages 1–3 entry points dispatching on the profile (``demo``, ``paper``, ``custom``), and
``make stamps`` (:func:`main`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

import pandas as pd

from aiplib.core import stamps
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.core.workspace import workspace
from aiplib.sources.corpora import get_profile
from aiplib.sources.corpora.custom.files import absolute_path, licence_table, scan_audio_files

log = logging.getLogger(__name__)

#: Default item-bank sizes per profile (``<profile>_smoke`` when ``$AIP_SMOKE=1``).
SIZES = {
    "demo": dict(n_asr_real=12, n_asr_synth=16, n_kws_target=20, n_kws_nontarget=10),
    "demo_smoke": dict(n_asr_real=2, n_asr_synth=2, n_kws_target=2, n_kws_nontarget=1),
    "paper": dict(),
    "paper_smoke": dict(
        n_librispeech=5, n_common_voice=5, n_kws=5
    ),  # the authors' --smoke-test: 5 per bank
    "custom": dict(),
    "custom_smoke": dict(max_items=3),
}


def stage_sizes(profile: str, smoke: bool = False) -> dict:
    """Item-bank size parameters of ``profile`` (small ones when ``smoke``)."""
    key = f"{profile}_smoke" if smoke else profile
    if key not in SIZES:
        raise AiplibParameterError(f"unknown profile {profile!r}")
    return dict(SIZES[key])


def raw_input_files(ws, params: dict) -> list[Path]:
    """Absolute paths (sorted, unique) of the files stage 1 reads for ``ws.profile``, for its stamp.

    ``custom``: the tables (``texts``, ``kws_labels``, the backgrounds' ``licences.csv`` else
    ``licenses.csv``), every audio file the folder scan finds and every file ``raw/inventory.csv``
    lists. Other profiles: none (their stage 1 installs or downloads fixed packages).
    """
    if ws.profile != "custom":
        return []
    found = {absolute_path(params[name]) for name in ("texts", "kws_labels") if params.get(name)}
    for name in ("speech_dir", "kws_dir", "backgrounds_dir"):
        folder = params.get(name)
        if not folder or not Path(folder).is_dir():
            continue
        found.update(scan_audio_files(folder))
        if name == "backgrounds_dir" and licence_table(folder):
            found.add(absolute_path(licence_table(folder)))
    inv = ws.raw / "inventory.csv"
    if inv.is_file():
        files = pd.read_csv(inv, dtype=str, keep_default_na=False, usecols=lambda c: c == "file")
        found.update(absolute_path(f) for f in files.get("file", []) if f)
    return sorted(found)


def raw_stamp(ws, params: dict) -> dict:
    """Stage 1's stamp: ``params`` (``profile`` included) and the SHA-256 of
    :func:`raw_input_files`."""
    return stamps.make_stamp(
        "01_download_data",
        params=params,
        ws=ws,
        inputs=raw_input_files(ws, params),
        module=get_profile(ws.profile).__name__,
    )


def gather_raw(ws, **params):
    """Stage 1: get the raw inputs of ``ws.profile`` into ``ws.raw`` (install, download or
    validate).

    Always runs (so a file added to a custom folder is seen), then writes ``raw/raw.stamp.json``
    (:func:`raw_stamp`, with ``raw/inventory.csv`` as output) for ``make stamps``.
    """
    out = get_profile(ws.profile).gather_raw(ws, **params)
    inv = ws.raw / "inventory.csv"
    stamps.write_stamp(
        stamps.stamp_path(ws.raw, "raw"),
        raw_stamp(ws, dict(profile=ws.profile, **params)),
        outputs=[inv] if inv.is_file() else [],
        ws=ws,
    )
    return out


def raw_changes(ws, recorded: dict) -> list[str]:
    """What the next stage 1 would see changed against ``recorded`` (``raw/raw.stamp.json``), e.g.
    ``["input added: /home/me/speech/c.wav"]``; a stamp without inputs is compared with the files
    and SHA-256 listed in ``raw/inventory.csv``."""
    now = raw_stamp(ws, recorded.get("params", {}))
    old = recorded
    inv = ws.raw / "inventory.csv"
    if not recorded.get("inputs") and now["inputs"] and inv.is_file():
        df = pd.read_csv(inv, dtype=str, keep_default_na=False)
        if {"file", "sha256"} <= set(df.columns):
            old = dict(
                recorded, inputs={ws.rel(f): sha for f, sha in zip(df["file"], df["sha256"]) if f}
            )
    return stamps.differences(old, now, ws=ws)


def build_item_banks(ws, *, overwrite: bool = False, **params):
    """Stage 2: write ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl`` for ``ws.profile``.

    Stamped (``itembanks/itembanks.stamp.json``: parameters and ``raw/inventory.csv``), as ``paper``
    streams Common Voice: the banks are read back unless the stamp differs or ``overwrite``; a
    warning names what changed. ``**params`` are the profile's (``seed``, sizes). Returns ``{"asr":
    …, "kws": …}``.
    """
    mod = get_profile(ws.profile)
    inv = ws.raw / "inventory.csv"
    stamp = stamps.make_stamp(
        "02_build_item_banks",
        params=dict(profile=ws.profile, **params),
        ws=ws,
        inputs=[inv] if inv.is_file() else [],
        module=mod.__name__,
    )
    stamp_file = stamps.stamp_path(ws.itembanks, "itembanks")
    banks = [ws.item_bank(f) for f in TASK_FAMILIES]
    if not overwrite and any(p.is_file() for p in banks):
        if changed := stamps.differences(stamps.read_stamp(stamp_file), stamp, ws=ws):
            log.warning("item banks are rebuilt: %s", "; ".join(changed[:5]))
            overwrite = True
    out = mod.build_item_banks(ws, overwrite=overwrite, **params)
    stamps.write_stamp(stamp_file, stamp, outputs=[p for p in banks if p.is_file()], ws=ws)
    return out


def battery_specs(ws, **params):
    """Stage 3 input: the background specs of ``ws.profile`` (see
    ``aiplib.battery.backgrounds``)."""
    return get_profile(ws.profile).battery_specs(ws, **params)


# ------------------------------------------------------------------------------- make stamps
#: What ``make stamps`` says of the stages without a stamp.
REBUILT = (
    "03 curation and 05 background manifests are rebuilt on every run; 04 recomputes only "
    "backgrounds whose WAV changed; 07 decodes only stimuli whose content key changed"
)


def _now_differences(ws, old: dict) -> list[str]:
    """Changes of one recorded stamp: stage 1's against the files it would read now, others' inputs
    re-hashed."""
    if old.get("stage") == "01_download_data":
        return raw_changes(ws, old)
    now = dict(
        old,
        inputs={
            k: (stamps.file_sha256(ws.path(k)) if ws.path(k).is_file() else "missing")
            for k in old.get("inputs", {})
        },
    )
    return stamps.differences(old, now, ws=ws)


def stale_stamps(ws) -> list[dict]:
    """Every stamp of the workspace and whether the next ``make all`` would rebuild it.

    A stamp is stale when its parameters, inputs or outputs changed, or when an input is an output
    of a stamp stale in that way (``upstream: raw/inventory.csv is rewritten by 01_download_data``);
    an input that is an output of a stamp stale only through its upstream is listed under
    ``follows`` (rebuilt if that file changes).

    Returns a list of dict in pipeline order: ``path`` (relative), ``stage``, ``written``,
    ``changes`` (list of str, empty when up to date; None for an unreadable stamp), ``follows``
    (list of str).
    """
    found = sorted(ws.root.rglob(f"*{stamps.STAMP_SUFFIX}")) if ws.root.is_dir() else []
    recs = [
        {
            "path": ws.rel(p),
            "stage": (old or {}).get("stage", ""),
            "written": (old or {}).get("written"),
            "stamp": old,
            "changes": None if old is None else _now_differences(ws, old),
            "follows": [],
        }
        for p in found
        for old in [stamps.read_stamp(p)]
    ]
    recs.sort(key=lambda r: (r["stage"], r["path"]))
    rewritten: dict[
        str, tuple[str, bool]
    ] = {}  # output → (stage rebuilding it, its own inputs changed)
    for r in recs:
        if r["stamp"] is None:
            continue
        direct = bool(r["changes"])
        for k in sorted(set(r["stamp"].get("inputs", {})) & set(rewritten)):
            stage, sure = rewritten[k]
            if sure:
                r["changes"].append(f"upstream: {k} is rewritten by {stage}")
            else:
                r["follows"].append(f"if {stage} writes another {k}")
        if r["changes"] or r["follows"]:
            rewritten.update({k: (r["stage"], direct) for k in r["stamp"].get("outputs", {})})
    return [{k: v for k, v in r.items() if k != "stamp"} for r in recs]


# ------------------------------------------------------------------------------- command line
def main(argv=None) -> int:
    """``python -m aiplib.sources.pipeline --profile P [--data-root D]`` (``make stamps``): say for
    every stamp whether the next ``make all`` would rebuild it, and why (:func:`stale_stamps`), and
    what the stages without one redo. Exit status 0 (all up to date) or 1."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.sources.pipeline", description=main.__doc__)
    ap.add_argument("--profile", default=os.environ.get("AIP_PROFILE", "demo"))
    ap.add_argument("--data-root", default=None)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ws = workspace(a.profile, data_root=a.data_root, create=False)
    if not (recs := stale_stamps(ws)):
        print(f"{ws.root}: no stamps (nothing built yet)")
        return 0
    stale = maybe = 0
    for r in recs:
        diff = r["changes"]
        if diff is None:
            print(f"{r['path']}: unreadable")
            stale += 1
            continue
        stale += bool(diff)
        maybe += bool(r["follows"]) and not diff
        state = (
            "STALE — "
            + "; ".join(diff[:5])
            + (f" (+{len(diff) - 5} more)" if len(diff) > 5 else "")
            if diff
            else "may be rebuilt — " + "; ".join(r["follows"])
            if r["follows"]
            else "up to date"
        )
        print(f"{r['path']} ({r['stage']}, {r['written']}): {state}")
    print(
        f"{stale} of {len(recs)} stamp(s) stale"
        + (f", {maybe} more may follow" if maybe else "")
        + f" ({time.perf_counter() - t0:.2f} s); stages {REBUILT}"
    )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
