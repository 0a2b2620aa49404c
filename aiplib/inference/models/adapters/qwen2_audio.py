"""Qwen2-Audio-7B-Instruct (``Qwen2AudioForConditionalGeneration``): the processor's chat template
with ``Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>`` before the task text, 25 audio tokens per
second; 128-bin log-mel features always padded to 30 s.
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


#: The adapter this module registers (:data:`aiplib.inference.models.adapters.ADAPTER_MODULES`).
ADAPTER = Qwen2AudioAdapter
