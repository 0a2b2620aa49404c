"""The task file ``aiplib/core/tasks.yaml`` (tasks, task families, keyword sets) and the condition
families.

A *task* (``asr``, ``kws``, ``asr_steer_p5``, ``kws_steer_p5``) is a (family, prompt variant) pair.
A *family* (``asr``, ``kws``) fixes the item bank, the manifest's reference column, the scoring rule
and the degradation column with its sign. A *keyword set* is the closed list of the KWS family
(default the paper's ten Speech Commands words); the set a run used is stored with its KWS item
bank.
"""

from __future__ import annotations

import functools
import string
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import yaml

from aiplib.core.errors import AiplibParameterError

#: The task file: task families, condition families, keyword sets, tasks, prompt sets.
TASK_FILE = Path(__file__).with_name("tasks.yaml")
#: ``kws_answer`` of a prompt set whose KWS prompt names the keywords (closed list).
KWS_CLOSED_LIST = "closed-list"
#: ``kws_answer`` of a prompt set whose KWS prompt asks for the spoken word or SILENCE (the
#: authors' open answer).
KWS_OPEN_ANSWER = "open-answer"


def _read_yaml(path: str | Path):
    """The parsed YAML file at ``path``."""
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


#: JSON Schema of ``tasks.yaml`` (``tasks.schema.yaml``); :func:`_read_task_file` adds the
#: cross-references.
_SCHEMA = _read_yaml(Path(__file__).with_name("tasks.schema.yaml"))


@functools.lru_cache(maxsize=4)
def _read_task_file(path: str) -> dict:
    """The task file at ``path``, checked against :data:`_SCHEMA`, then its cross-references.

    Raises
    ------
    AiplibParameterError
        Listing every problem found.
    """
    # jsonschema imports rfc3987_syntax when installed, which builds a Lark grammar at import (~2 s
    # of CPU in every process that imports aiplib: each stage's kernel, make's checks) for the "iri"
    # format only; this file is validated without format checks, so it is left unimported.
    sys.modules.setdefault("rfc3987_syntax", None)
    import jsonschema  # noqa: PLC0415

    data = _read_yaml(path)
    problems = []
    for error in jsonschema.Draft202012Validator(_SCHEMA).iter_errors(data):
        problems.append(f"{error.json_path}: {error.message}")
    if not problems:
        problems += _keyword_set_problems(data)
        problems += _task_problems(data)
        problems += _prompt_set_problems(data)
    if problems:
        raise AiplibParameterError(f"{path}: " + "; ".join(problems))
    return data


def _keyword_set_problems(data: dict) -> list[str]:
    """A task family naming a keyword set that ``keyword_sets`` does not hold."""
    problems = []
    for name, entry in data["families"].items():
        if "keyword_set" in entry and entry["keyword_set"] not in data["keyword_sets"]:
            problems.append(
                f"family {name!r}: keyword set {entry['keyword_set']!r} is not in 'keyword_sets'"
            )
    return problems


def _task_problems(data: dict) -> list[str]:
    """A task whose family is not in ``families``."""
    problems = []
    for name, entry in data["tasks"].items():
        if entry["family"] not in data["families"]:
            problems.append(f"task {name!r}: family {entry['family']!r} is not in 'families'")
    return problems


def _prompt_set_problems(data: dict) -> list[str]:
    """A prompt set name or alias used twice; a default prompt set that is not a prompt set."""
    sets = data["prompt_sets"]
    names = []
    for name, entry in sets.items():
        names.append(name)
        names.extend(entry.get("aliases") or [])
    problems = []
    for name in _distinct(names):
        if names.count(name) > 1:
            problems.append(f"prompt set name {name!r} is used twice")
    if data["default_prompt_set"] not in sets:
        problems.append(f"default_prompt_set {data['default_prompt_set']!r} is not a prompt set")
    return problems


