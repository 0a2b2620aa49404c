"""The task file ``aiplib/core/tasks.yaml`` (tasks, task families, keyword sets) and the condition families.

A *task* (``asr``, ``kws``, ``asr_steer_p5``, ``kws_steer_p5``) is a (family, prompt variant) pair. A
*family* (``asr``, ``kws``) fixes the item bank, the manifest's reference column, the scoring rule and
the degradation column with its sign. A *keyword set* is the closed list of the KWS family (default the
paper's ten Speech Commands words); the set a run used is stored with its KWS item bank.
"""
from __future__ import annotations

import functools
from pathlib import Path

import jsonschema
import yaml

from aiplib.core.errors import AiplibParameterError

TASK_FILE = Path(__file__).with_name("tasks.yaml")  # families, keyword sets, tasks, prompt sets
# kws_answer of a prompt set: its KWS prompt names the keywords (closed list), or asks for the spoken
# word or SILENCE (open answer, the authors')
KWS_CLOSED_LIST = "closed-list"
KWS_OPEN_ANSWER = "open-answer"

#: JSON Schema of ``tasks.yaml`` (``tasks.schema.yaml``); :func:`_read_task_file` adds the cross-references.
with open(Path(__file__).with_name("tasks.schema.yaml"), encoding="utf-8") as _fh:
    _SCHEMA = yaml.safe_load(_fh)


@functools.lru_cache(maxsize=4)
def _read_task_file(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    problems = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data)]
    if not problems:
        fams, sets = data["families"], data["prompt_sets"]
        problems += [f"family {f!r}: keyword set {d['keyword_set']!r} is not in 'keyword_sets'"
                     for f, d in fams.items() if "keyword_set" in d and d["keyword_set"] not in data["keyword_sets"]]
        problems += [f"task {t!r}: family {d['family']!r} is not in 'families'"
                     for t, d in data["tasks"].items() if d["family"] not in fams]
        names = [a for name, d in sets.items() for a in [name, *(d.get("aliases") or [])]]
        problems += [f"prompt set name {a!r} is used twice" for a in dict.fromkeys(names) if names.count(a) > 1]
        if data["default_prompt_set"] not in sets:
            problems.append(f"default_prompt_set {data['default_prompt_set']!r} is not a prompt set")
    if problems:
        raise AiplibParameterError(f"{path}: " + "; ".join(problems))
    return data


def task_file() -> dict:
    """The parsed task file (validated, read once; do not modify it): ``{"families": {family: {"reference",
    "scoring", "measure", "degradation": {"column", "sign"}, ["keyword_set"]}}, "keyword_sets": {name: [word,
    ...]}, "tasks": {task: {"family", "variant"}}, "default_prompt_set": str, "prompt_sets": {name: {"aliases",
    "kws_answer", "source"}}}``.

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
    if not (words := tuple(dict.fromkeys(str(k).strip().lower() for k in keywords if str(k).strip()))):
        raise AiplibParameterError("the keyword set is empty")
    if bad := [w for w in words if len(w.split()) != 1]:
        raise AiplibParameterError(f"keywords must be single words, got {bad}")
    return words


def keyword_set() -> tuple[str, ...]:
    """The KWS family's keyword set of the task file (the paper's ten words; :func:`task_file` has checked
    that ``keyword_sets`` holds it)."""
    return tuple(str(w).strip().lower() for w in task_file()["keyword_sets"][family_spec("kws")["keyword_set"]])


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
        raise AiplibParameterError(f"unknown condition family {name!r}; choose among {', '.join(CONDITION_FAMILIES)}")
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
    if not (parts := [p for p in parts if p]):
        return DEFAULT_SUITE
    chosen = {check_family(p) for p in parts if p != "all"}  # every name is checked, with "all" too
    return CONDITION_FAMILIES if "all" in parts else tuple(f for f in CONDITION_FAMILIES if f in chosen)
