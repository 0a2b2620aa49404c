"""Distractor talkers for the competing-speech family: Asterisk prompts in other languages, and
any folder of speech with a texts table.

Demo distractors are Debian's Asterisk prompt packages (bookworm, 1.6.1-1): human recordings with
a transcript ``/usr/share/doc/asterisk-core-sounds-<lang>/core-sounds-<lang>.txt.gz`` (lines
``name: text``) and audio under ``/usr/share/asterisk/sounds/<voice>/<name>.<ext>``; voices,
speakers and licences (from the Debian copyright files) in :data:`VOICES`. ``es`` is read by Allison
Smith, the voice of the demo's English items (a same-voice / other-language control); ``en`` (in
:data:`DEMO_LANGUAGES`) is the same-language distractor. G.722 (16 kHz, the English targets' codec)
  is
searched first, so a distractor does not differ by lacking the 4–8 kHz band.

Selection rule (:func:`asterisk_distractors`): the audio exists, the transcript holds at least
:data:`MIN_WORDS` words after removing bracketed stage directions and the paper's normalisation,
the prompt lasts at least :data:`MIN_DURATION_S` s, and the transcript is not damaged (a ``?``
between a letter and a lower-case word: the Italian file lost its accented vowels). Bookworm's
packages keep 251 fr, 225 it, 243 ru and 227 es prompts (about 20 min each).
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import soundfile as sf

from aiplib.core.errors import AiplibParameterError, MissingPackageError, ValidationError
from aiplib.core.textnorm import normalize_text
from aiplib.io.formats import parse_bool
from aiplib.sources.corpora import debian
from aiplib.sources.corpora.custom import files as custom_files
from aiplib.sources.corpora.custom.report import Collector, ValidationReport
from aiplib.sources.corpora.custom.validate import validate_speech

#: The Asterisk distractor voices (from each package's ``copyright`` file); ``en`` is the target's
#: own package.
VOICES = {
    lang: dict(voice=voice, sex=sex, credit=credit, licence=licence, same_voice_as_target=same)
    for lang, voice, sex, credit, licence, same in (
        ("fr", "fr_CA_f_June", "female", "June Wallack", "CC BY-SA 3.0", False),
        ("it", "it_IT_m_Carlo", "male", "Carlo Flora", "CC BY 3.0", False),
        ("ru", "ru_RU_f_IvrvoiceRU", "female", "Maxim Topal (ivrvoice.ru)", "CC BY 3.0", False),
        ("es", "es_MX_f_Allison", "female", "Allison Smith", "CC BY-SA 3.0", True),
        ("en", "en_US_f_Allison", "female", "Allison Smith", "CC BY-SA 3.0", True),
    )
}

#: Item-bank ``speaker`` ids read by Allison Smith (the demo's real ASR items):
#: ``same_voice_as_target`` of an Asterisk table holds for these targets only.
SAME_VOICE_TARGET_SPEAKERS = ("asterisk_allison",)

#: Languages of the demo's other-language distractors, in the order used by default.
LANGUAGES = ("fr", "it", "ru", "es")

#: The demo's distractor languages: :data:`LANGUAGES` and ``en``, the same-language distractor.
DEMO_LANGUAGES = LANGUAGES + ("en",)

#: Audio formats searched, in order (G.722 first: the target items' codec, see above).
FORMATS = ("g722", "wav")

#: Least number of words (paper normalisation, stage directions removed) of a kept prompt.
MIN_WORDS = 3

#: Least duration of a kept prompt, s.
MIN_DURATION_S = 1.5

#: Environment variable: further roots (``os.pathsep``-separated) holding extracted packages.
ROOT_ENV = "AIP_ASTERISK_ROOT"

#: Columns of a distractor table (both loaders).
DISTRACTOR_COLUMNS = [
    "distractor_id",
    "language",
    "voice",
    "sex",
    "same_voice_as_target",
    "key",
    "path",
    "text",
    "text_norm",
    "n_words",
    "duration_s",
    "source",
    "licence",
    "attribution",
]

#: Bytes per second of G.722 audio (64 kbit/s).
G722_BYTES_PER_S = 8000

#: A stage direction of a transcript: ``[...]`` or ``(...)``.
_STAGE = re.compile(r"\[[^\]]*\]|\([^)]*\)")

#: A damaged transcript: a ``?`` between a letter and a word (an accented vowel lost).
_DAMAGED = re.compile(r"[^\W\d_]\?\s*([^\W\d_])")


def debian_packages(languages=LANGUAGES, fmt: str = "g722") -> list[str]:
    """Debian packages holding the transcripts and the ``fmt`` audio of ``languages``
    (``["asterisk-core-sounds-fr", "asterisk-core-sounds-fr-g722", …]``)."""
    pkgs = []
    for lang in languages:
        pkgs.append(f"asterisk-core-sounds-{lang}")
        pkgs.append(f"asterisk-core-sounds-{lang}-{fmt}")
    return pkgs


def read_transcripts(path) -> dict[str, str]:
    """Parse an Asterisk transcript file ``core-sounds-<lang>.txt[.gz]`` (lines ``name: text``,
    ``name`` maybe ``digits/7``; ``;`` lines, lines without ``:`` and a byte-order mark skipped)
    into ``{key: text with white space collapsed}``; a key listed twice keeps its last text."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    out = {}
    with opener(path, "rt", encoding="utf-8-sig", errors="replace") as fh:
        for line in fh:
            line = line.lstrip("\ufeff")
            if not line.strip() or line.lstrip().startswith(";") or ":" not in line:
                continue
            key, _, text = line.partition(":")
            out[key.strip()] = " ".join(text.split())
    return out