def _distinct(items) -> list:
    """``items`` without repeats, in first-seen order."""
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def task_file() -> dict:
    """The parsed task file (validated, read once; do not modify it): ``{"families": {family:
    {"reference", "scoring", "measure", "degradation": {"column", "sign"}, ["keyword_set"]}},
    "keyword_sets": {name: [word, ...]}, "tasks": {task: {"family", "variant"}},
    "default_prompt_set": str, "prompt_sets": {name: {"aliases", "kws_answer", "source"}}}``.

    Raises
    ------
    AiplibParameterError
        If the file is malformed (every problem is listed).
    """
    return _read_task_file(str(TASK_FILE))


def required_tasks() -> tuple[str, ...]:
    """The task names every prompt set must define, in task-file order (``("asr", "kws",
    "asr_steer_p5", "kws_steer_p5")``)."""
    return tuple(task_file()["tasks"])


def family_spec(family: str) -> TaskFamily:
    """The :class:`TaskFamily` of a task family name (``asr``, ``kws``): :data:`TASK_FAMILIES`, with
    a clear error for an unknown name.

    Raises
    ------
    AiplibParameterError
        If ``family`` is not in the task file.
    """
    if family not in TASK_FAMILIES:
        raise AiplibParameterError(
            f"unknown task family {family!r}; choose one of {', '.join(TASK_FAMILIES)}"
        )
    return TASK_FAMILIES[family]


def task_family(task: str) -> str:
    """``"asr"`` or ``"kws"`` for a task name: its ``family`` in the task file, else the family it
    starts with (the authors' further steering variants, ``kws_steer_p3`` …).

    Raises
    ------
    AiplibParameterError
        If the name is in no family.
    """
    tasks = task_file()["tasks"]
    if task in tasks:
        return tasks[task]["family"]
    families = task_file()["families"]
    for fam in families:
        if task == fam or str(task).startswith(fam + "_"):
            return fam
    raise AiplibParameterError(
        f"task {task!r} belongs to neither the {' nor the '.join(families)} family"
    )


def normalize_keyword(text) -> str:
    """One keyword, KWS label or first answer word read the way KWS answers are: Unicode NFC,
    lower-case, white space collapsed, ASCII punctuation stripped at both ends; ``""`` when nothing
    is left (``"up!"`` → ``"up"``, ``" Yes "`` → ``"yes"``, ``"?"`` → ``""``)."""
    text = unicodedata.normalize("NFC", str(text))
    return " ".join(text.lower().split()).strip(string.punctuation).strip()


def normalize_keywords(keywords) -> tuple[str, ...]:
    """A keyword set (comma-separated string, sequence of words, or None: :data:`KEYWORDS`) as a
    tuple of keywords normalised as answers are (:func:`normalize_keyword`), in order, without
    repeats.

    Raises
    ------
    AiplibParameterError
        If the set is empty, an entry is empty (``"yes,,no"``: named by its position) or a keyword
        has a space in it (the first-word rule could never match it).
    """
    if keywords is None:
        return KEYWORDS
    if isinstance(keywords, str):
        keywords = keywords.split(",")
    keywords = [str(k) for k in keywords]
    if not any(k.strip() for k in keywords):
        raise AiplibParameterError("the keyword set is empty")
    empty = empty_keyword_entries(keywords)
    if empty:
        raise AiplibParameterError(
            f"the keyword set {','.join(keywords)!r} has {_entry_names(empty, len(keywords))} "
            "(nothing left after normalisation); remove the extra comma or the entry"
        )
    words = tuple(_distinct(normalize_keyword(k) for k in keywords))
    bad = [word for word in words if len(word.split()) != 1]
    if bad:
        raise AiplibParameterError(f"keywords must be single words, got {bad}")
    return words


def empty_keyword_entries(keywords) -> list[int]:
    """1-based positions of the entries of ``keywords`` (a sequence of str) that
    :func:`normalize_keyword` leaves empty (``["yes", "", "?"]`` → ``[2, 3]``)."""
    return [i for i, k in enumerate(keywords, start=1) if not normalize_keyword(k)]


def _entry_names(positions: list[int], n: int) -> str:
    """``"an empty entry (4 of 5)"`` or ``"empty entries (2, 4 of 5)"``."""
    if len(positions) == 1:
        return f"an empty entry ({positions[0]} of {n})"
    return f"empty entries ({', '.join(str(i) for i in positions)} of {n})"


