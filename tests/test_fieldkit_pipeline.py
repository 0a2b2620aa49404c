"""The whole pipeline (stages 1–9) on real recordings through the ``custom`` profile.

Inputs are the read-only field kit in ``../shared/fieldkit`` (LibriSpeech and LJSpeech utterances
with transcripts, a 44.1 kHz stereo FLAC, Speech Commands keyword clips, ESC-50 and Speech Commands
background noise; mixed formats, rates and channel counts). Nothing is copied: the test writes the
tables (``texts.csv``, ``kws_labels.csv``, ``licences.csv``) into ``tmp_path`` from the field kit's
``MANIFEST.csv``, and, to keep the run to a few minutes on 2 CPU cores, points the custom profile
at folders of *symlinks* to a subset (7 utterances — 5 LibriSpeech, 1 LJSpeech at 22.05 kHz, the
stereo 44.1 kHz FLAC — 2 keyword clips plus 1 multi-keyword clip that is skipped, and all 9
backgrounds). Every stage is the function its notebook calls (``notebooks/NN_*.py``), with
the embedded recogniser ``whisper_tiny_en`` and all four tasks.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
from notebook_run import run_notebook

from aiplib.core import DEFAULT_SEED
from aiplib.core.workspace import workspace
from aiplib.sources import pipeline
from aiplib.sources.corpora import custom

MODEL = "whisper_tiny_en"
SEED = DEFAULT_SEED  # the notebooks' default
SPEECH = [  # local_file under speech_asr/ (5 LibriSpeech of 2–5 s in FLAC and WAV, LJSpeech, JFK)
    "ls_test-clean_1089-134686-0001.flac", "ls_test-clean_1089-134691-0001.flac",
    "ls_dev-clean_251-137823-0002.wav", "ls_dev-clean_3536-23268-0010.wav",
    "ls_dev-clean_251-118436-0001.wav", "ljspeech_LJ002-0035.wav", "jfk_inaugural_1961.flac",
]
KWS = ["sc2_yes_692a88e6_nohash_2.wav", "sc2_unknown_marvin_0c40e715_nohash_0.wav", "sc2_seq_yes_no_go_stop.wav"]


def _manifest(fieldkit: Path) -> pd.DataFrame:
    m = pd.read_csv(fieldkit / "MANIFEST.csv", dtype=str, keep_default_na=False)
    m["name"] = m["local_file"].map(lambda f: Path(f).name)
    return m


def _corpus(name: str) -> str:
    return "LibriSpeech" if name.startswith("ls_") else "LJSpeech" if name.startswith("ljspeech") else "JFK 1961"


def _speaker(name: str) -> str:
    if name.startswith("ls_"):
        return "librispeech_" + name.split("_")[2].split("-")[0]
    return "ljspeech_LJ" if name.startswith("ljspeech") else "jfk"


def _tables(fieldkit: Path, out: Path, *, speech=None, kws=None, link: bool) -> dict:
    """Write texts.csv / kws_labels.csv / licences.csv into ``out``; returns gather_raw parameters.

    With ``link`` the folders are symlink folders holding only ``speech`` and ``kws`` (and every
    background, since ``licences.csv`` must sit next to them); without it they are the field kit's.
    """
    m = _manifest(fieldkit)
    out.mkdir(parents=True, exist_ok=True)
    sp = m[m.kind == "speech_asr"]
    kw = m[m.kind == "kws"]
    bg = m[m.kind == "background"]
    if speech is not None:
        sp = sp[sp.name.isin(speech)]
    if kws is not None:
        kw = kw[kw.name.isin(kws)]
    dirs = {}
    for role, rows, sub in (("speech", sp, "speech_asr"), ("kws", kw, "kws"), ("bg", bg, "backgrounds")):
        if link or role == "bg":
            d = out / role
            d.mkdir(exist_ok=True)
            for name in rows.name:
                if not (d / name).exists():
                    os.symlink(fieldkit / sub / name, d / name)
            dirs[role] = d
        else:
            dirs[role] = fieldkit / sub
    # accent_group: the corpus stands in for a speaker group (the field kit has no accent labels)
    pd.DataFrame({"file": sp.name, "text": sp.reference_text_or_label,
                  "accent_group": sp.name.map(_corpus), "speaker": sp.name.map(_speaker),
                  "licence": sp.licence, "attribution": sp.source_repo + ":" + sp.source_path}
                 ).to_csv(out / "texts.csv", index=False)
    pd.DataFrame({"file": kw.name, "label": kw.reference_text_or_label, "licence": kw.licence,
                  "attribution": kw.source_repo + ":" + kw.source_path}
                 ).to_csv(out / "kws_labels.tsv", sep="\t", index=False)
    pd.DataFrame({"file": bg.name, "licence": bg.licence, "attribution": bg.source_repo + ":" + bg.source_path,
                  "description": bg.reference_text_or_label}).to_csv(dirs["bg"] / "licences.csv", index=False)
    return dict(speech_dir=str(dirs["speech"]), texts=str(out / "texts.csv"), kws_dir=str(dirs["kws"]),
                kws_labels=str(out / "kws_labels.tsv"), backgrounds_dir=str(dirs["bg"]))


@pytest.mark.slow
def test_fieldkit_folders_validate(fieldkit, tmp_path):
    """All 13 utterances, 38 clips and 9 backgrounds of the field kit pass validation as they are."""
    params = _tables(fieldkit, tmp_path / "in", link=False)
    r = custom.validate_inputs(**params)
    assert r.ok, r.summary()
    assert len(r.speech) == 13 and len(r.backgrounds) == 9
    assert sum(k["used"] for k in r.kws) == 36
    assert sorted(Path(p.file).name for p in r.warnings if p.kind == "multi_keyword") == [
        "sc2_seq_right_left_up.wav", "sc2_seq_yes_no_go_stop.wav"]
    looped = {Path(p.file).name for p in r.warnings if p.kind == "bg_looped"}
    assert looped == {n for n in os.listdir(fieldkit / "backgrounds") if n.startswith("esc50_")}  # 5 s each
    assert not any(p.kind in ("few_backgrounds", "no_licence") for p in r.warnings)  # 9 ≥ 8, licences given
    fmt = {Path(s["file"]).name: (s["sample_rate"], s["channels"]) for s in r.speech}
    assert fmt["jfk_inaugural_1961.flac"] == (44100, 2) and fmt["ljspeech_LJ002-0020.wav"] == (22050, 1)


def _run_notebook_09(ws, tmp_path) -> dict:
    """Execute notebook 09 on ``ws`` with papermill; {file name: path} of the figures and tables."""
    run_notebook("09_make_figures", tmp_path / "09_make_figures.ipynb", parameters={"profile": ws.profile},
                 env={"AIP_DATA_ROOT": str(ws.root.parent)})
    return {p.name: p for d in (ws.figures_dir, ws.tables_dir) for p in d.glob("*") if p.suffix != ".json"}


@pytest.mark.slow
def test_fieldkit_pipeline_end_to_end(fieldkit, tmp_path):
    from aiplib.analysis.paper import FIGURE_NAMES, TABLE_NAMES
    from aiplib.battery.backgrounds import curate_battery
    from aiplib.battery.descriptors import descriptor_table
    from aiplib.inference.runner import run_inference
    from aiplib.scoring.score import score_inference
    from aiplib.scoring.wer_check import wer_constancy
    from aiplib.stimuli.checks import background_presence, determinism, write_inspection_clips
    from aiplib.stimuli.manifests import build_manifests

    t0 = time.perf_counter()
    timings = {}

    def lap(name):
        timings[name] = round(time.perf_counter() - t0 - sum(timings.values()), 1)

    params = _tables(fieldkit, tmp_path / "in", speech=SPEECH, kws=KWS, link=True)
    ws = workspace("custom", data_root=tmp_path / "data", create=False)

    # 1 · raw data (validated; the inventory points at the field kit, nothing is copied)
    with pytest.warns(UserWarning, match="multi_keyword"):
        inv = pipeline.gather_raw(ws, keywords="yes,no,up,down,left,right,on,off,stop,go", **params)
    # the only audio stage 1 writes: the dog-bark clip without its 4.4 s of zero padding
    assert [p.name for p in ws.raw.rglob("*.wav")] == ["esc50_1-100032-A-0.wav"]
    assert not list(ws.raw.rglob("*.flac"))
    assert (inv["package"] == "custom/backgrounds").sum() == 9
    lap("01_raw")
    # 2 · item banks
    banks = pipeline.build_item_banks(ws, seed=SEED, overwrite=False, **pipeline.stage_sizes("custom", False))
    asr, kws = banks["asr"], banks["kws"]
    assert len(asr) == len(SPEECH) and len(kws) == 2
    assert dict(zip(kws["label"], kws["is_target"])) == {"yes": True, "marvin": False}
    for p in list(asr["path"]) + list(kws["path"]):
        info = sf.info(str(ws.path(p)))
        assert (info.samplerate, info.channels) == (16000, 1)
    jfk = asr.set_index("item_id").loc["jfk_inaugural_1961"]
    assert abs(jfk["duration_s"] - 11.0) < 0.01  # 44.1 kHz stereo → 16 kHz mono, length kept
    lap("02_itembanks")
    # 3 · battery
    battery = curate_battery(ws, pipeline.battery_specs(ws), duration_s=30.0, target_lufs=-23.0, seed=SEED)
    assert len(battery) == 9 and set(battery["category"]) <= set(custom.CATEGORIES)
    assert (battery["licence"] != custom.UNKNOWN_LICENCE).all()
    assert np.allclose(battery["lufs_after"].astype(float), -23.0, atol=0.1)
    lap("03_battery")
    # 4 · descriptors
    desc = descriptor_table(ws, vad_threshold=0.5)
    assert len(desc) == 9 and np.isfinite(desc.select_dtypes("number").to_numpy()).all()
    lap("04_descriptors")
    # 5 · manifests: 1 clean + 9 backgrounds × 3 SNRs per item
    manifests = build_manifests(ws, snrs=[10, 5, 0])
    assert set(manifests["asr"].groupby("speech_id").size()) == {28}
    lap("05_manifests")
    # 6 · manipulation checks (smoke sizes, as the notebook under $AIP_SMOKE=1)
    presence = background_presence(ws)
    ach = presence.groupby("snr_db")["achieved_snr_db"].mean()
    assert np.allclose(ach.index.to_numpy(float), ach.to_numpy(float), atol=0.5)
    wer_constancy(ws, model=MODEL, n_items=2, seed=SEED)
    det = determinism(ws, n_rows=20, seed=SEED)
    assert det["identical_bytes"] and det["seeds_match"] and det["offsets_match"], det
    assert len(write_inspection_clips(ws, n=6, seed=SEED)) == 6
    lap("06_checks")
    # 7 · inference: all four tasks, every stimulus
    summary = run_inference(ws, models=MODEL, tasks="all", decoding="fast", progress=False)
    assert set(summary["status"]) == {"done"}, summary
    assert int(summary["n_errors"].fillna(0).sum()) == 0
    lap("07_inference")
    # 8 · scores
    scores = score_inference(ws)
    assert set(scores) == {"asr", "kws", "asr_steer_p5", "kws_steer_p5"}
    lap("08_scores")
    # 9 · figures and tables: notebook 09 draws them
    written = _run_notebook_09(ws, tmp_path)
    lap("09_figures")

    s = scores["asr"]
    clean = s[s["bg_id"] == "clean"]
    ls = clean[clean["item_id"].str.startswith("ls_")]
    ls_wer = ls["errors"].sum() / ls["ref_words"].sum()  # pooled over the 5 utterances
    all_clean_wer = clean["errors"].sum() / clean["ref_words"].sum()
    noisy = s[s["bg_id"] != "clean"]
    d = noisy.groupby("snr_db")["delta_wer"].mean()
    report = dict(librispeech_clean_wer=round(float(ls_wer), 4), all_clean_wer=round(float(all_clean_wer), 4),
                  mean_delta_wer_by_snr={float(k): round(float(v), 4) for k, v in d.items()},
                  kws_clean_acc=float(scores["kws"].query("bg_id == 'clean'")["correct"].mean()),
                  n_stimuli=int(summary["n_stimuli"].sum()), seconds=timings,
                  total_s=round(time.perf_counter() - t0, 1))
    print("\nfieldkit end-to-end:", json.dumps(report, indent=1))
    (ws.results / "fieldkit_e2e.json").write_text(json.dumps(report, indent=1))

    assert ls_wer < 0.2, ls[["item_id", "reference", "response", "wer"]].to_string()
    assert d.loc[0.0] > d.loc[10.0], d
    fig_dir, tab_dir = ws.results / "figures", ws.results / "tables"
    for name in FIGURE_NAMES:
        for ext in ("png", "pdf"):
            f = fig_dir / f"{name}.{ext}"
            assert f.is_file() and f.stat().st_size > 1000, f
            assert f.name in written
    for name in TABLE_NAMES:
        f = tab_dir / f"{name}.csv"
        assert f.is_file() and len(pd.read_csv(f)) > 0, f
    t4 = pd.read_csv(tab_dir / "table4_accent_dwer_item_means.csv")
    assert {"LibriSpeech", "LJSpeech", "JFK 1961"} <= set(t4["accent_group"])
