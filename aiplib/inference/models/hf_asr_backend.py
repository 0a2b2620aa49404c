"""``hf_asr`` backend: any Hugging Face speech-recognition checkpoint, by id and revision.

Registry entry::

    my_wav2vec2:
      backend: hf_asr
      model_type: auto          # auto | ctc | seq2seq
      weights: facebook/wav2vec2-base-960h   # hub id or a local save_pretrained folder
      revision: <commit>
      batch_size: 8

CTC models (wav2vec2, HuBERT …) are decoded greedily, seq2seq ones (Whisper, Moonshine …) with
``generate`` (one beam, at most ``entry.max_new_tokens`` tokens, a multilingual Whisper as English);
``auto`` picks from the config. Audio is cut to ``entry.max_audio_s`` (30 s). Without an attention
mask only clips of equal length share a batch. These models take no task prompt (``prompt_style:
none``).
"""

from __future__ import annotations

import inspect
import os
import time
from pathlib import Path

import numpy as np

from aiplib.core.errors import ModelUnavailableError
from aiplib.inference.models.transformers_backend import (
    DTYPES,
    HubRecogniser,
    folder_fingerprint,
    hub_errors,
)
from aiplib.io.audio import SR


def detect_kind(config, wanted: str = "auto") -> str:
    """``"ctc"`` or ``"seq2seq"`` for a transformers config, from transformers' own model mappings
    (``auto``: CTC if the model type maps to ``AutoModelForCTC``).

    Raises
    ------
    ModelUnavailableError
        If the model type maps to neither, or not to the ``wanted`` one (the message says which).
    """
    from transformers.models.auto.modeling_auto import (  # noqa: PLC0415
        MODEL_FOR_CTC_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    mt = getattr(config, "model_type", None)
    found = [
        k
        for k, names in (
            ("ctc", MODEL_FOR_CTC_MAPPING_NAMES),
            ("seq2seq", MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES),
        )
        if mt in names
    ]
    if not found:
        raise ModelUnavailableError(
            f"model type {mt!r} is neither a CTC nor a speech sequence-to-sequence model in "
            "transformers (AutoModelForCTC / AutoModelForSpeechSeq2Seq); hf_asr cannot run it"
        )
    if wanted == "auto" or wanted in found:
        return found[0] if wanted == "auto" else wanted
    raise ModelUnavailableError(
        f"model_type {wanted!r}, but transformers runs a {mt!r} checkpoint as "
        f"{found[0]}; set model_type: {found[0]} (or auto)"
    )


def _check_folder(entry, folder: Path) -> None:
    """One line for ``weights:`` naming a local folder (absolute, or starting with ``.`` or ``~``)
    that is missing or holds no config; any other value is left to the hub."""
    w = str(entry.weights)
    shown = Path(os.path.abspath(folder))  # errors name the absolute path tried
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise ModelUnavailableError(
                f"{entry.id}: weights folder {shown} has no config.json (save the "
                "checkpoint there with save_pretrained, model and processor)"
            )
    elif folder.is_absolute() or w.startswith((".", "~")):
        raise ModelUnavailableError(
            f"{entry.id}: weights folder {shown} does not exist (a hub id is "
            "'name' or 'namespace/name')"
        )


class HFASRRecogniser(HubRecogniser):
    """A transformers ASR checkpoint (CTC or seq2seq) behind the Recogniser interface.

    ``batch_size``, ``device``, ``precision`` (float32, float16, bfloat16) override the entry's;
    ``local_files_only`` defaults to True for a local folder or under ``HF_HUB_OFFLINE``.

    Raises
    ------
    MissingPackageError
        transformers is not installed.
    ModelUnavailableError
        Gated, missing or unreachable weights, a checkpoint that is no ASR model or not of the
        entry's ``model_type``, or CUDA asked for where torch sees no GPU (one line).
    AiplibParameterError
        An unsupported precision or a non-positive batch size.
    """

    backend = "hf_asr"

    def __init__(
        self,
        entry,
        *,
        batch_size: int | None = None,
        device: str | None = None,
        precision: str | None = None,
        local_files_only: bool | None = None,
        path: str | None = None,
    ):
        transformers, torch, folder, hub_kw = self._setup(
            entry, batch_size, device, precision, local_files_only
        )
        _check_folder(entry, folder)
        t0 = time.perf_counter()
        with hub_errors(entry):
            config = transformers.AutoConfig.from_pretrained(self.source, **hub_kw)
            try:
                self.kind = detect_kind(config, entry.model_type)
            except ModelUnavailableError as exc:
                raise ModelUnavailableError(f"{entry.id}: {self.source}: {exc}") from None
            auto = (
                transformers.AutoModelForCTC
                if self.kind == "ctc"
                else transformers.AutoModelForSpeechSeq2Seq
            )
            self.processor = transformers.AutoProcessor.from_pretrained(self.source, **hub_kw)
            self.model = (
                auto.from_pretrained(
                    self.source, dtype=getattr(torch, DTYPES[self.precision]), **hub_kw
                )
                .to(self.device)
                .eval()
            )
        self.load_s = time.perf_counter() - t0
        self.feature_extractor = getattr(self.processor, "feature_extractor", self.processor)
        self.masked = bool(getattr(self.feature_extractor, "return_attention_mask", False))
        # Whisper-style extractors pad every clip to one fixed window (padding="max_length" by
        # default): any clips batch together; the others pad to the longest clip of the batch
        pad = inspect.signature(self.feature_extractor.__call__).parameters.get("padding")
        self.fixed_window = pad is not None and pad.default == "max_length"
        self.revision = self._loaded_revision(config, hub_kw)
        self.weights_sha256 = folder_fingerprint(folder) if self.local else None
        kw = {"do_sample": False, "num_beams": 1, "max_new_tokens": int(entry.max_new_tokens)}
        if self.kind == "seq2seq" and getattr(
            getattr(self.model, "generation_config", None), "is_multilingual", False
        ):
            kw.update(language="en", task="transcribe")  # a multilingual Whisper decodes English
        self.generate_kwargs = {**kw, **(entry.extra.get("generate_kwargs") or {})}
        self._stats["n_prompts_ignored"] = 0

    def _loaded_revision(self, config, hub_kw: dict) -> str:
        """:meth:`_snapshot_revision`, else the hub-cache snapshot the config came from, else
        ``local`` / the requested revision / ``unknown``."""
        rev = self._snapshot_revision(config, self.model.config)
        if (
            rev is None and not self.local
        ):  # the hub cache file the config came from: .../snapshots/<commit>/
            from transformers.utils import cached_file  # noqa: PLC0415

            try:
                p = Path(cached_file(self.source, "config.json", **hub_kw)).parent
                rev = p.name if p.parent.name == "snapshots" else None
            except Exception:  # noqa: BLE001 - provenance only; the model has loaded
                pass
        return rev or ("local" if self.local else (self.entry.revision or "unknown"))

    def _info(self) -> dict:
        ctc = {"rule": "arg-max per frame, repeats merged, blank removed (tokenizer.batch_decode)"}
        decoding = {
            "greedy": True,
            "max_audio_s": self.entry.max_audio_s,
            **(ctc if self.kind == "ctc" else self.generate_kwargs),
        }
        return {
            "kind": self.kind,
            "dtype": str(self.model.dtype),
            "attention_mask": self.masked,
            "batching": (
                "fixed window"
                if self.fixed_window
                else "padded with attention mask"
                if self.masked
                else "equal-length clips only"
            ),
            "prompt": "none: the model takes no task prompt",
            "decoding": decoding,
        }

    def generate(self, audios, prompts):
        """Transcribe a batch greedily (:meth:`Recogniser.generate`); a non-empty prompt is ignored
        and counted."""
        clips, prompts = self.checked(audios, prompts)
        self._stats["n_prompts_ignored"] += sum(p is not None for p in prompts)
        return self._decode(
            clips, prompts, [None if self.masked or self.fixed_window else len(c) for c in clips]
        )

    def _batch(self, clips: list[np.ndarray], prompts=None) -> list[str]:
        import torch  # noqa: PLC0415

        t0 = time.perf_counter()
        kw = {"return_attention_mask": True} if self.masked else {}
        if not self.fixed_window:
            kw["padding"] = True
        inputs = self.feature_extractor(clips, sampling_rate=SR, return_tensors="pt", **kw)
        name = self.model.main_input_name
        x = inputs[name].to(self.device, dtype=self.model.dtype)
        mask = inputs.get("attention_mask") if self.masked else None
        mask = mask.to(self.device) if mask is not None else None
        with torch.inference_mode():
            texts = self._ctc(x, mask) if self.kind == "ctc" else self._seq2seq(name, x, mask)
        self._count(clips, t0)
        return [str(t).strip() for t in texts]

    def _ctc(self, x, mask) -> list[str]:
        logits = self.model(x, attention_mask=mask).logits
        ids = logits.argmax(dim=-1)
        if mask is not None:  # frames beyond a clip's own length become blanks
            n_in = mask.sum(-1)
            out_lengths = getattr(self.model, "_get_feat_extract_output_lengths", None)
            if out_lengths is not None:  # the wav2vec2 family's own conv arithmetic
                lens = out_lengths(n_in).tolist()
            else:  # others: the same fraction of the output frames as of the input samples
                lens = [int(np.ceil(int(k) * ids.shape[1] / mask.shape[1])) for k in n_in]
            for i, k in enumerate(lens):
                ids[i, int(k) :] = self.model.config.pad_token_id
        tok = getattr(self.processor, "tokenizer", self.processor)
        return tok.batch_decode(ids.cpu().tolist(), skip_special_tokens=True)

    def _seq2seq(self, name: str, x, mask) -> list[str]:
        kw = {name: x, **self.generate_kwargs, **({} if mask is None else {"attention_mask": mask})}
        seq = self.model.generate(**kw)
        return self.processor.batch_decode(getattr(seq, "sequences", seq), skip_special_tokens=True)


#: The backend's entry point, ``load(entry, **options)`` (aiplib.inference.models.load_model).
load = HFASRRecogniser
