"""What a stage-7 run does (:class:`RunPlan`: models × tasks, prompt set, shard) and how it decodes
(:class:`DecodingConfig`: decoding path, batch size, limit, progress, resume of unkeyed rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.inference.models import resolve
from aiplib.inference.models.registry import DEFAULT_MODEL
from aiplib.inference.models.whisper_window import check_arrangement
from aiplib.inference.prompts import TASKS, PromptSet, get_prompt_set, task_names
from aiplib.inference.shards import coerce_shard

#: The embedded Whisper's decoding path (aiplib.inference.models.whisper): Whisper's 30 s window,
#: what the model was trained on and what the paper's 30 s cap means. The 15/20/30 s `window` path
#: changes the noise effect on recordings it was not tuned on (docs/BENCHMARKS.md), so it is opt-in.
DEFAULT_DECODING = "fast"
#: The tasks stage 7 decodes unless told (:func:`aiplib.inference.prompts.task_names`): all of them.
DEFAULT_TASKS = "all"
#: Stimuli per generate call of the transformers Speech LLMs in the paper profile: the authors'
#: scripts/05_inference.py decoded one at a time (padded batches, 8-bit kernels above all, can
#: change a generation).
PAPER_BATCH_SIZE = 1


#: Seed of the sample ``limit`` takes (:func:`stratified_sample`): fixed, so every run with the same
#: ``limit`` decodes the same stimuli.
LIMIT_SEED = 0
#: Manifest columns a ``limit`` sample spreads over: the item, the background, the SNR (dB).
LIMIT_STRATA = ("speech_id", "background_id", "snr_db")


def stratified_sample(manifest: pd.DataFrame, limit: int | None, seed: int = LIMIT_SEED):
    """The ``limit`` manifest rows a limited stage-7 run decodes, spread over items, backgrounds and
    SNRs, in manifest order (all rows when ``limit`` is None or at least the manifest's length).

    Noisy rows are taken one at a time: each time the one whose item, background and SNR have been
    taken least often so far (the sum of the three counts), ties broken by a random order drawn with
    ``seed`` (numpy's default generator), so the same manifest, ``limit`` and ``seed`` give the same
    rows on every run. A noisy row brings its item's clean row (``condition == "clean"``) along,
    both counted in ``limit``, so every sampled item has its clean–noisy pair. A manifest without
    the :data:`LIMIT_STRATA` or ``condition`` columns is sampled over the columns it has.
    """
    n = len(manifest)
    if limit is None or int(limit) >= n:
        return manifest
    limit = int(limit)
    order = np.random.default_rng(seed).permutation(n)
    clean = np.zeros(n, bool)
    if "condition" in manifest.columns:
        clean = (manifest["condition"].astype(str) == "clean").to_numpy()
    codes = [_strata_codes(manifest, col) for col in LIMIT_STRATA]
    clean_of = {codes[0][i]: i for i in order if clean[i]}
    cand = order[~clean[order]]
    if cand.size == 0:
        return manifest.iloc[np.sort(order[:limit])]
    picked = _greedy_pick(cand, codes, clean_of, n, limit)
    return manifest.iloc[np.sort(np.array(picked, dtype=int))]


def _greedy_pick(cand: np.ndarray, codes: list, clean_of: dict, n: int, limit: int) -> list[int]:
    """Row positions of :func:`stratified_sample`: noisy candidates ``cand`` (in the seeded order)
    taken least-covered first, each with its item's clean row (``clean_of``: item code → row)."""
    item = codes[0]
    counts = [np.zeros(c.max() + 1, int) for c in codes]
    taken = np.zeros(n, bool)
    picked: list[int] = []
    while len(picked) < limit and not taken[cand].all():
        score = sum(cnt[c[cand]] for cnt, c in zip(counts, codes)).astype(float)
        score[taken[cand]] = np.inf
        if limit - len(picked) == 1:  # room for one row: no new item without room for its clean row
            score[[item[j] in clean_of and not taken[clean_of[item[j]]] for j in cand]] += n
        j = int(cand[int(np.argmin(score))])
        for r in (clean_of.get(item[j]), j):
            if r is not None and not taken[r] and len(picked) < limit:
                taken[r] = True
                picked.append(r)
        for cnt, c in zip(counts, codes):
            cnt[c[j]] += 1
    return picked


def _strata_codes(manifest: pd.DataFrame, col: str) -> np.ndarray:
    """Integer codes of ``col``'s values (all 0 when the manifest has no such column)."""
    if col not in manifest.columns:
        return np.zeros(len(manifest), int)
    return pd.factorize(manifest[col].astype(str))[0]


def limit_note(limit: int | None, seed: int = LIMIT_SEED) -> str:
    """The sentence a limited run prints about its sample ("" without a limit)."""
    if not limit:
        return ""
    return (
        f"limit {limit}: a stratified sample of {limit} stimuli per task, spread over items, "
        f"backgrounds and SNRs (seed {seed}, the same on every run; each item with its clean row)"
    )


@dataclass(frozen=True)
class DecodingConfig:
    """How stage 7 decodes.

    ``path``: the faster-whisper decoding path (``window``, ``fast``, ``standard``; enters the
    resume key); ``batch_size``: stimuli per ``generate`` call (default
    :func:`effective_batch_size`); ``limit``: only the first ``limit`` manifest rows per task;
    ``progress``: progress bars; ``rerun_unkeyed``: re-run rows without a resume key;
    ``arrangement``: the embedded Whisper's CPU arrangement
    (:data:`aiplib.inference.models.whisper_window.ARRANGEMENTS`; None: its default; the same
    transcripts, so not in the resume key). Raises :class:`AiplibParameterError` unless ``limit``
    and ``batch_size`` are None or positive integers and ``arrangement`` None or a known one.
    """

    path: str = DEFAULT_DECODING
    batch_size: int | None = None
    limit: int | None = None
    progress: bool = True
    rerun_unkeyed: bool = False
    arrangement: str | None = None

    def __post_init__(self):
        for name in ("limit", "batch_size"):
            v = getattr(self, name)
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0
            ):
                raise AiplibParameterError(f"{name} must be a positive integer or None, got {v!r}")
        if self.arrangement is not None:
            check_arrangement(self.arrangement)


@dataclass(frozen=True)
class RunPlan:
    """Which models (``ModelEntry`` tuple) decode which tasks with which :class:`PromptSet`, on
    which shard (``(i, n)``: the stimuli whose id hashes to ``i``, :mod:`aiplib.inference.shards`;
    None: all)."""

    entries: tuple
    tasks: tuple
    prompt_set: PromptSet
    shard: tuple | None = None

    @property
    def families(self) -> dict[str, list[str]]:
        """Task family (``asr``, ``kws``) → its tasks, in task order."""
        out: dict[str, list[str]] = {}
        for task in self.tasks:
            out.setdefault(TASKS[task][0], []).append(task)
        return out


@dataclass(frozen=True)
class RunOptions:
    """What a caller asks of stage 7, before it is resolved (:func:`configure`).

    ``models``: registry ids (one, a comma list, a list, or ``"all"``;
    :func:`aiplib.inference.models.resolve`); ``tasks``: task names (a comma list or ``"all"``);
    ``prompt_set``: a prompt-set name or file (None: the profile's); ``shard``: ``"i/n"``,
    ``(i, n)``, None (Slurm's array variables) or False (none); ``decoding``: the
    :class:`DecodingConfig` ``path``; the other fields are :class:`DecodingConfig`'s.
    """

    models: str | Sequence[str] = DEFAULT_MODEL
    tasks: str | Sequence[str] = DEFAULT_TASKS
    prompt_set: str | PromptSet | None = None
    shard: str | tuple | bool | None = None
    decoding: str = DEFAULT_DECODING
    batch_size: int | None = None
    limit: int | None = None
    progress: bool = True
    rerun_unkeyed: bool = False
    arrangement: str | None = None


def configure(ws, options: RunOptions) -> tuple[RunPlan, DecodingConfig]:
    """The :class:`RunPlan` and :class:`DecodingConfig` of stage 7's :class:`RunOptions`.

    Raises
    ------
    KeyError
        Unknown model id or task name (the valid ones listed).
    AiplibParameterError
        Bad ``limit``, ``batch_size`` or ``shard``.
    """
    shard = coerce_shard(options.shard)
    config = DecodingConfig(
        path=options.decoding,
        batch_size=options.batch_size,
        limit=options.limit,
        progress=options.progress,
        rerun_unkeyed=options.rerun_unkeyed,
        arrangement=options.arrangement,
    )
    # resolved before any model loads: a paper run without its prompts file fails at once
    ps = options.prompt_set
    if ps is None:
        ps = getattr(ws, "profile", None)
    plan = RunPlan(
        entries=tuple(resolve(options.models)),
        tasks=tuple(task_names(options.tasks)),
        prompt_set=get_prompt_set(ps, ws=ws),
        shard=shard,
    )
    return plan, config


def effective_batch_size(entry, batch_size: int | None, profile: str | None) -> int:
    """The batch size stage 7 decodes ``entry`` with: ``batch_size`` when given, else
    :data:`PAPER_BATCH_SIZE` for a ``transformers`` entry in the ``paper`` profile, else the entry's
    (a resume-key field of
    :data:`aiplib.inference.keys.BATCH_VARIANT_BACKENDS`)."""
    if batch_size is not None:
        return int(batch_size)
    return (
        PAPER_BATCH_SIZE
        if profile == "paper" and entry.backend == "transformers"
        else int(entry.batch_size or 1)
    )


def effective_attn_implementation(entry, profile: str | None) -> str | None:
    """The ``attn_implementation`` stage 7 loads ``entry`` with: in the ``paper`` profile the
    entry's ``paper_attn_implementation`` (registry data: the authors' kernel, ``sdpa`` or
    ``eager``), else None (the library's default)."""
    if profile != "paper":
        return None
    return entry.extra.get("paper_attn_implementation")
