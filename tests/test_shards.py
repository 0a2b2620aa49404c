"""Stage 7 shards (aiplib.shards): a stable partition of the stimuli and a merge that refuses
contradictions."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from aiplib.errors import AiplibParameterError
from aiplib.shards import (ShardConflictError, merge_all, merge_shards, parse_shard, select_shard, shard_of,
                           shard_path)


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
