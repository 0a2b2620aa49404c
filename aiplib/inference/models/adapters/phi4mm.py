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
    def load_model(cls, source, **kw):
        model = super().load_model(source, **kw)
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
        hub = {k: v for k, v in kw.items() if k in ("revision", "local_files_only", "token")}
        model.load_adapter(
            source,
            adapter_name="speech",
            adapter_kwargs={"subfolder": SPEECH_LORA, **hub},
            device_map=kw.get("device_map"),
        )
        model.set_adapter("speech")
        model._aip_speech_lora = True
        return model.eval()


#: The adapter this module registers (:data:`aiplib.inference.models.adapters.ADAPTER_MODULES`).
ADAPTER = Phi4MultimodalAdapter
