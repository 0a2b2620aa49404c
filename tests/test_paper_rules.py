"""The paper profile's rules that follow the authors' code (issue 34): their stage-6 answer clean-up
and null-answer rule at scoring time, the VAD fraction rounded to 4 decimals before Spearman, and
their attention kernels per model, read from the registry."""
from __future__ import annotations

import dataclasses
import json
import re
import string
from types import SimpleNamespace

import jiwer
import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

import authors_paper_run as run
from aiplib.core.workspace import workspace
from aiplib.scoring.score import score_inference


def _their_clean(hyp) -> str:
    """The authors' ``_clean_hyp`` rule (``scripts/06_score_metrics.py``), restated here from its
    description: strip; a leading known preamble up to its colon and one opening quote removed
    (ignoring case); one closing quote removed; strip."""
    text = str(hyp).strip()
    preamble = ("^(The transcription of the speech is|The speech transcribed from the audio is|The keyword is"
                "|The word is)[^:]*:\\s*['\"]?")
    text = re.sub(preamble, "", text, flags=re.IGNORECASE)
    if text[-1:] in ("'", '"'):
        text = text[:-1]
    return text.strip()


def _their_wer(ref: str, hyp: str) -> float:
    """Their ``_wer``: lower case, ASCII punctuation to spaces, white space collapsed, jiwer."""
    def norm(s):
        return " ".join(re.sub(f"[{re.escape(string.punctuation)}]", " ", str(s).lower()).split())
    return float(jiwer.wer(norm(ref), norm(hyp)))


@pytest.fixture(scope="module")
def authors_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("authors_rules")
    inference_dir, _ = run.write_authors_run(root / "theirs")
    return root, inference_dir


def _score(root, inference_dir, name, **rules):
    ws = workspace("paper", data_root=root / name)
    ws.ensure()
    return ws, score_inference(ws, inference_dir=inference_dir, tasks=["asr"], keywords="yes,no", **rules)["asr"]


def test_authors_stage6_cleanup_reproduces_their_cleaned_scores(authors_files):
    root, inference_dir = authors_files
    before = {p: p.read_bytes() for p in inference_dir.rglob("*.jsonl")}
    _, raw = _score(root, inference_dir, "as_generated")
    ws, cleaned = _score(root, inference_dir, "cleaned", response_cleanup="authors_stage6")
    assert {p: p.read_bytes() for p in inference_dir.rglob("*.jsonl")} == before  # stored rows untouched
    model = run.MODELS[0]
    rows = cleaned[(cleaned["model"] == model) & (cleaned["item_id"] == run.PREAMBLE_ITEM)]
    assert len(rows) == 13 and rows["response"].str.startswith("The transcription of the speech is").all()
    for r in rows.itertuples():
        assert r.response_scored == _their_clean(r.response)
        assert r.wer == pytest.approx(_their_wer(r.reference, _their_clean(r.response)))
    # their per-background ΔWER of the model, computed here from their rule, and ours with the clean-up
    lines = [json.loads(x) for x in (inference_dir / model / "asr.jsonl").read_text().splitlines()]
    ok = [x for x in lines if x["raw"] != "__ERROR__"]
    ok = list({x["id"]: x for x in ok}.values())  # the retried stimulus: its answer
    wer = {x["id"]: _their_wer(x["transcript"], _their_clean(x["raw"])) for x in ok}
    clean = {x["speech_id"]: wer[x["id"]] for x in ok if x["condition"] == "clean"}
    noisy = pd.DataFrame([{"bg": x["background_id"], "dwer": wer[x["id"]] - clean[x["speech_id"]]}
                          for x in ok if x["condition"] == "noisy"])
    theirs = noisy.groupby("bg")["dwer"].mean()
    ours = cleaned[(cleaned["model"] == model) & (cleaned["bg_id"] != "clean")].groupby("bg_id")["delta_wer"].mean()
    pd.testing.assert_series_equal(ours.sort_index(), theirs.sort_index(), check_names=False)
    # the preambles move the scores: as generated, the item's clean WER is 6/7 (six words inserted), cleaned 0
    first = raw[(raw["model"] == model) & (raw["stimulus_id"] == f"{run.PREAMBLE_ITEM}_clean")]
    assert first["wer"].iloc[0] == pytest.approx(6 / 7) and rows.set_index("bg_id").loc["clean", "wer"] == 0
    side = json.loads(ws.scores_sidecar("asr").read_text())
    assert side["answer_rules"]["response_cleanup"]["name"] == "authors_stage6"
    assert side["n_cleaned"] == {model: 13, run.MODELS[1]: 0}