def keyword_set() -> tuple[str, ...]:
    """The KWS family's keyword set of the task file (the paper's ten words; :func:`task_file` has
    checked that ``keyword_sets`` holds it)."""
    return tuple(
        str(w).strip().lower() for w in task_file()["keyword_sets"][family_spec("kws").keyword_set]
    )


@dataclass(frozen=True)
class TaskFamily:
    """One task family of the task file: how its rows are referenced, scored and compared.

    Read from ``families:`` in ``tasks.yaml``; code asks these fields instead of comparing a task
    name with ``"asr"`` or ``"kws"``.

    Attributes
    ----------
    name : str
        ``"asr"`` or ``"kws"``.
    reference : str
        Manifest column holding the reference (``transcript``, ``keyword``).
    reference_label : str
        What the explorer calls the reference (``Reference``, ``Keyword (label)``).
    scoring : str
        Name of the scorer (:mod:`aiplib.scoring.score` registers one per name).
    measure : str
        Per-row measure column of ``results/scores/<task>.csv`` (``wer``, ``correct``).
    measure_kind : str
        ``error_rate`` (lower is better, pooled as ``sum(errors) / sum(ref_words)``) or ``binary``
        (1 correct / 0 wrong per row, higher is better; paired rows allow McNemar's exact test).
    measure_label : str
        The measure in prose and figure axes (``WER``, ``accuracy``).
    summary : str
        Short name in table columns (``wer`` → ``wer_pp``, ``asr_wer_clean``; ``acc``).
    pooled : tuple of str
        Per-row count columns summed to pool the measure over rows (``errors``, ``ref_words``; empty
        when the pooled measure is the plain mean).
    degradation_column : str
        Score-file column of the per-pair degradation (``delta_wer``, ``delta_acc``).
    degradation_sign : str
        ``noisy_minus_clean`` (WER) or ``clean_minus_noisy`` (accuracy): positive means worse.
    degradation_label : str
        The degradation in prose (``ΔWER``, ``ΔAcc``).
    keyword_set : str or None
        Name of the default keyword set (KWS), or None.
    """

    name: str
    reference: str
    reference_label: str
    scoring: str
    measure: str
    measure_kind: str
    measure_label: str
    summary: str
    pooled: tuple[str, ...]
    degradation_column: str
    degradation_sign: str
    degradation_label: str
    keyword_set: str | None = None

    @property
    def is_binary(self) -> bool:
        """True when each row's measure is 1 (correct) or 0 (wrong)."""
        return self.measure_kind == "binary"

    @property
    def higher_is_worse(self) -> bool:
        """True for an error rate (WER), False for accuracy."""
        return self.degradation_sign == "noisy_minus_clean"

    def degradation(self, clean, noisy):
        """The degradation from the clean and the noisy measure (scalars or arrays of one shape):
        ``noisy - clean`` for an error rate, ``clean - noisy`` for accuracy; positive = worse.

        >>> TASK_FAMILIES["asr"].degradation(0.25, 0.5), TASK_FAMILIES["kws"].degradation(1.0, 0.75)
        (0.25, 0.25)
        """
        if self.higher_is_worse:
            return noisy - clean
        return clean - noisy


@dataclass(frozen=True)
class ConditionFamily:
    """One condition family of the task file: what a noisy row adds to the clean speech.

    Read from ``condition_families:`` in ``tasks.yaml``. The stage packages register their part of a
    family under :attr:`name` (mixing in :mod:`aiplib.stimuli`, leakage scoring in
    :mod:`aiplib.scoring`, tables in :mod:`aiplib.analysis`).

    Attributes
    ----------
    name : str
        The ``condition_family`` value of its manifest rows.
    label : str
        The condition chooser's title in the explorer and the report (``Background``).
    columns : tuple of str
        Manifest columns after :data:`aiplib.stimuli.manifests.EXTRA_COLUMNS`, in order.
    seed_start : dict
        Task family → first seed of its manifest row counter.
    has_snr : bool
        Whether its noisy rows carry a nominal SNR in dB (a channel transform does not).
    table : str or None
        Name of the family's own table in notebook 09 (None: the paper's tables).
    own_folders : bool
        Whether its manifests, inference rows, checks and scores live in a sub-folder named after
        it (``manifests/<name>/`` …, :class:`aiplib.core.workspace.Workspace`); False: the shared
        folders (``background``, the paper's layout).
    """

    name: str
    label: str
    columns: tuple[str, ...]
    seed_start: dict
    has_snr: bool
    table: str | None
    own_folders: bool