def speech_text(text: str) -> str:
    """The transcript without stage directions in brackets or parentheses (``[beep]``,
    ``(ahooga)``)."""
    return " ".join(_STAGE.sub(" ", str(text)).split())


def is_damaged(text: str) -> bool:
    """True when a ``?`` sits after a letter and before a lower-case word (``pu? essere``): an
    accented letter lost in the file's encoding, so the words are wrong."""
    m = _DAMAGED.search(str(text))
    return bool(m and m.group(1).islower())


def _roots(extra=None) -> list[Path]:
    """Where extracted packages are searched, in order: ``extra``, ``/``, then the roots of
    ``$AIP_ASTERISK_ROOT`` (:data:`ROOT_ENV`)."""
    roots = [Path(r) for r in extra or []]
    roots.append(Path("/"))
    for r in os.environ.get(ROOT_ENV, "").split(os.pathsep):
        if r:
            roots.append(Path(r))
    return roots


def _transcript_rel(lang: str) -> str:
    """The transcript file of language ``lang``, relative to a package root."""
    return f"usr/share/doc/asterisk-core-sounds-{lang}/core-sounds-{lang}.txt.gz"


def table_packages(table) -> list[str]:
    """The Debian packages the rows of a distractor table come from (:func:`debian_packages` of
    each language whose ``source`` is one of its Asterisk audio packages), in the table's order;
    rows of a folder (``custom/distractors``) add none."""
    pkgs = []
    pairs = []  # distinct (language, source), in table order
    for pair in zip(table["language"], table["source"]):
        if pair not in pairs:
            pairs.append(pair)
    for lang, source in pairs:
        for fmt in FORMATS:
            candidates = debian_packages([lang], fmt)
            if source in candidates:
                pkgs += [p for p in candidates if p not in pkgs]
    return pkgs


