"""Adapters of the ``transformers`` backend: one module per Speech LLM ``model_type``, imported on
demand.

An adapter builds the chat with the model's audio placeholder, calls the processor with ``audio=``,
checks that the inputs hold the audio features and placeholder tokens (:meth:`Adapter.check_inputs`:
a misnamed argument is silently ignored and the model answers from the text alone), generates
greedily and decodes the new tokens. Where torchvision / timm cannot be imported,
:func:`no_torchvision_patch` and :func:`no_timm_vision_patch` replace the image / video
sub-processors and Gemma 3n's vision tower, which audio never uses, by inert stubs.
"""

from __future__ import annotations

import functools
import importlib
import io
import logging

import numpy as np

from aiplib.io.audio import SR

log = logging.getLogger(__name__)


def _given(**options) -> dict:
    """The ``options`` that are set (not None), for a ``from_pretrained`` call."""
    return {name: value for name, value in options.items() if value is not None}


#: registry model_type → adapter module of this package (each defines ADAPTER, an Adapter subclass)
ADAPTER_MODULES = {
    "qwen2_audio": "qwen2_audio",
    "qwen25_omni": "qwen25_omni",
    "gemma3n": "gemma3n",
    "phi4_multimodal": "phi4mm",
    "voxtral": "voxtral",
}


class AudioInputError(RuntimeError):
    """The processor output lacks the audio features or the audio placeholder tokens."""


def get_adapter(model_type: str):
    """The adapter class of a registry ``model_type``.

    Raises
    ------
    KeyError
        If the model type has no adapter; the message lists the known model types.
    """
    if model_type not in ADAPTER_MODULES:
        raise KeyError(
            f"no transformers adapter for model_type {model_type!r}; "
            f"known model types: {', '.join(ADAPTER_MODULES)}"
        )
    return importlib.import_module(f"{__name__}.{ADAPTER_MODULES[model_type]}").ADAPTER


