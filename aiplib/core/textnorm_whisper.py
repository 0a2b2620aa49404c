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

#: The distribution the normaliser comes from.
_WHISPER_DIST = "openai-whisper"
#: Name of the Whisper-style normalisation (written into the provenance).
WHISPER_NORMALIZER_NAME = (
    f"{_WHISPER_DIST} whisper.normalizers.EnglishTextNormalizer"
    " + openai/whisper#2836 (standalone-1 rule)"
)
#: Version of the Whisper-style normalisation: the installed release + the fix.
WHISPER_NORMALIZER_VERSION = f"{importlib.metadata.version(_WHISPER_DIST)}+pr2836"
#: The bare package our private copies of ``whisper/normalizers/*.py`` are loaded under.
_PRIVATE_PACKAGE = "_aiplib_openai_whisper_normalizers"


def _load_whisper_module(name: str):
    """``whisper/normalizers/<name>.py`` of openai-whisper as a private module
    (``whisper/__init__.py`` not run)."""
    full = f"{_PRIVATE_PACKAGE}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    base = _normalizers_folder()
    if _PRIVATE_PACKAGE not in sys.modules:  # a bare package: its __init__ is not executed
        package_spec = importlib.util.spec_from_file_location(
            _PRIVATE_PACKAGE, f"{base}/__init__.py", submodule_search_locations=[base]
        )
        sys.modules[_PRIVATE_PACKAGE] = importlib.util.module_from_spec(package_spec)
    module_spec = importlib.util.spec_from_file_location(full, f"{base}/{name}.py")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[full] = module
    module_spec.loader.exec_module(module)
    return sys.modules[full]


def _normalizers_folder() -> str:
    """The installed ``whisper/normalizers`` folder (the package is not imported).

    Raises
    ------
    ImportError
        If ``openai-whisper`` is not installed.
    """
    spec = importlib.util.find_spec("whisper")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the {_WHISPER_DIST} package is not installed (pip install {_WHISPER_DIST})"
        )
    return f"{spec.submodule_search_locations[0]}/normalizers"


#: The release's rule for a ``1`` read as ``one``.
_RELEASE_ONE = r"\b1(s?)\b"
#: openai/whisper#2836's: only a ``1`` standing alone.
_FIXED_ONE = r"(?<!\S)1(s?)(?!\S)"


class _ReWithFix:
    """``re`` as our copy of ``english.py`` sees it: the release's ``\\b1(s?)\\b`` runs as
    openai/whisper#2836's."""

    def __getattr__(self, name):
        """Every other name of :mod:`re`, unchanged."""
        return getattr(re, name)

    @staticmethod
    def sub(pattern, repl, string, count: int = 0, flags: int = 0):
        """:func:`re.sub`, with the release's standalone-1 pattern replaced by the fixed one."""
        if pattern == _RELEASE_ONE:
            pattern = _FIXED_ONE
        return re.sub(pattern, repl, string, count=count, flags=flags)


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
