"""``make remove-model`` without ``MODELS=`` leaves a consistent report (issue 38, item 4).

A model of the user's models file that takes no prompt (``prompt_style: none``) has no steering rows;
scored without ``MODELS=`` (as ``make remove-model MODEL=other`` re-runs stages 8-9) its registry
entry is unknown. Stage 8's coverage then took the steering tasks as applicable and printed
"tiny × asr_steer_p5 covers 0 of N", while the report's provenance (read from the run log) said
"Not applicable: tiny". Applicability now comes from the inference folder itself: the run log's
``not_applicable`` event, else the rows' ``prompt_id``, and only then the registry.
"""
from __future__ import annotations

import json

import pytest
from test_report import make_run

from aiplib.analysis.provenance import collect_provenance
from aiplib.analysis.report_tables import not_applicable_note
from aiplib.inference import remove
from aiplib.scoring.coverage import coverage_table, partial_lines
from aiplib.scoring.score import score_inference

SMALL = dict(n_asr=4, n_kws=4, n_bg=3, snrs=(10, 0), models=("m_a", "tiny"))


def _no_prompt_model(ws, model="tiny", *, log_event=True):
    """``model``'s rows as stage 7 writes them for prompt_style none: no steering files, prompt_id
    "none", and (``log_event``) the run log's not_applicable event."""
    d = ws.inference / model
    for t in ("asr_steer_p5", "kws_steer_p5"):
        (d / f"{t}.jsonl").unlink()
    for t in ("asr", "kws"):
        rows = [json.loads(x) for x in (d / f"{t}.jsonl").read_text().splitlines()]
        (d / f"{t}.jsonl").write_text("".join(json.dumps({**r, "prompt_id": "none"}) + "\n"
                                              for r in rows))
    if log_event:
        with open(d / "run_log.jsonl", "a") as f:
            f.write(json.dumps({"event": "not_applicable", "model": model, "tasks": {
                "asr_steer_p5": f"{model} takes no task prompt", "kws_steer_p5": "…"}}) + "\n")


@pytest.fixture(autouse=True)
def _no_models_file(monkeypatch):
    monkeypatch.delenv("AIP_MODELS", raising=False)


@pytest.mark.parametrize("log_event", [True, False])
def test_a_no_prompt_model_unknown_to_the_registry_has_no_steering_coverage(tmp_path, log_event):
    ws = make_run(tmp_path, **SMALL)
    _no_prompt_model(ws, log_event=log_event)
    cov = coverage_table(ws, {"background": score_inference(ws)})
    tiny = cov[cov["model"] == "tiny"]
    assert sorted(tiny["task"]) == ["asr", "kws"] and tiny["complete"].all()
    assert sorted(cov.loc[cov["model"] == "m_a", "task"]) == [
        "asr", "asr_steer_p5", "kws", "kws_steer_p5"]
    assert partial_lines(cov) == []   # no "tiny × asr_steer_p5 covers 0 of 28"
    if log_event:
        assert "tiny — asr_steer_p5, kws_steer_p5" in not_applicable_note(ws)


def test_after_removal_the_model_appears_nowhere(tmp_path):
    ws = make_run(tmp_path, **SMALL)
    _no_prompt_model(ws)
    assert remove.main(["--profile", "demo", "--data-root", str(tmp_path), "--model", "tiny"]) == 0
    scores = score_inference(ws)                      # what stage 8 re-runs
    cov = coverage_table(ws, {"background": scores})
    assert set(cov["model"]) == {"m_a"} and cov["complete"].all()
    assert all(set(df["model"]) == {"m_a"} for df in scores.values())
    rec = collect_provenance(ws)
    assert list(rec["models"]) == ["m_a"] and rec["models_not_loaded"] == {}
    assert not_applicable_note(ws) is None
    assert "tiny" not in json.dumps(rec)
