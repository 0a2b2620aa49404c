"""Qwen2-Audio-7B-Instruct (``Qwen2AudioForConditionalGeneration``).

Prompt: the processor's chat template (default system turn "You are a helpful assistant.") with
``Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>`` before the task text; the processor expands
``<|AUDIO|>`` to one token per 40 ms of audio (25 per second). Features: 128-bin Whisper log-mel,
always padded to 30 s (3,000 frames) with ``feature_attention_mask``.
"""
from __future__ import annotations

from aiplib.inference.models.adapters import Adapter


class Qwen2AudioAdapter(Adapter):
    model_type = "qwen2_audio"
    model_class = "Qwen2AudioForConditionalGeneration"
    feature_keys = ("input_features", "feature_attention_mask")

    @staticmethod
    def fallback_chat_template(processor):
        return processor.default_chat_template  # hub folders without chat_template.json

    def audio_item(self, audio=None):
        return {"type": "audio", "audio_url": "stimulus.wav"}


ADAPTER = Qwen2AudioAdapter
