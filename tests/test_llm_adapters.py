"""transformers backend: the five Speech LLM families on tiny random-weight fixtures, offline, on CPU.

The fixtures (tests/tiny_models.py) are built once per session into a temporary folder, loaded
through a temporary registry with ``local_files_only=True`` and run through stage 7.
"""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

pytest.importorskip("transformers", minversion="5.0")

import tiny_models as tm  # noqa: E402
from conftest import make_tiny_workspace  # noqa: E402

from aiplib.core.errors import ModelUnavailableError  # noqa: E402
from aiplib.inference.models import get_entry, load_model, load_registry  # noqa: E402
from aiplib.inference.models.adapters import AudioInputError, get_adapter  # noqa: E402
from aiplib.inference.models.transformers_backend import check_batch_invariance  # noqa: E402
from aiplib.inference.prompts import prompt_for  # noqa: E402
from aiplib.inference.runner import run_inference  # noqa: E402
from aiplib.io.formats import read_manifest, read_results  # noqa: E402
from aiplib.stimuli.families import materialize  # noqa: E402
from aiplib.stimuli.manifests import build_manifests  # noqa: E402

LIMIT = 5          # entry.max_new_tokens of the test entries
THINKER_LIMIT = 9  # Qwen2.5-Omni: the thinker's own limit applies instead
N_STIMULI = 8


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    return tm.build_all(tmp_path_factory.mktemp("tiny_llms"))


# the packaged registry entry whose batch size the tiny fixture of each family vouches for
PACKAGED = {"qwen2_audio": ("qwen2_audio_7b",), "qwen25_omni": ("qwen25_omni_3b", "qwen25_omni_7b"),
            "gemma3n": ("gemma3n_e4b",), "phi4_multimodal": ("phi4_multimodal",), "voxtral": ("voxtral_mini_3b",)}


_PACKAGED_REGISTRY = load_registry()  # read at import, before any test swaps the registry


def _registry_batch(family: str) -> int:
    return _PACKAGED_REGISTRY[PACKAGED[family][0]].batch_size


@pytest.fixture(scope="module")
def reg_path(fixtures, tmp_path_factory):
    # stage 7 runs each fixture at its packaged entry's batch size, so the batch-1 == batch-N check
    # below is the evidence for that registry value
    entries = {f"tiny_{f}": tm.registry_entry(f, folder, max_new_tokens=LIMIT, batch_size=_registry_batch(f),
                                              thinker_max_new_tokens=THINKER_LIMIT if f == "qwen25_omni" else None)
               for f, folder in fixtures.items()}
    return tm.registry_yaml(tmp_path_factory.mktemp("reg") / "registry.yaml", entries)


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory):
    """2 ASR items (1.0 s and 1.5 s) × (clean + 1 background × 3 SNRs) = 8 stimuli."""
    ws = make_tiny_workspace(tmp_path_factory.mktemp("ws"), n_asr=2, n_kws=1, n_bg=1)
    build_manifests(ws)
    return ws


@pytest.mark.slow
@pytest.mark.parametrize("family", tm.MODEL_FAMILIES)
def test_stage7_on_tiny_fixture(family, fixtures, reg_path, demo_ws, monkeypatch):
    tm.use_registry(monkeypatch, reg_path)
    import aiplib.inference.models

    made = []
    real_load = aiplib.inference.models.load_model

    def spy(entry, **opts):
        made.append(real_load(entry, **opts))
        return made[-1]

    monkeypatch.setattr(aiplib.inference.models, "load_model", spy)
    mid = f"tiny_{family}"
    summary = run_inference(demo_ws, models=mid, tasks="asr", progress=False)
    assert summary.loc[0, "status"] == "done", summary.to_dict("records")
    assert summary.loc[0, "n_errors"] == 0 and summary.loc[0, "n_run"] == N_STIMULI

    df = read_results(demo_ws.inference / mid / "asr.jsonl")
    assert len(df) == N_STIMULI and df["error"].isna().all() and (df["raw"] != "__ERROR__").all()

    rec = made[0]
    placeholder = rec.placeholder
    _, task_text = prompt_for("asr")
    assert rec.last["prompts"], "no prompt recorded"
    for p in rec.last["prompts"]:
        assert placeholder in p and task_text in p
    limit = THINKER_LIMIT if family == "qwen25_omni" else LIMIT
    assert rec.token_limit == limit
    assert rec._stats["max_new_tokens_seen"] <= limit
    assert rec._stats["max_new_tokens_seen"] == limit  # random weights rarely stop early: the limit is reached
    bs = _registry_batch(family)
    assert bs > 1 and rec.batch_size == bs
    # 2 items × 4 stimuli: batches of bs (Gemma 3n / Phi-4 join only equal-length clips: ≤ 4)
    assert max(rec.last["batch_sizes"]) == min(bs, 4 if rec.adapter_cls.same_length_batches else N_STIMULI)

    log = [json.loads(line) for line in (demo_ws.inference / mid / "run_log.jsonl").read_text().splitlines()]
    info = log[-1]["info"]
    assert "revision" in info and info["revision_requested"] is None
    assert info["decoding"]["max_new_tokens"] == limit and info["local_files_only"] is True

    # batch 1 == batch N: decode the same stimuli one at a time, compare with the stage-7 rows (batch 4)
    manifest = read_manifest(demo_ws, "asr")
    audios = [np.asarray(materialize(r, demo_ws)[0], dtype=np.float32) for r in manifest.to_dict("records")]
    single = load_model(get_entry(mid), local_files_only=True)
    try:
        single.batch_size = 1
        one = single.generate(audios, [task_text] * len(audios))
    finally:
        single.close()
    by_id = dict(zip(df["id"], df["raw"]))
    diffs = [(sid, by_id[sid], r) for sid, r in zip(manifest["id"], one) if by_id[sid] != r]
    assert not diffs, diffs


