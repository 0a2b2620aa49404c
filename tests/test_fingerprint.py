"""The demo fingerprint (aiplib/analysis/fingerprint.py): a small finished workspace is
fingerprinted, then one background file, one transcript and one headline number are altered in
turn, and the check must name each (kind, file / row / table and column); the command line's
exit statuses through a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_tiny_workspace

from aiplib.analysis import fingerprint as fp
from aiplib.inference.fingerprint_slice import SLICE_SIZE
from aiplib.inference.prompts import TASKS
from aiplib.io.formats import DESCRIPTOR_TABLE_COLUMNS, read_manifest
from aiplib.stimuli.manifests import build_manifests

REPO = Path(__file__).resolve().parents[1]
MODEL = "whisper_tiny_en"
WATER = "raw/minetest-data/games/minetest/games/minetest_game/mods/env_sounds/sounds/water.ogg"


def _add_sources(ws) -> None:
    """Stage 1's inventory and a battery whose first background is cut from a Debian package's
    file (the others synthetic), as the demo's."""
    source = ws.path(WATER)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_bytes(b"OggS water")
    inventory = pd.DataFrame([{"file": WATER, "package": "minetest-data", "licence": "CC0 1.0",
                               "attribution": "test", "bytes": 10}])
    inventory.to_csv(ws.raw / "inventory.csv", index=False)
    battery = pd.read_csv(ws.battery_csv)
    battery["source_package"] = "synthetic"
    battery["source_file"] = "synthetic:white"
    battery.loc[0, ["source_package", "source_file"]] = ["minetest-data", WATER]
    battery.to_csv(ws.battery_csv, index=False)


def _add_descriptors(ws) -> None:
    rng = np.random.default_rng(1)
    bg_ids = pd.read_csv(ws.battery_csv)["bg_id"]
    table = pd.DataFrame({"bg_id": bg_ids})
    for column in DESCRIPTOR_TABLE_COLUMNS[1:]:
        table[column] = rng.random(len(table))
    table.to_csv(ws.descriptor_csv, index=False)


def _add_inference(ws) -> None:
    """Stage 7's files: every manifest row under every task of its family, and the run log."""
    folder = ws.inference / MODEL
    folder.mkdir(parents=True, exist_ok=True)
    for task, (family, _variant) in TASKS.items():
        manifest = read_manifest(ws, family)
        with open(ws.inference_jsonl(MODEL, task), "w", encoding="utf-8") as f:
            for n, stimulus in enumerate(manifest["id"]):
                row = {"id": stimulus, "raw": f"answer {n} to {task}", "model": MODEL, "task": task}
                f.write(json.dumps(row) + "\n")
    record = {"event": "run", "model": MODEL, "decoding": "fast", "decoding_key": "full30"}
    ws.run_log(MODEL).write_text(json.dumps(record) + "\n", encoding="utf-8")


def _add_tables(ws) -> None:
    """Stage 8-9 tables: the condition tables of the four tasks and Tables 2-5."""
    ws.tables_dir.mkdir(parents=True, exist_ok=True)
    for k, task in enumerate(TASKS):
        level = "wer_pp" if TASKS[task][0] == "asr" else "acc_pp"
        rows = [
            {"scope": "clean", "model": MODEL, "task": task, "snr_db": "", level: 4.5 + k},
            {"scope": "overall", "model": MODEL, "task": task, "snr_db": "", level: 20.25 + k,
             "delta_pp": 16.428571428571427 + k, "ci_low_pp": 3.9, "ci_high_pp": 27.7,
             "n_items": 3, "p_value": 0.25, "verdict": "worse"},
            {"scope": "snr", "model": MODEL, "task": task, "snr_db": 0.0, level: 30.0,
             "delta_pp": 25.5, "ci_low_pp": 10.0, "ci_high_pp": 40.0, "n_items": 3,
             "p_value": 0.125, "verdict": "worse"},
            {"scope": "condition", "model": MODEL, "task": task, "snr_db": 0.0, level: 31.0},
        ]
        pd.DataFrame(rows).to_csv(ws.tables_dir / f"conditions_{task}.csv", index=False)
    pd.DataFrame([{"task": "asr", "family": "asr", "model": "pooled", "descriptor": "zcr", "n": 3,
                   "r_s": 0.8125, "ci_low": "", "ci_high": "", "p_bh": 0.5}]).to_csv(
        ws.tables_dir / "table2_descriptor_correlations.csv", index=False)
    pd.DataFrame([{"rank": 1, "bg_id": "bg00", "asr_delta_wer_pp": 30.5, "kws_delta_acc_pp": 2.0},
                  {"rank": 2, "bg_id": "bg01", "asr_delta_wer_pp": 10.25, "kws_delta_acc_pp": 0.0}]
                 ).to_csv(ws.tables_dir / "table3_descriptor_values.csv", index=False)


