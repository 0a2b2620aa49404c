"""``transformers`` backend: the Speech LLMs (Qwen2-Audio, Qwen2.5-Omni, Phi-4-multimodal, Gemma 3n,
Voxtral), batched, greedy.

``weights`` is a hub id (at ``entry.revision`` when pinned) or a local ``save_pretrained`` folder
(nothing touches the network); ``precision`` ``float32``, ``float16``, ``bfloat16`` or ``int8_bnb``
(bitsandbytes); the adapter (:mod:`aiplib.inference.models.adapters`) picks the classes. Decoding is
greedy, at most ``entry.max_new_tokens`` new tokens (Qwen2.5-Omni: ``thinker_max_new_tokens``, 1024,
as in the paper), audio cut to ``entry.max_audio_s`` (30 s). Batches are left-padded;
:func:`check_batch_invariance` compares batch 1 with batch N.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import time
from pathlib import Path

from aiplib.core.errors import AiplibParameterError, MissingPackageError, ModelUnavailableError
from aiplib.inference.models.adapters import get_adapter
from aiplib.inference.models.base import Recogniser, batches_by_key, generate_throughput
from aiplib.inference.models.ct2_numerics import cpu_record
from aiplib.inference.models.paths import missing_local_weights
from aiplib.inference.models.registry import resolve_device
from aiplib.io.audio import SR

log = logging.getLogger(__name__)

#: precision → torch dtype
DTYPES = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
}
#: Largest weights (bytes, 4 GiB) hashed for provenance.
_HASH_LIMIT = 4 << 30


def hub_error_message(entry, exc: BaseException) -> str | None:
    """One actionable line for a hub refusal in ``exc``'s chain (a gated, missing or private
    repository, weights absent from the local cache while offline), or None if it is not one."""
    seen = set()
    while exc is not None and id(exc) not in seen:  # exc, its cause or context, theirs …
        seen.add(id(exc))
        message = _hub_refusal(entry, exc)
        if message is not None:
            return message
        exc = exc.__cause__ or exc.__context__
    return None


def _hub_refusal(entry, exc: BaseException) -> str | None:
    """The line for one exception of the chain (:func:`hub_error_message`), or None."""
    name = type(exc).__name__
    text = str(exc)
    if _is_gated(entry, exc):
        licence = entry.licence_url or f"https://huggingface.co/{entry.weights}"
        return (
            f"{entry.id}: {entry.weights} is gated — accept its licence at {licence} with your "
            "Hugging Face account, then run `hf auth login` (or set HF_TOKEN) on this machine and "
            "load again"
        )
    if name == "RepositoryNotFoundError":
        return f"{entry.id}: the hub has no repository {entry.weights!r} (or it is private)"
    if (
        name in ("LocalEntryNotFoundError", "OfflineModeIsEnabled")
        or "local_files_only" in text
        or "offline mode" in text.lower()
    ):
        return (
            f"{entry.id}: {entry.weights} is not in the local Hugging Face cache and the hub "
            f"cannot be reached (offline); download it once on a connected machine "
            f"(`hf download {entry.weights}`) or point `weights:` at a local folder"
        )
    return None


def _is_gated(entry, exc: BaseException) -> bool:
    """``exc`` says the repository is gated (or refuses a gated entry's access)."""
    name = type(exc).__name__
    status = getattr(getattr(exc, "response", None), "status_code", None)
    return (
        name == "GatedRepoError"
        or "gated repo" in str(exc).lower()
        or status in (401, 403)
        or (entry.gated and name in ("RepositoryNotFoundError", "HfHubHTTPError"))
    )


@contextlib.contextmanager
def hub_errors(entry, *, packages: bool = False):
    """Re-raise a hub refusal as one :class:`ModelUnavailableError` line (:func:`hub_error_message`)
    and, with ``packages``, a missing module as :class:`MissingPackageError`."""
    try:
        yield
    except (MissingPackageError, ModelUnavailableError):
        raise
    except Exception as exc:  # noqa: BLE001 - hub / transformers raise many types
        if packages and isinstance(exc, ModuleNotFoundError):
            pkg = {"mistral_common": "mistral-common"}.get(exc.name, exc.name)
            raise MissingPackageError(
                f"{entry.id} needs the Python package {pkg!r}; install it with `pip install {pkg}`"
            ) from exc
        msg = hub_error_message(entry, exc)
        if msg is not None:
            raise ModelUnavailableError(msg) from exc
        raise


def folder_fingerprint(folder: Path) -> str | None:
    """SHA-256 (hex) over the names and bytes of a checkpoint folder's ``*.safetensors`` / ``*.bin``
    files in name order; None when there are none or they exceed ``_HASH_LIMIT`` bytes."""
    files = sorted(
        p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file()
    )
    if not files or sum(p.stat().st_size for p in files) > _HASH_LIMIT:
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode())
        with open(p, "rb") as f:
            block = f.read(1 << 22)
            while block:
                h.update(block)
                block = f.read(1 << 22)
    return h.hexdigest()


