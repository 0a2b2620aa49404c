"""Tiny random-weight Speech LLM fixtures, built offline (no hub), for tests and benchmarks.

Each ``build_<family>(folder)`` writes a model (a few hundred thousand parameters, 1–2 MB) and
its processor to ``folder`` with ``save_pretrained`` and returns the folder; load it back through
the registry (``weights: <folder>``, ``local_files_only=True``). The layouts mirror the real
checkpoints (same classes, processors, chat templates and special tokens), only tiny. Random
weights produce random text: tests check the plumbing, never the words.

Tokenizers: a GPT-2 style byte-level BPE without merges (256 byte symbols + the family's
special tokens) encodes any text without files; Voxtral gets a tiny Tekken ``tekken.json`` for
mistral-common. Adapted from the shared notes on tiny fixtures (transformers 5.x on CPU).

``registry_yaml(entries)`` writes a registry file whose entries point at the folders.
"""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

__all__ = ["BUILDERS", "MODEL_FAMILIES", "build", "build_all", "registry_entry", "registry_yaml", "HF_ASR_BUILDERS",
           "build_wav2vec2_ctc", "build_whisper_asr", "hf_asr_entry",
           "byte_level_tokenizer", "use_registry", "scan_for"]


def byte_level_tokenizer(special_tokens):
    """Byte-level BPE with no merges (1 token per UTF-8 byte) + special tokens (ids from 256)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special_tokens])
    return tok


def _hf_tok(specials, **kw):
    from transformers import TokenizersBackend

    return TokenizersBackend(tokenizer_object=byte_level_tokenizer(specials), model_max_length=32768, **kw)


def _save(folder, model, proc, *, eos, pad):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder


# ------------------------------------------------------------------------------------ Qwen2-Audio
def build_qwen2_audio(folder):
    import torch
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    torch.manual_seed(0)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
    tok = _hf_tok(specials, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                  extra_special_tokens={"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                                        "audio_eos_token": "<|audio_eos|>"})
    fe = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=30,
                                 n_fft=400, padding_value=0.0, return_attention_mask=True)
    proc = Qwen2AudioProcessor(feature_extractor=fe, tokenizer=tok)
    proc.chat_template = proc.default_chat_template
    tid = tok.convert_tokens_to_ids
    cfg = Qwen2AudioConfig(
        audio_config=dict(model_type="qwen2_audio_encoder", num_mel_bins=128, encoder_layers=2,
                          encoder_attention_heads=2, encoder_ffn_dim=128, d_model=64, max_source_positions=1500),
        text_config=dict(model_type="qwen2", vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=4096, tie_word_embeddings=False,
                         eos_token_id=tid("<|im_end|>"), pad_token_id=tok.pad_token_id),
        audio_token_index=tid("<|AUDIO|>"))
    model = Qwen2AudioForConditionalGeneration(cfg).eval()
    return _save(folder, model, proc, eos=[tid("<|im_end|>"), tid("<|endoftext|>")], pad=tok.pad_token_id)


# ------------------------------------------------------------------------------------ Qwen2.5-Omni
OMNI_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% set image_count = namespace(value=0) %}"
    "{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving auditory and "
    "visual inputs, as well as generating text and speech.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' or 'audio' in content or 'audio_url' in content %}"
    "{% set audio_count.value = audio_count.value + 1 %}{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}"
    "<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_qwen25_omni(folder):
    """The thinker only (what the adapter loads), with the full Omni processor."""
    import torch
    from transformers import (
        Qwen2_5OmniConfig,
        Qwen2_5OmniProcessor,
        Qwen2_5OmniThinkerForConditionalGeneration,
        WhisperFeatureExtractor,
    )

    from aiplib.inference.models.adapters import no_torchvision_patch, stub_processor, torchvision_ok

    no_torchvision_patch()
    torch.manual_seed(0)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>",
                "<|IMAGE|>", "<|VIDEO|>", "<|vision_bos|>", "<|vision_eos|>"]
    tok = _hf_tok(specials, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                  extra_special_tokens={
                      "audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                      "audio_eos_token": "<|audio_eos|>", "image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>",
                      "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>"})
    fe = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=300,
                                 n_fft=400, padding_value=0.0, return_attention_mask=True)
    if torchvision_ok():
        from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor
        img, vid = Qwen2VLImageProcessor(), Qwen2VLVideoProcessor()
    else:
        from transformers import Qwen2VLImageProcessorPil
        img, vid = Qwen2VLImageProcessorPil(), stub_processor("video")
    proc = Qwen2_5OmniProcessor(image_processor=img, video_processor=vid, feature_extractor=fe, tokenizer=tok,
                                chat_template=OMNI_TEMPLATE)
    ids = {t: tok.convert_tokens_to_ids(t) for t in specials}
    thinker = dict(
        audio_config=dict(num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128,
                          d_model=64, max_source_positions=1500, n_window=100, output_dim=64),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           fullatt_block_indexes=[0], patch_size=14, spatial_merge_size=2, temporal_patch_size=2),
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
                         tie_word_embeddings=False),
        audio_token_index=ids["<|AUDIO|>"], image_token_index=ids["<|IMAGE|>"], video_token_index=ids["<|VIDEO|>"],
        audio_start_token_id=ids["<|audio_bos|>"], audio_end_token_id=ids["<|audio_eos|>"],
        vision_start_token_id=ids["<|vision_bos|>"], vision_end_token_id=ids["<|vision_eos|>"],
        user_token_id=tok.encode("user", add_special_tokens=False)[0])
    cfg = Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)
    model = Qwen2_5OmniThinkerForConditionalGeneration(cfg.thinker_config).eval()
    return _save(folder, model, proc, eos=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad=tok.pad_token_id)


# ------------------------------------------------------------------------------------ Gemma 3n
_G_N_MM = 8
_G_TEXT = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>",
           "<start_of_audio>"]
_G_V_TEXT = 256 + len(_G_TEXT)
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- if messages[0]['content'] is string -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- else -%}{%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}{%- endif -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}{%- else -%}"
    "{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{%- if message['content'] is string -%}{{ message['content'] | trim }}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'audio' -%}{{ '<audio_soft_token>' }}"
    "{%- elif item['type'] == 'image' -%}{{ '<image_soft_token>' }}"
    "{%- elif item['type'] == 'text' -%}{{ item['text'] | trim }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}"
)


def build_gemma3n(folder):
    import torch
    from transformers import (
        Gemma3nAudioFeatureExtractor,
        Gemma3nConfig,
        Gemma3nForConditionalGeneration,
        Gemma3nProcessor,
        SiglipImageProcessorPil,
    )

    from aiplib.inference.models.adapters import no_timm_vision_patch

    no_timm_vision_patch()
    torch.manual_seed(0)
    vision = ["<end_of_image>", "<image_soft_token>"] + [f"<vision_unused_{i}>" for i in range(_G_N_MM - 2)]
    audio = ["<end_of_audio>", "<audio_soft_token>"] + [f"<audio_unused_{i}>" for i in range(_G_N_MM - 2)]
    tok = _hf_tok(_G_TEXT + vision + audio, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
                  unk_token="<unk>",
                  extra_special_tokens={
                      "audio_token": "<audio_soft_token>", "boa_token": "<start_of_audio>",
                      "eoa_token": "<end_of_audio>", "image_token": "<image_soft_token>",
                      "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>"})
    img = SiglipImageProcessorPil(size={"height": 768, "width": 768}, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    proc = Gemma3nProcessor(feature_extractor=Gemma3nAudioFeatureExtractor(), image_processor=img, tokenizer=tok,
                            chat_template=GEMMA_TEMPLATE, audio_seq_length=188, image_seq_length=256)
    tid = tok.convert_tokens_to_ids
    eos = [tid("<eos>"), tid("<end_of_turn>")]
    cfg = Gemma3nConfig(
        text_config=dict(
            vocab_size=_G_V_TEXT + 2 * _G_N_MM, vocab_size_per_layer_input=_G_V_TEXT, hidden_size=64,
            intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
            hidden_size_per_layer_input=16, laurel_rank=8, altup_num_inputs=4, num_kv_shared_layers=0,
            layer_types=["sliding_attention", "full_attention"], activation_sparsity_pattern=[0.0, 0.0],
            sliding_window=512, max_position_embeddings=4096, pad_token_id=tid("<pad>"), eos_token_id=eos,
            bos_token_id=tid("<bos>")),
        audio_config=dict(vocab_size=_G_N_MM, vocab_offset=_G_V_TEXT + _G_N_MM, input_feat_size=128, hidden_size=64,
                          conf_num_attention_heads=2, conf_num_hidden_layers=1, sscp_conv_channel_size=[8, 8],
                          conf_attention_chunk_size=12, conf_attention_context_left=13,
                          conf_attention_context_right=0, conf_reduction_factor=4),
        vision_config=dict(vocab_size=_G_N_MM, vocab_offset=_G_V_TEXT, hidden_size=64),
        audio_soft_tokens_per_image=188, vision_soft_tokens_per_image=256,
        boi_token_id=tid("<start_of_image>"), eoi_token_id=tid("<end_of_image>"),
        image_token_id=tid("<image_soft_token>"), boa_token_id=tid("<start_of_audio>"),
        eoa_token_id=tid("<end_of_audio>"), audio_token_id=tid("<audio_soft_token>"))
    model = Gemma3nForConditionalGeneration(cfg).eval()
    return _save(folder, model, proc, eos=eos, pad=tid("<pad>"))


# ------------------------------------------------------------------------------------ Phi-4-multimodal
PHI4_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}{{ '<|image|>' }}"
    "{% elif content['type'] == 'audio' %}{{ '<|audio|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)


def build_phi4mm(folder):
    import torch
    from transformers import (
        Phi4MultimodalConfig,
        Phi4MultimodalFeatureExtractor,
        Phi4MultimodalForCausalLM,
        Phi4MultimodalProcessor,
    )

    from aiplib.inference.models.adapters import no_torchvision_patch, stub_processor, torchvision_ok

    no_torchvision_patch(image=True)
    torch.manual_seed(0)
    specials = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|image|>", "<|audio|>"]
    tok = _hf_tok(specials, bos_token="<|endoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                  unk_token="<|endoftext|>", extra_special_tokens={"image_token": "<|image|>", "audio_token": "<|audio|>"})
    tok.chat_template = PHI4_TEMPLATE  # survives a reload (the processor's copy does not)
    if torchvision_ok():
        from transformers import Phi4MultimodalImageProcessor
        img = Phi4MultimodalImageProcessor()
    else:
        img = stub_processor("image")
    proc = Phi4MultimodalProcessor(image_processor=img, audio_processor=Phi4MultimodalFeatureExtractor(),
                                   tokenizer=tok, chat_template=PHI4_TEMPLATE)
    tid = tok.convert_tokens_to_ids
    eos = [tid("<|endoftext|>"), tid("<|end|>")]
    cfg = Phi4MultimodalConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=4096, original_max_position_embeddings=4096,
        bos_token_id=tid("<|endoftext|>"), eos_token_id=eos, pad_token_id=tid("<|endoftext|>"),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_token_id=tid("<|image|>")),
        audio_config=dict(hidden_size=64, intermediate_size=128, num_blocks=2, num_attention_heads=4,
                          ext_pw_out_channel=64, depthwise_separable_out_channel=64, nemo_conv_channels=64,
                          input_size=80, time_reduction=8, audio_token_id=tid("<|audio|>")))
    model = Phi4MultimodalForCausalLM(cfg).eval()
    return _save(folder, model, proc, eos=eos, pad=tid("<|endoftext|>"))


# ------------------------------------------------------------------------------------ Voxtral
_V_N_SPECIAL = 100
_V_ENUM = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
           "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
           "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"]
_V_FIXED = {24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 34: "[TRANSCRIBE]"}


def _write_tekken(folder: Path) -> None:
    specials = [{"rank": r, "token_str": _V_ENUM[r] if r < len(_V_ENUM) else _V_FIXED.get(r, f"<SPECIAL_{r}>"),
                 "is_control": True} for r in range(_V_N_SPECIAL)]
    vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)]
    data = {
        "config": {
            "pattern": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?"
                       r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|"
                       r"\s*[\r\n]+|\s+(?!\S)|\s+",
            "num_vocab_tokens": 256, "default_vocab_size": _V_N_SPECIAL + 256,
            "default_num_special_tokens": _V_N_SPECIAL, "version": "v7"},
        "vocab": vocab, "special_tokens": specials,
        "audio": {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tekken.json").write_text(json.dumps(data))


def build_voxtral(folder):
    import torch
    from transformers import (
        MistralCommonBackend,
        VoxtralConfig,
        VoxtralForConditionalGeneration,
        VoxtralProcessor,
        WhisperFeatureExtractor,
    )

    torch.manual_seed(0)
    folder = Path(folder)
    _write_tekken(folder)
    tok = MistralCommonBackend.from_pretrained(str(folder), local_files_only=True)
    fe = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=30, n_fft=400)
    proc = VoxtralProcessor(feature_extractor=fe, tokenizer=tok)
    v = _V_N_SPECIAL + 256
    cfg = VoxtralConfig(
        audio_config=dict(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                          num_mel_bins=128, max_source_positions=1500, vocab_size=v),
        text_config=dict(model_type="llama", vocab_size=v, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         max_position_embeddings=4096, bos_token_id=1, eos_token_id=2, pad_token_id=11),
        audio_token_id=24)
    model = VoxtralForConditionalGeneration(cfg).eval()
    return _save(folder, model, proc, eos=2, pad=11)


# ------------------------------------------------------------------------------------ helpers
BUILDERS = {
    "qwen2_audio": build_qwen2_audio,
    "qwen25_omni": build_qwen25_omni,
    "gemma3n": build_gemma3n,
    "phi4_multimodal": build_phi4mm,
    "voxtral": build_voxtral,
}
"""registry family → fixture builder."""
MODEL_FAMILIES = tuple(BUILDERS)


def build(family: str, folder) -> Path:
    """Build one family's fixture into ``folder`` (skipped if ``folder/config.json`` exists)."""
    folder = Path(folder)
    if (folder / "config.json").is_file():
        return folder
    return Path(BUILDERS[family](folder))


