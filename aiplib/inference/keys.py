"""Stage 7's resume keys: a hash of what the model heard (the manifest row and its audio files),
of the prompt, and of the registry entry's output-deciding fields."""

from __future__ import annotations

import pandas as pd

from aiplib.core.hashing import file_sha256
from aiplib.core.stamps import json_sha256, jsonable, text_sha256
from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.stimuli.families import MIXERS, row_family
from aiplib.stimuli.mixing import is_clean_row

#: Field of an inference row holding its resume key (:func:`stimulus_key`).
STIM_KEY_FIELD = "stim_key"
#: Manifest columns that enter the resume key (with the SHA-256 of the two audio files).
STIM_KEY_FIELDS = (
    "id",
    "seed",
    "bg_offset",
    "snr_db",
    "background_id",
    "condition",
    "speech_path",
    "bg_path",
)
#: Registry-entry fields that decide a model's output; their hash enters the resume key (descriptive
#: fields — ``notes``, ``device``, ``concurrency`` … — do not; ``batch_size`` does for
#: :data:`BATCH_VARIANT_BACKENDS` only).
ENTRY_KEY_FIELDS = (
    "backend",
    "weights",
    "revision",
    "precision",
    "max_new_tokens",
    "thinker_max_new_tokens",
    "max_audio_s",
    "prompt_style",
    "command",
    "model",
    "engine_args",
    "generate_kwargs",
)


#: Entry field (in ``extra``) holding the attention kernel stage 7 loads a model with, where it sets
#: one (the paper profile: the authors' ``sdpa`` or ``eager``); it can change generated text, so it
#: enters the key when set (keys of entries without it are unchanged).
ATTENTION_FIELD = "attn_implementation"


#: Backends whose output can depend on the batch size (padded batched decoding can move an arg-max),
#: so ``batch_size`` enters their key; the others decode each stimulus alike in any batch.
BATCH_VARIANT_BACKENDS = ("transformers", "hf_asr")


def entry_sha256(entry) -> str:
    """Hex SHA-256 of the output-deciding fields (:data:`ENTRY_KEY_FIELDS`, plus ``batch_size``
    for :data:`BATCH_VARIANT_BACKENDS` and :data:`ATTENTION_FIELD` where set) of a registry entry
      (an :class:`aiplib.inference.models.ModelEntry`
    or its ``to_dict()``; stage 7 passes the entry with the batch size it decodes with)."""
    d = entry.to_dict() if hasattr(entry, "to_dict") else dict(entry)
    fields = ENTRY_KEY_FIELDS + (
        ("batch_size",) if d.get("backend") in BATCH_VARIANT_BACKENDS else ()
    )
    if d.get(ATTENTION_FIELD) is not None:
        fields = fields + (ATTENTION_FIELD,)
    return json_sha256({k: jsonable(d.get(k)) for k in fields})


def _val(v):
    try:
        if pd.isna(v):  # None, NaN, NaT, pd.NA
            return None
    except (TypeError, ValueError):
        pass
    v = jsonable(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v if isinstance(v, (int, float, bool)) else str(v)


def _text(v) -> str:
    v = _val(v)
    return "" if v is None else str(v)


def stimulus_base(row: dict, ws, hashes: dict | None = None) -> str:
    """The part of a stimulus's resume key that depends on the manifest row only.

    Hex SHA-256 of the canonical JSON of :data:`STIM_KEY_FIELDS` of ``row`` plus
    ``speech_sha256`` and ``bg_sha256`` (SHA-256 of the files ``speech_path`` and ``bg_path``
    point to; ``""`` for no background, ``"missing"`` for a file not found). A row without a
    background (clean) has ``seed`` and ``bg_offset`` left out: its audio does not depend on them.
    ``hashes`` (path → SHA-256), when given, is used and filled as a cache for one run.

    A noisy row of a family whose ``key_fields`` hook gives fields
    (:data:`aiplib.stimuli.families.MIXERS`; not ``background``) keeps ``seed`` and adds
    ``condition_family``, the family's manifest columns
    (:attr:`aiplib.core.tasks.ConditionFamily.columns`) as text and the hook's fields (competing
    speech: the distractor table's and recordings' SHA-256; channel: the external tool's version).
    Background rows and every clean row keep the key above.
    """
    rec = {k: _val(row.get(k)) for k in STIM_KEY_FIELDS}
    cf = row_family(row)
    # an unknown family has no mixer and fails at materialisation
    mixer = MIXERS.get(cf)
    own = {"condition_family": cf}
    if mixer is not None:
        for column in CONDITION_FAMILIES[cf].columns:
            own[column] = _text(row.get(column))
    if is_clean_row(row):
        extra = None
    elif mixer is not None:
        extra = mixer.key_fields(row, rec | own, ws, hashes)
    else:
        extra = {}
    if extra is not None:
        rec.update(own, **extra)
    elif not rec.get("bg_path"):  # a clean row's audio does not depend on its seed
        rec["seed"] = None
        rec["bg_offset"] = None
    _add_audio_hashes(rec, ws, {} if hashes is None else hashes)
    return json_sha256(rec)


def _add_audio_hashes(rec: dict, ws, cache: dict) -> None:
    """Set ``speech_sha256`` and ``bg_sha256`` of ``rec``: the SHA-256 of the file its path points
    to (``""`` for none, ``"missing"`` for a file not found), through ``cache`` (path → SHA-256)."""
    for k, col in (("speech_sha256", "speech_path"), ("bg_sha256", "bg_path")):
        rel = rec.get(col)
        if rel and rel not in cache:
            p = ws.path(rel)
            cache[rel] = file_sha256(p) if p.is_file() else "missing"
        rec[k] = cache[rel] if rel else ""


def stimulus_key(
    base: str, *, prompt_sha256: str, entry_sha256: str, decoding_sha256: str | None = None
) -> str:
    """Resume key of one (stimulus, prompt, model, decoding): the first 16 hex digits of
    SHA-256(``base`` : ``prompt_sha256`` : ``entry_sha256``), with ``: decoding_sha256``
    appended when given (64 bits).

    ``base`` is :func:`stimulus_base` of the manifest row, ``prompt_sha256`` the SHA-256 of the
    prompt text (:func:`text_sha256`), ``entry_sha256`` :func:`entry_sha256` of the model,
    ``decoding_sha256`` the :func:`json_sha256` of the backend's output-deciding decoding options
    (:func:`aiplib.inference.models.decoding_key`); None for a backend's reference decoding.
    """
    tail = f":{decoding_sha256}" if decoding_sha256 else ""
    return text_sha256(f"{base}:{prompt_sha256}:{entry_sha256}{tail}")[:16]
