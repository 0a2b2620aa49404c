"""Stages 1–3 entry points dispatching on the profile (``demo``, ``paper``, ``custom``), and the
listing of the stamps inside stages 1, 2, 4 and 5 (:func:`main`; ``make stamps`` lists the stage
records instead, :mod:`aiplib.core.stage_records`)."""

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
    # the authors' --smoke-test: 5 per bank
    "paper_smoke": dict(n_librispeech=5, n_common_voice=5, n_kws=5),
    "custom": dict(),
    "custom_smoke": dict(max_items=3),
}


#: Default of every profile parameter of the dispatchers below: "not given", so the profile's own
#: default applies and the stamps record only what the caller passed.
NOT_GIVEN = object()


def _given(params: dict) -> dict:
    """The entries of ``params`` the caller gave (not :data:`NOT_GIVEN`), in order."""
    return {k: v for k, v in params.items() if v is not NOT_GIVEN}


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
    found.update(_inventory_files(ws.raw / "inventory.csv"))
    return sorted(found)


def _is_file_column(name: str) -> bool:
    """True for the ``file`` column (the only one read of ``raw/inventory.csv``)."""
    return name == "file"


def _inventory_files(inv: Path) -> list[Path]:
    """Absolute paths of the files ``raw/inventory.csv`` lists (none when it is missing)."""
    if not inv.is_file():
        return []
    files = pd.read_csv(inv, dtype=str, keep_default_na=False, usecols=_is_file_column)
    return [absolute_path(f) for f in files.get("file", []) if f]


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


def gather_raw(
    ws,
    *,
    install=NOT_GIVEN,
    corpora=NOT_GIVEN,
    base_urls=NOT_GIVEN,
    force_download=NOT_GIVEN,
    registry=NOT_GIVEN,
    retries=NOT_GIVEN,
    progress=NOT_GIVEN,
    speech_dir=NOT_GIVEN,
    texts=NOT_GIVEN,
    kws_dir=NOT_GIVEN,
    kws_labels=NOT_GIVEN,
    backgrounds_dir=NOT_GIVEN,
    keywords=NOT_GIVEN,
):
    """Stage 1: get the raw inputs of ``ws.profile`` into ``ws.raw`` (install, download or
    validate).

    Only the parameters given are passed on, each to the profile that takes it: ``demo``
    (``install``, :func:`aiplib.sources.corpora.demo.gather_raw`), ``paper`` (``corpora``,
    ``base_urls``, ``force_download``, ``registry``, ``retries``, ``progress``,
    :func:`aiplib.sources.corpora.paper.gather_raw`), ``custom`` (``speech_dir``, ``texts``,
    ``kws_dir``, ``kws_labels``, ``backgrounds_dir``, ``keywords``,
    :func:`aiplib.sources.corpora.custom.gather_raw`); a parameter the profile does not take
    raises TypeError.

    Always runs (so a file added to a custom folder is seen), then writes ``raw/raw.stamp.json``
    (:func:`raw_stamp`, with ``raw/inventory.csv`` as output) for ``make stamps``.
    """
    params = _given(
        dict(
            install=install,
            corpora=corpora,
            base_urls=base_urls,
            force_download=force_download,
            registry=registry,
            retries=retries,
            progress=progress,
            speech_dir=speech_dir,
            texts=texts,
            kws_dir=kws_dir,
            kws_labels=kws_labels,
            backgrounds_dir=backgrounds_dir,
            keywords=keywords,
        )
    )
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


def build_item_banks(
    ws,
    *,
    overwrite: bool = False,
    seed=NOT_GIVEN,
    n_asr_real=NOT_GIVEN,
    n_asr_synth=NOT_GIVEN,
    n_kws_target=NOT_GIVEN,
    n_kws_nontarget=NOT_GIVEN,
    n_librispeech=NOT_GIVEN,
    n_common_voice=NOT_GIVEN,
    n_kws=NOT_GIVEN,
    cv_dataset=NOT_GIVEN,
    registry=NOT_GIVEN,
    max_items=NOT_GIVEN,
):
    """Stage 2: write ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl`` for ``ws.profile``.

    Stamped (``itembanks/itembanks.stamp.json``: parameters and ``raw/inventory.csv``), as ``paper``
    streams Common Voice: the banks are read back unless the stamp differs or ``overwrite``; a
    warning names what changed. The other parameters are the profile's, passed on only when given:
    ``seed``; ``demo``: ``n_asr_real``, ``n_asr_synth``, ``n_kws_target``, ``n_kws_nontarget``;
    ``paper``: ``n_librispeech``, ``n_common_voice``, ``n_kws``, ``cv_dataset``, ``registry``;
    ``custom``: ``max_items`` (see each profile's ``build_item_banks``; one it does not take raises
    TypeError). Returns ``{"asr": …, "kws": …}``.
    """
    params = _given(
        dict(
            seed=seed,
            n_asr_real=n_asr_real,
            n_asr_synth=n_asr_synth,
            n_kws_target=n_kws_target,
            n_kws_nontarget=n_kws_nontarget,
            n_librispeech=n_librispeech,
            n_common_voice=n_common_voice,
            n_kws=n_kws,
            cv_dataset=cv_dataset,
            registry=registry,
            max_items=max_items,
        )
    )
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
        changed = stamps.differences(stamps.read_stamp(stamp_file), stamp, ws=ws)
        if changed:
            log.warning("item banks are rebuilt: %s", "; ".join(changed[:5]))
            overwrite = True
    out = mod.build_item_banks(ws, overwrite=overwrite, **params)
    stamps.write_stamp(stamp_file, stamp, outputs=[p for p in banks if p.is_file()], ws=ws)
    return out


