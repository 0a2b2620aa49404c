"""The task file ``aiplib/core/tasks.yaml`` (tasks, task families, keyword sets) and the condition families.

A *task* (``asr``, ``kws``, ``asr_steer_p5``, ``kws_steer_p5``) is a (family, prompt variant) pair. A
*family* (``asr``, ``kws``) fixes the item bank, the manifest's reference column, the scoring rule and
the degradation column with its sign. A *keyword set* is the closed list of the KWS family (default the
paper's ten Speech Commands words); the set a run used is stored with its KWS item bank.
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

from aiplib.core.errors import AiplibParameterError

TASK_FILE = Path(__file__).with_name("tasks.yaml")  # families, keyword sets, tasks, prompt sets
# kws_answer of a prompt set: its KWS prompt names the keywords (closed list), or asks for the spoken
# word or SILENCE (open answer, the authors')
KWS_CLOSED_LIST = "closed-list"
KWS_OPEN_ANSWER = "open-answer"

_SIGNS = ("noisy_minus_clean", "clean_minus_noisy")


@functools.lru_cache(maxsize=4)
def _read_task_file(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    problems = []
    if not isinstance(data, dict):
        raise AiplibParameterError(f"{path}: expected a mapping with 'families', 'tasks' and 'prompt_sets'")
    fams, kw_sets = data.get("families"), data.get("keyword_sets")
    if not isinstance(kw_sets, dict) or not kw_sets:
        problems.append("'keyword_sets' must map set names to lists of words")
    else:
        for name, words in kw_sets.items():
            if (not isinstance(words, list) or not words
                    or not all(isinstance(w, str) and w.strip() and " " not in w.strip() for w in words)):
                problems.append(f"keyword set {name!r} must be a list of single words as quoted strings "
                                f"(YAML reads bare yes/no/on/off as booleans), got {words!r}")
    if not isinstance(fams, dict) or not fams:
        problems.append("'families' must map family names to {reference, scoring, measure, degradation}")
    else:
        for f, d in fams.items():
            if not isinstance(d, dict) or not {"reference", "scoring", "measure", "degradation"} <= set(d):
                problems.append(f"family {f!r} needs 'reference', 'scoring', 'measure' and 'degradation'")
                continue
            deg = d["degradation"]
            if not isinstance(deg, dict) or deg.get("sign") not in _SIGNS or not deg.get("column"):
                problems.append(f"family {f!r}: degradation needs 'column' and 'sign' in {_SIGNS}")
            if "keyword_set" in d and d["keyword_set"] not in (kw_sets or {}):
                problems.append(f"family {f!r}: keyword set {d['keyword_set']!r} is not in 'keyword_sets'")
    tasks, sets = data.get("tasks"), data.get("prompt_sets")
    if not isinstance(tasks, dict) or not tasks:
        problems.append("'tasks' must map task names to {family, variant}")
    else:
        for t, d in tasks.items():
            if not isinstance(d, dict) or not {"family", "variant"} <= set(d):
                problems.append(f"task {t!r} needs 'family' and 'variant'")
            elif isinstance(fams, dict) and d["family"] not in fams:
                problems.append(f"task {t!r}: family {d['family']!r} is not in 'families'")
    if not isinstance(sets, dict) or not sets:
        problems.append("'prompt_sets' must map set names to definitions")
    else:
        seen = {}
        for name, d in sets.items():
            if not isinstance(d, dict) or d.get("kws_answer") not in (KWS_CLOSED_LIST, KWS_OPEN_ANSWER):
                problems.append(f"prompt set {name!r}: kws_answer must be {KWS_CLOSED_LIST!r} or "
                                f"{KWS_OPEN_ANSWER!r}")
                continue
            src = d.get("source")
            if src != "builtin" and not (isinstance(src, dict) and {"base_url", "commit", "path"} <= set(src)):
                problems.append(f"prompt set {name!r}: source must be 'builtin' or have base_url, commit, path")
            for alias in [name, *(d.get("aliases") or [])]:
                if alias in seen:
                    problems.append(f"name {alias!r} is used by {seen[alias]!r} and {name!r}")
                seen[alias] = name
        if data.get("default_prompt_set") not in sets:
            problems.append(f"default_prompt_set {data.get('default_prompt_set')!r} is not a prompt set")
    if problems:
        raise AiplibParameterError(f"{path}: " + "; ".join(problems))
    return data


def task_file() -> dict:
    """The parsed task file (validated, read once; do not modify it).

    Returns
    -------
    dict
        ``{"families": {family: {"reference", "scoring", "measure", "degradation": {"column", "sign"},
        ["keyword_set"]}}, "keyword_sets": {name: [word, ...]}, "tasks": {task: {"family", "variant"}},
        "default_prompt_set": str, "prompt_sets": {name: {"aliases", "kws_answer", "source"}}}``.

    Raises
    ------
    AiplibParameterError
        If the file is malformed (every problem is listed).
    """
    return _read_task_file(str(TASK_FILE))


def required_tasks() -> tuple[str, ...]:
    """The task names every prompt set must define, in task-file order (``("asr", "kws", "asr_steer_p5",
    "kws_steer_p5")``)."""
    return tuple(task_file()["tasks"])


def family_spec(family: str) -> dict:
    """The task file's entry of a family (``reference``, ``scoring``, ``measure``, ``degradation``).

    Raises
    ------
    AiplibParameterError
        If ``family`` is not in the task file.
    """
    fams = task_file()["families"]
    if family not in fams:
        raise AiplibParameterError(f"unknown task family {family!r}; choose one of {', '.join(fams)}")
    return fams[family]


def task_family(task: str) -> str:
    """``"asr"`` or ``"kws"`` for a task name: its ``family`` in the task file, else the family it starts
    with (the authors' further steering variants, ``kws_steer_p3`` …).

    Raises
    ------
    AiplibParameterError
        If the name is in no family.
    """
    tasks = task_file()["tasks"]
    if task in tasks:
        return tasks[task]["family"]
    for fam in FAMILIES:
        if task == fam or str(task).startswith(fam + "_"):
            return fam
    raise AiplibParameterError(f"task {task!r} belongs to neither the {' nor the '.join(FAMILIES)} family")


def normalize_keywords(keywords) -> tuple[str, ...]:
    """A keyword set (comma-separated string, sequence of words, or None: :data:`KEYWORDS`) as a tuple of
    lower-case words, in order, without repeats.

    Raises
    ------
    AiplibParameterError
        If the set is empty or a keyword has a space in it (the first-word rule could never match it).
    """
    if keywords is None:
        return KEYWORDS
    if isinstance(keywords, str):
        keywords = keywords.split(",")
    words = tuple(dict.fromkeys(str(k).strip().lower() for k in keywords if str(k).strip()))
    if not words:
        raise AiplibParameterError("the keyword set is empty")
    bad = [w for w in words if len(w.split()) != 1]
    if bad:
        raise AiplibParameterError(f"keywords must be single words, got {bad}")
    return words


def keyword_set(name: str | None = None) -> tuple[str, ...]:
    """A keyword set of the task file (default: the KWS family's, the paper's ten words).

    Raises
    ------
    AiplibParameterError
        If ``name`` is no keyword set of the task file.
    """
    sets = task_file()["keyword_sets"]
    name = name or family_spec("kws")["keyword_set"]
    if name not in sets:
        raise AiplibParameterError(f"unknown keyword set {name!r}; valid: {', '.join(sets)}")
    return tuple(str(w).strip().lower() for w in sets[name])


FAMILIES: tuple[str, ...] = tuple(task_file()["families"])  # ("asr", "kws")
# the baseline task (prompt variant "baseline") of each family: {"asr": "asr", "kws": "kws"}
BASE_TASKS: dict[str, str] = {t["family"]: name for name, t in task_file()["tasks"].items()
                              if t["variant"] == "baseline"}
KEYWORDS: tuple[str, ...] = keyword_set()  # the paper's ten Speech Commands words (a custom item bank may differ)
# score-file column of each family's per-pair degradation ({"asr": "delta_wer", "kws": "delta_acc"}) and how
# it is formed from the measure (noisy_minus_clean for WER, clean_minus_noisy for accuracy): positive = worse
DEGRADATION_COLUMN: dict[str, str] = {f: d["degradation"]["column"] for f, d in task_file()["families"].items()}
DEGRADATION_SIGN: dict[str, str] = {f: d["degradation"]["sign"] for f, d in task_file()["families"].items()}

CONDITION_FAMILIES = ("background", "competing_speech", "channel")  # in report order
DEFAULT_SUITE = ("background",)  # the suite of ``make all`` without SUITE=


def check_family(name) -> str:
    """``name`` if it is one of :data:`CONDITION_FAMILIES`.

    Raises
    ------
    AiplibParameterError
        Naming the unknown family and the valid ones.
    """
    name = str(name).strip()
    if name not in CONDITION_FAMILIES:
        raise AiplibParameterError(f"unknown condition family {name!r}; choose among "
                                   f"{', '.join(CONDITION_FAMILIES)}")
    return name


def parse_suite(value) -> tuple:
    """The condition families of a suite parameter (a name, a comma list, ``"all"``, or empty/None:
    :data:`DEFAULT_SUITE`), distinct and in :data:`CONDITION_FAMILIES` order.

    Raises
    ------
    AiplibParameterError
        For an unknown name (the message lists the valid ones).

    Examples
    --------
    >>> parse_suite("channel, background"), parse_suite("all")[1]
    (('background', 'channel'), 'competing_speech')
    """
    if value is None:
        return DEFAULT_SUITE
    parts = [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p).strip() for p in value]
    parts = [p for p in parts if p]
    if not parts:
        return DEFAULT_SUITE
    chosen = {check_family(p) for p in parts if p != "all"}  # every name is checked, with "all" too
    if "all" in parts:
        return CONDITION_FAMILIES
    return tuple(f for f in CONDITION_FAMILIES if f in chosen)
