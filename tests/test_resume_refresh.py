"""Stage 7 resume: kept rows carry the current manifest's fields (new-user trial, defect 1).

The resume key covers what the model heard, not the reference text: after a transcript is
corrected (or a clean row's seed moves) the answer is kept, but its row's copy of the manifest
must be the current one, so scoring the inference folder alone gives the right WER.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from conftest import make_tiny_workspace
from test_stamps import HashRecogniser

import aiplib.inference.models
import aiplib.inference.resume
import aiplib.inference.shards
from aiplib.core.workspace import workspace
from aiplib.inference.models import get_entry
from aiplib.inference.runner import run_inference
from aiplib.io.formats import RUN_FIELDS, read_inference_jsonl, read_manifest
from aiplib.scoring.score import score_inference
from aiplib.stimuli.manifests import build_manifests

ANSWER = "word 0"


class ConstantRecogniser(HashRecogniser):
    """Answers every stimulus with ``ANSWER``, so the WER against each reference is known."""

    def generate(self, audios, prompts):
        self.calls += len(audios)
        return [ANSWER] * len(audios)


@pytest.fixture
def loads(monkeypatch):
    made = []

    def load(entry, **_):
        made.append(ConstantRecogniser(get_entry(entry) if isinstance(entry, str) else entry))
        return made[-1]

    monkeypatch.setattr(aiplib.inference.models, "load_model", load)
    return made


def _rows(path) -> list[dict]:
    return read_inference_jsonl(path)[0]


def _correct_text(ws, item: str, text: str) -> None:
    """The user's correction: the item bank's text of ``item`` (stage 2's output) changes."""
    p = ws.itembanks / "asr.jsonl"
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    for r in rows:
        if r["item_id"] == item:
            r["text"] = text
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_kept_rows_take_the_corrected_transcript_and_score_alone(tmp_path, loads):
    ws = make_tiny_workspace(tmp_path / "a", n_asr=2, n_kws=1, n_bg=2)
    build_manifests(ws, snrs=[10, 0])
    run_inference(ws, tasks="asr,asr_steer_p5", progress=False)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    before = {r["id"]: r for r in _rows(path)}
    assert len(before) == 2 * (1 + 2 * 2) and {r["transcript"] for r in before.values()} == {"word 0", "word 1"}

    _correct_text(ws, "a00", "word 0 again")
    man = build_manifests(ws, snrs=[10, 0], seed_start=1)["asr"]  # and every seed moves by one
    assert set(man.loc[man["speech_id"] == "a00", "transcript"]) == {"word 0 again"}
    n_loaded = len(loads)
    s = run_inference(ws, tasks="asr,asr_steer_p5", progress=False).set_index("task")
    # the noisy stimuli moved (other seed, other offset): re-run; the clean ones are kept
    noisy = set(man.loc[man["condition"] == "noisy", "id"])
    assert s.loc["asr", "n_run"] == len(noisy) == 8 and len(loads) == n_loaded + 1
    after = {r["id"]: r for r in _rows(path)}
    mrow = man.set_index("id")
    for cid in ("a00_clean", "a01_clean"):
        old, new = before[cid], after[cid]
        # the answer and how it was made: untouched
        assert {k: new.get(k) for k in RUN_FIELDS} == {k: old.get(k) for k in RUN_FIELDS}
        assert new["raw"] == ANSWER and new["stim_key"] == old["stim_key"]
        # the manifest's copy: current (seed of a clean row: 0 → 1 and 4 → 5)
        assert new["seed"] == int(mrow.loc[cid, "seed"]) == old["seed"] + 1
        assert list(new)[: len(man.columns)] == list(man.columns)  # the authors' order kept
    assert after["a00_clean"]["transcript"] == "word 0 again" and after["a01_clean"]["transcript"] == "word 1"
    # one reference per item in the file, in both tasks
    for task in ("asr", "asr_steer_p5"):
        rows = _rows(ws.inference / "whisper_tiny_en" / f"{task}.jsonl")
        assert {r["transcript"] for r in rows if r["speech_id"] == "a00"} == {"word 0 again"}
        assert len(rows) == 10

    # the README's route: score the inference folder alone, in a fresh workspace without manifests
    fresh = workspace("demo", data_root=tmp_path / "fresh")
    sc = score_inference(fresh, inference_dir=ws.inference, tasks=["asr"])["asr"]
    a00 = sc[sc["item_id"] == "a00"]
    assert len(a00) == 5 and set(a00["reference"]) == {"word 0 again"}
    assert np.allclose(a00["wer"], 1 / 3)  # "word 0 again" vs "word 0": one deletion in three words
    assert np.allclose(sc.loc[sc["item_id"] == "a01", "wer"], 0.5)
    # and the same as scoring against the manifest
    own = score_inference(ws, tasks=["asr"])["asr"].set_index("stimulus_id")
    assert np.allclose(own.loc[sc["stimulus_id"], "wer"].to_numpy(), sc["wer"].to_numpy())


def test_up_to_date_rows_are_only_read(tmp_path, loads):
    """Nothing changed: the file is not rewritten (same inode and bytes) and no model loads."""
    ws = make_tiny_workspace(tmp_path, n_asr=2, n_kws=1, n_bg=2)
    build_manifests(ws, snrs=[10])
    run_inference(ws, tasks="asr", progress=False)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    st, data = path.stat(), path.read_bytes()
    n = len(loads)
    s = run_inference(ws, tasks="asr", progress=True)
    assert s.loc[0, "n_run"] == 0 and len(loads) == n
    assert path.stat().st_ino == st.st_ino and path.stat().st_mtime_ns == st.st_mtime_ns
    assert path.read_bytes() == data


def test_console_line_when_nothing_to_decode(tmp_path, loads, monkeypatch, capsys):
    ws = make_tiny_workspace(tmp_path, n_asr=2, n_kws=1, n_bg=2)
    build_manifests(ws, snrs=[10])
    run_inference(ws, tasks="asr", progress=False)
    monkeypatch.setenv("AIP_PLAIN_PROGRESS", "1")  # as under make
    run_inference(ws, tasks="asr", progress=True)
    assert "[progress] stage 7 whisper_tiny_en asr: 0 to decode, 6 up to date" in capsys.readouterr().err
    _correct_text(ws, "a01", "word one")
    build_manifests(ws, snrs=[10])
    run_inference(ws, tasks="asr", progress=True)
    err = capsys.readouterr().err
    assert "stage 7 whisper_tiny_en asr: 0 to decode, 6 up to date, 3 kept row(s) refreshed" in err


def test_interrupted_refresh_loses_nothing(tmp_path, loads, monkeypatch):
    """A kill between writing the new file and renaming it leaves the old file whole."""
    ws = make_tiny_workspace(tmp_path, n_asr=2, n_kws=1, n_bg=2)
    build_manifests(ws, snrs=[10])
    run_inference(ws, tasks="asr", progress=False)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    data = path.read_bytes()
    _correct_text(ws, "a00", "word zero")
    build_manifests(ws, snrs=[10])

    class Killed(BaseException):
        """Stands in for SIGKILL (not an Exception: nothing catches it)."""

    def killed(*_a, **_k):
        raise Killed

    real_replace = os.replace
    monkeypatch.setattr(aiplib.inference.shards.os, "replace", killed)
    with pytest.raises(Killed):
        run_inference(ws, tasks="asr", progress=False)
    assert path.read_bytes() == data  # every finished row is still there
    monkeypatch.setattr(aiplib.inference.shards.os, "replace", real_replace)
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_run"] == 0
    rows = _rows(path)
    assert len(rows) == 6 and {r["transcript"] for r in rows if r["speech_id"] == "a00"} == {"word zero"}


def test_rows_without_key_are_not_rewritten(tmp_path, loads):
    """The authors' rows (no stim_key) are read as they are: never refreshed."""
    ws = make_tiny_workspace(tmp_path, n_asr=1, n_kws=1, n_bg=2)
    man = build_manifests(ws, snrs=[10])["asr"]
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    path.parent.mkdir(parents=True)
    rows = [dict({k: r[k] for k in ["id", "speech_id", "background_id", "snr_db", "condition", "seed"]},
                 transcript="their text", raw="authors", model="whisper_tiny_en", task="asr")
            for r in man.to_dict("records")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = path.read_bytes()
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_run"] == 0 and path.read_bytes() == data


def test_shard_file_rows_refreshed_and_merge_agrees(tmp_path, loads):
    """A shard refreshes the rows of its own file; rows of <task>.jsonl (which it never rewrites)
    get refreshed copies in its file, which the merge puts in their place; nothing is decoded."""
    from aiplib.inference.shards import merge_model

    ws = make_tiny_workspace(tmp_path, n_asr=2, n_kws=1, n_bg=2)
    build_manifests(ws, snrs=[10])
    mdir = ws.inference / "whisper_tiny_en"
    run_inference(ws, tasks="asr", progress=False, shard=(0, 2))  # shard 0 stays in its file
    run_inference(ws, tasks="asr", progress=False, shard=False)  # merges it, decodes the rest
    run_inference(ws, tasks="asr", progress=False, shard=(1, 2))  # nothing left
    main_before = _rows(mdir / "asr.jsonl")
    assert len(main_before) == 6 and not list(mdir.glob("asr.shard-*.jsonl"))
    _correct_text(ws, "a00", "word zero")
    build_manifests(ws, snrs=[10])
    n_loaded = len(loads)
    for i in range(2):
        for _ in range(2):  # a shard run again adds nothing more
            s = run_inference(ws, tasks="asr", progress=False, shard=(i, 2))
            assert s.loc[0, "n_run"] == 0
    assert len(loads) == n_loaded
    assert (mdir / "asr.jsonl").read_bytes() == b"".join(
        (json.dumps(r, ensure_ascii=False) + "\n").encode() for r in main_before)  # never rewritten by a shard
    copies = [r for i in range(2) for r in _rows(mdir / f"asr.shard-{i}-of-2.jsonl")]
    assert sorted(r["id"] for r in copies) == ["a00_bg00_snr10", "a00_bg01_snr10", "a00_clean"]
    res = merge_model(mdir)
    assert sum(r["rows_refreshed"] for r in res) == 3 and sum(r["rows_added"] for r in res) == 0
    rows = _rows(mdir / "asr.jsonl")
    man = read_manifest(ws, "asr").set_index("id")
    assert [r["id"] for r in rows] == [r["id"] for r in main_before]
    assert all(r["transcript"] == man.loc[r["id"], "transcript"] for r in rows)
    assert [r["raw"] for r in rows] == [r["raw"] for r in main_before]
    assert {r["transcript"] for r in rows if r["speech_id"] == "a00"} == {"word zero"}
