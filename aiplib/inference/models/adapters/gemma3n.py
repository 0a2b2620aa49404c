"""Gemma 3n E4B-it (``Gemma3nForConditionalGeneration``), audio + text.

The audio item renders as ``<audio_soft_token>``, which the processor expands to 188 audio tokens
per clip; features: 128-bin log-mel with ``input_features_mask``. The processor pads features to the
longest clip and the conformer sees that padding, so batches join only clips of equal length. The
weights are gated. Without a usable timm, the unused vision tower is a stub
(:func:`aiplib.inference.models.adapters.no_timm_vision_patch`).
"""

from __future__ import annotations

from aiplib.inference.models.adapters import Adapter, no_timm_vision_patch


class Gemma3nAdapter(Adapter):
    model_type = "gemma3n"
    model_class = "Gemma3nForConditionalGeneration"
    feature_keys = ("input_features", "input_features_mask")
    same_length_batches = True

    @classmethod
    def prepare(cls):
        super().prepare()
        no_timm_vision_patch()


#: The adapter this module registers (:data:`aiplib.inference.models.adapters.ADAPTER_MODULES`).
ADAPTER = Gemma3nAdapter
