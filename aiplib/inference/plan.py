"""What a stage-7 run does (:class:`RunPlan`: models × tasks, prompt set, shard) and how it decodes
(:class:`DecodingConfig`: decoding path, batch size, limit, progress, resume of unkeyed rows)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from aiplib.core.errors import AiplibParameterError
from aiplib.inference.models import resolve
from aiplib.inference.prompts import TASKS, PromptSet, get_prompt_set, task_names
from aiplib.inference.shards import coerce_shard

# The embedded Whisper's decoding path (aiplib.inference.models.whisper): Whisper's 30 s window,
# what the model was trained on and what the paper's 30 s cap means. The 15/20/30 s `window` path
# changes the noise effect on recordings it was not tuned on (docs/BENCHMARKS.md), so it is opt-in.
DEFAULT_DECODING = "fast"
# stimuli per generate call of the transformers Speech LLMs in the paper profile: the authors'
# scripts/05_inference.py decoded one at a time (padded batches, 8-bit kernels above all, can change
# a generation)
PAPER_BATCH_SIZE = 1


@dataclass(frozen=True)
class DecodingConfig:
    """How stage 7 decodes.

    ``path``: the faster-whisper decoding path (``window``, ``fast``, ``standard``; enters the
    resume key); ``batch_size``: stimuli per ``generate`` call (default
    :func:`effective_batch_size`); ``limit``: only the first ``limit`` manifest rows per task;
    ``progress``: progress bars; ``rerun_unkeyed``: re-run rows without a resume key. Raises
    :class:`AiplibParameterError` unless ``limit`` and ``batch_size`` are None or positive integers.
    """

    path: str = DEFAULT_DECODING
    batch_size: int | None = None
    limit: int | None = None
    progress: bool = True
    rerun_unkeyed: bool = False

    def __post_init__(self):
        for name in ("limit", "batch_size"):
            v = getattr(self, name)
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0
            ):
                raise AiplibParameterError(f"{name} must be a positive integer or None, got {v!r}")


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


def configure(ws, options: dict) -> tuple[RunPlan, DecodingConfig]:
    """The :class:`RunPlan` and :class:`DecodingConfig` of stage 7's keyword ``options``.

    ``models`` (ids, a comma list or ``"all"``; default ``whisper_tiny_en``), ``tasks`` (default
    ``"all"``), ``prompt_set`` (default the profile's), ``shard`` (``"i/n"``, ``(i, n)``, None:
    Slurm's array variables, False: none), ``decoding`` (the config's ``path``) and the other fields
    of :class:`DecodingConfig`.

    Raises
    ------
    TypeError
        An unknown option.
    KeyError
        Unknown model id or task name (the valid ones listed).
    AiplibParameterError
        Bad ``limit``, ``batch_size`` or ``shard``.
    """
    o, decoding = dict(options), [f.name for f in fields(DecodingConfig) if f.name != "path"]
    if unknown := set(o) - {"models", "tasks", "prompt_set", "shard", "decoding", *decoding}:
        raise TypeError(f"unknown stage-7 option(s) {', '.join(sorted(unknown))}")
    shard = coerce_shard(o.get("shard"))
    config = DecodingConfig(
        path=o.get("decoding", DEFAULT_DECODING), **{k: o[k] for k in decoding if k in o}
    )
    # resolved before any model loads: a paper run without its prompts file fails at once
    ps = o.get("prompt_set")
    ps = get_prompt_set(ps if ps is not None else getattr(ws, "profile", None), ws=ws)
    plan = RunPlan(
        entries=tuple(resolve(o.get("models", "whisper_tiny_en"))),
        tasks=tuple(task_names(o.get("tasks", "all"))),
        prompt_set=ps,
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