def torch_numerics(torch, device: str) -> dict:
    """The numeric path of a torch model in this process, for the run log's ``numerics`` key.

    :func:`~aiplib.inference.models.ct2_numerics.cpu_record` plus ``"torch"``: ``cpu_capability``
    (``torch.backends.cpu.get_cpu_capability()``: the ISA of torch's CPU kernels, e.g. ``"AVX2"``),
    ``num_threads`` and ``num_interop_threads``, whether MKL and oneDNN (``mkldnn``) are built in,
    ``device`` and, on CUDA, ``cuda_device`` (the GPU's name). JSON-serialisable; never raises.
    """
    info = {"device": str(device)}
    try:
        info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        info["num_threads"] = torch.get_num_threads()
        info["num_interop_threads"] = torch.get_num_interop_threads()
        info["mkl"] = bool(torch.backends.mkl.is_available())
        info["mkldnn"] = bool(torch.backends.mkldnn.is_available())
        if str(device).startswith("cuda"):
            info["cuda_device"] = torch.cuda.get_device_name(torch.device(device))
    except Exception as exc:  # noqa: BLE001 - provenance only: an old torch lacks some of these
        info["error"] = f"{type(exc).__name__}: {exc}"
    record = cpu_record()
    record["torch"] = info
    return record


class HubRecogniser(Recogniser):
    """What the ``transformers`` and ``hf_asr`` backends share: the option checks, the weights'
    source and provenance, the batch loop, the counts and ``close``."""

    backend = ""
    precisions: tuple[str, ...] = tuple(DTYPES)

    def _setup(self, entry, batch_size, device, precision, local_files_only):
        """Check the options (the errors the subclasses list); returns ``(transformers, torch,
        folder, hub_kw)``: the entry's ``weights`` as a folder (``self.local`` when it is one,
        ``self.source`` the folder or hub id) and the ``from_pretrained`` keywords
        (``local_files_only``: default True for a folder or under ``HF_HUB_OFFLINE``; the pinned
        ``revision`` of a hub id)."""
        missing = missing_local_weights(entry.weights)
        if missing is not None:  # a local path, never taken for a hub id
            raise ModelUnavailableError(f"{entry.id}: weights folder {missing} does not exist")
        transformers = self._import_transformers()
        import torch  # noqa: PLC0415

        self.name = entry.id
        self.entry = entry
        self.batch_size = int(batch_size or entry.batch_size or 1)
        if self.batch_size <= 0:
            raise AiplibParameterError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.device = resolve_device(device or entry.device)
        self.precision = precision or entry.precision
        self._check_precision_and_device(torch)
        folder = Path(str(entry.weights)).expanduser()
        self.local = folder.is_dir()
        self.source = str(folder) if self.local else str(entry.weights)
        if local_files_only is None:
            local_files_only = self.local or os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        self.local_files_only = bool(local_files_only)
        hub_kw = {"local_files_only": self.local_files_only}
        if entry.revision and not self.local:
            hub_kw["revision"] = entry.revision
        self._stats = {"n_stimuli": 0, "n_batches": 0, "audio_s": 0.0, "generate_s": 0.0}
        return transformers, torch, folder, hub_kw

    def _import_transformers(self):
        """The ``transformers`` module; :class:`MissingPackageError` without it."""
        try:
            import transformers  # noqa: PLC0415
        except ModuleNotFoundError:
            raise MissingPackageError(
                f"the {self.backend} backend needs transformers 5; install it with "
                "`pip install 'transformers>=5'` (or the project's [llm] extra)"
            ) from None
        return transformers

    def _check_precision_and_device(self, torch) -> None:
        """The backend supports the precision; a CUDA device has a GPU."""
        if self.precision not in self.precisions:
            raise AiplibParameterError(
                f"{self.entry.id}: precision {self.precision!r} is not supported by the "
                f"{self.backend} backend (use {', '.join(self.precisions)})"
            )
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ModelUnavailableError(
                f"{self.entry.id} is set to run on CUDA but torch sees no GPU "
                f"(torch {torch.__version__}); set device: cpu or run on a GPU machine"
            )

    def _snapshot_revision(self, *configs) -> str | None:
        """The commit a config was loaded from, else the folder name of a hub-cache snapshot, else
        None."""
        for c in configs:
            if getattr(c, "_commit_hash", None):
                return str(c._commit_hash)
        p = Path(self.source)
        return p.name if self.local and p.parent.name == "snapshots" else None

    def info(self) -> dict:
        """Weights, revision loaded, classes, dtype, device, decoding, versions
        (JSON-serialisable)."""
        import torch  # noqa: PLC0415
        import transformers  # noqa: PLC0415

        return {
            "model": self.name,
            "backend": self.backend,
            "model_type": self.entry.model_type,
            "weights": self.entry.weights,
            "weights_path": self.source,
            "weights_sha256": self.weights_sha256,
            "revision": self.revision,
            "revision_requested": self.entry.revision,
            "local_files_only": self.local_files_only,
            "path": self.backend,
            "window": None,
            "model_class": type(self.model).__name__,
            "processor_class": type(self.processor).__name__,
            "precision": self.precision,
            "device": self.device,
            "batch_size": self.batch_size,
            **self._info(),
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "numerics": torch_numerics(torch, self.device),
            "load_s": round(self.load_s, 3),
            "stats": self.stats(),
        }

    def stats(self) -> dict:
        """Throughput so far (:func:`aiplib.inference.models.base.generate_throughput`)."""
        return generate_throughput(self._stats)

    def _decode(self, clips, prompts, keys) -> list[str]:
        """Responses of :meth:`_batch` over batches of clips sharing a key
        (:func:`batches_by_key`)."""
        out: list = [None] * len(clips)
        for chunk in batches_by_key(keys, self.batch_size):
            for i, text in zip(
                chunk, self._batch([clips[i] for i in chunk], [prompts[i] for i in chunk])
            ):
                out[i] = text
        return out

    def _count(self, clips, t0: float) -> None:
        st = self._stats
        st["n_stimuli"] += len(clips)
        st["n_batches"] += 1
        st["audio_s"] += sum(len(c) for c in clips) / SR
        st["generate_s"] += time.perf_counter() - t0

    def close(self) -> None:
        """Drop the model and processor and free (GPU) memory; idempotent."""
        if getattr(self, "model", None) is None:
            return
        self.model = self.processor = self.adapter = self.feature_extractor = None
        gc.collect()  # then PyTorch's cached CUDA memory goes back to the device (best effort)
        with contextlib.suppress(Exception):
            import torch  # noqa: PLC0415

            if torch.cuda.is_available():
                torch.cuda.empty_cache()


