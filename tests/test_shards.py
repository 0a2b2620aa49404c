"""Stage 7 shards (aiplib.inference.shards): a stable partition of the stimuli and a merge that refuses
contradictions."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from aiplib.core.errors import AiplibParameterError
from aiplib.inference.shards import (
    ShardConflictError,
    merge_all,
    merge_shards,
    parse_shard,
    select_shard,
    shard_of,
    shard_path,
)


def test_parse_shard_from_spec_and_slurm():
    assert parse_shard("1/4", env={}) == (1, 4)
    assert parse_shard(None, env={}) is None
    assert parse_shard("", env={"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "4"}) == (3, 4)
    # --array=1-4: ids 1…4, min 1 → shards 0…3
    assert parse_shard(None, env={"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4",
                                  "SLURM_ARRAY_TASK_MIN": "1"}) == (3, 4)
    for bad in ("4/4", "1-4", "x/2", "-1/3"):
        with pytest.raises(AiplibParameterError):
            parse_shard(bad, env={})


def test_shard_of_is_sha256_of_the_id():
    # first 8 bytes of sha256(id), big-endian, mod n: fixed values on every machine
    assert [shard_of(s, 4) for s in "abcdef"] == [2, 2, 2, 1, 2, 2]
    assert shard_of("syn-01_clean", 4) == 3


def test_select_shard_partitions_every_row_once():
    m = pd.DataFrame({"id": [f"item{i:03d}_bg{i % 7}_snr{i % 3}" for i in range(300)]})
    parts = [select_shard(m, (i, 3)) for i in range(3)]
    assert sum(len(p) for p in parts) == 300
    assert sorted(pd.concat(parts)["id"]) == sorted(m["id"])
    assert all(60 <= len(p) <= 140 for p in parts)  # roughly balanced
    assert select_shard(m, None) is m


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _row(i, raw, prompt="asr"):
    return {"id": i, "raw": raw, "model": "m", "task": "asr", "prompt_id": prompt}


def test_merge_appends_new_rows_once_and_moves_shards(tmp_path):
    main = tmp_path / "m" / "asr.jsonl"
    _write(main, [_row("a", "hello")])
    s0, s1 = shard_path(main, (0, 2)), shard_path(main, (1, 2))
    assert s0.name == "asr.shard-0-of-2.jsonl"
    _write(s0, [_row("a", "hello"), _row("b", "x")])
    _write(s1, [{"id": "c", "raw": "__ERROR__", "error": "boom", "model": "m", "task": "asr"}, _row("c", "y")])
    res = merge_all(tmp_path)
    assert res[0]["rows_added"] == 3 and res[0]["duplicates_identical"] == 1
    ids = [json.loads(line)["id"] for line in main.read_text().splitlines()]
    assert ids == ["a", "b", "c", "c"]
    assert not s0.exists() and (main.parent / "merged-shards" / s0.name).exists()
    assert merge_all(tmp_path) == []  # nothing left to merge


def test_merge_refuses_different_answers_and_writes_nothing(tmp_path):
    main = tmp_path / "m" / "asr.jsonl"
    _write(main, [_row("a", "hello")])
    _write(shard_path(main, (0, 2)), [_row("a", "hullo")])
    before = main.read_text()
    with pytest.raises(ShardConflictError, match="'a'.*'hello'.*'hullo'"):
        merge_shards(main)
    assert main.read_text() == before and shard_path(main, (0, 2)).exists()
    # another prompt is another answer, not a conflict
    _write(shard_path(main, (0, 2)), [_row("a", "hullo", prompt="asr_steer_p5")])
    assert merge_shards(main)["rows_added"] == 1


def test_merge_sets_aside_main_rows_a_shard_answered_under_another_key(tmp_path):
    main = tmp_path / "m" / "asr.jsonl"
    _write(main, [_row("a", "old") | {"stim_key": "k1"}, _row("b", "kept") | {"stim_key": "kb"},
                  {"id": "a", "raw": "__ERROR__", "error": "boom", "model": "m", "task": "asr"}])
    _write(shard_path(main, (0, 2)), [_row("a", "new") | {"stim_key": "k2"}])
    res = merge_shards(main)
    assert res["rows_added"] == 1 and res["rows_superseded"] == 1
    rows = [json.loads(x) for x in main.read_text().splitlines()]
    assert [(r["id"], r["raw"]) for r in rows] == [("b", "kept"), ("a", "__ERROR__"), ("a", "new")]
    side = [json.loads(x) for x in (main.parent / "superseded" / "asr.jsonl").read_text().splitlines()]
    assert [(r["id"], r["raw"], r["stim_key"]) for r in side] == [("a", "old", "k1")]


def test_merge_refuses_while_a_shard_runs_and_a_shard_runs_once(tmp_path):
    from aiplib.inference.shards import ShardBusyError, busy_shards, shard_lock

    model_dir = tmp_path / "inference" / "m"
    _write(shard_path(model_dir / "asr.jsonl", (1, 2)), [_row("a", "x")])
    with shard_lock(model_dir, (1, 2)):
        assert busy_shards(model_dir) == ["1/2"]
        with pytest.raises(ShardBusyError, match="m 1/2"):
            merge_all(tmp_path / "inference")
        with pytest.raises(ShardBusyError, match="already running"):
            with shard_lock(model_dir, (1, 2)):
                pass
        with shard_lock(model_dir, (0, 2)):  # another shard is another lock
            pass
    assert busy_shards(model_dir) == []  # released (a killed process releases it too)
    assert merge_all(tmp_path / "inference")[0]["rows_added"] == 1


# ------------------------------------------------------------------ two shards as two processes
# A deterministic fake recogniser (its answer is a hash of the audio and the prompt, so two
# processes give the same row for the same stimulus) and an optional SIGKILL after K decodes.
_SHARD_RUN = r"""
import hashlib, os, signal, sys
import numpy as np
import aiplib.inference.models
from aiplib.inference.runner import run_inference
from aiplib.inference.models import Recogniser
from aiplib.core.workspace import workspace