def find_root(lang: str, *, roots=None, formats=FORMATS) -> tuple[Path, str]:
    """``(root, fmt)``: the first root holding the transcript and audio folder of ``lang``
    (``roots`` first, then ``/`` and the ``os.pathsep``-separated ``$AIP_ASTERISK_ROOT``), with the
    audio extension found.

    Raises
    ------
    AiplibParameterError
        If ``lang`` is not in :data:`VOICES`.
    MissingPackageError
        If no root holds them; the message names the packages and both ways to get them.
    """
    if lang not in VOICES:
        raise AiplibParameterError(
            f"no Asterisk distractor voice for {lang!r} (known: {', '.join(VOICES)})"
        )
    voice = VOICES[lang]["voice"]
    for root in _roots(roots):
        if not (root / _transcript_rel(lang)).is_file():
            continue
        folder = root / "usr/share/asterisk/sounds" / voice
        for fmt in formats:
            if folder.is_dir() and any(folder.glob(f"*.{fmt}")):
                return root, fmt
    pkgs = debian_packages([lang], formats[0])
    raise MissingPackageError(
        f"the {lang} Asterisk prompts are not installed (packages {', '.join(pkgs)}). "
        f"Install them with\n    {debian.install_command(pkgs)}\nor, without root, run "
        f"aiplib.sources.corpora.asterisk_langs.download_and_extract(DIR) and set {ROOT_ENV}=DIR"
    )