def test_null_answer_is_the_text_none_in_the_paper_profile_and_failed_when_asked(authors_files):
    root, inference_dir = authors_files
    ws, paper_rule = _score(root, inference_dir, "null_paper")
    _, failed = _score(root, inference_dir, "null_failed", null_answer="failed")
    model, _, sid = run.NULL_ANSWER
    row = paper_rule[(paper_rule["model"] == model) & (paper_rule["stimulus_id"] == sid)]
    assert row["response"].tolist() == ["None"]
    assert row["wer"].iloc[0] == pytest.approx(_their_wer(run.ASR_ITEMS["cv_0a1b2c3d_0"][0], "None"))
    assert sid not in set(failed.loc[failed["model"] == model, "stimulus_id"])
    side = json.loads(ws.scores_sidecar("asr").read_text())
    assert side["answer_rules"]["null_answer"]["name"] == "text_none" and side["n_null_as_text"][model] == 1
    from aiplib.analysis.provenance import collect_provenance
    from aiplib.analysis.report_tables import provenance_lines

    lines = provenance_lines(collect_provenance(ws))
    assert 'answers of asr: clean-up none (0 changed); null answer text_none (1 read as "None")' in lines


def test_vad_fraction_is_rounded_to_4_decimals_before_spearman(authors_files, tmp_path):
    from aiplib.analysis import paper, stats
    from aiplib.io.formats import load_scores, read_descriptor_table

    root, inference_dir = authors_files
    ws = workspace("paper", data_root=tmp_path)
    ws.ensure()
    score_inference(ws, inference_dir=inference_dir, tasks=["asr", "kws"], keywords="yes,no")
    run.write_descriptors(ws)
    descriptors = read_descriptor_table(ws.descriptor_csv, index=True)
    rounded = stats.round_descriptors(descriptors)["vad_speech_fraction"]
    assert list(rounded) == [0.0123, 0.2123, 0.2123, 0.9]  # esc_dog and noisex_babble tie at 4 decimals
    t2 = paper.table2_descriptor_correlations(load_scores(ws), descriptors, n_resamples=20)
    vad = t2[(t2["task"] == "asr") & (t2["model"] == "pooled") & (t2["descriptor"] == "vad_speech_fraction")].iloc[0]
    deg = stats.degradation_by_background(load_scores(ws)["asr"], "asr")["pooled"]
    expect = spearmanr(rounded.loc[deg.index], deg)
    assert vad["r_s"] == pytest.approx(expect.statistic) and vad["p"] == pytest.approx(expect.pvalue)
    assert vad["r_s"] != pytest.approx(vad["r_s_unrounded"])  # the tie is what the rounding changes
    assert list(t2.columns[5:8]) == ["r_s", "p", "p_permutation"]


@pytest.mark.parametrize("model, profile, expect", [
    ("qwen2_audio_7b", "paper", "sdpa"), ("qwen25_omni_3b", "paper", "sdpa"), ("qwen25_omni_7b", "paper", "sdpa"),
    ("phi4_multimodal", "paper", "eager"), ("qwen2_audio_7b", "demo", None), ("whisper_tiny_en", "paper", None)])
def test_the_authors_attention_kernel_comes_from_the_registry_in_the_paper_profile(model, profile, expect):
    from aiplib.inference.models import get_entry
    from aiplib.inference.plan import effective_attn_implementation

    assert effective_attn_implementation(get_entry(model), profile) == expect


def test_transformers_backend_passes_and_records_the_attention_kernel(tmp_path, monkeypatch):
    """The kwargs from_pretrained gets (a stand-in adapter records them) and what info() says."""
    pytest.importorskip("transformers")
    from aiplib.inference.models import get_entry
    from aiplib.inference.models import transformers_backend as tb

    seen = {}

    class Adapter:
        placeholder = "<audio>"

        def __init__(self, entry, processor, model):
            self.generator = model

        @classmethod
        def prepare(cls):
            return None

        @classmethod
        def load_processor(cls, source, **kw):
            return SimpleNamespace()

        @classmethod
        def load_model(cls, source, **kw):
            seen.update(kw)
            return SimpleNamespace(config=None, dtype="float32")

        def token_limit(self):
            return 8

    monkeypatch.setattr(tb, "get_adapter", lambda model_type: Adapter)  # noqa: ARG005
    local = dataclasses.replace(get_entry("phi4_multimodal"), weights=str(tmp_path), revision=None, device="cpu",
                                precision="float32")
    rec = tb.TransformersRecogniser(local, attn_implementation="eager")
    assert seen["attn_implementation"] == "eager"
    assert rec.info()["attn_implementation"] == "eager"
    seen.clear()
    rec = tb.TransformersRecogniser(local)
    assert "attn_implementation" not in seen and rec.info()["attn_implementation"] == "library default"
    assert np.isfinite(rec.load_s)


def test_the_attention_kernel_enters_the_resume_key_only_where_set():
    """Rows decoded with another attention kernel are re-run, never mixed; entries without a
    kernel keep the key they had."""
    import dataclasses

    from aiplib.inference.keys import ATTENTION_FIELD, entry_sha256
    from aiplib.inference.models import get_entry

    entry = get_entry("qwen2_audio_7b")
    sdpa = dataclasses.replace(entry, extra={**entry.extra, ATTENTION_FIELD: "sdpa"})
    eager = dataclasses.replace(entry, extra={**entry.extra, ATTENTION_FIELD: "eager"})
    assert len({entry_sha256(entry), entry_sha256(sdpa), entry_sha256(eager)}) == 3
    whisper = get_entry("whisper_tiny_en")
    assert entry_sha256(whisper) == entry_sha256(dataclasses.replace(whisper))