root, shard, kill_after = sys.argv[1], sys.argv[2], int(sys.argv[3])

class Fake(Recogniser):
    def __init__(self, entry, **_):
        self.name, self.entry, self.batch_size, self.n = entry.id, entry, 2, 0
    def info(self):
        return {"path": "fake", "window": None, "weights_path": "none"}
    def generate(self, audios, prompts):
        out = []
        for a, p in zip(audios, prompts):
            if kill_after and self.n >= kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
            self.n += 1
            h = hashlib.sha256(np.asarray(a, np.float32).tobytes() + str(p).encode()).hexdigest()[:12]
            out.append(f"said {h}")
        return out
    def close(self):
        pass

aiplib.inference.models.load_model = lambda entry, **o: Fake(entry)
s = run_inference(workspace("demo", data_root=root), tasks="all", limit=12, progress=False,
                  shard=shard or False)
print("n_run", int(s["n_run"].sum()))
"""


def _shard_cmd(root, shard, kill_after=0) -> dict:
    """``subprocess`` arguments of one stage-7 process (``shard`` "" = unsharded) on ``root``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return {"args": [sys.executable, "-c", _SHARD_RUN, str(root), shard, str(kill_after)], "env": env,
            "stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}


def _run_shard(root, shard, kill_after=0):
    return subprocess.run(**_shard_cmd(root, shard, kill_after), timeout=120, check=False)


def _rows(inference_dir):
    """Every row of every task file: {(model, task): sorted (id, raw, stim_key)}."""
    from aiplib.io.formats import read_inference_jsonl

    out = {}
    for p in sorted(inference_dir.glob("*/*.jsonl")):
        if p.stem != "run_log":
            rows = read_inference_jsonl(p)[0]
            out[(p.parent.name, p.stem)] = sorted((r["id"], r["raw"], r["stim_key"]) for r in rows)
    return out


@pytest.mark.slow
def test_two_shard_processes_merged_equal_an_unsharded_run_and_a_killed_shard_resumes(tmp_path):
    from conftest import make_tiny_workspace

    from aiplib.io.formats import read_inference_jsonl
    from aiplib.stimuli.manifests import build_manifests

    ws = make_tiny_workspace(tmp_path / "data", n_asr=2, n_kws=2, n_bg=2)  # 14 stimuli per family
    build_manifests(ws)
    root = tmp_path / "data"
    model_dir = ws.inference / "whisper_tiny_en"

    # the reference: one unsharded process (12 stimuli × 4 tasks), then put aside
    ref = _run_shard(root, "")
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert "n_run 48" in ref.stdout
    expected = _rows(ws.inference)
    assert sum(len(v) for v in expected.values()) == 48
    shutil.move(ws.inference, tmp_path / "inference-unsharded")
    shutil.move(ws.checks / "mix_diagnostics.csv", tmp_path / "mix_diagnostics-unsharded.csv")

    # shard 1/2 is killed (SIGKILL) after 7 decodes, with a half-written line at the end of its file
    killed = _run_shard(root, "1/2", kill_after=7)
    assert killed.returncode == -9
    s1 = model_dir / "asr.shard-1-of-2.jsonl"
    written = {t: len(read_inference_jsonl(model_dir / f"{t}.shard-1-of-2.jsonl")[0])
               for t in ("asr", "asr_steer_p5", "kws", "kws_steer_p5")
               if (model_dir / f"{t}.shard-1-of-2.jsonl").is_file()}
    assert 0 < sum(written.values()) < 24
    with open(s1, "a") as f:
        f.write('{"id": "a01_bg01_snr0", "raw": "sa')
    assert not (model_dir / "asr.jsonl").exists()  # a shard never writes the main file

    # both shards run at once as two processes; shard 1 resumes alone from its own file
    procs = [subprocess.Popen(**_shard_cmd(root, sh)) for sh in ("0/2", "1/2")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    n0, n1 = (int(o[0].split("n_run")[1]) for o in outs)
    assert n0 + n1 + sum(written.values()) == 48  # nothing decoded twice, nothing left out
    assert all(line.endswith("}") for line in s1.read_text().splitlines())  # the half line was cut
    logs = [json.loads(x) for x in (model_dir / "run_log.shard-1-of-2.jsonl").read_text().splitlines()]
    assert logs[-1]["event"] == "run" and logs[-1]["shard"] == "1/2" and logs[-1]["n_done"] == n1
    assert not (model_dir / "run_log.jsonl").exists()

    # merged: exactly the rows of the unsharded run; shard files, run logs and diagnostics folded in
    res = merge_all(ws.inference)
    assert sorted(r["file"].rsplit("/", 1)[1] for r in res) == ["asr.jsonl", "asr_steer_p5.jsonl", "kws.jsonl",
                                                                 "kws_steer_p5.jsonl"]
    assert sum(r["rows_added"] for r in res) == 48 and sum(r["lines_skipped"] for r in res) == 0
    assert _rows(ws.inference) == expected
    assert not list(model_dir.glob("*.shard-*")) and len(list((model_dir / "merged-shards").iterdir())) == 10
    runs = [json.loads(x) for x in (model_dir / "run_log.jsonl").read_text().splitlines()]
    assert sorted(r["shard"] for r in runs) == ["0/2", "1/2"]
    diag = pd.read_csv(ws.checks / "mix_diagnostics.csv", dtype=str)
    ref_diag = pd.read_csv(tmp_path / "mix_diagnostics-unsharded.csv", dtype=str)
    assert diag["stimulus_id"].is_unique
    assert diag.sort_values("stimulus_id").reset_index(drop=True).equals(
        ref_diag.sort_values("stimulus_id").reset_index(drop=True))

    # after the merge, a shard finds its stimuli done in the main file: the model is not loaded
    again = _run_shard(root, "0/2", kill_after=1)  # a load and a decode would kill it
    assert again.returncode == 0 and "n_run 0" in again.stdout
    up = json.loads((model_dir / "run_log.shard-0-of-2.jsonl").read_text().splitlines()[-1])
    assert up["event"] == "up_to_date" and up["shard"] == "0/2"