def build_all(root, families=MODEL_FAMILIES) -> dict[str, Path]:
    """Build fixtures under ``root/<family>``; returns family → folder."""
    return {f: build(f, Path(root) / f) for f in families}


def registry_entry(family: str, folder, *, max_new_tokens: int = 6, thinker_max_new_tokens: int | None = None,
                   batch_size: int = 4, **more) -> dict:
    """Fields of a CPU registry entry for a tiny fixture."""
    e = dict(backend="transformers", model_type=family, weights=str(folder), revision=None, precision="float32",
             device="cpu", requires="cpu", max_new_tokens=max_new_tokens,
             thinker_max_new_tokens=thinker_max_new_tokens, max_audio_s=30, prompt_style="chat",
             batch_size=batch_size, disabled_reason=None, gated=False, notes="tiny random-weight test fixture")
    e.update(more)
    return e


# ------------------------------------------------------------------------------------ hf_asr checkpoints
# Plain recognisers for the ``hf_asr`` backend (not Speech LLMs: not in BUILDERS). Random weights; the
# output layers are kept to letters and space so that transcripts are words, and the weights are
# large enough (init_std 1) that a transcript depends on its audio.
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
WHISPER_SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>",
                    "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]


def build_wav2vec2_ctc(folder, *, attention_mask: bool = True):
    """A tiny ``Wav2Vec2ForCTC`` with a letter ``vocab.json`` (``Wav2Vec2CTCTokenizer``) and its
    feature extractor. ``attention_mask=False`` builds the wav2vec2-base layout (group norm, no
    attention mask: zero padding changes the output, so clips batch only with equal lengths)."""
    import torch
    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4,
             **{c: i + 5 for i, c in enumerate(_LETTERS.upper() + "'")}}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tok = Wav2Vec2CTCTokenizer(str(folder / "vocab.json"), unk_token="<unk>", pad_token="<pad>",
                               word_delimiter_token="|")
    fe = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                  return_attention_mask=attention_mask)
    torch.manual_seed(0)
    cfg = Wav2Vec2Config(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4),
                         num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                         feat_extract_norm="layer" if attention_mask else "group",
                         do_stable_layer_norm=attention_mask, pad_token_id=0)
    model = Wav2Vec2ForCTC(cfg).eval()
    with torch.no_grad():  # no <s>, </s>, <unk>: letters, apostrophe, word breaks and blanks only
        model.lm_head.bias[1:4] = -1e4
    model.save_pretrained(folder)
    Wav2Vec2Processor(feature_extractor=fe, tokenizer=tok).save_pretrained(folder)
    return folder