@pytest.fixture
def finished(tmp_path):
    """A finished demo workspace (stages 1-9's files, small) and its fingerprint file."""
    ws = make_tiny_workspace(tmp_path / "data", n_asr=3, n_kws=3, n_bg=3)
    _add_sources(ws)
    build_manifests(ws, snrs=[10, 0])
    _add_descriptors(ws)
    _add_inference(ws)
    _add_tables(ws)
    path = fp.write_fingerprint(fp.compute_fingerprint(ws, MODEL), tmp_path / "fingerprint.json")
    return ws, path


def _verify(ws, path, capsys) -> tuple[int, str]:
    status = fp.main(["verify", "--profile", "demo", "--data-root", str(ws.root.parent),
                      "--fingerprint", str(path)])
    return status, capsys.readouterr().out


def _first(ws, path) -> fp.Divergence:
    expected = json.loads(path.read_text(encoding="utf-8"))
    divergences = fp.compare(expected, fp.compute_fingerprint(ws, MODEL))
    assert divergences, "the altered run should differ"
    return divergences[0]


def test_fingerprint_holds_inputs_slice_and_headline(finished):
    ws, path = finished
    text = path.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text.startswith('{\n  "format": 1,')
    saved = json.loads(text)
    assert list(saved) == sorted(saved)
    inputs = saved["inputs"]
    assert {"itembanks/asr.jsonl", "itembanks/kws.jsonl", "descriptors/acoustic_descriptors.csv",
            "manifests/asr.csv", "manifests/kws.csv", "bg/bg00.wav"} <= set(inputs)
    assert len([f for f in inputs if f.startswith("bg/")]) == 3
    assert len([f for f in inputs if f.startswith("itembanks/audio/")]) == 6
    assert saved["input_packages"] == {"bg/bg00.wav": ["minetest-data"]}
    rule = saved["slice"]["rule"]
    assert (rule["size"], rule["model"], rule["decoding"]) == (SLICE_SIZE, MODEL, "fast")
    n_stimuli = len(read_manifest(ws, "asr")) + len(read_manifest(ws, "kws"))
    assert rule["n_stimuli"] == min(n_stimuli, SLICE_SIZE)
    rows = saved["slice"]["rows"]
    assert len(rows) == 2 * rule["n_stimuli"]                 # baseline and steering prompt
    assert {r["task"] for r in rows} == set(TASKS)
    assert rows == sorted(rows, key=lambda r: (r["task"], r["id"]))
    overall = saved["headline"]["conditions_asr"][f"model={MODEL}, scope=overall"]
    assert overall["delta_pp"] == 16.428571428571427 and overall["n_items"] == 3
    assert f"model={MODEL}, scope=condition, snr_db=0.0" not in saved["headline"]["conditions_asr"]
    assert saved["headline"]["table3_descriptor_values"]["bg_id=bg01"]["asr_delta_wer_pp"] == 10.25
    assert fp.counts(saved)[:2] == (len(inputs), len(rows))


def test_verify_says_the_run_matches(finished, capsys):
    ws, path = finished
    status, out = _verify(ws, path, capsys)
    assert status == fp.EXIT_MATCH, out
    n_inputs, n_rows, n_numbers = fp.counts(json.loads(path.read_text(encoding="utf-8")))
    assert out == (f"fingerprint: the run matches {path} ({n_inputs} inputs, {n_rows} transcripts, "
                   f"{n_numbers} headline numbers)\n")