def wav_bytes(y: np.ndarray, *, sr: int = SR) -> bytes:
    """A float32 waveform as the bytes of a 16-bit PCM WAV file (in memory)."""
    import soundfile as sf  # noqa: PLC0415

    buf = io.BytesIO()
    sf.write(buf, np.asarray(y, dtype=np.float32), sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


class Adapter:
    """Input builder + generate/decode for one model type (subclass per model type).

    Class attributes: ``model_type`` (registry), ``model_class`` (the ``transformers`` class
    loaded), ``feature_keys`` (what the processor output must hold when audio was given),
    ``needs_image_stub`` / ``needs_video_stub`` (:func:`no_torchvision_patch`),
    ``same_length_batches``.
    """

    model_type = ""
    model_class = ""
    feature_keys: tuple[str, ...] = ("input_features",)
    needs_image_stub = False
    needs_video_stub = False
    same_length_batches = (
        False  # True when the audio encoder sees the padding: a batch joins clips of equal length
    )

    def __init__(self, entry, processor, model):
        self.entry = entry
        self.processor = processor
        self.model = model
        if hasattr(self.tokenizer, "padding_side"):
            self.tokenizer.padding_side = "left"
        self.fix_generation_config()

    @classmethod
    def prepare(cls) -> None:
        """Patches needed before the processor / model can be loaded on this machine."""
        if cls.needs_video_stub:
            no_torchvision_patch()
        if cls.needs_image_stub:
            no_torchvision_patch(image=True)

    @classmethod
    def load_processor(
        cls, source: str, *, local_files_only: bool = False, revision: str | None = None
    ):
        """``AutoProcessor.from_pretrained`` of ``source`` (a folder or hub id; ``revision``: the
        pinned commit, when set); a processor that lost its chat template on reload gets
        :meth:`fallback_chat_template`."""
        from transformers import AutoProcessor  # noqa: PLC0415

        hub_options = _given(local_files_only=local_files_only, revision=revision)
        proc = AutoProcessor.from_pretrained(source, **hub_options)
        if (
            getattr(proc, "chat_template", None) is None
            and cls.fallback_chat_template(proc) is not None
        ):
            proc.chat_template = cls.fallback_chat_template(proc)
        return proc

    @staticmethod
    def fallback_chat_template(processor):
        """Chat template used when the processor has none (None: leave it so)."""
        return None

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
        """``<model_class>.from_pretrained`` of ``source`` in eval mode, passed the options set
        (not None): the hub's ``local_files_only`` and pinned ``revision``, the ``device_map``, the
        torch ``dtype``, the attention kernel and the 8-bit ``quantization_config``."""
        import transformers  # noqa: PLC0415

        options = _given(
            local_files_only=local_files_only,
            revision=revision,
            device_map=device_map,
            dtype=dtype,
            attn_implementation=attn_implementation,
            quantization_config=quantization_config,
        )
        return getattr(transformers, cls.model_class).from_pretrained(source, **options).eval()

    @property
    def tokenizer(self):
        return getattr(self.processor, "tokenizer", self.processor)

    @property
    def generator(self):
        """The module whose ``generate`` is called (Qwen2.5-Omni: the thinker)."""
        return self.model

    def fix_generation_config(self) -> None:
        """Give generate a pad token (the tokenizer's, else the first eos)."""
        gc = getattr(self.generator, "generation_config", None)
        if gc is not None and gc.pad_token_id is None:
            pad = getattr(self.tokenizer, "pad_token_id", None)
            gc.pad_token_id = pad if pad is not None else _eos_ids(gc)[0]

    @property
    def placeholder(self) -> str:
        """The audio placeholder token as it appears in the rendered prompt."""
        return getattr(self.processor, "audio_token", None) or getattr(
            self.tokenizer, "audio_token"
        )

    @property
    def placeholder_id(self) -> int:
        return int(self.tokenizer.convert_tokens_to_ids(self.placeholder))

    def audio_item(self, audio=None) -> dict:
        """The audio part of the user turn, as the model's chat template expects it."""
        return {"type": "audio", "audio": "stimulus.wav"}

    def conversation(self, prompt: str | None, audio=None) -> list[dict]:
        """One user turn: the audio (:meth:`audio_item`), then the prompt text (if any)."""
        content = [self.audio_item(audio), *([{"type": "text", "text": prompt}] if prompt else [])]
        return [{"role": "user", "content": content}]

    def render(self, prompt: str | None) -> str:
        """The chat prompt as text (audio placeholder not yet expanded)."""
        return self.processor.apply_chat_template(
            self.conversation(prompt), add_generation_prompt=True, tokenize=False
        )

    def encode(self, audios: list[np.ndarray], prompts: list[str | None]):
        """Processor output (``BatchFeature``, left-padded) and the rendered prompts."""
        texts = [self.render(p) for p in prompts]
        inputs = self.processor(
            text=texts, audio=list(audios), sampling_rate=SR, return_tensors="pt", padding=True
        )
        return inputs, texts

    def check_inputs(self, inputs, n: int) -> None:
        """Raise :class:`AudioInputError` unless every row carries audio.

        Checks the feature tensors named in :attr:`feature_keys` (present, batch of audio
        non-empty) and at least one audio placeholder token per row of ``input_ids``.
        """
        missing = [k for k in self.feature_keys if k not in inputs or inputs[k] is None]
        if missing:
            raise AudioInputError(
                f"{self.model_type}: the processor output has no {', '.join(missing)} (keys: "
                f"{', '.join(inputs.keys())}); the audio was dropped"
            )
        ids = inputs["input_ids"]
        per_row = (ids == self.placeholder_id).sum(dim=1)
        if ids.shape[0] != n or bool((per_row == 0).any()):
            raise AudioInputError(
                f"{self.model_type}: {int((per_row == 0).sum())} of {n} prompts have no audio "
                f"placeholder {self.placeholder!r}"
            )

    def token_limit(self) -> int:
        """New-token limit of one response (``entry.max_new_tokens``)."""
        return int(self.entry.max_new_tokens)

    def generate_kwargs(self) -> dict:
        return {
            "do_sample": False,
            "num_beams": 1,
            "max_new_tokens": self.token_limit(),
            **(self.entry.extra.get("generate_kwargs") or {}),
        }

    def generate(self, inputs):
        """New token ids, shape (batch, n_new) (the prompt part cut off)."""
        import torch  # noqa: PLC0415

        inputs = inputs.to(self.device)
        dtype = self.dtype
        if dtype is not None:
            for k, v in list(inputs.items()):
                if torch.is_tensor(v) and v.is_floating_point():
                    inputs[k] = v.to(dtype)
        with torch.inference_mode():
            out = self.generator.generate(**inputs, **self.generate_kwargs())
        seq = out.sequences if hasattr(out, "sequences") else out
        return seq[:, inputs["input_ids"].shape[1] :]

    def decode(self, new_tokens) -> list[str]:
        return [
            t.strip()
            for t in self.tokenizer.batch_decode(new_tokens.tolist(), skip_special_tokens=True)
        ]

    def n_new_tokens(self, new_tokens) -> list[int]:
        """Generated tokens per row, not counting padding after an early end-of-sequence."""
        gc = self.generator.generation_config
        pad = gc.pad_token_id
        eos = set(_eos_ids(gc))
        counts = []
        for row in new_tokens.tolist():
            n = next((k + 1 for k, t in enumerate(row) if t in eos), None)
            if n is None:  # no end-of-sequence: trailing padding does not count
                n = len(row)
                while n and pad is not None and row[n - 1] == pad and pad not in eos:
                    n -= 1
            counts.append(n)
        return counts

    @property
    def device(self):
        return getattr(self.generator, "device", None) or "cpu"

    @property
    def dtype(self):
        return getattr(self.generator, "dtype", None)


def _eos_ids(gc) -> list:
    """A generation config's end-of-sequence ids as a list (``[None]`` when it has none)."""
    eos = gc.eos_token_id
    return list(eos) if isinstance(eos, (list, tuple)) else [eos]


@functools.cache
def _importable(name: str) -> bool:
    try:  # absent (ModuleNotFoundError) or broken, e.g. "operator torchvision::nms does not exist"
        importlib.import_module(name)
        return True
    except Exception:  # noqa: BLE001
        return False


def torchvision_ok() -> bool:
    """True when torchvision imports (cached)."""
    return _importable("torchvision")


@functools.cache  # each patch is made once
def no_torchvision_patch(*, image: bool = False) -> bool:
    """Let processors with video / image sub-processors load without torchvision.

    Video: ``AutoVideoProcessor`` returns an inert ``NoVideoProcessor`` and the processor's class
    check accepts it. ``image=True`` also makes ``AutoImageProcessor.from_pretrained`` fall back
    to an inert ``NoImageProcessor`` when the real one cannot load (Phi-4-multimodal's image
    processor exists only as a torchvision backend). Idempotent; does nothing (returns False)
    when torchvision works.
    """
    if torchvision_ok():
        return False
    from transformers.processing_utils import ProcessorMixin  # noqa: PLC0415

    if not image:
        import transformers.models.auto.video_processing_auto as vpa  # noqa: PLC0415

        class _StubAutoVideoProcessor:
            # transformers' protocol: called with the library's own arguments, all ignored
            from_pretrained = classmethod(_inert_video_processor)

        vpa.AutoVideoProcessor = _StubAutoVideoProcessor
        orig_check = ProcessorMixin.check_argument_for_proper_class
        from transformers.video_processing_utils import VideoProcessorMixin  # noqa: PLC0415

        def _check(self, argument_name, argument):
            if "video_processor" in argument_name and isinstance(argument, VideoProcessorMixin):
                return type(argument)
            return orig_check(self, argument_name, argument)

        ProcessorMixin.check_argument_for_proper_class = _check
    else:
        import transformers.models.auto.image_processing_auto as ipa  # noqa: PLC0415

        orig_cls = ipa.AutoImageProcessor

        def _image_processor_or_stub(cls, *args, **kwargs):
            """The real image processor, else an inert one (transformers' own arguments passed
            through)."""
            try:
                return orig_cls.from_pretrained(*args, **kwargs)
            except Exception:  # noqa: BLE001 - ImportError (torchvision) or unknown stub type
                return stub_processor("image")

        class _AutoImageProcessor(orig_cls):
            from_pretrained = classmethod(_image_processor_or_stub)

        ipa.AutoImageProcessor = _AutoImageProcessor
    return True


def _inert_video_processor(cls, *args, **kwargs):
    """``AutoVideoProcessor.from_pretrained`` without torchvision: an inert processor, whatever
    transformers passes."""
    return stub_processor("video")


def _refuse_images(self, *args, **kwargs):
    """The stub image processor's ``preprocess``: images cannot be processed here."""
    raise RuntimeError("image processing is stubbed out (torchvision unusable here)")


def _refuse_vision(self, *args, **kwargs):
    """The stub vision tower's ``forward``: audio and text only."""
    raise RuntimeError(
        "the Gemma 3n vision tower is stubbed out (timm unusable here); audio and text only"
    )


@functools.cache
def _stub_classes() -> dict:
    from transformers.image_processing_utils import BaseImageProcessor  # noqa: PLC0415
    from transformers.video_processing_utils import VideoProcessorMixin  # noqa: PLC0415

    class NoVideoProcessor(VideoProcessorMixin):
        """Placeholder video processor (audio/text-only use, no torchvision)."""

        temporal_patch_size = 2
        merge_size = 2
        patch_size = 14

    class NoImageProcessor(BaseImageProcessor):
        """Placeholder image processor (audio/text-only use, no torchvision)."""

        model_input_names = ["pixel_values"]
        # transformers' protocol: called with the library's own arguments
        preprocess = _refuse_images

    return {"video": NoVideoProcessor, "image": NoImageProcessor}


def stub_processor(kind: str):
    """An inert ``"video"`` or ``"image"`` processor instance (for building processors without
    torchvision)."""
    return _stub_classes()[kind]()


@functools.cache  # the patch is made once
def no_timm_vision_patch() -> bool:
    """Build Gemma 3n's vision tower as a parameter-free stub when timm is unusable.

    Gemma 3n's vision tower is a timm MobileNetV5; audio-only inference never calls it. With the
    patch, loading a real checkpoint reports the vision-tower weights as unused (a warning) and
    an image input raises. Idempotent; does nothing (returns False) when timm works.
    """
    if torchvision_ok() and _importable("timm"):
        return False
    import transformers.models.gemma3n.modeling_gemma3n as g3n  # noqa: PLC0415
    from torch import nn  # noqa: PLC0415

    class _StubVisionTower(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config

        # torch's protocol: called with the model's own arguments
        forward = _refuse_vision

    orig = g3n.AutoModel

    def _vision_stub_or_model(config, *args, **kwargs):
        """``AutoModel.from_config``: the stub for Gemma 3n's vision tower, else the real model
        (transformers' own arguments passed through)."""
        if getattr(config, "model_type", "") == "gemma3n_vision":
            return _StubVisionTower(config)
        return orig.from_config(config, *args, **kwargs)

    class _AutoModel:
        from_config = staticmethod(_vision_stub_or_model)

    g3n.AutoModel = _AutoModel
    return True
