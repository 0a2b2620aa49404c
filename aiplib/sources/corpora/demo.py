"""Stages 1–3 inputs of the embedded default profile ``demo``: everything comes from Debian
packages.

* Real speech: the Asterisk English prompts (``asterisk-core-sounds-en-g722``, Allison Smith,
  CC BY-SA 3.0) with the transcripts of ``asterisk-core-sounds-en``.
* Synthetic speech (``synthetic: true``): Harvard sentences (IEEE 1969, *Recommended Practice for
  Speech Quality Measurements*, public domain) and command words read by espeak-ng and flite
  voices (:mod:`aiplib.sources.corpora.tts`).
* Backgrounds: recordings from ``minetest-data``, ``sonic-pi-samples``,
  ``asterisk-moh-opsound-g722``
  and ``extremetuxracer-data`` (credits per file in :mod:`aiplib.sources.corpora.demo_sources`),
  babble and hubbub of Asterisk prompts not in the item bank, three synthetic noises.
"""

from __future__ import annotations

import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core import DEFAULT_SEED
from aiplib.core.atomic import atomic_path
from aiplib.core.errors import (
    AiplibError,
    AiplibParameterError,
    AudioFileError,
    MissingPackageError,
)
from aiplib.core.tasks import KEYWORDS, TASK_FAMILIES
from aiplib.io.audio import SR, load_audio, write_wav
from aiplib.io.formats import read_item_bank, write_csv_atomic, write_item_bank
from aiplib.sources.corpora import debian
from aiplib.sources.corpora.asterisk_langs import (  # the one transcript parser
    G722_BYTES_PER_S,
    read_distractor_table,
    read_transcripts,
    table_packages,
)
from aiplib.sources.corpora.demo_sources import BATTERY, BG_SOURCES, NOTICES, Src
from aiplib.sources.corpora.tts import pad_to, synthesize, trim_silence

#: Debian packages the demo profile needs (``asterisk-core-sounds-en`` brings the transcripts).
DEBIAN_PACKAGES = [
    "ffmpeg",
    "espeak-ng",
    "flite",
    "sox",
    "asterisk-core-sounds-en",
    "asterisk-core-sounds-en-g722",
    "asterisk-moh-opsound-g722",
    "minetest-data",
    "sonic-pi-samples",
    "extremetuxracer-data",
]

#: Non-target words (Speech Commands' auxiliary words).
NON_TARGET_WORDS = (
    "bed",
    "cat",
    "happy",
    "house",
    "marvin",
    "sheila",
    "tree",
    "wow",
    "bird",
    "dog",
)

#: Lists 1–3 of the Harvard sentences (IEEE 1969, public domain), from ``harvard_sentences.csv``.
HARVARD_SENTENCES = tuple(
    pd.read_csv(Path(__file__).with_name("harvard_sentences.csv"))["sentence"]
)

#: Synthetic ASR voices (``engine:voice``); ``kal16`` is flite's 16 kHz build of ``kal``.
ASR_VOICES = (
    "espeak:en-us",
    "espeak:en-gb",
    "espeak:en-gb-scotland",
    "espeak:en-gb-x-rp",
    "espeak:en-029",
    "espeak:en-us-nyc",
    "espeak:en-gb-x-gbclan",
    "espeak:en-gb-x-gbcwmd",
    "flite:kal16",
    "flite:slt",
    "flite:rms",
    "flite:awb",
)

#: Fourteen synthetic KWS voices (espeak-ng accent + voice variant, flite voices).
KWS_VOICES = (
    "espeak:en-us+f3",
    "espeak:en-gb+m2",
    "flite:slt",
    "espeak:en-gb-scotland+f2",
    "flite:kal16",
    "espeak:en-029+m4",
    "espeak:en-us-nyc+f4",
    "flite:awb",
    "espeak:en-gb-x-rp+m3",
    "espeak:en-gb-x-gbclan+f5",
    "flite:rms",
    "espeak:en-gb-x-gbcwmd+m7",
    "espeak:en-us+m1",
    "espeak:en-gb+f1",
)