def test_an_altered_background_names_the_file_and_its_package(finished, capsys):
    ws, path = finished
    wav = ws.bg / "bg00.wav"
    data = bytearray(wav.read_bytes())
    data[-1] ^= 0xFF
    wav.write_bytes(bytes(data))
    first = _first(ws, path)
    assert (first.kind, first.where) == ("inputs", "bg/bg00.wav")
    assert first.package.startswith("minetest-data ")
    status, out = _verify(ws, path, capsys)
    assert status == fp.EXIT_DIVERGES
    lines = out.splitlines()
    assert lines[0].startswith("fingerprint: inputs differ first at bg/bg00.wav "
                               "(from Debian package minetest-data ")
    assert "expected sha256" in lines[0]
    assert lines[1].startswith("fingerprint: 1 difference(s): inputs 1, decoding 0, scoring 0")


def test_an_input_difference_names_both_package_versions_when_they_differ(finished):
    ws, path = finished
    expected = json.loads(path.read_text(encoding="utf-8"))
    actual = json.loads(json.dumps(expected))
    actual["inputs"]["bg/bg00.wav"] = "0" * 64
    expected["package_versions"]["minetest-data"] = "5.6.1+dfsg-1"
    actual["package_versions"]["minetest-data"] = "5.6.1+dfsg-2"
    (first,) = fp.compare(expected, actual)
    assert first.describe() == ("inputs differ first at bg/bg00.wav (from Debian package "
                                "minetest-data 5.6.1+dfsg-2, 5.6.1+dfsg-1 in the fingerprint): "
                                f"sha256 000000000000… expected sha256 "
                                f"{expected['inputs']['bg/bg00.wav'][:12]}…")


def test_an_altered_transcript_names_its_row_and_task(finished, capsys):
    ws, path = finished
    saved = json.loads(path.read_text(encoding="utf-8"))
    target = saved["slice"]["rows"][-1]
    jsonl = ws.inference_jsonl(MODEL, target["task"])
    rows = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["id"] == target["id"]:
            row["raw"] = "something else"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    first = _first(ws, path)
    assert (first.kind, first.where) == ("decoding", f"{target['id']} task {target['task']}")
    assert (first.actual, first.expected) == ("something else", target["response"])
    status, out = _verify(ws, path, capsys)
    assert status == fp.EXIT_DIVERGES
    assert out.splitlines()[0] == (f"fingerprint: decoding differs first at {target['id']} task "
                                   f"{target['task']}: \"something else\" expected "
                                   f"\"{target['response']}\"")


def test_an_altered_headline_number_names_table_and_column(finished, capsys):
    ws, path = finished
    csv = ws.tables_dir / "conditions_kws.csv"
    table = pd.read_csv(csv, dtype=str, keep_default_na=False)
    table.loc[table["scope"] == "overall", "ci_high_pp"] = "27.8"
    table.to_csv(csv, index=False)
    first = _first(ws, path)
    assert first.kind == "scoring"
    assert first.where == f"conditions_kws.csv column ci_high_pp row model={MODEL}, scope=overall"
    assert (first.actual, first.expected) == (27.8, 27.7)
    status, out = _verify(ws, path, capsys)
    assert status == fp.EXIT_DIVERGES
    assert out.splitlines()[0] == ("fingerprint: scoring differs first at conditions_kws.csv "
                                   f"column ci_high_pp row model={MODEL}, scope=overall: "
                                   "27.8 expected 27.7")


def test_inputs_come_first_then_decoding_then_scoring(finished):
    ws, path = finished
    descriptors = pd.read_csv(ws.descriptor_csv)
    number_column = descriptors.select_dtypes("number").columns[0]
    descriptors.loc[0, number_column] = descriptors.loc[0, number_column] + 1.0
    descriptors.to_csv(ws.descriptor_csv, index=False)
    jsonl = ws.inference_jsonl(MODEL, "asr")
    jsonl.write_text(jsonl.read_text(encoding="utf-8").replace("answer 0 ", "answer zero "),
                     encoding="utf-8")
    (ws.tables_dir / "table3_descriptor_values.csv").unlink()
    expected = json.loads(path.read_text(encoding="utf-8"))
    kinds = [d.kind for d in fp.compare(expected, fp.compute_fingerprint(ws, MODEL))]
    assert kinds == sorted(kinds, key=fp.KINDS.index)
    assert set(kinds) == set(fp.KINDS)
    assert kinds.count("scoring") == 6                          # two rows × three cells gone