def build_whisper_asr(folder):
    """A tiny English-only ``WhisperForConditionalGeneration`` (80 mel bins, 1 + 1 layers) with a
    ``WhisperProcessor`` whose tokenizer is byte-level BPE without merges (``vocab.json`` of the
    256 byte symbols, an empty ``merges.txt``) plus Whisper's special tokens."""
    import torch
    from tokenizers import pre_tokenizers
    from transformers import (
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    (folder / "vocab.json").write_text(json.dumps({c: i for i, c in enumerate(alphabet)}))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    eot_s = WHISPER_SPECIALS[0]
    tok = WhisperTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), unk_token=eot_s,
                           bos_token=eot_s, eos_token=eot_s, pad_token=eot_s)
    tok.add_special_tokens({"additional_special_tokens": WHISPER_SPECIALS[1:]})
    ids = {t: tok.convert_tokens_to_ids(t) for t in WHISPER_SPECIALS}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    torch.manual_seed(0)
    cfg = WhisperConfig(vocab_size=len(tok), num_mel_bins=80, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_source_positions=1500, max_target_positions=64, init_std=1.0,
                        decoder_start_token_id=sot, eos_token_id=eot, pad_token_id=eot, bos_token_id=eot,
                        suppress_tokens=[], begin_suppress_tokens=None)
    model = WhisperForConditionalGeneration(cfg).eval()
    keep = set(tok.convert_tokens_to_ids(list(_LETTERS) + ["\u0120"])) | {eot}  # Ġ: the byte of a space
    with torch.no_grad():  # tied output layer: only letters, space and end-of-text can win
        w = model.model.decoder.embed_tokens.weight
        for i in range(w.shape[0]):
            if i not in keep:
                w[i] = 0
        w[eot] *= 0.5
    g = model.generation_config
    g.decoder_start_token_id, g.eos_token_id, g.pad_token_id = sot, eot, eot
    g.no_timestamps_token_id, g.is_multilingual, g.forced_decoder_ids = ids["<|notimestamps|>"], False, None
    g.suppress_tokens, g.begin_suppress_tokens = [], None
    model.save_pretrained(folder)
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tok).save_pretrained(folder)
    return folder