#: Where Debian installs shared data.
_SHARE = Path("/usr/share")

#: Folder of the Asterisk English prompts under :data:`_SHARE`.
_PROMPTS = "asterisk/sounds/en_US_f_Allison"

#: The prompts' transcript file under :data:`_SHARE`.
_TRANSCRIPT = "doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"

#: Debian package of the Asterisk English prompts (G.722).
_AST_PKG = "asterisk-core-sounds-en-g722"

#: Debian package of their transcripts.
_TXT_PKG = "asterisk-core-sounds-en"

#: Licence of the Asterisk prompts.
_AST_LICENCE = "CC BY-SA 3.0"

#: Attribution of the Asterisk prompts.
_AST_ATTR = (
    "Asterisk core sounds (English), recorded by Allison Smith (theivrvoice.com), Digium, Inc."
)

#: A plain transcript (letters, digits, spaces and simple punctuation only).
_TEXT_OK = re.compile(r"^[A-Za-z0-9 ,.'?!;:\-]+$")

#: Talkers of the babble background.
_N_BABBLE = 6

#: Talkers of the hubbub background.
_N_HUBBUB = 2

#: Least duration of one talker stream of the babble and hubbub, s.
_STREAM_S = 31.0


# ----------------------------------------------------------------------------- stage 1
def _copy(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` atomically (:func:`atomic_path`); a ``dst`` of the same size is
    kept."""
    if dst.is_file() and dst.stat().st_size == src.stat().st_size:
        return
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def _source_files() -> list[Src]:
    """Every file stage 1 copies: prompts, transcript, background sources, licence notices."""
    texts = read_transcripts(_SHARE / _TRANSCRIPT)
    files = [Src(_TXT_PKG, _TRANSCRIPT, _AST_LICENCE, _AST_ATTR + " (transcripts)")]
    files += [
        Src(_AST_PKG, f"{_PROMPTS}/{k}.g722", _AST_LICENCE, _AST_ATTR)
        for k in sorted(texts)
        if (_SHARE / _PROMPTS / f"{k}.g722").is_file()
    ]
    for group in BG_SOURCES.values():
        files += group
    copyrights = [
        Src(p, f"doc/{p}/copyright", "licence notice", "Debian copyright file")
        for p in sorted({s.package for s in files})
    ]
    return files + copyrights + NOTICES


def gather_raw(ws, *, install: bool = True):
    """Stage 1: copy the demo's source files into ``raw/<package>/`` (files of the same size
    skipped) and return ``raw/inventory.csv`` (``file``, ``package``, ``licence``, ``attribution``,
    ``bytes``); ``install`` lets :func:`aiplib.sources.corpora.debian.ensure_packages` install
    missing packages. Also writes ``raw/debian_packages.csv`` (:func:`record_debian_packages`).

    Raises
    ------
    MissingPackageError
        If a package of :data:`DEBIAN_PACKAGES` is missing and cannot be installed.
    """
    debian.ensure_packages(DEBIAN_PACKAGES, install=install)
    ws.ensure()
    rows = []
    for s in _source_files():
        src = _SHARE / s.rel
        dst = ws.raw / s.package / s.rel
        if not src.is_file():
            raise MissingPackageError(
                f"{src}: expected in Debian package {s.package}; reinstall it with\n"
                f"    {debian.install_command([s.package])}"
            )
        _copy(src, dst)
        rows.append(
            dict(
                file=ws.rel(dst),
                package=s.package,
                licence=s.licence,
                attribution=s.attribution,
                bytes=dst.stat().st_size,
            )
        )
    df = pd.DataFrame(rows, columns=["file", "package", "licence", "attribution", "bytes"])
    df.to_csv(ws.raw / "inventory.csv", index=False)
    record_debian_packages(ws)
    return df


def input_packages(ws) -> dict:
    """Every Debian package the demo's inputs come from, with its role: the packages of
    ``raw/inventory.csv`` (files copied), the rest of :data:`DEBIAN_PACKAGES` (the synthesis engines
    and decoders: espeak-ng, flite, ffmpeg …), the Asterisk language packs of
    ``raw/distractors/distractors.csv`` when the competing-speech family was prepared, and the
    libraries and data these depend on that are built from the same source package
    (:func:`aiplib.sources.corpora.debian.same_source_closure`: ``espeak-ng-data``, ``libflite1``,
    ``libavcodec59`` …).

    Returns ``{package: role}`` in that order (without dpkg: the listed packages only).
    """
    roles = {}
    inventory = ws.raw / "inventory.csv"
    if inventory.is_file():
        listed = pd.read_csv(inventory, dtype=str, keep_default_na=False, usecols=["package"])
        for pkg in listed["package"]:
            roles.setdefault(pkg, "files copied to raw/ (raw/inventory.csv)")
    for pkg in DEBIAN_PACKAGES:
        roles.setdefault(pkg, "program the demo runs or reads (demo.DEBIAN_PACKAGES)")
    if ws.distractors_csv.is_file():
        table = read_distractor_table(ws.distractors_csv)
        for pkg in table_packages(table):
            roles.setdefault(pkg, "competing-speech distractors (raw/distractors/distractors.csv)")
    for pkg, root in debian.same_source_closure(roles).items():
        roles.setdefault(pkg, f"library or data of {root} (same source package)")
    return roles


def record_debian_packages(ws) -> pd.DataFrame:
    """Write ``raw/debian_packages.csv``: version and ``.deb`` SHA-256 of every package of
    :func:`input_packages`, as installed when stage 1 ran (columns
    :data:`aiplib.sources.corpora.debian.PACKAGE_COLUMNS`; without dpkg each says
    ``unknown (no dpkg)``). Returns the table. Never raises for a missing tool.
    """
    rows = debian.package_records(input_packages(ws))
    table = pd.DataFrame(rows, columns=debian.PACKAGE_COLUMNS)
    write_csv_atomic(table, ws.debian_packages_csv)
    return table


# ----------------------------------------------------------------------------- stage 2
def asterisk_prompts(ws):
    """The Asterisk English prompts copied by :func:`gather_raw`, sorted by ``key``: ``key``
    (``agent-pass``, ``digits/7``), ``path`` (absolute ``.g722``), ``text``, ``n_words``,
    ``duration_s`` (s, from the size at 64 kbit/s), ``clean_text`` (no ``[tone]``, plain
    punctuation).

    Raises
    ------
    AiplibError
        If stage 1 has not been run.
    """
    tpath = ws.raw / _TXT_PKG / _TRANSCRIPT
    if not tpath.is_file():
        raise AiplibError(
            f"{tpath} is missing: run aiplib.sources.corpora.demo.gather_raw(ws) first (stage 1)"
        )
    rows = []
    for key, text in sorted(read_transcripts(tpath).items()):
        p = ws.raw / _AST_PKG / _PROMPTS / f"{key}.g722"
        if p.is_file():
            rows.append(
                dict(
                    key=key,
                    path=str(p),
                    text=text,
                    n_words=len(text.split()),
                    duration_s=p.stat().st_size / G722_BYTES_PER_S,
                    clean_text=bool(_TEXT_OK.match(text)),
                )
            )
    return pd.DataFrame(rows)


def _slug(voice: str) -> str:
    """A voice name (``espeak:en-us+m1``) as part of an item id (``espeak-en-us-m1``)."""
    return voice.replace(":", "-").replace("+", "-")


def _engine_credit(voice: str) -> str:
    """The synthesis engine of a voice: ``espeak-ng`` or ``flite``."""
    if voice.startswith("espeak:"):
        return "espeak-ng"
    return "flite"


def _item(ws, family, item_id, y, credit: dict, **extra) -> dict:
    """An item-bank record; ``credit`` holds ``source_file, source, licence, attribution, speaker,
    accent_group, synthetic``, ``extra`` the task fields (``text``, or ``label`` and
    ``is_target``)."""
    path = write_wav(ws.itembanks / "audio" / family / f"{item_id}.wav", y)
    c = credit
    return dict(
        item_id=item_id,
        path=ws.rel(path),
        source_file=c["source_file"],
        source=c["source"],
        licence=c["licence"],
        attribution=c["attribution"],
        duration_s=float(y.size / SR),
        speaker=c["speaker"],
        accent_group=c["accent_group"],
        synthetic=c["synthetic"],
        **extra,
    )


def _asr_real(ws, n: int, rng) -> list[dict]:
    """``n`` Asterisk prompts of 2–10 s with ≥ 5 words and a plain transcript, a seeded choice."""
    p = asterisk_prompts(ws)
    cand = p[(p.duration_s >= 2.0) & (p.duration_s <= 10.0) & (p.n_words >= 5) & p.clean_text]
    if n > len(cand):
        raise AiplibParameterError(f"n_asr_real={n} but only {len(cand)} Asterisk prompts qualify")
    credit = dict(
        source=_AST_PKG,
        licence=_AST_LICENCE,
        attribution=_AST_ATTR,
        speaker="asterisk_allison",
        accent_group="en-US (Asterisk, real)",
        synthetic=False,
    )
    return [
        _item(
            ws,
            "asr",
            "ast-" + r.key.replace("/", "-"),
            load_audio(r.path),
            dict(credit, source_file=ws.rel(r.path)),
            text=r.text,
        )
        for r in cand.iloc[np.sort(rng.choice(len(cand), size=n, replace=False))].itertuples()
    ]


def _asr_synth(ws, n: int, rng) -> list[dict]:
    """``n`` Harvard sentences (a seeded order) read by :data:`ASR_VOICES` in turn, trimmed."""
    order = rng.permutation(len(HARVARD_SENTENCES))
    rows = []
    for i in range(n):
        k = int(order[i % len(order)])
        voice = ASR_VOICES[i % len(ASR_VOICES)]
        text = HARVARD_SENTENCES[k]
        y = trim_silence(synthesize(text, voice))
        rows.append(
            _item(
                ws,
                "asr",
                f"syn-{i:02d}-{_slug(voice)}",
                y,
                dict(
                    source_file=f"harvard:list{k // 10 + 1}/{k % 10 + 1}",
                    source=f"{_engine_credit(voice)} (synthetic voice)",
                    licence="public domain text; synthetic audio generated locally with "
                    f"{_engine_credit(voice)}",
                    attribution=f"Harvard sentence list {k // 10 + 1} no. {k % 10 + 1} (IEEE 1969) "
                    f"read by the synthetic voice {voice}",
                    speaker=voice,
                    accent_group=voice,
                    synthetic=True,
                ),
                text=text,
            )
        )
    return rows


def _kws(ws, n_target: int, n_nontarget: int, rng) -> list[dict]:
    """``n_target`` keywords and ``n_nontarget`` non-target words read by a seeded order of
    :data:`KWS_VOICES`, each centred in ≥ 1 s."""
    voices = [KWS_VOICES[j] for j in rng.permutation(len(KWS_VOICES))]
    plan = [(KEYWORDS[i % len(KEYWORDS)], True) for i in range(n_target)]
    plan += [(NON_TARGET_WORDS[i % len(NON_TARGET_WORDS)], False) for i in range(n_nontarget)]
    rows = []
    for i, (word, is_target) in enumerate(plan):
        voice = voices[i % len(voices)]
        y = pad_to(trim_silence(synthesize(word, voice)), SR)  # ≥ 1 s, like Speech Commands clips
        rows.append(
            _item(
                ws,
                "kws",
                f"kws-{i:02d}-{word}-{_slug(voice)}",
                y,
                dict(
                    source_file=f"word:{word}",
                    source=f"{_engine_credit(voice)} (synthetic voice)",
                    licence="public domain word; synthetic audio generated locally with "
                    f"{_engine_credit(voice)}",
                    attribution=f"the word '{word}' read by the synthetic voice {voice}",
                    speaker=voice,
                    accent_group=voice.split("+")[0],
                    synthetic=True,
                ),
                label=word,
                is_target=is_target,
            )
        )
    return rows


def build_item_banks(
    ws,
    *,
    n_asr_real: int = 12,
    n_asr_synth: int = 16,
    n_kws_target: int = 20,
    n_kws_nontarget: int = 10,
    seed: int = DEFAULT_SEED,
    overwrite: bool = False,
):
    """Stage 2: write ``itembanks/asr.jsonl``, ``itembanks/kws.jsonl`` and their 16 kHz WAVs (read
    back when both exist, unless ``overwrite``); the same ``seed`` gives the same items and bytes.

    ``n_asr_real``: a seeded choice among the Asterisk prompts of 2–10 s with ≥ 5 words and a plain
    transcript, untrimmed; ``n_asr_synth``: Harvard sentences read by :data:`ASR_VOICES` in turn,
    trimmed to 0.1 s margins; ``n_kws_target`` / ``n_kws_nontarget``: words of :data:`KEYWORDS` /
    :data:`NON_TARGET_WORDS`, voices round-robin over a seeded order of :data:`KWS_VOICES`, centred
    in ≥ 1 s.

    Raises
    ------
    AiplibError
        If stage 1 has not been run.
    AiplibParameterError
        If a count is negative or more real items are asked for than qualify.
    """
    counts = dict(
        n_asr_real=n_asr_real,
        n_asr_synth=n_asr_synth,
        n_kws_target=n_kws_target,
        n_kws_nontarget=n_kws_nontarget,
    )
    bad = {k: v for k, v in counts.items() if int(v) != v or v < 0}
    if bad:
        raise AiplibParameterError(f"item counts must be integers ≥ 0, got {bad}")
    if not overwrite and all(ws.item_bank(f).is_file() for f in TASK_FAMILIES):
        banks = {f: read_item_bank(ws, f) for f in TASK_FAMILIES}
        if (
            len(banks["asr"]) != n_asr_real + n_asr_synth
            or len(banks["kws"]) != n_kws_target + n_kws_nontarget
        ):
            warnings.warn(
                "existing item banks have other sizes than asked; pass overwrite=True to rebuild",
                stacklevel=2,
            )
        return banks
    ws.ensure()
    rng_real, rng_synth, rng_kws = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    write_item_bank(
        ws, "asr", _asr_real(ws, n_asr_real, rng_real) + _asr_synth(ws, n_asr_synth, rng_synth)
    )
    write_item_bank(ws, "kws", _kws(ws, n_kws_target, n_kws_nontarget, rng_kws), keywords=KEYWORDS)
    return {f: read_item_bank(ws, f) for f in TASK_FAMILIES}


# ----------------------------------------------------------------------------- battery
def _unique_join(values) -> str:
    """The distinct ``values`` joined with ``"; "``, in first-seen order."""
    distinct = []
    for v in values:
        if v not in distinct:
            distinct.append(v)
    return "; ".join(distinct)


def _group_spec(ws, bg_id, category, group, description, start_s) -> dict:
    """The spec of a recorded background: the files of source group ``group``, concatenated."""
    srcs = BG_SOURCES[group]
    paths = [ws.raw / s.package / s.rel for s in srcs]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise AudioFileError(
            f"{missing[0]}: background source missing; run "
            f"aiplib.sources.corpora.demo.gather_raw(ws) first (stage 1)"
        )
    spec = dict(
        bg_id=bg_id,
        category=category,
        description=description,
        sources=[str(p) for p in paths],
        combine="concat",
        source_package=srcs[0].package,
        licence=_unique_join(s.licence for s in srcs),
        attribution=_unique_join(s.attribution for s in srcs),
        synthetic=False,
    )
    if start_s:
        spec["start_s"] = float(start_s)
    return spec


def _noise_spec(bg_id, kind, description) -> dict:
    """The spec of a seeded synthetic noise of ``kind`` (white, pink, brown)."""
    return dict(
        bg_id=bg_id,
        category="stationary",
        description=description,
        sources=[],
        combine=f"synthetic:{kind}",
        source_package="synthetic",
        licence="CC0 1.0 (generated)",
        attribution=f"seeded {kind} noise generated by aiplib.battery.backgrounds",
        synthetic=True,
    )


def _talker_streams(ws, n_streams: int, seed: int) -> list[list[str]]:
    """Disjoint sequences of ≥ 31 s of Asterisk prompts that are not in ``itembanks/asr.jsonl``."""
    if not ws.item_bank("asr").is_file():
        raise AiplibError(
            f"{ws.item_bank('asr')} is missing: run build_item_banks(ws) first, so that the babble "
            "avoids the prompts of the item bank"
        )
    used = {str(ws.path(f)) for f in read_item_bank(ws, "asr").get("source_file", [])}
    p = asterisk_prompts(ws)
    cand = p[(p.n_words >= 3) & (p.duration_s >= 1.5) & p.clean_text & ~p.path.isin(used)]
    order = cand.iloc[np.random.default_rng(seed).permutation(len(cand))]
    streams = []
    cur = []
    total = 0.0
    for r in order.itertuples():
        cur.append(r.path)
        total += r.duration_s
        if total >= _STREAM_S:
            streams.append(cur)
            cur = []
            total = 0.0
            if len(streams) == n_streams:
                return streams
    raise AiplibError(
        f"not enough Asterisk prompts outside the item bank for {n_streams} talker streams"
    )


def _speech_specs(ws, seed: int) -> list[dict]:
    """The babble and hubbub specs: talker streams summed (``combine="sum"``)."""
    streams = _talker_streams(ws, _N_BABBLE + _N_HUBBUB, seed)
    common = dict(
        category="speech-like",
        combine="sum",
        source_package=_AST_PKG,
        licence=_AST_LICENCE,
        attribution=_AST_ATTR,
        synthetic=False,
    )
    return [
        dict(
            common,
            bg_id="babble_6talker",
            sources=streams[:_N_BABBLE],
            description=f"{_N_BABBLE}-talker babble: {_N_BABBLE} different sequences of Asterisk "
            "prompts (all by one female speaker) summed; none is in the item bank",
        ),
        dict(
            common,
            bg_id="hubbub_2talker",
            sources=streams[_N_BABBLE:],
            description="two-talker hubbub: two different sequences of Asterisk prompts "
            "(same female speaker) summed; none is in the item bank or the babble",
        ),
    ]


def battery_specs(ws, *, seed: int = DEFAULT_SEED) -> list[dict]:
    """The 20 background specs of the demo battery, sources as absolute paths under ``raw/``: 15
    recordings (stationary, transient, music), a 6-talker babble and a two-talker hubbub
    (``combine="sum"``, each talker a list of prompts avoiding the ASR bank's, chosen and ordered
    with ``seed``) and 3 synthetic noises; each ``subaudible="remove"``. Stages 1 and 2 must have
    run.

    Raises
    ------
    AudioFileError
        If a source file has not been copied to ``raw/`` yet.
    AiplibError
        If the item bank does not exist yet.
    """
    specs = []
    for bg_id, category, group, description, start_s in BATTERY:
        if group in ("white", "pink", "brown"):
            specs.append(_noise_spec(bg_id, group, description))
        else:
            specs.append(_group_spec(ws, bg_id, category, group, description, start_s))
    # DC and rumble below 20 Hz are taken out before normalisation (aiplib.io.subaudible)
    return [dict(s, subaudible="remove") for s in specs + _speech_specs(ws, seed)]
