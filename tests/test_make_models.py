"""``make models`` lists what you can run (issue 38, item 2): every registry entry and every entry
of a test models file, each with its backend, what it needs and whether it is ready here; then the
tasks, suites and profiles. Real make, real files, a real (refused) server port and a real program."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.core.workspace import PROFILES
from aiplib.inference.models import load_registry
from aiplib.inference.prompts import TASKS

ROOT = Path(__file__).resolve().parents[1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]          # closed again: nothing answers there


@pytest.mark.slow
def test_make_models_lists_registry_and_models_file_with_readiness(tmp_path):
    audit = tmp_path / "audit"
    (audit / "ckpt").mkdir(parents=True)
    (audit / "bin").mkdir()
    prog = audit / "bin" / "my-asr"
    prog.write_text("#!/bin/sh\necho yes\n")
    prog.chmod(0o755)
    port = _closed_port()
    models = {
        "mine": {"backend": "command", "model_type": "external", "command": "./bin/my-asr {file}",
                 "prompt_style": "none"},
        "gone_prog": {"backend": "command", "model_type": "external",
                      "command": "no-such-asr-program {file}"},
        "tiny_w2v": {"backend": "hf_asr", "model_type": "auto", "weights": "./ckpt"},
        "lost_w2v": {"backend": "hf_asr", "model_type": "auto", "weights": "./lost"},
        "my_api": {"backend": "openai", "model_type": "api", "model": "m",
                   "base_url": f"http://127.0.0.1:{port}/v1"},
    }
    (audit / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k not in ("AIP_MODELS", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "-o", "setup", "models",
         f"MODELS={audit / 'models.yaml'}", f"DATA_ROOT={tmp_path / 'data'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    rows = {ln.split()[0].lstrip("*"): ln for ln in lines if ln.startswith("  ") and "→" in ln}
    registry = [m for m in load_registry(ROOT / "aiplib" / "inference" / "models" / "registry.yaml")]
    assert list(rows) == registry + list(models)            # every model, one line each, in order
    assert f"your models file {audit / 'models.yaml'}" in lines[0]
    assert rows["whisper_tiny_en"].split()[1] == "faster_whisper"
    assert rows["whisper_tiny_en"].endswith("→  ready")      # the embedded model runs everywhere
    assert "CUDA GPU; weights: hub Qwen/Qwen2.5-Omni-3B" in rows["qwen25_omni_3b"]
    assert "server http://localhost:8000/v1" in rows["qwen25_omni_3b_vllm"]
    assert rows["mine"].startswith("  *mine ") and f"program {prog}" in rows["mine"]
    assert rows["mine"].endswith("→  ready")
    assert rows["gone_prog"].endswith(
        "NOT READY: program 'no-such-asr-program' not found on PATH (or not executable)")
    assert f"weights: folder {audit / 'ckpt'}" in rows["tiny_w2v"]
    assert rows["lost_w2v"].endswith(f"{audit / 'lost'} does not exist")
    assert rows["my_api"].endswith(f"NOT READY: no server answers at http://127.0.0.1:{port}/v1")
    text = out.stdout
    assert all(f"  {t} " in text for t in TASKS)
    assert all(f"  {cf} " in text for cf in CONDITION_FAMILIES)
    assert all(f"  {p} " in text for p in PROFILES)


def test_make_models_names_a_bad_models_file_in_one_line(tmp_path, monkeypatch, capsys):
    from aiplib.inference.models.catalog import main

    bad = tmp_path / "m.yaml"
    bad.write_text("mine:\n  backend: comand\n  model_type: external\n")
    monkeypatch.setenv("AIP_MODELS", str(bad))
    assert main([]) == 1
    assert capsys.readouterr().err == (
        f"make models: {bad}: registry entry 'mine': field 'backend': unknown backend 'comand'; "
        "valid backends: faster_whisper, transformers, command, openai, hf_asr\n")
