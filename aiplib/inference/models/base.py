"""The interface every recogniser backend implements.

A backend module (``aiplib/inference/models/<module>.py``) exposes ``load(entry, *, <its keyword
options>) -> Recogniser``; :func:`aiplib.inference.models.registry.load_model` imports it only when
an entry of that backend is chosen, so one model's heavy dependencies never break another's.
"""

from __future__ import annotations

import abc
import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from aiplib.core.errors import AiplibParameterError
from aiplib.io.audio import SR, valid_audio

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from aiplib.inference.models.registry import ModelEntry


class Recogniser(abc.ABC):
    """A loaded model that turns audio (+ prompt) into text; ``name`` is ``entry.id``."""

    name: str
    entry: "ModelEntry"

    @abc.abstractmethod
    def info(self) -> dict:
        """What was actually run: weights, revision / checksum, decoding path … (JSON, for
        ``run_log.jsonl``)."""

    @abc.abstractmethod
    def generate(self, audios: list[np.ndarray], prompts: list[str | None]) -> list[str]:
        """Decode a batch greedily.

        Parameters
        ----------
        audios : list of np.ndarray [shape=(n_i,)], float32
            16 kHz mono waveforms; backends cut them to ``entry.max_audio_s``.
        prompts : list of (str or None)
            One prompt per waveform; None means no prompt.

        Returns
        -------
        list of str
            One response per waveform, stripped of surrounding white space.
        """

    @property
    def max_samples(self) -> int:
        """Samples (16 kHz) kept of each waveform: ``entry.max_audio_s`` seconds."""
        return int(round(float(self.entry.max_audio_s) * SR))

    def checked(self, audios, prompts) -> tuple[list[np.ndarray], list[str | None]]:
        """``(clips, prompts)`` of a :meth:`generate` call: each waveform checked (float32,
        C-contiguous) and cut to :attr:`max_samples`; a blank prompt becomes None.

        Raises
        ------
        AiplibParameterError
            If the recogniser was closed (its ``model`` is None), the lists differ in length or a
            waveform is invalid (:func:`aiplib.io.audio.valid_audio`).
        """
        if getattr(self, "model", "") is None:
            raise AiplibParameterError(f"{self.name} was closed")
        if len(audios) != len(prompts):
            raise AiplibParameterError(f"got {len(audios)} waveforms but {len(prompts)} prompts")
        clips = [
            np.ascontiguousarray(valid_audio(np.asarray(a), name=f"audio[{i}]")[: self.max_samples])
            for i, a in enumerate(audios)
        ]
        return clips, [p.strip() if isinstance(p, str) and p.strip() else None for p in prompts]

    def close(self) -> None:
        """Free the model's memory (idempotent). The default does nothing."""

    def __repr__(self):
        return f"<{type(self).__name__} {getattr(self, 'name', '?')}>"


def retry_key(audio: np.ndarray, prompt) -> str:
    """Key of one (audio, prompt) in a backend's retry cache: hex SHA-1 of the float32 samples
    (after the cut to ``max_audio_s``) followed by ``repr(prompt)``."""
    h = hashlib.sha1(np.ascontiguousarray(audio, dtype=np.float32).tobytes())
    h.update(repr(prompt).encode())
    return h.hexdigest()


def answer_each(cache: dict, clips, prompts, run, error) -> list[str]:
    """The answers of a batch decoded stimulus by stimulus (``command``, ``openai``).

    ``run(indices)`` gives ``(ok, text or error message)`` per index not answered in ``cache``. A
    failed batch keeps its answers in ``cache`` (:func:`retry_key`), so the runner's per-item retry
    sends nothing twice, and raises ``error`` with the first failure's message.
    """
    keys = [retry_key(y, p) for y, p in zip(clips, prompts)]
    results = {i: cache.pop(k) for i, k in enumerate(keys) if k in cache}
    todo = [i for i in range(len(keys)) if i not in results]
    if todo:
        results.update(zip(todo, run(todo)))
    bad = [results[i][1] for i in range(len(keys)) if not results[i][0]]
    if bad:
        if len(keys) > 1:
            cache.update({keys[i]: results[i] for i in todo})
        raise error(bad[0])
    if len(keys) > 1:
        cache.clear()
    return [results[i][1] for i in range(len(keys))]


def check_parallelism(entry_id: str, batch_size: int, concurrency: int) -> None:
    """Check the calls a ``command`` or ``openai`` recogniser runs at once.

    Raises
    ------
    AiplibParameterError
        ``batch_size`` or ``concurrency`` is not positive.

    A warning is logged when ``batch_size`` (stimuli per generate call) caps the calls in flight
    below ``concurrency``."""
    for name, v in (("batch_size", batch_size), ("concurrency", concurrency)):
        if v <= 0:
            raise AiplibParameterError(f"{entry_id}: {name} must be a positive integer, got {v!r}")
    if batch_size < concurrency:
        log.warning(
            "%s: batch_size %d < concurrency %d: at most %d calls will be in flight",
            entry_id,
            batch_size,
            concurrency,
            batch_size,
        )


def run_concurrently(call, todo: list, workers: int, thread_name: str) -> list:
    """``[call(i) for i in todo]``, in the order of ``todo``, with up to ``workers`` calls at once
    (threads named ``thread_name``; one call at a time when ``workers`` is 1 or ``todo`` holds one
    item)."""
    workers = min(workers, len(todo))
    if workers <= 1:
        return [call(i) for i in todo]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name) as pool:
        return list(pool.map(call, todo))


def batches_by_key(keys: list, batch_size: int) -> list[list[int]]:
    """Indices of ``keys`` in chunks of at most ``batch_size`` that share one key (groups in order
    of first appearance, indices in input order)."""
    groups: dict = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    chunks = []
    for idx in groups.values():
        for s in range(0, len(idx), batch_size):
            chunks.append(idx[s : s + batch_size])
    return chunks


def generate_throughput(raw: dict) -> dict:
    """A copy of a backend's running counts (``audio_s``, ``generate_s`` in seconds, …) rounded (0.1
    ms, 1 ms), with ``stimuli_per_s`` and ``rtfx`` (audio s / generate s) added; both None before
    any generate time."""
    s = dict(raw)
    g = s["generate_s"]
    s["generate_s"] = round(g, 4)
    s["audio_s"] = round(s["audio_s"], 3)
    s["stimuli_per_s"] = round(s["n_stimuli"] / g, 4) if g > 0 else None
    s["rtfx"] = round(raw["audio_s"] / g, 3) if g > 0 else None
    return s
