"""Qwen2.5-Omni-3B / -7B, text output only: the thinker
(``Qwen2_5OmniThinkerForConditionalGeneration``).

The paper called the full model's ``generate(..., max_new_tokens=64)``, which passes only
``thinker_``-prefixed options on, so the thinker's default 1024 applied: the thinker is called with
``entry.thinker_max_new_tokens`` (1024), else ``entry.max_new_tokens``. The processor pads features
to 300 s; the thinker reads only the valid frames, so the adapter pads to ``entry.max_audio_s`` (30
s): identical outputs, ~14× faster. 25 audio tokens per second.
"""

from __future__ import annotations

import math

from aiplib.inference.models.adapters import Adapter


class Qwen25OmniAdapter(Adapter):
    model_type = "qwen25_omni"
    model_class = "Qwen2_5OmniThinkerForConditionalGeneration"
    feature_keys = ("input_features", "feature_attention_mask")
    needs_video_stub = True

    def __init__(self, entry, processor, model):
        super().__init__(entry, processor, model)
        fe = processor.feature_extractor
        seconds = int(math.ceil(float(entry.max_audio_s)))
        if getattr(fe, "chunk_length", 0) > seconds:
            fe.chunk_length = seconds
            fe.n_samples = seconds * fe.sampling_rate
            fe.nb_max_frames = fe.n_samples // fe.hop_length

    def token_limit(self) -> int:
        t = self.entry.thinker_max_new_tokens
        return int(t if t is not None else self.entry.max_new_tokens)


#: The adapter this module registers (:data:`aiplib.inference.models.adapters.ADAPTER_MODULES`).
ADAPTER = Qwen25OmniAdapter
