"""The explorer opens on the model with the most complete coverage (issue 38, item 6), not the
alphabetically first: a 5-row partial run named ``a_trial`` beside a complete ``z_full``."""
from __future__ import annotations

from test_report import make_run

from aiplib.explore import data as xd
from aiplib.explore import ui as xu
from aiplib.scoring.score import score_inference

SMALL = dict(n_asr=3, n_kws=3, n_bg=3, snrs=(10, 0), models=("a_trial", "z_full"),
             tasks=("asr", "kws"))


def _trial_of_5_rows(ws):
    for p in (ws.inference / "a_trial").glob("*.jsonl"):
        if p.name != "run_log.jsonl":
            p.write_text("".join(p.read_text().splitlines(keepends=True)[:5]))


def test_most_complete_model_before_and_after_scoring(tmp_path):
    ws = make_run(tmp_path, **SMALL)
    _trial_of_5_rows(ws)
    assert xd.available_models(ws, "asr") == ["a_trial", "z_full"]
    assert xd.most_complete_model(ws, "asr") == "z_full"          # from the inference rows
    score_inference(ws)
    assert xd.most_complete_model(ws, "kws") == "z_full"          # from the scores
    assert xd.most_complete_model(ws, "asr", ["a_trial"]) == "a_trial"
    assert xd.most_complete_model(ws, "asr", []) is None


def test_a_tie_goes_to_the_first_by_name(tmp_path):
    ws = make_run(tmp_path, **SMALL)
    assert xd.most_complete_model(ws, "asr") == "a_trial"


def test_the_explorer_opens_on_the_complete_model(tmp_path):
    ws = make_run(tmp_path, **SMALL)
    _trial_of_5_rows(ws)
    score_inference(ws)
    ex = xu.explorer(ws).explorer
    assert ex.controls["model"].value == "z_full"
