"""Tasks and the prompts each task gives a recogniser.

A *task* is a (family, prompt variant) pair: the family picks the item bank and the scoring rule
(``asr``: word error rate; ``kws``: first word of the response against the keyword label), the
variant picks the instruction. ``baseline`` asks for the job only; ``p5`` ("steering prompt 5")
adds an instruction to attend to the foreground speaker and ignore the background.

Speech LLMs get ``text`` as the user turn of a chat. Whisper-style recognisers get it as the
decoder's *initial prompt* (previous-context text, see :mod:`aiplib.models.whisper`), which biases
spelling and style but is not an instruction the model follows.
"""
from __future__ import annotations

__all__ = ["KEYWORDS", "TASKS", "PROMPTS", "prompt_for", "task_names"]

KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
"""The ten Speech Commands keywords (closed set of the KWS task)."""

_KW_LIST = ", ".join(KEYWORDS)
_STEER = ("Listen only to the main foreground speaker and ignore all background sounds, noise, "
          "music and other voices.")

TASKS: dict[str, tuple[str, str]] = {
    "asr": ("asr", "baseline"),
    "kws": ("kws", "baseline"),
    "asr_steer_p5": ("asr", "p5"),
    "kws_steer_p5": ("kws", "p5"),
}
"""Task name → (family, prompt variant). The task name is the ``<task>`` of the result files."""

PROMPTS: dict[tuple[str, str], dict[str, str]] = {
    ("asr", "baseline"): {
        "prompt_id": "asr_baseline_v1",
        "text": "Transcribe the speech in this audio exactly.",
    },
    ("asr", "p5"): {
        "prompt_id": "asr_p5_v1",
        "text": f"{_STEER} Transcribe the speech of the main speaker in this audio exactly.",
    },
    ("kws", "baseline"): {
        "prompt_id": "kws_baseline_v1",
        "text": ("Which word is spoken in this audio? It is one of: "
                 f"{_KW_LIST}, or another word. Answer with the single word only."),
    },
    ("kws", "p5"): {
        "prompt_id": "kws_p5_v1",
        "text": (f"{_STEER} Which word does the main speaker say? It is one of: "
                 f"{_KW_LIST}, or another word. Answer with the single word only."),
    },
}
"""(family, variant) → ``{"prompt_id", "text"}``. Change ``prompt_id`` whenever ``text`` changes:
results are keyed by it."""


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


def prompt_for(task: str) -> tuple[str, str]:
    """The prompt of a task.

    Parameters
    ----------
    task : str
        A key of :data:`TASKS`.

    Returns
    -------
    prompt_id : str
    text : str

    Raises
    ------
    KeyError
        If ``task`` is unknown; the message lists the valid tasks.
    """
    if task not in TASKS:
        raise KeyError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    p = PROMPTS[TASKS[task]]
    return p["prompt_id"], p["text"]