def _task_family_spec(name: str, entry: dict) -> TaskFamily:
    """The :class:`TaskFamily` of one ``families:`` entry of the task file."""
    degradation = entry["degradation"]
    return TaskFamily(
        name=name,
        reference=entry["reference"],
        reference_label=entry["reference_label"],
        scoring=entry["scoring"],
        measure=entry["measure"],
        measure_kind=entry["measure_kind"],
        measure_label=entry["measure_label"],
        summary=entry["summary"],
        pooled=tuple(entry["pooled"]),
        degradation_column=degradation["column"],
        degradation_sign=degradation["sign"],
        degradation_label=degradation["label"],
        keyword_set=entry.get("keyword_set"),
    )


def _condition_family_spec(name: str, entry: dict) -> ConditionFamily:
    """The :class:`ConditionFamily` of one ``condition_families:`` entry of the task file."""
    return ConditionFamily(
        name=name,
        label=entry["label"],
        columns=tuple(entry["columns"]),
        seed_start=dict(entry["seed_start"]),
        has_snr=bool(entry["has_snr"]),
        table=entry["table"],
        own_folders=bool(entry["own_folders"]),
    )


#: Task family name → :class:`TaskFamily`, in task-file order (``asr``, ``kws``).
TASK_FAMILIES: Mapping[str, TaskFamily] = MappingProxyType(
    {name: _task_family_spec(name, entry) for name, entry in task_file()["families"].items()}
)

#: Condition family name → :class:`ConditionFamily`, in report order (``background``,
#: ``competing_speech``, ``channel``).
CONDITION_FAMILIES: Mapping[str, ConditionFamily] = MappingProxyType(
    {
        name: _condition_family_spec(name, entry)
        for name, entry in task_file()["condition_families"].items()
    }
)

#: The baseline task (prompt variant ``baseline``) of each task family: ``{"asr": "asr", "kws":
#: "kws"}``.
BASE_TASKS: dict[str, str] = {
    t["family"]: name for name, t in task_file()["tasks"].items() if t["variant"] == "baseline"
}

#: The paper's ten Speech Commands words (a custom item bank may carry its own set).
KEYWORDS: tuple[str, ...] = keyword_set()

#: The suite of ``make all`` without ``SUITE=``.
DEFAULT_SUITE = ("background",)


def task_family_spec(task: str) -> TaskFamily:
    """The :class:`TaskFamily` of a task name (``asr_steer_p5`` → the ``asr`` family).

    Raises
    ------
    AiplibParameterError
        If the name is in no family.
    """
    return TASK_FAMILIES[task_family(task)]


def check_family(name) -> str:
    """``name`` if it is one of :data:`CONDITION_FAMILIES`.

    Raises
    ------
    AiplibParameterError
        Naming the unknown family and the valid ones.
    """
    name = str(name).strip()
    if name not in CONDITION_FAMILIES:
        raise AiplibParameterError(
            f"unknown condition family {name!r}; choose among {', '.join(CONDITION_FAMILIES)}"
        )
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
    parts = _suite_parts(value)
    if not parts:
        return DEFAULT_SUITE
    chosen = {check_family(p) for p in parts if p != "all"}  # every name is checked, with "all" too
    if "all" in parts:
        return tuple(CONDITION_FAMILIES)
    return tuple(f for f in CONDITION_FAMILIES if f in chosen)


def _suite_parts(value) -> list[str]:
    """The non-empty, stripped names of a suite parameter (a comma list or a sequence)."""
    if isinstance(value, str):
        items = value.split(",")
    else:
        items = value
    parts = []
    for item in items:
        part = str(item).strip()
        if part:
            parts.append(part)
    return parts