def _cli(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "aiplib.analysis.fingerprint", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_command_line_exit_statuses(finished):
    """1 on a divergence, 2 when stage 7's files are missing (a subprocess, as make runs it)."""
    ws, path = finished
    common = ["--profile", "demo", "--data-root", str(ws.root.parent), "--fingerprint", str(path)]
    original = (ws.bg / "bg01.wav").read_bytes()
    (ws.bg / "bg01.wav").write_bytes(b"not the same")
    done = _cli("verify", *common)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("fingerprint: inputs differ first at bg/bg01.wav: sha256 ")
    for jsonl in (ws.inference / MODEL).glob("*.jsonl"):
        jsonl.unlink()
    # inputs are compared first: a run through stage 5 with a changed input is still named
    done = _cli("verify", *common)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("fingerprint: inputs differ first at bg/bg01.wav: sha256 ")
    (ws.bg / "bg01.wav").write_bytes(original)
    done = _cli("verify", *common)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("fingerprint: cannot verify the run: ")
    assert "stage 7 has not run whisper_tiny_en" in done.stdout
    assert len(done.stdout.splitlines()) == 1


def test_a_missing_fingerprint_file_is_status_2(finished, tmp_path, capsys):
    ws, _path = finished
    status, out = _verify(ws, tmp_path / "none.json", capsys)
    assert status == fp.EXIT_MISSING and "does not exist (make fingerprint writes it" in out


def test_write_regenerates_the_file_but_the_date(finished, capsys):
    ws, path = finished
    again = path.with_name("again.json")
    status = fp.main(["write", "--profile", "demo", "--data-root", str(ws.root.parent),
                      "--fingerprint", str(again)])
    assert status == 0
    assert capsys.readouterr().out.rstrip().endswith("commit it")
    first = json.loads(path.read_text(encoding="utf-8"))
    second = json.loads(again.read_text(encoding="utf-8"))
    first.pop("made_on")
    second.pop("made_on")
    assert first == second


def test_authors_table4_keeps_a_row_per_accent_label_and_refuses_twins(tmp_path):
    """Table 4 (the authors' flat mean) is named by model and accent label: every label is kept;
    two rows with one name, or a missing key column, are errors rather than one row hiding another."""
    spec = next(t for t in fp.FINDINGS_TABLES if t.name == "table4_accent_dwer")
    path = tmp_path / "table4_accent_dwer.csv"
    pd.DataFrame({"model": [MODEL, MODEL, MODEL, "other"], "accent_label": ["en-us", "en-gb", "flite", "en-us"],
                  "n_items": [10, 10, 10, 4], "mean_delta_wer_pp": [12.5, 20.25, 3.0, 1.0]}).to_csv(path, index=False)
    cells = fp.headline_cells(path, spec, MODEL)
    assert cells == {f"model={MODEL}, accent_label=en-us": {"n_items": 10, "mean_delta_wer_pp": 12.5},
                     f"model={MODEL}, accent_label=en-gb": {"n_items": 10, "mean_delta_wer_pp": 20.25},
                     f"model={MODEL}, accent_label=flite": {"n_items": 10, "mean_delta_wer_pp": 3.0}}
    pd.DataFrame({"model": [MODEL, MODEL], "accent_label": ["en-us", "en-us"], "n_items": [1, 2],
                  "mean_delta_wer_pp": [1.0, 2.0]}).to_csv(path, index=False)
    with pytest.raises(fp.AiplibError, match="two rows are named"):
        fp.headline_cells(path, spec, MODEL)
    pd.DataFrame({"model": [MODEL], "accent_group": ["en-us"]}).to_csv(path, index=False)
    with pytest.raises(fp.AiplibError, match="no column accent_label"):
        fp.headline_cells(path, spec, MODEL)
