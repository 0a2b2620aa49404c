"""OpenAI Whisper's English text normaliser, loaded without torch, with the upstream fix #2836.

``whisper/normalizers/basic.py`` and ``english.py`` of the installed ``openai-whisper`` are loaded
as private modules (``whisper/__init__.py`` imports torch, numba and tiktoken). In that copy the
release's rule ``\\b1(s?)\\b`` → ``one`` runs with the pattern of openai/whisper PR #2836, merged
after the last release: only a ``1`` standing alone becomes ``one`` (so ``"one dollar"`` → ``"$1"``
no longer equals ``"one"``). Radford et al., arXiv:2212.04356; github.com/openai/whisper,
``whisper/normalizers``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
import sys

_WHISPER_DIST = "openai-whisper"
WHISPER_NORMALIZER_NAME = (
    f"{_WHISPER_DIST} whisper.normalizers.EnglishTextNormalizer"
    " + openai/whisper#2836 (standalone-1 rule)"
)
WHISPER_NORMALIZER_VERSION = (
    f"{importlib.metadata.version(_WHISPER_DIST)}+pr2836"  # installed release + the fix
)


def _load_whisper_module(name: str):
    """``whisper/normalizers/<name>.py`` of openai-whisper as a private module
    (``whisper/__init__.py`` not run)."""
    pkg = "_aiplib_openai_whisper_normalizers"
    full = f"{pkg}.{name}"
    if full not in sys.modules:
        spec = importlib.util.find_spec("whisper")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(
                f"the {_WHISPER_DIST} package is not installed (pip install {_WHISPER_DIST})"
            )
        base = f"{spec.submodule_search_locations[0]}/normalizers"
        if pkg not in sys.modules:  # a bare package: its __init__ is not executed
            sys.modules[pkg] = importlib.util.module_from_spec(
                importlib.util.spec_from_file_location(
                    pkg, f"{base}/__init__.py", submodule_search_locations=[base]
                )
            )
        mspec = importlib.util.spec_from_file_location(full, f"{base}/{name}.py")
        sys.modules[full] = mod = importlib.util.module_from_spec(mspec)
        mspec.loader.exec_module(mod)
    return sys.modules[full]


_RELEASE_ONE = r"\b1(s?)\b"
_FIXED_ONE = r"(?<!\S)1(s?)(?!\S)"  # openai/whisper#2836: only a 1 standing alone


class _ReWithFix:
    """``re`` as our copy of ``english.py`` sees it: the release's ``\\b1(s?)\\b`` runs as
    openai/whisper#2836's."""

    def __getattr__(self, name):
        return getattr(re, name)

    @staticmethod
    def sub(pattern, repl, string, *args, **kwargs):
        return re.sub(
            _FIXED_ONE if pattern == _RELEASE_ONE else pattern, repl, string, *args, **kwargs
        )


@functools.lru_cache(maxsize=1)
def english_normalizer():
    """The ``EnglishTextNormalizer`` (``str -> str``, one cached instance) of the installed
    ``openai-whisper``, with PR #2836.

    Raises
    ------
    ImportError
        If ``openai-whisper`` is not installed.
    """
    _load_whisper_module("basic")
    eng = _load_whisper_module("english")
    eng.re = _ReWithFix()  # our private module copy only; the whisper package is untouched
    return eng.EnglishTextNormalizer()
