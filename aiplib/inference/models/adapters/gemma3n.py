"""Gemma 3n E4B-it (``Gemma3nForConditionalGeneration``), audio + text.

Prompt: the hub chat template; the audio item renders as ``<audio_soft_token>``, which the
processor expands to ``\\n\\n<start_of_audio>`` + 188 ``<audio_soft_token>`` + ``<end_of_audio>\\n\\n``
(a fixed number per clip). Features: 128-bin log-mel (``input_features``) with
``input_features_mask``.

Batches: the processor pads features to the longest clip of the batch and the conformer's
subsampling convolutions see that padding, so a mixed-length batch can change a response (seen
on the tiny fixture: 1 of 14); batches therefore only join clips of equal length
(``same_length_batches``), which a manifest provides (an item's stimuli are listed together).

The weights are gated: the backend turns the hub's refusal into a
:class:`~aiplib.core.errors.ModelUnavailableError` naming the licence page and ``hf auth login``.
Without a usable timm, the (unused) vision tower is replaced by a stub
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


ADAPTER = Gemma3nAdapter
