"""The KWS keyword set has one home and travels with the item bank (issue 12, item 2).

``make all PROFILE=custom KEYWORDS=alpha,beta`` passes the set to stage 1; from there it must reach
the item bank (``itembanks/kws.json``), the KWS prompt text (stage 7) and the scoring (stage 8).
These tests follow that path at the function level.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from test_custom import make_inputs

from aiplib.core import tasks
from aiplib.core.workspace import workspace
from aiplib.inference.prompts import PROMPTS, get_prompt_set
from aiplib.io import formats
from aiplib.scoring.score import score_inference
from aiplib.sources.corpora import custom

REPO = Path(__file__).resolve().parents[1]


def _manifest_rows(bank: pd.DataFrame) -> pd.DataFrame:
    """Clean rows only (enough for the scoring rule), in the authors' manifest schema."""
    return pd.DataFrame([{"id": f"{r.item_id}_clean", "speech_id": r.item_id, "background_id": "clean",
                          "snr_db": 99, "condition": "clean", "seed": 10000 + i, "speech_path": r.path,
                          "bg_path": "", "keyword": r.label, "is_target": r.is_target, "family": "kws"}
                         for i, r in enumerate(bank.itertuples())])


def test_custom_keywords_reach_item_bank_prompt_and_scoring(tmp_path):
    params = make_inputs(tmp_path / "in")
    # relabel the clips: two of the new keywords, a non-keyword, and "yes" (no keyword any more)
    pd.DataFrame({"file": ["yes.wav", "go.wav", "cat.wav", "happy.wav", "seq.wav"],
                  "label": ["Alpha", "beta", "cat", "yes", "alpha beta"]}).to_csv(params["kws_labels"], sep="\t", index=False)
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):  # the set differs from the paper's ten: a validation warning
        custom.gather_raw(ws, **params, keywords="alpha,beta")

    # 1. the item bank: labels normalised, is_target from the new set, the set in the sidecar
    bank = custom.build_item_banks(ws)["kws"].set_index("label", drop=False)  # multi-word clip skipped
    assert dict(zip(bank.label, bank.is_target)) == {"alpha": True, "beta": True, "cat": False, "yes": False}
    assert formats.read_item_bank_keywords(ws) == ("alpha", "beta")

    # 2. the KWS prompt names the set of the item bank (and its id differs from the default's)
    pid, text = get_prompt_set("custom", ws=ws).prompt("kws")
    assert "It is one of: alpha, beta, or another word." in text
    assert not re.search(r"\byes\b", text)
    assert pid != PROMPTS[("kws", "baseline")]["prompt_id"] and pid.startswith("kws_baseline_v1_kw")
    assert get_prompt_set("custom", ws=ws).prompt("asr") == ("asr_baseline_v1", PROMPTS[("asr", "baseline")]["text"])

    # 3. the scoring reads the same set
    formats.write_manifest_csv(_manifest_rows(bank), ws.manifest_csv("kws"))
    ids = {lab: f"{bank.loc[lab, 'item_id']}_clean" for lab in bank.label}
    answers = {"m_good": {"alpha": "Alpha.", "cat": "yes", "beta": "**Beta**", "yes": "no"},
               "m_bad": {"alpha": "yes", "cat": "beta", "beta": "alpha", "yes": "alpha"}}
    for model, ans in answers.items():
        lines = [formats.inference_row_json({"id": ids[lab], "raw": a, "model": model, "task": "kws",
                                             "prompt_id": pid}) for lab, a in ans.items()]
        ws.inference_jsonl(model, "kws").parent.mkdir(parents=True, exist_ok=True)
        formats.append_jsonl_lines(ws.inference_jsonl(model, "kws"), lines)
    df = score_inference(ws, tasks=["kws"])["kws"]
    got = {(r.model, r.label): int(r.correct) for r in df.itertuples()}
    assert got == {("m_good", "alpha"): 1, ("m_good", "cat"): 1, ("m_good", "beta"): 1, ("m_good", "yes"): 1,
                   ("m_bad", "alpha"): 0, ("m_bad", "cat"): 0, ("m_bad", "beta"): 0, ("m_bad", "yes"): 0}
    side = formats.read_scores(ws.scores_csv("kws"))
    assert len(side) == 8
    import json

    assert json.loads(ws.scores_sidecar("kws").read_text())["keywords"] == ["alpha", "beta"]
    # with the default set, "yes" on the non-keyword clip "cat" would have been wrong
    df_default = score_inference(ws, tasks=["kws"], keywords=tasks.KEYWORDS)["kws"]
    assert int(df_default.set_index(["model", "label"]).loc[("m_good", "cat"), "correct"]) == 0