def test_batch_invariance_report_with_mixed_prompts(fixtures, reg_path):
    entry = load_registry(reg_path)["tiny_qwen2_audio"]
    rec = load_model(entry, local_files_only=True)
    rng = np.random.default_rng(3)
    audios = [(0.1 * rng.standard_normal(int(16000 * s))).astype(np.float32) for s in (0.7, 1.3)]
    prompts = [None, "Which word is spoken in this audio? Answer with one word."]
    r = check_batch_invariance(rec, audios, prompts, batch_size=2)
    assert r["equal"] and r["n"] == 2 and r["batch_size"] == 2 and r["differences"] == []
    assert r["seconds_batch1"] > 0 and r["speedup"] is not None
    st = rec.stats()
    assert st["n_stimuli"] == 4 and st["rtfx"] > 0 and st["peak_gpu_mem_mb"] is None
    rec.close()
    rec.close()  # idempotent


def test_dropped_audio_is_detected(fixtures, reg_path):
    rec = load_model(load_registry(reg_path)["tiny_qwen2_audio"], local_files_only=True)
    a = rec.adapter
    inputs, _ = a.encode([np.zeros(16000, np.float32)], ["Transcribe."])
    a.check_inputs(inputs, 1)
    del inputs["input_features"]
    with pytest.raises(AudioInputError, match="input_features"):
        a.check_inputs(inputs, 1)
    text_only = a.processor(text=["<|im_start|>user\nhello<|im_end|>\n"], return_tensors="pt")
    text_only["input_features"] = text_only["feature_attention_mask"] = np.zeros(1)
    with pytest.raises(AudioInputError, match="placeholder"):
        a.check_inputs(text_only, 1)
    rec.close()


def test_hub_snapshot_folder_reports_its_revision(fixtures, tmp_path):
    snap = tmp_path / "models--tiny--qwen2-audio" / "snapshots" / "0123abcd"
    shutil.copytree(fixtures["qwen2_audio"], snap)
    e = dataclasses.replace(load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
        "snap": tm.registry_entry("qwen2_audio", snap)}))["snap"])
    rec = load_model(e)
    info = rec.info()
    assert info["revision"] == "0123abcd" and len(info["weights_sha256"]) == 64
    rec.close()


def _cpu(entry):
    return dataclasses.replace(entry, requires="cpu", device="cpu", precision="float32")


def test_gated_gemma_gives_licence_and_login_hint(monkeypatch):
    from aiplib.inference.models.adapters import gemma3n

    entry = _cpu(get_entry("gemma3n_e4b"))

    class GatedRepoError(OSError):  # same name as huggingface_hub.errors.GatedRepoError
        pass

    def refuse(cls, source, **kw):
        try:
            raise GatedRepoError("401 Client Error. Cannot access gated repo")
        except GatedRepoError as exc:
            raise OSError("You are trying to access a gated repo.") from exc

    monkeypatch.setattr(gemma3n.Gemma3nAdapter, "load_processor", classmethod(refuse))
    with pytest.raises(ModelUnavailableError) as ei:
        load_model(entry)
    msg = str(ei.value)
    assert "https://huggingface.co/google/gemma-3n-E4B-it" in msg and "hf auth login" in msg


def test_hub_weights_missing_offline_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    entry = _cpu(get_entry("qwen2_audio_7b"))
    with pytest.raises(ModelUnavailableError, match="not in the local Hugging Face cache"):
        load_model(entry, local_files_only=True)


def test_every_registry_llm_family_has_an_adapter():
    fams = {e.model_type for e in load_registry().values() if e.backend == "transformers"}
    for f in fams:
        assert get_adapter(f).model_type == f
    with pytest.raises(KeyError, match="known model types"):
        get_adapter("nope")
    omni = get_entry("qwen25_omni_7b")
    assert omni.thinker_max_new_tokens == 1024 and omni.max_new_tokens == 64


# ------------------------------------------------------------------------------------ Phi-4 revision pin
PHI4_HUB_ID = "microsoft/Phi-4-multimodal-instruct"
PHI4_REVISION = "refs/pr/70"