class TransformersRecogniser(HubRecogniser):
    """A Speech LLM loaded with ``transformers`` behind the Recogniser interface.

    ``batch_size``, ``device``, ``precision`` override the entry's; ``local_files_only`` defaults to
    True for a local folder or under ``HF_HUB_OFFLINE``; ``attn_implementation`` (``sdpa``,
    ``eager``, …) reaches ``from_pretrained`` when given (stage 7 gives the entry's
    ``paper_attn_implementation`` in the paper profile), else the library chooses; ``info()``
    records it.

    Raises
    ------
    KeyError
        The model type has no adapter.
    MissingPackageError
        transformers (or bitsandbytes / peft / mistral-common) is missing.
    ModelUnavailableError
        Gated, missing or unreachable weights (one actionable line).
    """

    backend = "transformers"
    precisions = (*DTYPES, "int8_bnb")

    def __init__(
        self,
        entry,
        *,
        batch_size: int | None = None,
        device: str | None = None,
        precision: str | None = None,
        local_files_only: bool | None = None,
        path: str | None = None,
        attn_implementation: str | None = None,
    ):
        transformers, torch, folder, hub_kw = self._setup(
            entry, batch_size, device, precision, local_files_only
        )
        self.adapter_cls = get_adapter(entry.model_type)
        model_kw = dict(hub_kw, device_map={"": "cuda:0" if self.device == "cuda" else self.device})
        self.attn_implementation = attn_implementation
        if attn_implementation is not None:
            model_kw["attn_implementation"] = attn_implementation
        if self.precision == "int8_bnb":
            try:
                import bitsandbytes  # noqa: F401, PLC0415
            except ModuleNotFoundError:
                raise MissingPackageError(
                    f"{entry.id} is loaded in 8 bits and needs bitsandbytes; install "
                    "it with `pip install bitsandbytes`"
                ) from None
            model_kw.update(
                quantization_config=transformers.BitsAndBytesConfig(load_in_8bit=True),
                dtype=torch.float16,
            )
        else:
            model_kw["dtype"] = getattr(torch, DTYPES[self.precision])
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with hub_errors(entry, packages=True):
            self.adapter_cls.prepare()
            processor = self.adapter_cls.load_processor(self.source, **hub_kw)
            model = self.adapter_cls.load_model(self.source, **model_kw)
        self.load_s = time.perf_counter() - t0
        self.adapter = self.adapter_cls(entry, processor, model)
        self.placeholder = self.adapter.placeholder
        self.token_limit = self.adapter.token_limit()
        self.model = model
        self.processor = processor
        self.revision = self._snapshot_revision(getattr(model, "config", None))
        self.weights_sha256 = folder_fingerprint(folder) if self.local else None
        self._stats["max_new_tokens_seen"] = 0
        self.last: dict = {}

    def _info(self) -> dict:
        a = self.adapter
        e = self.entry
        return {
            "generator_class": type(a.generator).__name__,
            "dtype": str(getattr(a.generator, "dtype", "")),
            "attn_implementation": self.attn_implementation or "library default",
            "padding_side": "left",
            "audio_placeholder": a.placeholder,
            "speech_lora": getattr(self.model, "_aip_speech_lora", None),
            "decoding": {
                "do_sample": False,
                "num_beams": 1,
                "max_new_tokens": a.token_limit(),
                "entry_max_new_tokens": e.max_new_tokens,
                "thinker_max_new_tokens": e.thinker_max_new_tokens,
                "max_audio_s": e.max_audio_s,
                "generate_kwargs": dict(e.extra.get("generate_kwargs") or {}),
            },
        }

    def stats(self) -> dict:
        """Throughput so far: stimuli, audio s, generate s, stimuli/s, RTFx, peak GPU memory
        (MB)."""
        s = generate_throughput(self._stats)
        s["peak_gpu_mem_mb"] = None
        if self.device == "cuda":
            import torch  # noqa: PLC0415

            s["peak_gpu_mem_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return s

    def generate(self, audios, prompts):
        """Decode a batch greedily (:meth:`Recogniser.generate`).

        Raises
        ------
        aiplib.inference.models.adapters.AudioInputError
            The processor output lacks the audio features or placeholders.
        """
        clips, prompts = self.checked(audios, prompts)
        self.last = {"prompts": [], "batch_sizes": []}  # this call's rendered prompts and batches
        return self._decode(
            clips, prompts, [len(c) if self.adapter.same_length_batches else None for c in clips]
        )

    def _batch(self, clips, prompts) -> list[str]:
        a = self.adapter
        t0 = time.perf_counter()
        inputs, texts = a.encode(clips, prompts)
        a.check_inputs(inputs, len(clips))
        new = a.generate(inputs)
        texts_out = a.decode(new)
        self._count(clips, t0)
        n_new = a.n_new_tokens(new)
        self._stats["max_new_tokens_seen"] = max([self._stats["max_new_tokens_seen"], *n_new])
        self.last["prompts"].extend(texts)
        self.last["batch_sizes"].append(len(clips))
        return texts_out


#: The backend's entry point, ``load(entry, **options)`` (aiplib.inference.models.load_model).
load = TransformersRecogniser


def check_batch_invariance(rec, audios, prompts, *, batch_size: int | None = None) -> dict:
    """Decode the same stimuli one at a time and in batches of N (default ``rec.batch_size``, 2 …
    ``len(audios)``).

    Returns ``{"equal", "n", "batch_size", "n_diff", "differences": [{"index", "batch1", "batchN"}],
    "seconds_batch1", "seconds_batchN", "speedup"}``.
    """
    old = rec.batch_size
    n = min(len(audios), max(2, int(batch_size or old or 2)))

    def timed(size):
        """(responses, seconds) at batch size ``size``."""
        rec.batch_size = size
        t = time.perf_counter()
        return rec.generate(list(audios), list(prompts)), time.perf_counter() - t

    try:
        one, s1 = timed(1)
        many, sn = timed(n)
    finally:
        rec.batch_size = old
    diffs = [
        {"index": i, "batch1": x, "batchN": y} for i, (x, y) in enumerate(zip(one, many)) if x != y
    ]
    if diffs:
        log.warning(
            "%s: %d of %d responses differ between batch 1 and batch %d",
            getattr(rec, "name", "?"),
            len(diffs),
            len(one),
            n,
        )
    return {
        "equal": not diffs,
        "n": len(one),
        "batch_size": n,
        "n_diff": len(diffs),
        "differences": diffs,
        "seconds_batch1": round(s1, 4),
        "seconds_batchN": round(sn, 4),
        "speedup": round(s1 / sn, 3) if sn > 0 else None,
    }
