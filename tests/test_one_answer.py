"""One stimulus, one answer (issue 37): stages 7 and 8 refuse an inference file holding two
different answers for one stimulus (same id, prompt and key) and stage 8 refuses rows of another
model (a ``<task>.jsonl`` linked to another model's file), naming the file and the line; identical
repeated rows are read once. Real files, real stage-7 and stage-8 code (the recogniser is the
constant fake of ``test_resume_refresh``)."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_tiny_workspace
from test_resume_refresh import ANSWER, loads  # noqa: F401 - the fixture

from aiplib.core.errors import AiplibError
from aiplib.inference.runner import run_inference
from aiplib.scoring.score import score_inference
from aiplib.stimuli.manifests import build_manifests

REPO = Path(__file__).resolve().parents[1]
MODEL = "whisper_tiny_en"


def _decoded(tmp_path):
    """A tiny workspace whose stage 7 has run (2 ASR items, 1 background, SNR 10 dB: 4 rows)."""
    ws = make_tiny_workspace(tmp_path / "data", n_asr=2, n_kws=1, n_bg=1)
    build_manifests(ws, snrs=[10])
    run_inference(ws, tasks="asr", progress=False)
    return ws, ws.inference / MODEL / "asr.jsonl"


def _append_copy(path: Path, index: int, **change) -> dict:
    """Append a copy of row ``index`` of ``path`` with ``change``; returns the copy."""
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    row = {**rows[index], **change}
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return row


def test_two_answers_for_one_stimulus_stop_stages_7_and_8(tmp_path, loads):  # noqa: F811
    ws, path = _decoded(tmp_path)
    n_lines = len(path.read_text().splitlines())
    assert n_lines == 4
    row = _append_copy(path, 1, raw="a different answer")
    before = path.read_bytes()
    msg = (rf"stimulus '{row['id']}' \(prompt {row['prompt_id']}\) has two different answers: "
           rf"'{ANSWER}' in {path} line 2 and 'a different answer' in line 5; delete the wrong line")
    with pytest.raises(AiplibError, match=msg):
        score_inference(ws, tasks=["asr"])
    with pytest.raises(AiplibError, match=msg):
        run_inference(ws, tasks="asr", progress=False)
    assert path.read_bytes() == before  # nothing lost or rewritten
    # the CLI of stage 8: exit 1, one line naming file and line
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIP_DATA_ROOT": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-m", "aiplib.scoring.score", "--profile", "demo", "--tasks", "asr"],
                         capture_output=True, text=True, env=env, cwd=REPO, check=False)
    assert out.returncode == 1 and out.stderr.strip().splitlines()[-1].startswith(
        f"scoring: stimulus '{row['id']}' (prompt {row['prompt_id']}) has two different answers")
    assert f"{path} line 2" in out.stderr
    # the user's resolution: the wrong line deleted, stage 8 scores again
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:4]))
    assert len(score_inference(ws, tasks=["asr"])["asr"]) == 4


def test_identical_repeats_are_read_once_with_a_note(tmp_path, loads, caplog):  # noqa: F811
    ws, path = _decoded(tmp_path)
    _append_copy(path, 0)
    _append_copy(path, 2)
    with caplog.at_level(logging.WARNING):
        asr = score_inference(ws, tasks=["asr"])["asr"]
    assert len(asr) == 4 and set(asr["response"]) == {ANSWER}
    assert f"{path}: 2 row(s) repeat another row's stimulus, prompt, key and answer" in caplog.text
    side = json.loads((ws.results / "scores" / "asr.json").read_text())
    assert side["n_duplicates"] == {MODEL: 2}
    s = run_inference(ws, tasks="asr", progress=False)  # stage 7 accepts them too
    assert int(s["n_run"].sum()) == 0


def test_a_folder_linked_to_another_models_file_is_refused(tmp_path, loads):  # noqa: F811
    ws, path = _decoded(tmp_path)
    mine = ws.inference / "mine"
    mine.mkdir()
    (mine / "asr.jsonl").symlink_to(path)
    with pytest.raises(AiplibError) as err:
        score_inference(ws, tasks=["asr"])
    assert type(err.value).__name__ == "WrongModelRowError"
    assert str(err.value).startswith(
        f"{mine / 'asr.jsonl'} (a link to {path}) line 1: the row is an answer of model "
        f"'{MODEL}', not of 'mine' whose folder holds it")
    # without the link the true model scores alone: "word 0" against "word 0" (WER 0) and "word 1" (0.5)
    (mine / "asr.jsonl").unlink()
    mine.rmdir()
    asr = score_inference(ws, tasks=["asr"])["asr"]
    assert set(asr["model"]) == {MODEL} and np.isclose(asr["wer"].mean(), 0.25)