def test_item_bank_without_sidecar_uses_the_task_file_set(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    assert formats.read_item_bank_keywords(ws) == tasks.KEYWORDS
    assert get_prompt_set("demo", ws=ws).prompt("kws") == (PROMPTS[("kws", "baseline")]["prompt_id"],
                                                           PROMPTS[("kws", "baseline")]["text"])
    formats.write_item_bank(ws, "kws", [{"item_id": "a", "path": "x.wav", "duration_s": 1.0, "label": "up",
                                         "is_target": True}])
    assert formats.read_item_bank_keywords(ws) == tasks.KEYWORDS
    assert list(formats.read_item_bank(ws, "kws")["item_id"]) == ["a"]


def test_keyword_set_and_task_facts_have_one_home():
    assert tasks.KEYWORDS == ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
    families = tasks.TASK_FAMILIES
    assert {f: spec.degradation_column for f, spec in families.items()} == {"asr": "delta_wer", "kws": "delta_acc"}
    assert {f: spec.degradation_sign for f, spec in families.items()} == {
        "asr": "noisy_minus_clean", "kws": "clean_minus_noisy"}
    assert families["asr"].degradation(0.2, 0.5) == pytest.approx(0.3)
    assert families["kws"].degradation(0.9, 0.6) == pytest.approx(0.3)
    assert [tasks.task_family(t) for t in ("asr", "kws_steer_p5", "asr_steer_p3")] == ["asr", "kws", "asr"]
    out = subprocess.run(["grep", "-rn", '"yes", "no"', "aiplib"], cwd=REPO, capture_output=True, text=True)
    hits = [ln for ln in out.stdout.splitlines() if "__pycache__" not in ln]
    assert len(hits) == 1 and hits[0].startswith("aiplib/core/tasks.yaml"), hits
    out = subprocess.run(["grep", "-rn", "^def task_family(\\|^DESCRIPTORS = \\|^TASK_FAMILIES", "aiplib",
                          "--include=*.py"], cwd=REPO, capture_output=True, text=True)
    homes = sorted(ln.split(":")[0] for ln in out.stdout.splitlines())
    assert homes.count("aiplib/core/tasks.py") == 2 and homes.count("aiplib/io/formats/tables.py") == 1, homes


def test_ids_named_na_stay_strings(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    m = pd.DataFrame([{"id": "NA_clean", "speech_id": "NA", "background_id": "clean", "snr_db": 99,
                       "condition": "clean", "seed": 0, "speech_path": "a.wav", "bg_path": "", "keyword": "no",
                       "is_target": True},
                      {"id": "x_NA_snr5", "speech_id": "x", "background_id": "NA", "snr_db": 5,
                       "condition": "noisy", "seed": 1, "speech_path": "a.wav", "bg_path": "NA.wav",
                       "keyword": "null", "is_target": False}])
    formats.write_manifest_csv(m, ws.manifest_csv("kws"))
    back = formats.read_manifest(ws, "kws")
    assert list(back["speech_id"]) == ["NA", "x"] and list(back["background_id"]) == ["clean", "NA"]
    assert list(back["keyword"]) == ["no", "null"] and list(back["snr_db"]) == [99, 5]
    pd.DataFrame({"bg_id": ["NA", "rain"], "category": ["music", "NA"], "path": ["bg/NA.wav", "bg/r.wav"]}
                 ).to_csv(ws.battery_csv, index=False)
    assert list(formats.read_battery_csv(ws.battery_csv)["bg_id"]) == ["NA", "rain"]
    t = pd.DataFrame({"bg_id": ["NA"], **{d: [0.5] for d in formats.DESCRIPTORS}, "silent_frame_share": [0.0]})
    formats.write_descriptor_table(t, ws.descriptor_csv)
    assert formats.read_descriptor_table(ws.descriptor_csv, index=True).index.tolist() == ["NA"]


# ------------------------------------------------ keyword labels normalised as answers (issue 37)
def _labelled_up(tmp_path) -> dict:
    """make_inputs whose second clip is labelled ``up``."""
    params = make_inputs(tmp_path / "in")
    pd.DataFrame({"file": ["yes.wav", "go.wav", "cat.wav", "happy.wav", "seq.wav"],
                  "label": ["Yes", "up", "cat", "happy", "yes|no|go"]}).to_csv(params["kws_labels"], sep="\t",
                                                                               index=False)
    return params


@pytest.mark.slow
def test_keywords_are_normalised_like_answers_and_an_empty_entry_is_named(tmp_path):
    from test_custom import cli_args

    from aiplib.sources.corpora.custom.validate import validate_inputs

    params = _labelled_up(tmp_path)
    # "up!" is read as "up", so the "up" clip is a target; "NO" is "no"
    rep = validate_inputs(**params, keywords="Yes,NO,marvin,up!")
    assert rep.ok and rep.params["keywords"] == ["yes", "no", "marvin", "up"]
    assert {r["label"]: r["is_target"] for r in rep.kws if r["used"]} == {
        "yes": True, "up": True, "cat": False, "happy": False}
    notes = [p.message for p in rep.problems if p.kind == "keywords"]
    assert notes[0] == ("keyword 'up!' is read as 'up' (keywords are normalised as KWS answers are: "
                        "lower-case, punctuation stripped at both ends)")
    # the empty entry: stage 1 (a real process, as make runs it) stops with one line naming it
    env = {"PYTHONPATH": str(REPO), "AIP_DATA_ROOT": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cli_args(params) + ["--keywords", "Yes,NO,marvin,,up!"], capture_output=True,
                         text=True, cwd=REPO, env=env, check=False)
    assert out.returncode == 1
    assert ("  FATAL [keywords] keyword entry 4 of 5 in 'Yes,NO,marvin,,up!' is empty after normalisation; "
            "remove the extra comma or the entry") in out.stdout.splitlines()
    # the set's one parser (prompts, scoring) reads it the same way
    assert tasks.normalize_keywords("Yes,NO,marvin,up!") == ("yes", "no", "marvin", "up")
    with pytest.raises(tasks.AiplibParameterError, match=r"'Yes,NO,marvin,,up!' has an empty entry \(4 of 5\)"):
        tasks.normalize_keywords("Yes,NO,marvin,,up!")