def battery_specs(ws, *, seed=NOT_GIVEN, registry=NOT_GIVEN):
    """Stage 3 input: the background specs of ``ws.profile`` (list of dict, see
    :func:`aiplib.battery.backgrounds.curate_battery`); ``seed`` and ``registry`` (``paper``) are
    passed on only when given."""
    params = _given(dict(seed=seed, registry=registry))
    return get_profile(ws.profile).battery_specs(ws, **params)


# ------------------------------------------------------------------------------- inner stamps
#: What :func:`main` says of the stages without a stamp.
REBUILT = (
    "03 curation and 05 background manifests are rebuilt on every run; 04 recomputes only "
    "backgrounds whose WAV changed; 07 decodes only stimuli whose content key changed"
)


def _now_differences(ws, old: dict) -> list[str]:
    """Changes of one recorded stamp: stage 1's against the files it would read now, others' inputs
    re-hashed."""
    if old.get("stage") == "01_download_data":
        return raw_changes(ws, old)
    inputs = {}
    for k in old.get("inputs", {}):
        if ws.path(k).is_file():
            inputs[k] = stamps.file_sha256(ws.path(k))
        else:
            inputs[k] = "missing"
    now = dict(old, inputs=inputs)
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
    found = []
    if ws.root.is_dir():
        found = sorted(ws.root.rglob(f"*{stamps.STAMP_SUFFIX}"))
    # executed/NN_*.stamp.json are the stage records (aiplib.core.stage_records), not stamps
    found = [p for p in found if p.parent != ws.root / "executed"]
    recs = [_stamp_record(ws, p) for p in found]
    recs.sort(key=_pipeline_order)
    _propagate_upstream(recs)
    return [{k: v for k, v in r.items() if k != "stamp"} for r in recs]


def _stamp_record(ws, path: Path) -> dict:
    """One stamp file read and compared with the workspace now (``changes`` None when
    unreadable)."""
    old = stamps.read_stamp(path)
    changes = None
    if old is not None:
        changes = _now_differences(ws, old)
    return {
        "path": ws.rel(path),
        "stage": (old or {}).get("stage", ""),
        "written": (old or {}).get("written"),
        "stamp": old,
        "changes": changes,
        "follows": [],
    }


def _pipeline_order(rec: dict) -> tuple:
    """Sort key of a stamp record: stage, then path."""
    return (rec["stage"], rec["path"])


def _propagate_upstream(recs: list[dict]) -> None:
    """Mark, in pipeline order, each stamp whose input an earlier stale stamp rewrites: under
    ``changes`` when that stamp's own inputs changed, else under ``follows``."""
    # output → (stage rebuilding it, whether its own inputs changed)
    rewritten: dict[str, tuple[str, bool]] = {}
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
            for k in r["stamp"].get("outputs", {}):
                rewritten[k] = (r["stage"], direct)


# ------------------------------------------------------------------------------- command line
def _state(diff: list[str], follows: list[str]) -> str:
    """What ``make stamps`` says of one readable stamp: stale (the first 5 changes), may be
    rebuilt, or up to date."""
    if diff:
        state = "STALE — " + "; ".join(diff[:5])
        if len(diff) > 5:
            state += f" (+{len(diff) - 5} more)"
        return state
    if follows:
        return "may be rebuilt — " + "; ".join(follows)
    return "up to date"


def main(argv=None) -> int:
    """``python -m aiplib.sources.pipeline --profile P [--data-root D]``: say for every stamp
    inside stages 1, 2, 4 and 5 whether the stage, when it next runs, would rebuild that output,
    and why (:func:`stale_stamps`), and what the stages without one redo. Whether a stage runs at
    all is its record's question (``make stamps``, :mod:`aiplib.core.stage_records`). Exit status
    0 (all up to date) or 1."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.sources.pipeline", description=main.__doc__)
    ap.add_argument("--profile", default=os.environ.get("AIP_PROFILE", "demo"))
    ap.add_argument("--data-root", default=None)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ws = workspace(a.profile, data_root=a.data_root, create=False)
    recs = stale_stamps(ws)
    if not recs:
        print(f"{ws.root}: no stamps (nothing built yet)")
        return 0
    stale = 0
    maybe = 0
    for r in recs:
        diff = r["changes"]
        if diff is None:
            print(f"{r['path']}: unreadable")
            stale += 1
            continue
        stale += bool(diff)
        maybe += bool(r["follows"]) and not diff
        print(f"{r['path']} ({r['stage']}, {r['written']}): {_state(diff, r['follows'])}")
    more = ""
    if maybe:
        more = f", {maybe} more may follow"
    print(
        f"{stale} of {len(recs)} stamp(s) stale{more} "
        f"({time.perf_counter() - t0:.2f} s); stages {REBUILT}"
    )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
