"""Tasks and the prompts each task gives a recogniser.

A *task* is a (family, prompt variant) pair: the family picks the item bank and the scoring rule
(``asr``: word error rate; ``kws``: first word of the response against the keyword label), the
variant picks the instruction. ``baseline`` asks for the job only; ``p5`` ("steering prompt 5")
adds an instruction to attend to the foreground speaker and ignore the background.

Prompt sets: :data:`PROMPTS` below is the built-in set ``aip-closed-v1`` (closed-list KWS), the
default and the set of the ``demo`` and ``custom`` profiles. The ``paper`` profile uses the
authors' own prompts (open-answer KWS), read from their inference script — see
:mod:`aiplib.prompt_sets` and ``prompt_for(task, prompt_set="paper")``. The tasks themselves are
defined in ``aiplib/tasks.yaml``.

Speech LLMs get ``text`` as the user turn of a chat. Whisper-style recognisers get it as the
decoder's *initial prompt* (previous-context text, see :mod:`aiplib.models.whisper`), which biases
spelling and style but is not an instruction the model follows.
"""
from __future__ import annotations

import hashlib

from .prompt_sets import default_prompt_set_name
from .tasks import KEYWORDS, normalize_keywords, task_file

__all__ = ["TASKS", "PROMPTS", "DEFAULT_PROMPT_SET", "NO_PROMPT_ID", "builtin_prompts", "prompt_for", "task_names",
           "not_applicable"]

_STEER = ("Listen only to the main foreground speaker and ignore all background sounds, noise, "
          "music and other voices.")

TASKS: dict[str, tuple[str, str]] = {t: (d["family"], d["variant"]) for t, d in task_file()["tasks"].items()}
"""Task name → (family, prompt variant), from ``aiplib/tasks.yaml``. The task name is the ``<task>``
of the result files."""

DEFAULT_PROMPT_SET: str = default_prompt_set_name()
"""Name of the prompt set used when none is given (``"aip-closed-v1"``: the texts of :data:`PROMPTS`)."""


def builtin_prompts(keywords=None) -> dict[tuple[str, str], dict[str, str]]:
    """The built-in prompt set ``aip-closed-v1`` for a closed keyword set.

    Parameters
    ----------
    keywords : str, sequence of str or None
        The KWS keyword set named in the KWS prompts (None: the default ten,
        :data:`aiplib.tasks.KEYWORDS`; normalised with :func:`aiplib.tasks.normalize_keywords`).

    Returns
    -------
    dict
        (family, variant) → ``{"prompt_id", "text"}``. With another keyword set than the default
        the KWS prompt ids end in ``_kw<first 8 hex of the SHA-256 of "w1,w2,...">``, so results
        (resumed on the prompt id) never mix two keyword sets.

    Raises
    ------
    AiplibParameterError
        If the keyword set is empty or has a multi-word keyword.
    """
    kw = normalize_keywords(keywords)
    kw_list = ", ".join(kw)
    suffix = "" if kw == KEYWORDS else "_kw" + hashlib.sha256(",".join(kw).encode("utf-8")).hexdigest()[:8]
    return {
        ("asr", "baseline"): {
            "prompt_id": "asr_baseline_v1",
            "text": "Transcribe the speech in this audio exactly.",
        },
        ("asr", "p5"): {
            "prompt_id": "asr_p5_v1",
            "text": f"{_STEER} Transcribe the speech of the main speaker in this audio exactly.",
        },
        ("kws", "baseline"): {
            "prompt_id": "kws_baseline_v1" + suffix,
            "text": ("Which word is spoken in this audio? It is one of: "
                     f"{kw_list}, or another word. Answer with the single word only."),
        },
        ("kws", "p5"): {
            "prompt_id": "kws_p5_v1" + suffix,
            "text": (f"{_STEER} Which word does the main speaker say? It is one of: "
                     f"{kw_list}, or another word. Answer with the single word only."),
        },
    }


PROMPTS: dict[tuple[str, str], dict[str, str]] = builtin_prompts()
"""(family, variant) → ``{"prompt_id", "text"}`` of the built-in prompt set ``aip-closed-v1`` with the
default keywords. Change ``prompt_id`` whenever ``text`` changes: results are keyed by it."""


def task_names(tasks="all") -> list[str]:
    """Expand a task selection into task names.

    Parameters
    ----------
    tasks : str or iterable of str
        ``"all"``, one task name, a comma-separated string, or a list of names.

    Returns
    -------
    list of str
        Task names in :data:`TASKS` order (for ``"all"``) or in the given order.

    Raises
    ------
    KeyError
        If a name is not in :data:`TASKS`; the message lists the valid names.
    """
    if isinstance(tasks, str):
        names = list(TASKS) if tasks.strip() == "all" else [t.strip() for t in tasks.split(",") if t.strip()]
    else:
        names = list(tasks)
    bad = [t for t in names if t not in TASKS]
    if bad:
        raise KeyError(f"unknown task(s) {', '.join(map(repr, bad))}; valid tasks: {', '.join(TASKS)}")
    return names


def prompt_for(task: str, prompt_set=None, **load) -> tuple[str, str]:
    """The prompt of a task in a prompt set.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`.
    prompt_set : str, aiplib.prompt_sets.PromptSet or None
        A set name or alias (``"aip-closed-v1"``, ``"demo"``, ``"custom"``, ``"paper"``,
        ``"authors-05"``), a loaded :class:`~aiplib.prompt_sets.PromptSet`, or None for
        :data:`DEFAULT_PROMPT_SET` (the texts of :data:`PROMPTS`). Load a fetched set once with
        :func:`aiplib.prompt_sets.get_prompt_set` and pass the object when asking for several tasks.
    **load
        Passed to :func:`aiplib.prompt_sets.get_prompt_set` (``ws``, ``prompts_file``, ``commit`` …).

    Returns
    -------
    prompt_id : str
    text : str

    Raises
    ------
    KeyError
        If ``task`` is unknown; the message lists the valid tasks.
    aiplib.errors.AiplibParameterError
        If ``prompt_set`` is no known set.
    aiplib.prompt_file.PromptFileError, aiplib.errors.DownloadError
        If a fetched set cannot be read or downloaded (see ``get_prompt_set``).
    """
    from .prompt_sets import get_prompt_set  # noqa: PLC0415

    if task not in TASKS:
        raise KeyError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    return get_prompt_set(prompt_set, **load).prompt(task)


NO_PROMPT_ID = "none"
"""``prompt_id`` of the rows of a model that takes no task prompt (``prompt_style: none``): it is
sent none (:func:`not_applicable`)."""


def not_applicable(entry, tasks) -> dict[str, str]:
    """The tasks a model cannot do differently from its baseline, with the reason.

    A model that takes no task prompt (``prompt_style: none``: CTC and other plain recognisers,
    backend ``hf_asr``) hears no instruction, so a prompt variant (``asr_steer_p5`` …) would repeat
    the decode of its family's baseline task: such tasks are *not applicable* to it and are not
    run (stage 7's summary and ``run_log.jsonl`` say so; stage 8 then has no file to score).

    Parameters
    ----------
    entry : aiplib.models.ModelEntry
    tasks : list of str
        Task names (:data:`aiplib.prompts.TASKS`).

    Returns
    -------
    dict of str → str
        ``{task: reason}``; empty for a model that takes prompts.
    """
    if getattr(entry, "takes_prompt", True):
        return {}
    return {t: (f"{entry.id} takes no task prompt (prompt_style none): the {variant} prompt would repeat "
                f"the {family} baseline's decode")
            for t in tasks for family, variant in [TASKS[t]] if variant != "baseline"}