HF_ASR_BUILDERS = {"wav2vec2_ctc": build_wav2vec2_ctc, "whisper": build_whisper_asr}
"""hf_asr fixture name → builder."""


def hf_asr_entry(folder, *, model_type: str = "auto", max_new_tokens: int = 12, batch_size: int = 4, **more) -> dict:
    """Fields of a CPU ``hf_asr`` registry entry for a tiny checkpoint folder."""
    e = dict(backend="hf_asr", model_type=model_type, weights=str(folder), revision=None, precision="float32",
             device="cpu", requires="cpu", max_new_tokens=max_new_tokens, max_audio_s=30, batch_size=batch_size,
             notes="tiny random-weight hf_asr test fixture")
    e.update(more)
    return e


def registry_yaml(path, entries: dict[str, dict]) -> Path:
    """Write ``{model id: fields}`` as a registry file; returns its path."""
    path = Path(path)
    path.write_text(yaml.safe_dump(entries, sort_keys=False))
    return path


def use_registry(monkeypatch, path) -> None:
    """Make ``path`` the registry every ``aiplib`` call reads (ids, ``resolve``, stage 7)."""
    import functools

    from aiplib.inference.models import registry

    # a fresh cache for the test; the packaged registry's cache is restored untouched afterwards
    monkeypatch.setattr(registry, "_cached_parse", functools.lru_cache(maxsize=8)(registry._cached_parse.__wrapped__))
    monkeypatch.setattr(registry, "REGISTRY_PATH", Path(path))


def scan_for(root, needle: str) -> list[str]:
    """Files under ``root`` whose bytes contain ``needle``."""
    hits = []
    for p in Path(root).rglob("*"):
        if p.is_file():
            try:
                if needle.encode() in p.read_bytes():
                    hits.append(str(p))
            except OSError:
                pass
    return hits
