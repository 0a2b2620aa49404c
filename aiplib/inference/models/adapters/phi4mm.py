"""Phi-4-multimodal-instruct with its speech LoRA (``Phi4MultimodalForCausalLM``; the
``speech-lora`` subfolder loaded with ``load_adapter``, needs ``peft``; a folder without it, the
tiny fixtures, is used as it is). Prompt ``<|user|><|audio|>{task}<|end|><|assistant|>``, about 12.5
audio tokens per second. The conformer sees a shorter clip's padded frames, so batches join only
clips of equal length.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiplib.core.errors import MissingPackageError
from aiplib.inference.models.adapters import Adapter

log = logging.getLogger(__name__)
#: The speech LoRA adapter of the Phi-4 multimodal checkpoint.
SPEECH_LORA = "speech-lora"


class Phi4MultimodalAdapter(Adapter):
    model_type = "phi4_multimodal"
    model_class = "Phi4MultimodalForCausalLM"
    feature_keys = ("audio_input_features", "audio_embed_sizes")
    needs_image_stub = True
    same_length_batches = True

    @staticmethod
    def fallback_chat_template(processor):
        return getattr(
            processor.tokenizer, "chat_template", None
        )  # the processor loses its own on reload

    @classmethod
    def load_model(
        cls,
        source: str,
        *,
        local_files_only: bool = False,
        revision: str | None = None,
        device_map: dict | None = None,
        dtype=None,
        attn_implementation: str | None = None,
        quantization_config=None,
    ):
        """:meth:`Adapter.load_model`, then the checkpoint's speech LoRA (``speech-lora/``) when it
        has one (``peft`` needed)."""
        model = super().load_model(
            source,
            local_files_only=local_files_only,
            revision=revision,
            device_map=device_map,
            dtype=dtype,
            attn_implementation=attn_implementation,
            quantization_config=quantization_config,
        )
        if Path(source).is_dir() and not (Path(source) / SPEECH_LORA).is_dir():
            log.info("%s has no %s/ folder: running without the speech LoRA", source, SPEECH_LORA)
            model._aip_speech_lora = False
            return model
        try:
            import peft  # noqa: F401, PLC0415
        except ModuleNotFoundError:
            raise MissingPackageError(
                "Phi-4-multimodal's speech adapter needs the Python package "
                "'peft'; install it with `pip install peft`"
            ) from None
        hub = {"local_files_only": local_files_only}
        if revision is not None:
            hub["revision"] = revision
        model.load_adapter(
            source,
            adapter_name="speech",
            adapter_kwargs={"subfolder": SPEECH_LORA, **hub},
            device_map=device_map,
        )
        model.set_adapter("speech")
        model._aip_speech_lora = True
        return model.eval()


#: The adapter this module registers (:data:`aiplib.inference.models.adapters.ADAPTER_MODULES`).
ADAPTER = Phi4MultimodalAdapter
