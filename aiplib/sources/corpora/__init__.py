"""Stages 1–3 inputs of each profile behind one interface (:class:`Profile`, :func:`get_profile`):
``demo`` (the embedded default from Debian packages), ``paper`` (the paper's corpora and the
authors' rules) and ``custom`` (the user's folders). One module per corpus (lhotse's recipe
layout: a ``CORPUS`` record from ``corpora.yaml`` and a ``prepare_<corpus>`` reader; downloads in
:mod:`aiplib.sources.download`): ``esc50``, ``ms_snsd``, ``noisex92``, ``musan``, ``librispeech``,
``speech_commands``, ``common_voice``. Submodules are imported on demand.
"""

from __future__ import annotations

import importlib
from typing import Callable, Protocol, runtime_checkable

from aiplib.core.errors import AiplibParameterError


@runtime_checkable
class Profile(Protocol):
    """What a profile provides: the inputs of stages 1–3 (everything later is profile-independent).

    Each profile is a module of ``aiplib.sources.corpora`` defining these three functions, each
    taking the workspace and the profile's own keyword-only parameters (the stage notebook's):

    ``gather_raw(ws, *, ...)``
        Stage 1: get the raw inputs into the workspace (install, download or validate).
    ``build_item_banks(ws, *, seed, overwrite, ...) -> dict``
        Stage 2: write ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl``; ``{"asr": df, "kws":
        df}``.
    ``battery_specs(ws, *, seed, ...) -> list``
        Stage 3 input: the background specs for
        :func:`aiplib.battery.backgrounds.curate_battery`.
    """

    gather_raw: Callable[..., object]
    build_item_banks: Callable[..., dict]
    battery_specs: Callable[..., list]


#: Profile name → the module implementing :class:`Profile`.
PROFILES = {p: f"aiplib.sources.corpora.{p}" for p in ("demo", "paper", "custom")}


def get_profile(name: str) -> Profile:
    """The module ``aiplib.sources.corpora.<name>`` implementing profile ``name`` (imported on first
    use).

    Raises
    ------
    AiplibParameterError
        If ``name`` is not a key of :data:`PROFILES`.
    """
    if name not in PROFILES:
        raise AiplibParameterError(f"unknown profile {name!r}; choose {', '.join(PROFILES)}")
    return importlib.import_module(PROFILES[name])