def download_and_extract(dest, languages=LANGUAGES, *, fmt: str = "g722") -> Path:
    """``apt-get download`` the packages and ``dpkg-deb -x`` them into ``dest`` (no root; use it as
    ``roots=[dest]`` or ``$AIP_ASTERISK_ROOT``); returns ``dest``. MissingPackageError if a tool or
    download fails."""
    dest = Path(dest)
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        raise MissingPackageError("apt-get and dpkg-deb are needed to fetch the Asterisk packages")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="asterisk-debs-") as tmp:
        pkgs = debian_packages(languages, fmt)
        proc = subprocess.run(
            ["apt-get", "download", *pkgs], cwd=tmp, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise MissingPackageError(
                f"apt-get download {' '.join(pkgs)} failed: "
                f"{(proc.stderr or proc.stdout).strip()[-500:]}"
            )
        for deb in sorted(Path(tmp).glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True, capture_output=True)
    return dest


def _duration_s(path: Path, fmt: str) -> float:
    """Duration of a prompt, s: from the size for G.722 (64 kbit/s), else from the file header."""
    if fmt == "g722":
        return path.stat().st_size / G722_BYTES_PER_S
    return float(sf.info(str(path)).duration)


def asterisk_distractors(
    languages=LANGUAGES,
    *,
    roots=None,
    formats=FORMATS,
    min_words: int = MIN_WORDS,
    min_duration_s: float = MIN_DURATION_S,
) -> pd.DataFrame:
    """The Asterisk distractor utterances of ``languages`` kept by the module's selection rule
    (``min_words``, ``min_duration_s`` in s); ``roots`` are searched first (:func:`find_root`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`DISTRACTOR_COLUMNS`, by language (given order) then key; ``distractor_id``
        ``<lang>-<key>`` (``/`` → ``-``), ``path`` absolute, ``duration_s`` in s (G.722: from the
        size).

    Raises
    ------
    MissingPackageError
        If a language's packages are found nowhere (see :func:`find_root`).
    """
    rows = []
    for lang in languages:
        root, fmt = find_root(lang, roots=roots, formats=formats)
        v = VOICES[lang]
        folder = root / "usr/share/asterisk/sounds" / v["voice"]
        for key, text in sorted(read_transcripts(root / _transcript_rel(lang)).items()):
            path = folder / f"{key}.{fmt}"
            norm = normalize_text(speech_text(text))
            if is_damaged(text) or len(norm.split()) < min_words or not path.is_file():
                continue
            dur = _duration_s(path, fmt)
            if dur < min_duration_s:
                continue
            rows.append(
                dict(
                    distractor_id=f"{lang}-{key.replace('/', '-')}",
                    language=lang,
                    voice=v["voice"],
                    sex=v["sex"],
                    same_voice_as_target=v["same_voice_as_target"],
                    key=key,
                    path=str(path),
                    text=text,
                    text_norm=norm,
                    n_words=len(norm.split()),
                    duration_s=round(dur, 6),
                    source=f"asterisk-core-sounds-{lang}-{fmt}",
                    licence=v["licence"],
                    attribution=f"Asterisk core sounds ({lang}), recorded by {v['credit']}",
                )
            )
    return pd.DataFrame(rows, columns=DISTRACTOR_COLUMNS)


def folder_distractors(speech_dir, texts, *, language: str | None = None) -> pd.DataFrame:
    """Distractor utterances from any folder of speech (recursive) with a texts CSV/TSV (``file``,
    ``text``, ``language`` unless ``language=`` is given; optional ``speaker``,
    ``same_voice_as_target``, ``licence``, ``attribution``), validated as the custom profile's
    speech.

    Returns a DataFrame with columns :data:`DISTRACTOR_COLUMNS` (``distractor_id``
    ``<language>-<item id>``, ``source`` ``custom/distractors``, ``duration_s`` in s measured after
    decoding).

    Raises
    ------
    ValidationError
        If the validation finds a fatal problem (with the full list), or a row has no language.
    """
    probs = Collector()
    scans = []
    rows = validate_speech(speech_dir, texts, probs, scans)
    ValidationReport(problems=probs.sorted(), speech=rows, scans=scans).raise_if_fatal()
    folder = custom_files.absolute_path(speech_dir)
    path = custom_files.absolute_path(texts)
    # as validated
    table = custom_files.read_table(path, ("file",), probs, "texts", aliases={"path": "file"})
    extra = {custom_files.absolute_path(folder / r["file"]): r for r in table.to_dict("records")}
    out = []
    for r in rows:
        e = extra.get(Path(r["file"]), {})
        lang = language or str(e.get("language", "")).strip()
        if not lang:
            raise ValidationError(
                [f"{r['file']}: no language (give a 'language' column or language=)"]
            )
        norm = normalize_text(r["text"])
        out.append(
            dict(
                distractor_id=f"{lang}-{r['item_id']}",
                language=lang,
                voice=r["speaker"],
                sex="",
                same_voice_as_target=parse_bool(e.get("same_voice_as_target", "")) is True,
                key=r["item_id"],
                path=r["file"],
                text=r["text"],
                text_norm=norm,
                n_words=len(norm.split()),
                duration_s=r["duration_s"],
                source="custom/distractors",
                licence=r["licence"],
                attribution=r["attribution"],
            )
        )
    return pd.DataFrame(out, columns=DISTRACTOR_COLUMNS)


@functools.lru_cache(maxsize=4)
def _read_table(path: str, mtime_ns: int, size: int, root: str | None) -> pd.DataFrame:
    """The distractor table at ``path`` typed (``mtime_ns`` and ``size`` only key the cache)."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    if root is not None and "path" in df.columns:
        df["path"] = [_under(root, p) for p in df["path"]]
    missing = [c for c in DISTRACTOR_COLUMNS if c not in df.columns]
    if missing:
        raise ValidationError([f"{path}: distractor table lacks columns {missing}"])
    df["n_words"] = pd.to_numeric(df["n_words"], errors="coerce").astype("Int64")
    df["duration_s"] = pd.to_numeric(df["duration_s"], errors="coerce")
    df["same_voice_as_target"] = df["same_voice_as_target"].map(_is_true)
    return df


def _under(root: str, path: str) -> str:
    """``path`` itself when absolute, else joined to ``root``."""
    if os.path.isabs(path):
        return path
    return os.path.join(root, path)


def _is_true(value) -> bool:
    """A table cell read as a bool (only a true value counts)."""
    return parse_bool(value) is True


def read_distractor_table(path, *, root=None) -> pd.DataFrame:
    """Read ``raw/distractors/distractors.csv`` (cached on path, mtime and size: read-only),
    relative paths resolved against ``root``; ``n_words`` Int64, ``duration_s`` float,
    ``same_voice_as_target`` bool. FileNotFoundError if missing, ValidationError if a column of
    :data:`DISTRACTOR_COLUMNS` is missing."""
    p = Path(path).resolve()
    st = p.stat()
    if root is not None:
        root = str(Path(root).resolve())
    return _read_table(str(p), st.st_mtime_ns, st.st_size, root)
