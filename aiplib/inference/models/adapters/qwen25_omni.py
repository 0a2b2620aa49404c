"""Qwen2.5-Omni-3B / -7B, text output only: the *thinker* (``Qwen2_5OmniThinkerForConditionalGeneration``).

The thinker class loads straight from the full checkpoint folder and leaves the talker and the
token-to-wave modules unloaded (no speech output, less memory).

Generation limit
----------------
The paper called the full model's ``generate(..., max_new_tokens=64)``. That wrapper passes only
``thinker_``-prefixed options to the thinker and its own default ``thinker_max_new_tokens=1024``
wins (verified with transformers 5: ``max_new_tokens=8`` still produced 1,024 tokens), so the
paper's Qwen2.5-Omni responses were limited by the thinker's 1,024 tokens, not by 64. To reproduce
the paper, the thinker is called with ``max_new_tokens = entry.thinker_max_new_tokens`` (registry
field, 1024 for both entries); when that field is null, ``entry.max_new_tokens`` applies.

Feature window
--------------
The processor pads every clip's log-mel features to the feature extractor's ``chunk_length``
(300 s on the hub), which costs about 0.7 s of CPU per stimulus. The thinker reads only the frames
that ``feature_attention_mask`` marks valid, and Whisper's log-mel of a clip does not depend on how
much silence follows it (the padding never sets the spectrogram maximum), so the adapter pads to
``entry.max_audio_s`` (30 s) instead: identical inputs and outputs (checked on the tiny fixture),
~14× faster feature extraction.

Prompt: the hub chat template (default "You are Qwen, a virtual human …" system turn) with
``<|audio_bos|><|AUDIO|><|audio_eos|>`` before the task text; 25 audio tokens per second.
"""
from __future__ import annotations

import math

from aiplib.inference.models.adapters import Adapter

__all__ = ["Qwen25OmniAdapter", "ADAPTER"]


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


ADAPTER = Qwen25OmniAdapter