def test_phi4_fixture_has_the_pinned_revisions_native_layout(fixtures):
    """refs/pr/70 holds the transformers-native layout; main still holds the remote-code one
    (``model_type: phi4mm``, ``auto_map``, ``Phi4MMForCausalLM``). The fixture must be the former."""
    folder = fixtures["phi4_multimodal"]
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["model_type"] == "phi4_multimodal"
    assert cfg["architectures"] == ["Phi4MultimodalForCausalLM"]
    assert "auto_map" not in cfg
    assert cfg["audio_config"]["model_type"] == "phi4_multimodal_audio"
    assert cfg["vision_config"]["model_type"] == "phi4_multimodal_vision"
    assert not list(folder.glob("*.py"))  # no remote code
    proc = json.loads((folder / "processor_config.json").read_text())
    assert proc["processor_class"] == "Phi4MultimodalProcessor"


def test_phi4_registry_entry_passes_the_pinned_revision_to_all_three_loads(fixtures, monkeypatch):
    """The packaged ``phi4_multimodal`` entry, loaded with every hub call recorded and answered from
    the tiny fixture: processor, model and speech LoRA all receive ``revision=refs/pr/70``."""
    import sys
    import types

    import transformers

    entry = _cpu(get_entry("phi4_multimodal"))
    assert entry.weights == PHI4_HUB_ID and entry.revision == PHI4_REVISION
    folder = str(fixtures["phi4_multimodal"])
    calls = []
    klass = transformers.Phi4MultimodalForCausalLM
    real_proc = transformers.AutoProcessor.from_pretrained
    real_model = klass.from_pretrained

    def hub_kw(kw):
        return {k: v for k, v in kw.items() if k not in ("revision",)}

    def fake_proc(source, **kw):
        calls.append(("processor", source, dict(kw)))
        return real_proc(folder, **hub_kw(kw))

    def fake_model(source, **kw):
        calls.append(("model", source, dict(kw)))
        return real_model(folder, **hub_kw(kw))

    def fake_load_adapter(self, source, adapter_name=None, adapter_kwargs=None, **kw):
        calls.append(("speech_lora", source, dict(adapter_kwargs or {}, adapter_name=adapter_name)))

    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", fake_proc)
    monkeypatch.setattr(klass, "from_pretrained", fake_model)
    monkeypatch.setattr(klass, "load_adapter", fake_load_adapter, raising=False)
    monkeypatch.setattr(klass, "set_adapter", lambda self, name: None, raising=False)
    monkeypatch.setitem(sys.modules, "peft", types.ModuleType("peft"))  # the adapter checks it is installed

    rec = load_model(entry)
    try:
        assert [c[0] for c in calls] == ["processor", "model", "speech_lora"]
        assert all(src == PHI4_HUB_ID and kw["revision"] == PHI4_REVISION for _, src, kw in calls)
        assert calls[2][2]["subfolder"] == "speech-lora" and calls[2][2]["adapter_name"] == "speech"
        info = rec.info()
        assert info["revision_requested"] == PHI4_REVISION
        out = rec.generate([np.sin(np.linspace(0, 400, 16000)).astype(np.float32)], [None])
        assert len(out) == 1 and isinstance(out[0], str)
    finally:
        rec.close()


def test_registry_batch_sizes_are_the_tested_ones():
    """Every transformers entry batches (> 1) at the size its family's stage-7 test runs with;
    an entry whose batch-invariance test failed would keep 1 and say why in ``notes``."""
    for family, ids in PACKAGED.items():
        sizes = {_PACKAGED_REGISTRY[i].batch_size for i in ids}
        assert sizes == {_registry_batch(family)} and min(sizes) > 1, (family, sizes)
    assert {e.model_type for e in _PACKAGED_REGISTRY.values() if e.backend == "transformers"} == set(PACKAGED)


@pytest.mark.parametrize("family", tm.MODEL_FAMILIES)
def test_left_padding_and_attention_mask(family, fixtures, reg_path):
    """A batch mixing a prompt-less and a long prompt (and clips of two lengths where the family
    pads audio to a fixed window) is left-padded: the shorter row's mask is 0 on its first
    positions and 1 to the end, those positions hold the pad token, and every row ends with a
    real token, so generation continues each row from its own last token."""
    rec = load_model(load_registry(reg_path)[f"tiny_{family}"], local_files_only=True)
    try:
        a = rec.adapter
        assert a.tokenizer.padding_side == "left"
        rng = np.random.default_rng(0)
        n2 = 16000 if a.same_length_batches else 24000
        audios = [(0.1 * rng.standard_normal(n)).astype(np.float32) for n in (16000, n2)]
        inputs, _ = a.encode(audios, [None, "Transcribe the speech in this audio exactly, word for word."])
        mask, ids = inputs["attention_mask"], inputs["input_ids"]
        assert mask.shape == ids.shape and mask.shape[0] == 2
        assert bool((mask[:, -1] == 1).all())
        lengths = mask.sum(dim=1).tolist()
        short = int(np.argmin(lengths))
        n_pad = mask.shape[1] - lengths[short]
        assert n_pad > 0 and lengths[1 - short] == mask.shape[1]
        assert mask[short, :n_pad].sum() == 0 and bool((mask[short, n_pad:] == 1).all())
        pad = a.generator.generation_config.pad_token_id
        assert set(ids[short, :n_pad].tolist()) == {pad}
    finally:
        rec.close()
