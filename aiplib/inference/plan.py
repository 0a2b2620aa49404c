"""What a stage-7 run does (:class:`RunPlan`: models × tasks, prompt set, shard) and how it decodes
(:class:`DecodingConfig`: decoding path, batch size, limit, progress, resume of unkeyed rows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
