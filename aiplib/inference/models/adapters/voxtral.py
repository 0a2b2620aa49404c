"""Voxtral-Mini-3B-2507 (``VoxtralForConditionalGeneration``), chat mode: each waveform goes in as a
base64 16-bit WAV through the chat template (mistral-common, which pads the audio to a multiple of
30 s: ``[BEGIN_AUDIO]`` + 375 ``[AUDIO]`` tokens per 30 s). Needs ``mistral-common``.
"""

from __future__ import annotations

import base64

from aiplib.inference.models.adapters import Adapter, wav_bytes

#: id of [AUDIO] (hard-coded in VoxtralProcessor)
AUDIO_TOKEN_ID = 24


class VoxtralAdapter(Adapter):
    model_type = "voxtral"
    # the default feature_keys and placeholder (processor.audio_token)
    model_class = "VoxtralForConditionalGeneration"

    @property
    def placeholder_id(self) -> int:
        return AUDIO_TOKEN_ID

    def audio_item(self, audio=None):
        return {"type": "audio", "base64": base64.b64encode(wav_bytes(audio)).decode("ascii")}

    def encode(self, audios, prompts):
        convs = [self.conversation(p, a) for a, p in zip(audios, prompts)]
        inputs = self.processor.apply_chat_template(
            convs, tokenize=True, return_dict=True, return_tensors="pt"
        )
        texts = [
            self.tokenizer.decode(row, skip_special_tokens=False)
            for row in inputs["input_ids"].tolist()
        ]
        return inputs, texts


#: The adapter this module registers (:data:`aiplib.inference.models.adapters.ADAPTER_MODULES`).
ADAPTER = VoxtralAdapter
