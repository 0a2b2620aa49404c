"""Tasks, their prompts and the prompt sets they come from (``aiplib/core/tasks.yaml``).

A task is a (family, prompt variant) pair. A prompt set gives every task one text: ``aip-closed-v1``
(aliases ``demo``, ``custom``; the default) the built-in closed-list texts of :data:`PROMPTS`;
``paper`` (alias ``authors-05``) the ``PROMPTS`` dict of the authors' ``scripts/05_inference.py``
(github.com/IvLabs/AIP-Speech), downloaded once and read with :mod:`ast`, never executed.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Mapping

from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.stamps import text_sha256
from aiplib.core.tasks import (
    KEYWORDS,
    KWS_CLOSED_LIST,
    KWS_OPEN_ANSWER,
    normalize_keywords,
    required_tasks,
    task_file,
)
from aiplib.core.workspace import workspace
from aiplib.io.formats import read_item_bank_keywords
from aiplib.sources.download import download_file


class PromptFileError(AiplibError, ValueError):
    """A prompts file cannot be used as a prompt set (the message names the file and line)."""


def _scope_nodes(body):
    """Statements that run at import time (module body and its if/try/with/for blocks, not def/class
    bodies)."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):  # an except handler: its body
            yield from _scope_nodes(getattr(node, field, None) or [])


def _names(target) -> list[str]:
    """The variable names an assignment target binds."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        names = []
        for e in target.elts:
            names.extend(_names(e))
        return names
    return []


def _is_var(node, variable) -> bool:
    """``node`` is the bare name ``variable``."""
    return isinstance(node, ast.Name) and node.id == variable


def _targets(node) -> list:
    """The targets a statement assigns, updates or deletes (none for other statements)."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _mutation(node, variable) -> str | None:
    """Why ``node`` (a module-level statement) changes the dict after its literal, or None."""
    for t in _targets(node):
        if isinstance(t, (ast.Subscript, ast.Attribute)) and _is_var(t.value, variable):
            return f"`{ast.unparse(t)}` is assigned or deleted"
        if isinstance(node, ast.AugAssign) and _is_var(t, variable):
            return f"`{variable}` is updated in place ({type(node.op).__name__})"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        if isinstance(f, ast.Attribute) and _is_var(f.value, variable):
            return f"`{variable}.{f.attr}(...)` is called"
    return None


def _describe(node) -> str:
    """A short quote of a node for an error message."""
    if isinstance(node, ast.JoinedStr):
        return "an f-string"
    text = ast.unparse(node)  # a node of ast.parse always unparses
    return f"`{text[:60]}{'…' if len(text) > 60 else ''}`"


