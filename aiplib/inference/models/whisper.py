"""faster-whisper backend: Whisper models in CTranslate2 format, offline, on CPU (or CUDA).

Decoding is greedy (``beam_size=1``, temperature 0, no fallback), language ``en``, no timestamps, no
previous-text conditioning, no VAD, at most ``entry.max_new_tokens`` tokens, audio cut to
``entry.max_audio_s`` (30 s), with Whisper's silence rule (no-speech probability > 0.6 while the
average log-probability < −1 gives ``""``). The task prompt is Whisper's initial prompt.

Decoding paths: ``standard`` is ``WhisperModel.transcribe``, one clip at a time, on the 30 s window;
``fast`` the same computation on the CTranslate2 model directly (batched ``encode``, encoder outputs
cached so a family's second prompt skips the encoder; the same transcripts,
``benchmarks/bench_inference.py``); ``window`` (opt-in) the fast path on the shortest of 15, 20, 30
s leaving at least 5 s of padding; it changes the measured noise effect on recordings it was not
tuned on (``benchmarks/bench_window.py``, docs/BENCHMARKS.md), so stage 7's default is ``fast``; its
policy enters the resume key.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from aiplib.core.errors import AiplibParameterError, MissingPackageError, ModelUnavailableError
from aiplib.inference.models import registry
from aiplib.inference.models.base import Recogniser
from aiplib.inference.models.ct2_numerics import (
    import_ctranslate2,
    numerics_record,
    pin_ctranslate2,
)
from aiplib.inference.models.whisper_weights import resolve_weights
from aiplib.inference.models.whisper_window import (
    ARRANGEMENTS,  # noqa: F401 - WhisperOptions.arrangement's values, read here
    DEFAULT_ARRANGEMENT,  # noqa: F401 - read here
    FULL_WINDOW_FRAMES,
    MIN_PAD_S,
    check_arrangement,
    decoding_config,
    decoding_key,  # noqa: F401 - registry.decoding_key reads it here
    window_frames,
    window_s,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WhisperOptions:
    """How a :class:`WhisperRecogniser` decodes (each field overrides the registry entry's value).

    ``path``: ``window``, ``fast`` or ``standard``; ``cpu_threads``: CTranslate2 threads per worker
    (default ``cores // workers``); ``workers``: fast path on CPU, sub-batches decoded concurrently
    (default the usable cores); ``batch_size``: clips per encoder/decoder call of the fast path;
    ``windows_s``, ``min_pad_s``: the ``window`` path's encoder windows and least padding, seconds;
    ``no_speech_threshold``, ``log_prob_threshold``: Whisper's silence rule (None disables it);
    ``encoder_cache``: encoder outputs kept (LRU, default ``2 * batch_size``); ``arrangement``:
    how the fast path on CPU spreads a batch (:data:`ARRANGEMENTS`, default
    :data:`DEFAULT_ARRANGEMENT`; it sets the defaults of ``workers``, ``cpu_threads`` and
    ``encode_per_clip``); ``encode_per_clip``: one clip per encoder call (the decoder still takes
    the whole sub-batch), the same transcripts (``tests/test_numerics.py``).
    """

    path: str = "fast"
    cpu_threads: int | None = None
    device: str | None = None
    compute_type: str | None = None
    batch_size: int | None = None
    windows_s: tuple | None = None
    min_pad_s: float = MIN_PAD_S
    no_speech_threshold: float | None = 0.6
    log_prob_threshold: float | None = -1.0
    encoder_cache: int | None = None
    workers: int | None = None
    encode_per_clip: bool | None = None
    arrangement: str | None = None


def _import_faster_whisper():
    """faster-whisper's ``WhisperModel``, ``Tokenizer`` and ``get_suppressed_tokens``;
    :class:`MissingPackageError` without it."""
    try:
        from faster_whisper import WhisperModel  # noqa: PLC0415
        from faster_whisper.tokenizer import Tokenizer  # noqa: PLC0415
        from faster_whisper.transcribe import get_suppressed_tokens  # noqa: PLC0415
    except ModuleNotFoundError as exc:
        raise MissingPackageError(
            "the faster_whisper backend needs faster-whisper; "
            "install it with `pip install faster-whisper`"
        ) from exc
    return WhisperModel, Tokenizer, get_suppressed_tokens


def _usable_cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class WhisperRecogniser(Recogniser):
    """A faster-whisper model behind the Recogniser interface (``options``:
    :class:`WhisperOptions`).

    Raises
    ------
    AiplibParameterError
        Unknown ``path`` or ``arrangement``.
    ModelUnavailableError
        The weights cannot be opened offline.
    """

    def __init__(self, entry, options: WhisperOptions | None = None):
        o = options or WhisperOptions()
        self.decoding = decoding_config(o.path, windows_s=o.windows_s, min_pad_s=o.min_pad_s)
        # before faster_whisper imports ctranslate2: one numeric path on every CPU
        pin_ctranslate2()
        whisper_model, tokenizer, get_suppressed_tokens = _import_faster_whisper()
        self.name = entry.id
        self.entry = entry
        self.path = self.decoding["path"]
        self.batch_size = int(o.batch_size or entry.batch_size or 1)
        self.window = dict(
            windows_s=tuple(self.decoding["windows_s"]), min_pad_s=self.decoding["min_pad_s"]
        )
        self.no_speech_threshold = o.no_speech_threshold
        self.log_prob_threshold = o.log_prob_threshold
        self.device = registry.resolve_device(o.device or entry.device)
        self.compute_type = o.compute_type or entry.precision
        self.arrangement = check_arrangement(o.arrangement)
        self._set_parallelism(o)
        self.weights_path, self.weights_sha256 = resolve_weights(entry)
        t0 = time.perf_counter()
        self.model = self._open_model(whisper_model)
        self.load_s = time.perf_counter() - t0
        self.tokenizer = tokenizer(
            self.model.hf_tokenizer,
            self.model.model.is_multilingual,
            task="transcribe",
            language="en",
        )
        self.suppress_tokens = list(get_suppressed_tokens(self.tokenizer, [-1]))
        self.max_initial_timestamp_index = int(round(1.0 / self.model.time_precision))
        if o.encoder_cache is not None:
            self.encoder_cache_size = int(o.encoder_cache)
        else:
            self.encoder_cache_size = int(2 * self.batch_size)
        self._prompt_cache = {}
        self._enc_cache = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._feature_pool: ThreadPoolExecutor | None = None

    def _set_parallelism(self, o: WhisperOptions) -> None:
        """``workers``, ``cpu_threads`` and ``encode_per_clip`` from ``o``, the defaults those of
        the arrangement on the fast path on CPU (:data:`ARRANGEMENTS`)."""
        cores = _usable_cores()
        fast_cpu = self.path == "fast" and self.device == "cpu"
        per_clip = fast_cpu and self.arrangement == "per_clip"
        if o.workers:
            self.workers = int(o.workers)
        elif fast_cpu and not per_clip:
            self.workers = int(cores)  # sub-batches decoded concurrently, one per core
        else:
            self.workers = 1
        self.cpu_threads = int(o.cpu_threads or max(1, cores // self.workers))
        if o.encode_per_clip is None:
            self.encode_per_clip = per_clip
        else:
            self.encode_per_clip = bool(o.encode_per_clip)

    def _open_model(self, whisper_model):
        """The faster-whisper model of the resolved weights, opened offline;
        :class:`ModelUnavailableError` when it cannot be."""
        try:
            return whisper_model(
                self.weights_path,
                device=self.device,
                compute_type=self.compute_type,
                cpu_threads=self.cpu_threads,
                num_workers=self.workers,
                local_files_only=True,
            )
        except Exception as exc:  # noqa: BLE001 - hub/ctranslate2 raise many types
            raise ModelUnavailableError(
                f"{self.entry.id}: cannot open Whisper weights {self.weights_path!r} "
                f"offline ({type(exc).__name__}: {exc})"
            ) from exc

    def info(self) -> dict:
        """Weights, checksum, decoding path and options (JSON-serialisable)."""
        import faster_whisper  # noqa: PLC0415

        ctranslate2 = import_ctranslate2()

        return {
            "model": self.name,
            "backend": "faster_whisper",
            "weights": self.entry.weights,
            "weights_path": self.weights_path,
            "weights_sha256": self.weights_sha256,
            "revision": self.entry.revision,
            "path": self.decoding["decoding"],
            "window": {
                "windows_s": self.decoding["windows_s"],
                "min_pad_s": self.decoding["min_pad_s"],
                "padding": "log-mel features zero-padded to the window",
            },
            "device": self.device,
            "compute_type": self.compute_type,
            "cpu_threads": self.cpu_threads,
            "workers": self.workers,
            "arrangement": self.arrangement if self.path == "fast" else None,
            "encode_per_clip": self.encode_per_clip,
            "batch_size": self.batch_size if self.path == "fast" else 1,
            "decoding": {
                "beam_size": 1,
                "temperature": 0.0,
                "language": "en",
                "without_timestamps": True,
                "condition_on_previous_text": False,
                "prompt_as": "initial_prompt",
                "max_new_tokens": self.entry.max_new_tokens,
                "no_speech_threshold": self.no_speech_threshold,
                "log_prob_threshold": self.log_prob_threshold,
                "max_audio_s": self.entry.max_audio_s,
            },
            "faster_whisper": faster_whisper.__version__,
            "ctranslate2": ctranslate2.__version__,
            "numerics": numerics_record(self.weights_path, self.compute_type, self.device),
            "load_s": round(self.load_s, 3),
        }

    def window_s(self, n_samples: int) -> int:
        """Encoder window, in seconds, this recogniser uses for a clip of ``n_samples`` (16 kHz)
        samples (:func:`window_s`; always 30 on the ``standard`` path)."""
        return window_s(min(int(n_samples), self.max_samples), **self.window)

    def generate(self, audios, prompts):
        """Transcribe a batch (:meth:`Recogniser.generate`; ``""`` for a window Whisper judges
        silent)."""
        clips, prompts = self.checked(audios, prompts)
        if self.path == "standard":
            return [self._standard(a, p) for a, p in zip(clips, prompts)]
        return self._fast(clips, prompts)

    def close(self) -> None:
        """Release the CTranslate2 model."""
        if getattr(self, "model", None) is not None:
            with contextlib.suppress(Exception):  # best effort
                self.model.model.unload_model()
        self.model = None
        getattr(self, "_enc_cache", {}).clear()
        for name in ("_pool", "_feature_pool"):
            pool = getattr(self, name, None)
            if pool is not None:
                pool.shutdown(wait=True)
            setattr(self, name, None)

    def _standard(self, audio: np.ndarray, prompt: str | None) -> str:
        segments, _ = self.model.transcribe(
            audio,
            language="en",
            task="transcribe",
            beam_size=1,
            best_of=1,
            temperature=0.0,
            condition_on_previous_text=False,
            initial_prompt=prompt,
            without_timestamps=True,
            vad_filter=False,
            max_new_tokens=self.entry.max_new_tokens,
            no_speech_threshold=self.no_speech_threshold,
            log_prob_threshold=self.log_prob_threshold,
        )
        return "".join(s.text for s in segments).strip()

    def _prompt_tokens(self, prompt: str | None) -> list[int]:
        if prompt not in self._prompt_cache:
            previous = self.tokenizer.encode(" " + prompt) if prompt else []
            self._prompt_cache[prompt] = self.model.get_prompt(
                self.tokenizer, previous, without_timestamps=True
            )
        return self._prompt_cache[prompt]

    def features(self, clips, w: int = FULL_WINDOW_FRAMES) -> np.ndarray:
        """Log-mel features [shape=(len(clips), n_mels, w)], float32, of ``clips`` (16 kHz) as
        ``transcribe`` computes them (the pad frame dropped, at most 3,000 frames), zero-padded to
        ``w`` mel frames.
        """
        feats = [
            self.model.feature_extractor(c)[:, :-1][:, :FULL_WINDOW_FRAMES] for c in clips
        ]  # pad frame dropped
        return np.stack([np.pad(f, ((0, 0), (0, w - f.shape[1]))) for f in feats]).astype(
            np.float32
        )

    def decode_options(self, prompt: str | None) -> tuple[list[int], dict]:
        """(prompt tokens, keyword arguments of CTranslate2 ``Whisper.generate``) of the fast path.

        Raises
        ------
        AiplibParameterError
            If the prompt plus ``entry.max_new_tokens`` exceeds Whisper's 448-token context.
        """
        tokens = self._prompt_tokens(prompt)
        max_length = len(tokens) + int(self.entry.max_new_tokens)
        if max_length > self.model.max_length:
            raise AiplibParameterError(
                f"prompt of {len(tokens)} tokens + max_new_tokens {self.entry.max_new_tokens} "
                f"exceeds Whisper's {self.model.max_length}-token context"
            )
        return tokens, dict(
            beam_size=1,
            patience=1,
            length_penalty=1,
            repetition_penalty=1,
            no_repeat_ngram_size=0,
            max_length=max_length,
            return_scores=True,
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=self.suppress_tokens,
            max_initial_timestamp_index=self.max_initial_timestamp_index,
        )

    def _encode(self, clips, keys, w: int):
        """Encoder outputs [shape=(b, w // 2, d_model)] for ``clips``, reusing cached ones.

        Thread-safe: the cache is only touched under ``self._lock``; encoding runs outside it.
        """
        ctranslate2 = import_ctranslate2()
        use_cache = self.encoder_cache_size > 0 and self.device == "cpu"
        missing = self._uncached(keys, w, use_cache)
        fresh = {}
        if missing and self.encode_per_clip:
            fresh = self._encode_each(ctranslate2, clips, keys, missing, w)
            if not use_cache:
                rows = [fresh[k] for k in keys]
                return ctranslate2.StorageView.from_array(np.ascontiguousarray(np.stack(rows)))
        elif missing:
            batch = self.features([clips[i] for i in missing], w)
            enc = self.model.model.encode(ctranslate2.StorageView.from_array(batch), to_cpu=False)
            if not use_cache:
                return enc
            arr = np.array(enc)
            fresh = {keys[i]: arr[j] for j, i in enumerate(missing)}
        rows = self._cached_rows(keys, w, fresh)
        return ctranslate2.StorageView.from_array(np.ascontiguousarray(np.stack(rows)))

    def _uncached(self, keys, w: int, use_cache: bool) -> list[int]:
        """Indices of ``keys`` whose encoder output for window ``w`` is not cached (all without
        the cache)."""
        if not use_cache:
            return list(range(len(keys)))
        with self._lock:
            return [i for i, k in enumerate(keys) if (k, w) not in self._enc_cache]

    def _encode_each(self, ctranslate2, clips, keys, missing: list[int], w: int) -> dict:
        """``{key: encoder output [shape=(w // 2, d_model)]}``, one encoder call per clip; with
        one worker the features of the next clips are computed in a helper thread meanwhile."""
        one_clip = [[clips[i]] for i in missing]
        if self.workers == 1 and len(missing) > 1:
            if self._feature_pool is None:
                self._feature_pool = ThreadPoolExecutor(1, thread_name_prefix="aip-mel")
            feats = self._feature_pool.map(self.features, one_clip, [w] * len(missing))
        else:
            feats = (self.features(c, w) for c in one_clip)
        fresh = {}
        for i, one in zip(missing, feats):
            encoded = self.model.model.encode(ctranslate2.StorageView.from_array(one), to_cpu=True)
            fresh[keys[i]] = np.array(encoded)[0]
        return fresh

    def _cached_rows(self, keys, w: int, fresh: dict) -> list:
        """Cache the ``fresh`` outputs; every key's output in order (the least recently used ones
        beyond the cache size dropped)."""
        rows = []
        with self._lock:
            for k in keys:
                if k in fresh:
                    self._enc_cache[(k, w)] = fresh[k]
                self._enc_cache.move_to_end((k, w))
                rows.append(self._enc_cache[(k, w)])
            while len(self._enc_cache) > max(self.encoder_cache_size, len(keys) * self.workers):
                self._enc_cache.popitem(last=False)
        return rows

    def _fast(self, clips, prompts) -> list[str]:
        groups = {}
        for i, a in enumerate(clips):
            n_frames = min(
                FULL_WINDOW_FRAMES, a.shape[0] // self.model.feature_extractor.hop_length
            )
            w = window_frames(n_frames, **self.window)
            groups.setdefault((w, prompts[i]), []).append(i)
        out = [""] * len(clips)
        for (w, prompt), idx in groups.items():
            tokens, gen_kw = self.decode_options(prompt)
            # sub-batches of at most batch_size, spread evenly over the workers
            n_sub = max(self.workers, -(-len(idx) // self.batch_size))
            chunks = [c for c in (idx[k::n_sub] for k in range(n_sub)) if c]

            def run(chunk, tokens=tokens, gen_kw=gen_kw, w=w):
                keys = [hashlib.blake2b(clips[i].tobytes(), digest_size=16).digest() for i in chunk]
                enc = self._encode([clips[i] for i in chunk], keys, w)
                results = self.model.model.generate(enc, [tokens] * len(chunk), **gen_kw)
                for i, r in zip(chunk, results):
                    out[i] = self._text(r)

            if self.workers > 1 and len(chunks) > 1:
                if (
                    self._pool is None
                ):  # one pool for the model's life (threads are not re-made per call)
                    self._pool = ThreadPoolExecutor(
                        max_workers=self.workers, thread_name_prefix="aip-whisper"
                    )
                list(self._pool.map(run, chunks))
            else:
                for chunk in chunks:
                    run(chunk)
        return out

    def _text(self, result) -> str:
        toks = result.sequences_ids[0]
        if (
            self.no_speech_threshold is not None
            and result.no_speech_prob > self.no_speech_threshold
        ):
            avg_logprob = result.scores[0] * len(toks) / (len(toks) + 1)
            if not (self.log_prob_threshold is not None and avg_logprob > self.log_prob_threshold):
                return ""
        return self.tokenizer.decode(toks).strip()


def load(
    entry,
    *,
    path: str = "fast",
    cpu_threads: int | None = None,
    batch_size: int | None = None,
    workers: int | None = None,
    device: str | None = None,
    precision: str | None = None,
    arrangement: str | None = None,
) -> WhisperRecogniser:
    """The backend's entry point (:func:`aiplib.inference.models.load_model`): the
    :class:`WhisperOptions` it passes (``precision``: the CTranslate2 ``compute_type``)."""
    options = WhisperOptions(
        path=path,
        cpu_threads=cpu_threads,
        batch_size=batch_size,
        workers=workers,
        device=device,
        compute_type=precision,
        arrangement=arrangement,
    )
    return WhisperRecogniser(entry, options)
