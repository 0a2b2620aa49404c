"""The model registry: ``registry.yaml`` (data, keyed by the id users pass as ``--model``; its
comments describe every field), with the user's models file merged over it
(:func:`user_models_path`) → :class:`ModelEntry` → a loaded Recogniser. :data:`BACKEND_MODULES` maps
a ``backend`` to its module, imported only when an entry using it loads.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from aiplib.core.errors import MissingPackageError, ModelUnavailableError
from aiplib.core.workspace import MODELS_ENV, MODELS_FILE_NAME, repo_root
from aiplib.inference.models.ct2_numerics import import_ctranslate2
from aiplib.inference.models.paths import resolve_entry_paths

#: The packaged registry file.
REGISTRY_PATH = Path(__file__).with_name("registry.yaml")
#: A user model id: a letter or digit, then letters, digits, ``_``, ``.`` or ``-``.
_USER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: The embedded model every machine can run: stage 7's default ``models`` (suggested when another
#: entry cannot run).
DEFAULT_MODEL = "whisper_tiny_en"

#: backend → module path; each module defines ``load(entry, **options) -> Recogniser``.
BACKEND_MODULES: dict[str, str] = {
    "faster_whisper": "aiplib.inference.models.whisper",
    "transformers": "aiplib.inference.models.transformers_backend",
    "command": "aiplib.inference.models.command_backend",
    "openai": "aiplib.inference.models.openai_backend",
    "hf_asr": "aiplib.inference.models.hf_asr_backend",
}
#: The known backends.
BACKENDS = tuple(BACKEND_MODULES)

#: A ``precision`` in words, for the error that it needs a GPU.
_PRECISION_WORDS = {"int8_bnb": "8-bit bitsandbytes"}
#: Backend-specific fields kept in ModelEntry.extra (anything else unknown is a typo → error).
_EXTRA_FIELDS = {
    "command",
    "timeout_s",
    "base_url",
    "base_url_env",
    "model",
    "api_key_env",
    "engine_args",
    "generate_kwargs",
    "concurrency",
    "wheels",
    "paper_attn_implementation",
}
#: Backends whose entry may set ``concurrency`` (calls in flight at once: programs, HTTP requests).
CONCURRENT_BACKENDS = ("command", "openai")
#: backend → the extra fields it needs.
_REQUIRED_EXTRA = {"command": ("command",), "openai": ("base_url", "model")}
#: Fields whose explicit null is kept (not replaced by the default).
_NULLABLE = {"thinker_max_new_tokens", "weights", "revision", "disabled_reason", "licence_url"}


@dataclass(frozen=True)
class ModelEntry:
    """One registry entry (``registry.yaml`` describes each field).

    Attributes
    ----------
    id : str
        Registry key, the ``--model`` value and the ``inference/<model>/`` folder name.
    backend, model_type : str
        One of :data:`BACKENDS`; the architecture, which picks the adapter inside a backend.
    weights : str or None
        Hub id, ``package:<module>`` or a path (None for ``command`` / ``openai``); a models file's
        local folder is absolute, resolved from the file's folder
        (:mod:`aiplib.inference.models.paths`).
    max_audio_s : float > 0, seconds
    extra : dict
        Backend-specific fields (:data:`_EXTRA_FIELDS`).
    """

    id: str
    backend: str
    model_type: str
    weights: str | None = None
    revision: str | None = None
    precision: str = "float32"
    device: str = "auto"
    requires: str = "cpu"
    max_new_tokens: int = 64
    thinker_max_new_tokens: int | None = None
    max_audio_s: float = 30.0
    prompt_style: str = "chat"
    batch_size: int = 1
    disabled_reason: str | None = None
    gated: bool = False
    licence_url: str | None = None
    notes: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def takes_prompt(self) -> bool:
        """False for ``prompt_style: none`` (stage 7 sends no prompt, steering tasks not
        applicable)."""
        return self.prompt_style != "none"

    def to_dict(self) -> dict:
        """The entry as a plain JSON-serialisable dict (``extra`` merged in)."""
        d = dataclasses.asdict(self)
        d.update(d.pop("extra"))
        return d


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (PyYAML silently keeps the last)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ValueError(
                f"duplicate key {key!r} in model registry "
                f"(line {key_node.start_mark.line + 1}); each model id must appear once"
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

#: Fields with a fixed set of values.
_CHOICES = {
    "requires": ("cpu", "cuda"),
    "device": ("cpu", "cuda", "auto"),
    "prompt_style": ("initial_prompt", "chat", "none"),
}
#: ``model_type`` values of an ``hf_asr`` entry (:mod:`aiplib.inference.models.hf_asr_backend`).
HF_ASR_KINDS = ("auto", "ctc", "seq2seq")


#: Old registry field → new name (read with a ``FutureWarning``).
RENAMED_FIELDS = {"family": "model_type"}


def _renamed_fields(model_id: str, raw):
    """``raw`` with deprecated field names replaced (:data:`RENAMED_FIELDS`), warning once per
    field."""
    raw = dict(raw)
    for old, new in RENAMED_FIELDS.items():
        if old not in raw:
            continue
        value = raw.pop(old)
        if new in raw and raw[new] != value:
            raise ValueError(
                f"registry entry {model_id!r}: both {old!r} ({value!r}) and {new!r} "
                f"({raw[new]!r}) are given; {old!r} is the old name of {new!r}, keep only {new!r}"
            )
        raw.setdefault(new, value)
        warnings.warn(
            f"registry entry {model_id!r}: the field {old!r} is deprecated and will be removed; "
            f"rename it to {new!r} ({old}: {value} -> {new}: {value})",
            FutureWarning,
            stacklevel=4,
        )
    return raw


def _bad(model_id: str, msg: str) -> ValueError:
    """The error of a malformed registry entry, naming it."""
    return ValueError(f"registry entry {model_id!r}: {msg}")


def _entry(model_id: str, raw) -> ModelEntry:
    """The :class:`ModelEntry` of one registry entry's fields; ``ValueError`` naming the entry and
    the field when one is unknown, missing or out of range."""
    if not isinstance(raw, dict):
        raise _bad(model_id, f"expected a mapping of fields, got {type(raw).__name__}")
    raw = _renamed_fields(model_id, raw)
    names = {f.name for f in dataclasses.fields(ModelEntry)} - {"id", "extra"}
    _check_field_names(model_id, raw, names)
    if raw["backend"] == "hf_asr":
        raw = _hf_asr_fields(model_id, raw)
    _check_values(model_id, raw)
    _check_concurrency(model_id, raw)
    _check_backend_fields(model_id, raw)
    return _make_entry(model_id, raw, names)


def _check_field_names(model_id: str, raw: dict, names: set[str]) -> None:
    """No unknown field; ``backend`` and ``model_type`` given; a known backend."""
    unknown = set(raw) - names - _EXTRA_FIELDS
    if unknown:
        raise _bad(model_id, f"unknown field(s) {', '.join(sorted(unknown))}")
    for req in ("backend", "model_type"):
        if not raw.get(req):
            raise _bad(model_id, f"field {req!r} is required")
    backend = raw["backend"]
    if backend not in BACKENDS:
        raise _bad(
            model_id,
            f"field 'backend': unknown backend {backend!r}; valid backends: {', '.join(BACKENDS)}",
        )


def _hf_asr_fields(model_id: str, raw: dict) -> dict:
    """An ``hf_asr`` entry's fields, ``prompt_style: none`` by default (it sends no prompt); its
    ``model_type`` one of :data:`HF_ASR_KINDS`."""
    raw = {"prompt_style": "none", **raw}
    if raw["prompt_style"] != "none":
        raise _bad(
            model_id,
            "backend 'hf_asr' sends no task prompt; prompt_style must be none, "
            f"got {raw['prompt_style']!r}",
        )
    if raw["model_type"] not in HF_ASR_KINDS:
        raise _bad(
            model_id,
            f"model_type of backend 'hf_asr' must be one of {', '.join(HF_ASR_KINDS)}, "
            f"got {raw['model_type']!r}",
        )
    return raw


def _check_values(model_id: str, raw: dict) -> None:
    """Fields with choices hold one of them; counts and durations are positive numbers."""
    for key, choices in _CHOICES.items():
        if key in raw and raw[key] not in choices:
            raise _bad(model_id, f"{key} must be one of {', '.join(choices)}, got {raw[key]!r}")
    for key in ("max_new_tokens", "batch_size", "thinker_max_new_tokens", "max_audio_s"):
        v = raw.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0):
            raise _bad(model_id, f"{key} must be a positive number, got {v!r}")


def _check_concurrency(model_id: str, raw: dict) -> None:
    """``concurrency``: a positive integer of a :data:`CONCURRENT_BACKENDS` entry, at most its
    ``batch_size``."""
    conc = raw.get("concurrency")
    if conc is None:
        return
    if raw["backend"] not in CONCURRENT_BACKENDS:
        names = " and ".join(repr(b) for b in CONCURRENT_BACKENDS)
        raise _bad(model_id, f"concurrency applies to backends {names} only")
    if isinstance(conc, bool) or not isinstance(conc, int) or conc <= 0:
        raise _bad(model_id, f"concurrency must be a positive integer, got {conc!r}")
    batch_size = raw.get("batch_size") or 1
    if batch_size < conc:  # stage 7 sends batch_size rows per generate() call
        raise _bad(
            model_id,
            f"batch_size ({batch_size}) must be at least concurrency ({conc}); "
            "stage 7 sends batch_size rows per call",
        )


def _check_backend_fields(model_id: str, raw: dict) -> None:
    """The fields the entry's backend needs (:data:`_REQUIRED_EXTRA`; ``weights`` unless it calls a
    program or a server)."""
    backend = raw["backend"]
    for key in _REQUIRED_EXTRA.get(backend, ()):
        if not raw.get(key):
            raise _bad(model_id, f"backend {backend!r} needs field {key!r}")
    if backend not in ("command", "openai") and not raw.get("weights"):
        raise _bad(model_id, f"field 'weights' is required for backend {backend!r}")


def _make_entry(model_id: str, raw: dict, names: set[str]) -> ModelEntry:
    """The :class:`ModelEntry` of checked fields: unset ones take the defaults, backend-specific
    ones go to ``extra``."""
    values = {k: v for k, v in raw.items() if k in names and (v is not None or k in _NULLABLE)}
    if "max_audio_s" in values:
        values["max_audio_s"] = float(values["max_audio_s"])
    values["notes"] = str(raw.get("notes") or "").strip()
    extra = {k: v for k, v in raw.items() if k in _EXTRA_FIELDS}
    return ModelEntry(id=model_id, extra=extra, **values)


def user_models_path() -> Path | None:
    """The user models file: ``$AIP_MODELS`` if set, else ``<data root>/models.yaml`` when it exists
    (data root ``$AIP_DATA_ROOT``, else ``<repo>/data``); None without one.

    Raises
    ------
    FileNotFoundError
        ``$AIP_MODELS`` names a file that does not exist.
    """
    given = os.environ.get(MODELS_ENV)
    if given:
        p = Path(os.path.abspath(Path(given).expanduser()))
        if not p.is_file():
            raise FileNotFoundError(f"{p}: user models file not found (MODELS= / ${MODELS_ENV})")
        return p
    data_root = Path(os.environ.get("AIP_DATA_ROOT") or repo_root() / "data").expanduser()
    p = data_root / MODELS_FILE_NAME
    return p if p.is_file() else None


def load_registry(path=None) -> dict[str, ModelEntry]:
    """``{model id: ModelEntry}`` of a registry file, in file order.

    Without ``path``: the packaged ``registry.yaml`` with the entries of :func:`user_models_path`
    merged over it (a user id equal to a registry id replaces that entry; new ids follow).

    Raises
    ------
    ValueError
        On a duplicate id, an unknown backend or field, or an invalid value: one line naming the
        file, the entry and the field.
    FileNotFoundError
        If ``path`` (or ``$AIP_MODELS``) does not exist.
    """
    path = Path(path) if path is not None else REGISTRY_PATH
    if path != REGISTRY_PATH:
        return _parse(path)
    reg = dict(_cached_parse(str(path), path.stat().st_mtime))
    user = user_models_path()
    if user is not None:
        reg.update(_cached_parse(str(user), user.stat().st_mtime, user=True))
    return reg


def _parse(path: Path, *, user: bool = False) -> dict[str, ModelEntry]:
    """The entries of one registry file; ``ValueError`` naming the file for bad YAML or a bad
    entry."""
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader) or {}
        if not isinstance(raw, dict):
            raise ValueError("the file must be a mapping of model id → fields")
        if user:
            _check_user_ids(raw)
        base = Path(os.path.abspath(path.parent))  # the file's relative paths start here
        return {str(k): _entry(str(k), resolve_entry_paths(v, base)) for k, v in raw.items()}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ValueError(
            f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"
        ) from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _check_user_ids(raw: dict) -> None:
    """A user model id names a folder: :data:`_USER_ID` characters only."""
    for k in raw:
        if not _USER_ID.fullmatch(str(k)):
            raise ValueError(
                f"registry entry {str(k)!r}: the id names the folder inference/<id>/; "
                "use letters, digits, '_', '-' and '.'"
            )


@functools.lru_cache(maxsize=8)
def _cached_parse(path: str, _mtime: float, *, user: bool = False) -> dict[str, ModelEntry]:
    """:func:`_parse`, cached per file and modification time."""
    return _parse(Path(path), user=user)


def list_models(path=None) -> list[str]:
    """Model ids of the registry, in file order."""
    return list(load_registry(path))


def get_entry(model_id: str, *, path=None) -> ModelEntry:
    """The entry of ``model_id``; ``KeyError`` listing the valid ids if unknown."""
    reg = load_registry(path)
    if model_id not in reg:
        raise KeyError(f"unknown model {model_id!r}; valid models: {', '.join(reg)}")
    return reg[model_id]


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """True when an NVIDIA GPU is usable (torch, else CTranslate2, decides; cached)."""
    try:
        import torch  # noqa: PLC0415

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no torch or a broken CUDA install both mean "no GPU"
        pass
    try:
        ctranslate2 = import_ctranslate2()
        return ctranslate2.get_cuda_device_count() > 0
    except Exception:  # noqa: BLE001
        return False


def resolve_device(device: str) -> str:
    """The torch device of an entry's ``device`` field: ``"auto"`` becomes ``"cuda"`` where a GPU is
    visible (:func:`cuda_available`), else ``"cpu"``; any other value is kept."""
    return ("cuda" if cuda_available() else "cpu") if device == "auto" else device


def check_runnable(entry: ModelEntry) -> None:
    """Raise :class:`ModelUnavailableError` (one actionable line) if ``entry`` is disabled or needs
    a CUDA GPU this machine lacks; nothing touches the network.
    """
    if entry.disabled_reason:
        raise ModelUnavailableError(f"{entry.id} is disabled: {entry.disabled_reason}")
    if entry.requires == "cuda" and not cuda_available():
        what = _PRECISION_WORDS.get(entry.precision, entry.precision)
        raise ModelUnavailableError(
            f"{entry.id} needs a CUDA GPU ({what}); none found. "
            f"Run on a GPU machine or choose {DEFAULT_MODEL}"
        )


def _in_all(entry: ModelEntry) -> bool:
    """``entry`` belongs to ``"all"``: not ``openai``, not disabled, and runnable here."""
    if entry.backend == "openai" or entry.disabled_reason:
        return False
    return entry.requires != "cuda" or cuda_available()


def resolve(models, *, path=None) -> list[ModelEntry]:
    """Registry entries of a ``models`` value (stage 7's ``--model``).

    ``"all"`` is every entry that can run here (no disabled ones, the CPU ones without CUDA, never
    ``openai`` entries, which need a server); one id, a comma list or a list of ids are returned
    even if they cannot run here (the runner logs why). ``KeyError`` (valid ids listed) for an
    unknown id.
    """
    reg = load_registry(path)
    if isinstance(models, str):
        if models.strip() == "all":
            return [e for e in reg.values() if _in_all(e)]
        ids = [m.strip() for m in models.split(",") if m.strip()]
    else:
        ids = list(models)
    return [get_entry(m, path=path) for m in ids]


def load_model(
    entry_or_id,
    *,
    path: str | None = None,
    batch_size: int | None = None,
    attn_implementation: str | None = None,
    cpu_threads: int | None = None,
    workers: int | None = None,
    local_files_only: bool | None = None,
    device: str | None = None,
    precision: str | None = None,
    arrangement: str | None = None,
):
    """Load a recogniser through its backend module's ``load(entry, **options)``, passed the
    options given (not None): ``path`` (the Whisper decoding path, e.g. ``"fast"``; other backends
    ignore it), ``batch_size`` (stimuli per ``generate`` call), ``attn_implementation`` (a
    ``transformers`` attention kernel), ``cpu_threads`` and ``workers`` (the embedded Whisper's),
    ``local_files_only`` (the Hugging Face backends': never ask the hub), ``device`` and
    ``precision`` (overriding the entry's), ``arrangement`` (the embedded Whisper's CPU
    arrangement; not passed to a backend whose ``load`` does not take it).

    Raises
    ------
    KeyError
        Unknown model id.
    ModelUnavailableError
        The entry cannot run here (:func:`check_runnable`) or its backend is not implemented.
    MissingPackageError
        The backend needs a Python package that is not installed.
    """
    entry = get_entry(entry_or_id) if isinstance(entry_or_id, str) else entry_or_id
    check_runnable(entry)
    given = {
        "path": path,
        "batch_size": batch_size,
        "attn_implementation": attn_implementation,
        "cpu_threads": cpu_threads,
        "workers": workers,
        "local_files_only": local_files_only,
        "device": device,
        "precision": precision,
        "arrangement": arrangement,
    }
    options = {name: value for name, value in given.items() if value is not None}
    module = _backend_module(entry)
    if "arrangement" not in inspect.signature(module.load).parameters:
        options.pop("arrangement", None)
    return module.load(entry, **options)


def _backend_module(entry: ModelEntry):
    """Import ``entry``'s backend module; :class:`ModelUnavailableError` when it does not exist,
    :class:`MissingPackageError` when a package it needs is missing."""
    module_path = BACKEND_MODULES[entry.backend]
    try:
        module = importlib.import_module(module_path)
    except ModuleNotFoundError as exc:
        if exc.name == module_path or (exc.name and module_path.startswith(exc.name + ".")):
            raise ModelUnavailableError(
                f"backend {entry.backend!r} is not implemented yet (needed by {entry.id})"
            ) from None
        raise MissingPackageError(
            f"{entry.id} (backend {entry.backend!r}) needs the Python package {exc.name!r}; "
            f"install it with `pip install {exc.name}`"
        ) from exc
    return module


def decoding_key(entry: ModelEntry, decoding: str) -> dict | None:
    """The output-deciding part of ``decoding`` for ``entry``'s backend (its module's
    ``decoding_key(decoding)``, e.g. the embedded Whisper's window policy; None for backends without
    one), computed without loading the model: it enters stage 7's resume key.
    """
    try:
        module = importlib.import_module(BACKEND_MODULES[entry.backend])
    except ModuleNotFoundError:
        return None  # a backend that cannot load ignores decoding (its load fails later)
    fn = getattr(module, "decoding_key", None)
    return fn(decoding) if fn is not None else None