def _string(node, where: str) -> str:
    """The value of a string literal, adjacent literals or ``+`` between such; anything else
    raises."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string(node.left, where) + _string(node.right, where)
    raise PromptFileError(
        f"{where}:{node.lineno}: {_describe(node)} is not a string literal; only string literals "
        "(adjacent, parenthesised or joined with +) are read — the file is never executed"
    )


def parse_prompts_file(path, *, variable: str = "PROMPTS") -> dict[str, str]:
    """Read the literal dict ``variable = {...}`` of a Python file without executing it; every key,
    in file order.

    Raises
    ------
    PromptFileError
        The file cannot be read or parsed; ``variable`` is assigned never or more than once at
        module level, or not to a dict display of string-literal keys and values; a key repeats; or
        the dict is changed at module level after its literal.
    """
    p = Path(path)
    tree = _parse_python(p)
    assigns = []
    mutations = []
    for node in _scope_nodes(tree.body):
        if _assigns_variable(node, variable):
            assigns.append(node)
            continue
        why = _mutation(node, variable)
        if why is not None:
            mutations.append((node.lineno, why))
    node = _single_assignment(p, variable, assigns)
    if mutations:
        line, why = mutations[0]
        raise PromptFileError(
            f"{p}:{line}: {why} at module level, so the dict the script used differs "
            f"from its literal; not read"
        )
    return _literal_dict(p, variable, node.value)


def _parse_python(p: Path) -> ast.Module:
    """The syntax tree of a Python file (never executed); :class:`PromptFileError` when it cannot be
    read or parsed."""
    try:
        source = p.read_bytes()
    except OSError as exc:
        raise PromptFileError(f"cannot read the prompts file {p}: {exc.strerror or exc}") from None
    try:
        return ast.parse(source, filename=str(p))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        where = f":{line}" if line else ""
        raise PromptFileError(
            f"{p}{where}: not a Python file that can be parsed ({getattr(exc, 'msg', exc)})"
        ) from None


def _assigns_variable(node, variable: str) -> bool:
    """``node`` binds ``variable`` (``=``, also in a tuple, or an annotated assignment with a
    value)."""
    if isinstance(node, ast.Assign):
        return any(variable in _names(t) for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return _is_var(node.target, variable) and node.value is not None
    return False


def _single_assignment(p: Path, variable: str, assigns: list):
    """The one module-level ``variable = …``; :class:`PromptFileError` for none, several, or a
    tuple unpacking."""
    if not assigns:
        raise PromptFileError(
            f"{p}: no module-level assignment `{variable} = {{...}}` found "
            f"(is this the authors' inference script?)"
        )
    if len(assigns) > 1:
        lines = ", ".join(str(a.lineno) for a in assigns)
        raise PromptFileError(
            f"{p}:{assigns[1].lineno}: `{variable}` is assigned {len(assigns)} times at "
            f"module level (lines {lines}); cannot tell which dict the script used"
        )
    node = assigns[0]
    if isinstance(node, ast.Assign) and not all(
        _is_var(t, variable) or variable not in _names(t) for t in node.targets
    ):
        raise PromptFileError(
            f"{p}:{node.lineno}: `{variable}` is unpacked from a tuple; expected "
            f"`{variable} = {{...}}`"
        )
    return node


def _literal_dict(p: Path, variable: str, value) -> dict[str, str]:
    """The keys and string values of a dict display, in order; :class:`PromptFileError` for
    anything else, a ``**`` unpacking, a key that is not a string literal or repeats."""
    if not isinstance(value, ast.Dict):
        raise PromptFileError(
            f"{p}:{value.lineno}: `{variable}` is {_describe(value)}, not a literal "
            f"dict `{{'task': 'text', ...}}`"
        )
    out: dict[str, str] = {}
    for k, v in zip(value.keys, value.values):
        if k is None:
            raise PromptFileError(
                f"{p}:{v.lineno}: `**{_describe(v).strip('`')}` unpacking in "
                f"`{variable}` is not read; only literal keys"
            )
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise PromptFileError(
                f"{p}:{k.lineno}: key {_describe(k)} of `{variable}` is not a string literal"
            )
        if k.value in out:
            raise PromptFileError(f"{p}:{k.lineno}: key {k.value!r} appears twice in `{variable}`")
        out[k.value] = _string(v, str(p))
    return out


#: The steering sentence the p5 prompts of ``aip-closed-v1`` open with.
_STEER = (
    "Listen only to the main foreground speaker and ignore all background sounds, noise, music "
    "and other voices."
)

#: task name (the <task> of the result files) → (family, prompt variant), from tasks.yaml.
TASKS: dict[str, tuple[str, str]] = {
    t: (d["family"], d["variant"]) for t, d in task_file()["tasks"].items()
}


def _prompt(prompt_id: str, text: str) -> dict[str, str]:
    """One prompt: ``{"prompt_id", "text"}``."""
    return {"prompt_id": prompt_id, "text": text}


def builtin_prompts(keywords=None) -> dict[tuple[str, str], dict[str, str]]:
    """(family, variant) → ``{"prompt_id", "text"}`` of ``aip-closed-v1`` for a keyword set (None:
    the default).

    With other keywords than the default the KWS prompt ids end in ``_kw<first 8 hex of the SHA-256
    of "w1,w2,...">``, so results never mix two keyword sets.

    Raises
    ------
    AiplibParameterError
        If the keyword set is empty or has a multi-word keyword.
    """
    kw = normalize_keywords(keywords)
    choice = f"It is one of: {', '.join(kw)}, or another word. Answer with the single word only."
    suffix = ""
    if kw != KEYWORDS:
        suffix = "_kw" + hashlib.sha256(",".join(kw).encode("utf-8")).hexdigest()[:8]
    p = _prompt
    return {
        ("asr", "baseline"): p("asr_baseline_v1", "Transcribe the speech in this audio exactly."),
        ("asr", "p5"): p(
            "asr_p5_v1",
            f"{_STEER} Transcribe the speech of the main speaker in this audio exactly.",
        ),
        ("kws", "baseline"): p(
            "kws_baseline_v1" + suffix, f"Which word is spoken in this audio? {choice}"
        ),
        ("kws", "p5"): p(
            "kws_p5_v1" + suffix, f"{_STEER} Which word does the main speaker say? {choice}"
        ),
    }


#: aip-closed-v1 with the default keywords (change prompt_id whenever text changes: results are
#: keyed by it).
PROMPTS: dict[tuple[str, str], dict[str, str]] = builtin_prompts()


def task_names(tasks="all") -> list[str]:
    """Expand ``"all"``, a name, a comma list or a list of names into task names.

    Raises
    ------
    KeyError
        If a name is not in :data:`TASKS`; the message lists the valid names.
    """
    if not isinstance(tasks, str):
        names = list(tasks)
    elif tasks.strip() == "all":
        names = list(TASKS)
    else:
        names = [t.strip() for t in tasks.split(",") if t.strip()]
    bad = [t for t in names if t not in TASKS]
    if bad:
        raise KeyError(
            f"unknown task(s) {', '.join(map(repr, bad))}; valid tasks: {', '.join(TASKS)}"
        )
    return names


def prompt_for(
    task: str, prompt_set=None, *, ws=None, prompts_file: str | Path | None = None
) -> tuple[str, str]:
    """``(prompt_id, text)`` of a task in a prompt set (name, :class:`PromptSet` or None: the
    default).

    ``ws`` and ``prompts_file`` go to :func:`get_prompt_set`, which gives the errors besides
    ``KeyError`` (unknown task).
    """
    if task not in TASKS:
        raise KeyError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    return get_prompt_set(prompt_set, ws=ws, prompts_file=prompts_file).prompt(task)


#: prompt_id of the rows of a model that takes no task prompt (prompt_style: none).
NO_PROMPT_ID = "none"


def not_applicable(entry, tasks) -> dict[str, str]:
    """``{task: reason}`` of the prompt variants a model that takes no task prompt (``prompt_style:
    none``) would only repeat its family's baseline on; stage 7 skips them. Empty for a model that
    takes prompts."""
    if getattr(entry, "takes_prompt", True):
        return {}
    reasons = {}
    for t in tasks:
        family, variant = TASKS[t]
        if variant != "baseline":
            reasons[t] = (
                f"{entry.id} takes no task prompt (prompt_style none): the {variant} prompt would "
                f"repeat the {family} baseline's decode"
            )
    return reasons


#: Field of inference rows, score rows and sidecars holding PromptSet.name.
PROMPT_SET_FIELD = "prompt_set"
#: Source field of get_prompt_set → the environment variable that supplies it when not given.
ENV_VARS = {
    "prompts_file": "PROMPTS_FILE",
    "commit": "PROMPTS_COMMIT",
    "base_url": "PROMPTS_BASE_URL",
    "path": "PROMPTS_PATH",
    "sha256": "PROMPTS_SHA256",
}

#: A commit hash or plain ref name.
_COMMIT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def prompt_set_names(*, aliases: bool = False) -> list[str]:
    """Names of the prompt sets of the task file (``aliases``: with ``demo``, ``custom``,
    ``authors-05``)."""
    names = []
    for name, d in task_file()["prompt_sets"].items():
        names.append(name)
        if aliases:
            names.extend(d.get("aliases") or [])
    return names


def canonical_prompt_set_name(name: str | None) -> str:
    """The prompt set an alias (or None: the default) names.

    Raises
    ------
    AiplibParameterError
        If ``name`` is no prompt set or alias; the message lists the valid ones.
    """
    if name is None:
        return task_file()["default_prompt_set"]
    for canon, d in task_file()["prompt_sets"].items():
        if name == canon or name in (d.get("aliases") or []):
            return canon
    raise AiplibParameterError(
        f"unknown prompt set {name!r}; valid: {', '.join(prompt_set_names(aliases=True))}"
    )


@dataclass(frozen=True, eq=False)
class PromptSet:
    """One named prompt set.

    ``texts`` / ``prompt_ids``: task → prompt text / id (a file's ids are ``<name>_<task>_<first 10
    hex of the text's SHA-256>``; stage 7 resumes on them); ``kws_answer``: ``closed-list`` or
    ``open-answer``; ``source``: ``{"kind": "builtin" | "url" | "file", …}``; ``sha256``,
    ``variable``: the prompts file's SHA-256 and dict name (None for a built-in set);
    ``other_keys``: keys of that dict no task uses.
    """

    name: str
    texts: Mapping[str, str]
    prompt_ids: Mapping[str, str]
    kws_answer: str
    source: Mapping[str, object]
    sha256: str | None = None
    variable: str | None = None
    other_keys: tuple[str, ...] = ()

    def text(self, task: str) -> str:
        """Prompt text of ``task``; ``KeyError`` (listing the tasks) if unknown."""
        if task not in self.texts:
            raise KeyError(f"unknown task {task!r}; valid tasks: {', '.join(self.texts)}")
        return self.texts[task]

    def prompt(self, task: str) -> tuple[str, str]:
        """``(prompt_id, text)`` of ``task``; ``KeyError`` (listing the tasks) if unknown."""
        text = self.text(task)
        return self.prompt_ids[task], text

    @property
    def texts_sha256(self) -> str:
        """SHA-256 of the texts as canonical JSON (sorted keys, UTF-8)."""
        blob = json.dumps(dict(self.texts), sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

    def __repr__(self) -> str:
        return (
            f"PromptSet(name={self.name!r}, kws_answer={self.kws_answer!r}, "
            f"source={dict(self.source)!r}, sha256={self.sha256!r})"
        )


def _builtin_set(name: str, spec: dict, keywords=None) -> PromptSet:
    """The built-in prompt set ``name`` (``aip-closed-v1``) for a keyword set (None: the
    default)."""
    kw = normalize_keywords(keywords)
    prompts = {t: builtin_prompts(kw)[TASKS[t]] for t in required_tasks()}
    texts = {t: p["text"] for t, p in prompts.items()}
    ids = {t: p["prompt_id"] for t, p in prompts.items()}
    return PromptSet(
        name=name,
        texts=MappingProxyType(texts),
        prompt_ids=MappingProxyType(ids),
        kws_answer=spec["kws_answer"],
        source=MappingProxyType(
            {
                "kind": "builtin",
                "module": "aiplib.inference.prompts",
                **({} if kw == KEYWORDS else {"keywords": list(kw)}),
            }
        ),
    )


def prompt_set_record(ps: PromptSet) -> dict:
    """The provenance record of a prompt set (JSON-serialisable; for sidecars and run logs)."""
    return {
        PROMPT_SET_FIELD: ps.name,
        "kws_answer": ps.kws_answer,
        "source": dict(ps.source),
        "sha256": ps.sha256,
        "variable": ps.variable,
        "texts_sha256": ps.texts_sha256,
        "tasks": {
            t: {
                "prompt_id": ps.prompt_ids[t],
                "text": ps.texts[t],
                "text_sha256": text_sha256(ps.texts[t]),
            }
            for t in ps.texts
        },
        "other_keys": list(ps.other_keys),
    }


def prompt_set_from_file(
    path,
    *,
    name: str = "paper",
    kws_answer: str = KWS_OPEN_ANSWER,
    variable: str = "PROMPTS",
    source: Mapping | None = None,
    sha256: str | None = None,
) -> PromptSet:
    """A prompt set from the literal dict ``variable`` of a Python file
    (:func:`parse_prompts_file`).

    ``source`` defaults to ``{"kind": "file", "path": <absolute path>}``; ``sha256`` is the expected
    SHA-256.

    Raises
    ------
    PromptFileError
        As :func:`parse_prompts_file`; also for a missing or empty task text or another SHA-256.
    """
    if kws_answer not in (KWS_CLOSED_LIST, KWS_OPEN_ANSWER):
        raise AiplibParameterError(
            f"kws_answer must be {KWS_CLOSED_LIST!r} or {KWS_OPEN_ANSWER!r}, got {kws_answer!r}"
        )
    p = Path(path)
    found = parse_prompts_file(p, variable=variable)
    digest = file_sha256(p)
    if sha256 and digest != sha256.lower():
        raise PromptFileError(
            f"{p}: SHA-256 {digest} differs from the expected {sha256.lower()}; the prompts file "
            "changed (delete the cached copy to fetch it again, or update the pin)"
        )
    texts = _task_texts(p, found, name=name, variable=variable)
    ids = {t: f"{name}_{t}_{text_sha256(s)[:10]}" for t, s in texts.items()}
    src = dict(source) if source is not None else {"kind": "file", "path": str(p.resolve())}
    return PromptSet(
        name=name,
        texts=MappingProxyType(texts),
        prompt_ids=MappingProxyType(ids),
        kws_answer=kws_answer,
        source=MappingProxyType(src),
        sha256=digest,
        variable=variable,
        other_keys=tuple(k for k in found if k not in texts),
    )


def _task_texts(p: Path, found: dict[str, str], *, name: str, variable: str) -> dict[str, str]:
    """The text of every task a prompt set needs, from a file's ``variable`` dict ``found``;
    :class:`PromptFileError` for a missing or empty one."""
    need = required_tasks()
    missing = [t for t in need if t not in found]
    if missing:
        raise PromptFileError(
            f"{p}: the `{variable}` dict has no key {', '.join(map(repr, missing))} (prompt set "
            f"{name!r} needs {', '.join(need)}); keys found: {', '.join(found) or 'none'}"
        )
    texts = {t: found[t] for t in need}
    empty = [t for t, s in texts.items() if not s.strip()]
    if empty:
        raise PromptFileError(
            f"{p}: `{variable}` has an empty text for {', '.join(map(repr, empty))}"
        )
    return texts


def prompts_url(base_url: str, commit: str, path: str) -> str:
    """``<base_url>/<commit>/<path>`` (the layout of raw.githubusercontent.com).

    Raises
    ------
    AiplibParameterError
        If ``commit`` is not a plain name (letters, digits, ``._-``) or ``path`` is absolute or has
        ``..``.
    """
    if not isinstance(commit, str) or not _COMMIT_RE.match(commit):
        raise AiplibParameterError(
            f"prompts commit must be a commit hash or plain ref name, got {commit!r}"
        )
    pp = PurePosixPath(path)
    if pp.is_absolute() or ".." in pp.parts or not pp.name:
        raise AiplibParameterError(
            f"prompts path must be a relative path inside the repository, got {path!r}"
        )
    return f"{base_url.rstrip('/')}/{commit}/{pp.as_posix()}"


def fetch_prompts_file(
    *,
    base_url: str,
    commit: str,
    path: str,
    cache_dir,
    sha256: str | None = None,
    progress: bool = False,
) -> tuple[Path, dict]:
    """Download a prompts file once into ``<cache_dir>/<commit>/<file name>`` (reused offline).

    Returns ``(path, source)``; raises :class:`aiplib.core.errors.DownloadError` (no answer or an
    error status; the message says to use ``PROMPTS_FILE`` offline) or ``ChecksumError`` (not
    ``sha256``).
    """
    url = prompts_url(base_url, commit, path)
    dest = Path(cache_dir) / commit / PurePosixPath(path).name
    downloaded = not dest.is_file()
    if downloaded:
        download_file(
            url,
            dest,
            sha256=sha256,
            progress=progress,
            retries=1,
            hint=(
                f"The paper prompt set needs network access once (the file is then cached "
                f"as {dest}). Offline, download {PurePosixPath(path).name} elsewhere and set "
                f"PROMPTS_FILE=<that file>, or set PROMPTS_BASE_URL to a mirror."
            ),
        )
    return dest, {
        "kind": "url",
        "url": url,
        "base_url": base_url,
        "commit": commit,
        "path": path,
        "cached_file": str(dest),
        "downloaded": downloaded,
    }


def get_prompt_set(
    prompt_set=None,
    *,
    ws=None,
    keywords=None,
    progress: bool = False,
    prompts_file: str | Path | None = None,
    commit: str | None = None,
    base_url: str | None = None,
    path: str | None = None,
    sha256: str | None = None,
    cache_dir: str | Path | None = None,
) -> PromptSet:
    """A prompt set by name, its file fetched and parsed when it has one.

    Parameters
    ----------
    prompt_set : str, PromptSet or None
        A name or alias of ``tasks.yaml``, a :class:`PromptSet` (returned as is) or None (the
        default).
    ws : aiplib.core.workspace.Workspace, optional
        Its ``raw/prompts/`` caches downloads (default the ``paper`` workspace); its KWS item bank
        gives the built-in sets' keywords (else ``keywords``, else the default).
    prompts_file, commit, base_url, path, sha256 : str, optional
        Where the set's file comes from (a local copy; else the commit, server and path it is
        downloaded from) and its pinned SHA-256: each, when None, from its :data:`ENV_VARS`
        variable, then the task file.
    cache_dir : str or Path, optional
        Overrides ``<ws>/raw/prompts``.

    Raises
    ------
    AiplibParameterError
        Unknown set name (valid names listed) or a malformed commit/path.
    PromptFileError
        The file cannot be parsed, lacks a task's key, or its SHA-256 differs from the pin.
    aiplib.core.errors.DownloadError
        The file has to be fetched and cannot be (offline: use ``PROMPTS_FILE``).
    """
    if isinstance(prompt_set, PromptSet):
        return prompt_set
    name = canonical_prompt_set_name(prompt_set)
    spec = task_file()["prompt_sets"][name]
    if spec["source"] == "builtin":
        if keywords is None and ws is not None:
            keywords = read_item_bank_keywords(ws)
        return _builtin_set(name, spec, keywords)
    local = _setting(prompts_file, "prompts_file")
    pin = _setting(sha256, "sha256")
    if local:
        return _local_prompt_set(Path(local).expanduser(), name, spec, pin)
    where = _PromptLocation(
        commit=_setting(commit, "commit", spec["source"]["commit"]),
        base_url=_setting(base_url, "base_url", spec["source"]["base_url"]),
        path=_setting(path, "path", spec["source"]["path"]),
    )
    if cache_dir is None:
        cache_dir = Path((ws if ws is not None else workspace("paper")).raw) / "prompts"
    return _fetched_prompt_set(name, spec, where, pin, cache_dir, progress)


def _setting(given, key: str, spec_value=None):
    """A prompt source field: the argument ``given``, else its :data:`ENV_VARS` variable, else
    ``spec_value``."""
    if given is not None:
        return given
    return os.environ.get(ENV_VARS[key], "").strip() or spec_value


@dataclass(frozen=True)
class _PromptLocation:
    """Where a prompts file is downloaded from: ``<base_url>/<commit>/<path>``."""

    commit: str
    base_url: str
    path: str


def _local_prompt_set(p: Path, name: str, spec: dict, pin: str | None) -> PromptSet:
    """The prompt set ``name`` from a local copy of its file (``PROMPTS_FILE``)."""
    src = spec["source"]
    if not p.is_file():
        raise PromptFileError(
            f"PROMPTS_FILE {p} does not exist (a local copy of the prompts file "
            f"{src['path']} of {src.get('repo', src['base_url'])} is expected)"
        )
    return prompt_set_from_file(
        p,
        name=name,
        kws_answer=spec["kws_answer"],
        variable=src.get("variable", "PROMPTS"),
        sha256=pin,
        source={"kind": "file", "path": str(p.resolve()), "stands_for": src["path"]},
    )


def _fetched_prompt_set(
    name: str, spec: dict, where: _PromptLocation, pin: str | None, cache_dir, progress: bool
) -> PromptSet:
    """The prompt set ``name`` from its file downloaded once into ``cache_dir``; the task file's
    pin applies when the file is the task file's own."""
    src = spec["source"]
    if pin is None and (where.commit, where.base_url, where.path) == (
        src["commit"],
        src["base_url"],
        src["path"],
    ):
        pin = src.get("sha256")
    file, source = fetch_prompts_file(
        base_url=where.base_url,
        commit=where.commit,
        path=where.path,
        cache_dir=cache_dir,
        sha256=pin,
        progress=progress,
    )
    if src.get("repo") and where.base_url == src["base_url"]:
        source = {**source, "repo": src["repo"]}
    return prompt_set_from_file(
        file,
        name=name,
        kws_answer=spec["kws_answer"],
        variable=src.get("variable", "PROMPTS"),
        sha256=pin,
        source=source,
    )


#: "aip-closed-v1": the texts of PROMPTS.
DEFAULT_PROMPT_SET: str = task_file()["default_prompt_set"]
