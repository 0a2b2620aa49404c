"""The ``paper`` profile: the paper's corpora, item banks and background battery (stages 1–3).

Stage 1 :func:`gather_raw` (= :func:`download_all`) downloads the six corpora of :data:`CORPORA`
(seven files, :mod:`aiplib.sources.download`); stage 2 :func:`build_item_banks` applies the
authors' selection rules to LibriSpeech, Common Voice (streamed) and Speech Commands; stage 3
:func:`battery_specs` gives the 20 backgrounds of Table 1. Corpus modules (source and licence
each): :mod:`~aiplib.sources.corpora.esc50` [1]_, :mod:`~aiplib.sources.corpora.ms_snsd` [2]_,
:mod:`~aiplib.sources.corpora.noisex92` [3]_, :mod:`~aiplib.sources.corpora.musan` [4]_,
:mod:`~aiplib.sources.corpora.librispeech` [5]_, :mod:`~aiplib.sources.corpora.speech_commands`
  [6]_,
:mod:`~aiplib.sources.corpora.common_voice` [7]_.

Layout under ``data/paper/`` (archives kept next to their extracted data)::

    backgrounds/esc50/master.zip            + ESC-50-master/{audio,meta}/
    backgrounds/ms_snsd/master.zip          + MS-SNSD-master/{noise_train,noise_test,...}/
    backgrounds/noisex92/babble.wav
    backgrounds/musan/musan.tar.gz          + musan/{music,speech,noise}/
    speech_asr/librispeech/test-clean.tar.gz, test-other.tar.gz + LibriSpeech/test-{clean,other}/
    speech_asr/common_voice/                (only the 80 kept Common Voice clips, stage 2)
    kws/speech_commands/speech_commands_v0.02.tar.gz + speech_commands_v0.02/<word>/*.wav
    checks/download_progress.json           (one entry per completed file)

References
----------
.. [1] K. J. Piczak, ESC-50, ACM Multimedia 2015.
.. [2] C. K. A. Reddy et al., MS-SNSD, Interspeech 2019.
.. [3] A. Varga and H. J. M. Steeneken, NOISEX-92, Speech Communication 12(3), 1993.
.. [4] D. Snyder, G. Chen and D. Povey, MUSAN, arXiv:1510.08484, 2015.
.. [5] V. Panayotov et al., Librispeech, ICASSP 2015.
.. [6] P. Warden, Speech Commands, arXiv:1804.03209, 2018.
.. [7] R. Ardila et al., Common Voice, LREC 2020.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import pandas as pd

from aiplib.core.errors import DownloadError
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.core.workspace import workspace
from aiplib.io.audio import SR, load_audio, write_wav
from aiplib.io.formats import read_item_bank, write_item_bank
from aiplib.sources.corpora import esc50, librispeech, ms_snsd, musan, noisex92, speech_commands
from aiplib.sources.corpora.common_voice import (
    CV_DATASET,
    N_COMMON_VOICE,
    load_common_voice,
    select_common_voice,
)
from aiplib.sources.corpora.librispeech import prepare_librispeech, read_librispeech_speakers
from aiplib.sources.corpora.speech_commands import KEYWORDS
from aiplib.sources.download import (
    Corpus,
    CorpusError,
    download_corpus,
    need_dir,
    resolve_base_url,
    set_cache_env,
)

__all__ = [
    "CORPORA",
    "corpus_dir",
    "base_url_for",
    "download_all",
    "gather_raw",
    "build_item_banks",
    "battery_specs",
    "BATTERY",
    "AUTHORS_CATEGORY",
    "SELECTION_RULES",
    "AUTHORS_SEED",
    "N_LIBRISPEECH",
    "N_KWS",
]

#: The corpora of stage 1, keyed by name (the folder name and mirror-variable suffix).
CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in (
        esc50.CORPUS,
        ms_snsd.CORPUS,
        noisex92.CORPUS,
        musan.CORPUS,
        librispeech.CORPUS,
        speech_commands.CORPUS,
    )
}

#: ``RANDOM_SEED`` of the authors' ``scripts/02_build_banks.py`` (``random.Random(42)``).
AUTHORS_SEED = 42

#: LibriSpeech utterances in the ASR bank (authors' ``ASR_N``).
N_LIBRISPEECH = 100

#: Speech Commands items in the KWS bank (authors' ``KWS_N``).
N_KWS = 120


#: Folders the authors draw non-target KWS items from (``silence`` does not exist in v0.02).
KWS_NONTARGET_FOLDERS = ("_background_noise_", "silence")
#: Injection probes: the last 3 clips (name order) of each of the first 4 keywords.
N_PROBE_KEYWORDS = 4
#: Injection probes per probe keyword (the last clips in name order).
N_PROBES_PER_KEYWORD = 3

#: Text of the ``selection_rule`` field of each item bank record.
SELECTION_RULES = {
    "librispeech": "authors' scripts/02_build_banks.py: every utterance of test-clean then "
    "test-other (sorted *.trans.txt, file order), random.Random(42).shuffle, first {n}",
    "common_voice": "authors' scripts/02_build_banks.py: fsicoli/common_voice_17_0 en validation "
    "stream (unshuffled), first {n} clips whose accent and gender are both given and not "
    "'unknown'",
    "kws": "authors' scripts/02_build_banks.py: random.Random(42); per keyword (yes..go) sorted "
    "clips shuffled, first {per_kw}; _background_noise_/silence clips shuffled, first {per_nt}; "
    "probes = last 3 sorted clips of yes/no/up/down; all shuffled, first {n}",
}


def _get(name: str, registry=None) -> Corpus:
    """Corpus ``name`` of ``registry`` (default :data:`CORPORA`); KeyError listing the names."""
    reg = CORPORA if registry is None else registry
    if name not in reg:
        raise KeyError(f"unknown corpus {name!r}; valid names: {', '.join(sorted(reg))}")
    return reg[name]


def corpus_dir(ws, name: str, *, registry=None) -> Path:
    """Folder of corpus ``name``: ``<ws.root>/<kind>/<name>``; KeyError (listing the names) if
    unknown."""
    corpus = _get(name, registry)
    return Path(ws.root) / corpus.kind / corpus.name


def base_url_for(name: str, base_urls=None, *, registry=None) -> str:
    """Base URL of corpus ``name`` (:func:`aiplib.sources.download.resolve_base_url`); KeyError if
    unknown."""
    return resolve_base_url(_get(name, registry), base_urls)


# ----------------------------------------------------------------------------- stage 1: downloads
def download_all(
    ws,
    corpora=None,
    base_urls=None,
    *,
    force_download: bool = False,
    registry=None,
    retries: int = 2,
    progress: bool | None = True,
) -> dict:
    """Stage 1 of ``paper``: download every corpus of :data:`CORPORA` (or those named) into ``ws``.

    Each corpus is tried even when an earlier one failed. ``base_urls``: ``{name: url}`` or one
    mirror root; ``registry`` replaces :data:`CORPORA`; ``retries`` (retries per file) and
    ``progress`` (progress bars) go to :func:`aiplib.sources.download.fetch`.

    Returns
    -------
    dict
        ``{name: Path of the corpus folder}``.

    Raises
    ------
    KeyError
        Unknown corpus name.
    DownloadError
        After trying all corpora, listing every failure with its URL and how to use a mirror.
    """
    set_cache_env()
    reg = CORPORA if registry is None else registry
    names = list(reg) if corpora is None else list(corpora)
    for n in names:
        _get(n, reg)
    progress_file = Path(ws.root) / "checks" / "download_progress.json"
    out = {}
    errors = []
    for n in names:
        try:
            out[n] = download_corpus(
                reg[n],
                corpus_dir(ws, n, registry=reg),
                base_url=base_url_for(n, base_urls, registry=reg),
                force_download=force_download,
                progress_file=progress_file,
                retries=retries,
                progress=progress,
            )
        except DownloadError as exc:
            errors.append((n, exc))
    if len(errors) == 1:
        raise errors[0][1]
    if errors:
        raise _download_errors(errors, len(names), reg)
    return out


def _download_errors(errors: list, n_corpora: int, reg) -> DownloadError:
    """One :class:`DownloadError` listing every ``(name, error)`` of ``errors``, with how to use a
    mirror when a network download failed."""
    lines = []
    for n, e in errors:
        if e.url:
            lines.append(f"- {n}: {e.url}: {e.reason}")
        else:
            lines.append(f"- {n}: {e}")
    net = [n for n, e in errors if e.url]
    hint = ""
    if net:
        env_vars = ", ".join(_get(n, reg).env_var for n in net)
        hint = (
            "\nFiles already downloaded are kept and partial files are resumed on the next run. "
            f"To use a mirror, set AIP_MIRROR_<CORPUS>=<base URL> (here {env_vars}), or "
            "AIP_MIRROR=<root URL with one folder per corpus>, or pass base_urls / --base-url, "
            "e.g. `make 01 PROFILE=paper MIRROR=https://my.mirror/aip-corpora`."
        )
    listing = "\n".join(lines)
    return DownloadError(
        f"{len(errors)} of {n_corpora} corpora could not be downloaded:\n{listing}{hint}"
    )


def gather_raw(
    ws,
    *,
    corpora=None,
    base_urls=None,
    force_download: bool = False,
    registry=None,
    retries: int = 2,
    progress: bool | None = True,
) -> dict:
    """Stage 1 of the profile interface (:class:`aiplib.sources.corpora.Profile`):
    :func:`download_all` with the same parameters; returns ``{name: Path of the corpus folder}``.

    Raises
    ------
    KeyError
        Unknown corpus name.
    DownloadError
        After trying all corpora, listing every failure.
    """
    return download_all(
        ws,
        corpora=corpora,
        base_urls=base_urls,
        force_download=force_download,
        registry=registry,
        retries=retries,
        progress=progress,
    )


# ----------------------------------------------------------------------------- stage 2: item banks
# (the authors' rules)
def _kws_candidates(sc_root: Path, n: int, rng) -> list:
    """The authors' KWS candidate list before the final shuffle (dicts, in their order)."""
    per_kw = n // len(KEYWORDS) + 2
    per_nt = n // 4

    def wavs(folder, shuffle=False):
        """The sorted WAVs of a folder of the corpus, shuffled by ``rng`` when ``shuffle``."""
        files = sorted((sc_root / folder).glob("*.wav"))  # none when the folder is missing
        if shuffle:
            rng.shuffle(files)
        return files

    items = []
    for kw in KEYWORDS:
        for w in wavs(kw, True)[:per_kw]:
            items.append(
                {
                    "item_id": f"kws_{kw}_{w.stem}",
                    "file": w,
                    "label": kw,
                    "is_target": True,
                    "probe_id": None,
                }
            )
    for f in KWS_NONTARGET_FOLDERS:
        for w in wavs(f, True)[:per_nt]:
            items.append(
                {
                    "item_id": f"kws_nt_{f}_{w.stem}",
                    "file": w,
                    "label": f,
                    "is_target": False,
                    "probe_id": None,
                }
            )
    for kw in KEYWORDS[:N_PROBE_KEYWORDS]:
        for w in wavs(kw)[-N_PROBES_PER_KEYWORD:]:
            items.append(
                {
                    "item_id": f"probe_{kw}_{w.stem}",
                    "file": w,
                    "label": kw,
                    "is_target": False,
                    "probe_id": f"probe_{kw}_{w.stem}",
                }
            )
    return items


def _select_librispeech(ls_dir: Path, n: int) -> list[dict]:
    """The authors' LibriSpeech choice: every utterance shuffled by ``Random(42)``, the first
    ``n`` (metadata only)."""
    items = prepare_librispeech(ls_dir, with_duration=False).to_dict("records")
    random.Random(AUTHORS_SEED).shuffle(items)
    return items[:n]


def _select_kws(sc_root: Path, n: int) -> list[dict]:
    """The authors' KWS choice: the candidates of :func:`_kws_candidates` shuffled by the same
    ``Random(42)``, the first ``n`` (metadata only)."""
    rng = random.Random(AUTHORS_SEED)
    items = _kws_candidates(sc_root, n, rng)
    rng.shuffle(items)
    return items[:n]


def _check_corpus_sizes(ls_items: list, kws_items: list, n_librispeech: int, n_kws: int) -> None:
    """Raise :class:`CorpusError` naming each corpus with fewer candidates than asked for."""
    short = []
    if len(ls_items) < n_librispeech:
        short.append(
            f"LibriSpeech test-clean+test-other: {len(ls_items)} utterances, {n_librispeech} needed"
        )
    if len(kws_items) < n_kws:
        short.append(f"Speech Commands: {len(kws_items)} candidate clips, {n_kws} needed")
    if short:
        raise CorpusError(
            "the corpora are too small for the paper's item banks — " + "; ".join(short)
        )


def _write_item(ws, family: str, item_id: str, y, fields: dict) -> dict:
    """Write ``y`` to ``itembanks/audio/<family>/<item_id>.wav``; returns its item-bank row
    (``item_id``, ``path``, ``fields``, ``duration_s``)."""
    out = write_wav(ws.itembanks / "audio" / family / f"{item_id}.wav", y)
    return {
        "item_id": item_id,
        "path": ws.rel(out),
        **fields,
        "duration_s": round(y.size / SR, 4),
    }


def _librispeech_rows(ws, ls_items: list, genders: dict, rule: str) -> list[dict]:
    """Item-bank rows (audio written) of the chosen LibriSpeech utterances."""
    corpus = librispeech.CORPUS
    rows = []
    for r in ls_items:
        fields = dict(
            source_file=ws.rel(r["path"]),
            source=f"LibriSpeech {r['part']}",
            licence=corpus.licence,
            attribution=f"{corpus.attribution}; LibriVox reader {r['speaker']}",
            speaker=f"ls_{r['speaker']}",
            accent_group=None,
            synthetic=False,
            text=r["text"],
            gender=genders.get(r["speaker"], "unknown"),
            accent="american_english",
            selection_rule=rule,
        )
        rows.append(_write_item(ws, "asr", r["utt_id"], load_audio(r["path"]), fields))
    return rows


def _common_voice_rows(ws, cv_kept: list, rule: str) -> list[dict]:
    """Item-bank rows (audio written) of the kept Common Voice clips."""
    rows = []
    for c in cv_kept:
        fields = dict(
            source_file=ws.rel(c["source_file"]),
            source="Common Voice 17.0 (en, validation)",
            licence="CC0 1.0",
            attribution=f"Mozilla Common Voice 17.0 via {CV_DATASET} (Ardila et al., LREC 2020)",
            speaker=f"cv_{c['speaker'][:16]}",
            accent_group=c["accent_group"],
            synthetic=False,
            text=c["text"],
            gender=c["gender"],
            accent=c["accent"],
            selection_rule=rule,
        )
        rows.append(_write_item(ws, "asr", c["item_id"], c["y"], fields))
    return rows


def _kws_rows(ws, kws_items: list, rule: str) -> list[dict]:
    """Item-bank rows (audio written) of the chosen Speech Commands clips."""
    corpus = speech_commands.CORPUS
    rows = []
    for r in kws_items:
        fields = dict(
            source_file=ws.rel(r["file"]),
            source="Speech Commands v0.02",
            licence=corpus.licence,
            attribution=corpus.attribution,
            speaker=f"sc2_{r['file'].stem.split('_nohash_')[0]}",
            accent_group=None,
            synthetic=False,
            label=r["label"],
            is_target=r["is_target"],
            probe_id=r["probe_id"],
            selection_rule=rule,
        )
        rows.append(_write_item(ws, "kws", r["item_id"], load_audio(r["file"]), fields))
    return rows


def _check_bank_counts(asr_rows: list, kws_rows: list, n_asr: int, n_kws: int) -> None:
    """Raise :class:`CorpusError` unless each bank has exactly its count of unique items."""
    n_unique_asr = len({r["item_id"] for r in asr_rows})
    if len(asr_rows) != n_asr or n_unique_asr != n_asr:
        raise CorpusError(
            f"ASR item bank has {len(asr_rows)} items ({n_unique_asr} unique), {n_asr} expected"
        )
    if len(kws_rows) != n_kws or len({r["item_id"] for r in kws_rows}) != n_kws:
        raise CorpusError(f"KWS item bank has {len(kws_rows)} items, {n_kws} expected")


def _remove_stale_files(ws, bank_rows: dict, cv_dir: Path, cv_kept: list) -> None:
    """Delete the item WAVs and Common Voice clips of an earlier selection (those no row
    names)."""
    audio_dir = ws.itembanks / "audio"
    for family, rows in bank_rows.items():
        keep = {ws.path(r["path"]).name for r in rows}
        for f in (audio_dir / family).glob("*.wav"):
            if f.name not in keep:
                f.unlink()
    keep = {Path(c["source_file"]).name for c in cv_kept}
    for f in cv_dir.iterdir():
        if f.is_file() and f.name not in keep:
            f.unlink()


def build_item_banks(
    ws,
    *,
    seed: int | None = None,
    cv_dataset=None,
    n_librispeech: int = N_LIBRISPEECH,
    n_common_voice: int = N_COMMON_VOICE,
    n_kws: int = N_KWS,
    overwrite: bool = False,
    registry=None,
) -> dict:
    """Stage 2 of ``paper``: the authors' item banks (``scripts/02_build_banks.py``, rules in
    :data:`SELECTION_RULES`, copied into each record's ``selection_rule``); ``{"asr": df, "kws":
      df}``.

    ASR: ``n_librispeech`` LibriSpeech [5]_ and ``n_common_voice`` Common Voice 17 [7]_ items
    (``cv_dataset``, default :func:`load_common_voice`); KWS: ``n_kws`` Speech Commands v0.02 [6]_
    items with injection probes (``probe_id``); the authors' sizes are 100, 80, 120 (5 each in their
    smoke test). ``seed`` is ignored (the rules use ``random.Random(42)``); ``registry`` replaces
    :data:`CORPORA`. Item audio: 16 kHz mono float32 WAV at
    ``itembanks/audio/<family>/<item_id>.wav``; read back when both banks exist and ``overwrite`` is
    false.

    Raises
    ------
    CorpusError
        A corpus is missing (run stage 1) or too small for the counts, naming what is short.
    MissingPackageError
        ``cv_dataset`` not given and ``datasets`` missing or ≥ 4.
    """
    del seed
    if not overwrite and all(ws.item_bank(f).is_file() for f in TASK_FAMILIES):
        return {f: read_item_bank(ws, f) for f in TASK_FAMILIES}

    # select (metadata only: nothing is written before every count is met)
    ls_dir = corpus_dir(ws, "librispeech", registry=registry)
    ls_items = _select_librispeech(ls_dir, n_librispeech)
    sc_root = need_dir(
        corpus_dir(ws, "speech_commands", registry=registry) / speech_commands.ROOT,
        "Speech Commands v0.02",
    )
    kws_items = _select_kws(sc_root, n_kws)
    _check_corpus_sizes(ls_items, kws_items, n_librispeech, n_kws)
    cv_dir = Path(ws.root) / "speech_asr" / "common_voice"
    if cv_dataset is None:
        cv_dataset = load_common_voice()
    cv_kept = select_common_voice(cv_dataset, cv_dir, n=n_common_voice)

    # write item audio and rows
    genders = read_librispeech_speakers(ls_dir)
    rule_ls = SELECTION_RULES["librispeech"].format(n=n_librispeech)
    rule_cv = SELECTION_RULES["common_voice"].format(n=n_common_voice)
    rule_kws = SELECTION_RULES["kws"].format(
        n=n_kws, per_kw=n_kws // len(KEYWORDS) + 2, per_nt=n_kws // 4
    )
    asr_rows = _librispeech_rows(ws, ls_items, genders, rule_ls)
    asr_rows += _common_voice_rows(ws, cv_kept, rule_cv)
    kws_rows = _kws_rows(ws, kws_items, rule_kws)

    # assert the counts, drop files of an earlier selection, write the banks
    _check_bank_counts(asr_rows, kws_rows, n_librispeech + n_common_voice, n_kws)
    _remove_stale_files(ws, {"asr": asr_rows, "kws": kws_rows}, cv_dir, cv_kept)
    write_item_bank(ws, "asr", asr_rows)
    write_item_bank(ws, "kws", kws_rows, keywords=KEYWORDS)
    return {"asr": pd.DataFrame(asr_rows), "kws": pd.DataFrame(kws_rows)}


# ----------------------------------------------------------------------------- stage 3: the battery
# of Table 1
#: Table 1 as the authors' ``BATTERY_SPEC`` (``scripts/03_curate_battery.py``), their order and
#: ``bg_id``s: ``(bg_id, corpus, selector, category, description)``. A selector is an ESC-50 class
#: number (the first ``audio/1-*-A-<class>.wav``: fold 1, take A) or a glob inside the corpus
#: folder; the authors' categories are in :data:`AUTHORS_CATEGORY`. Read from ``paper_battery.csv``.
_TABLE1 = pd.read_csv(Path(__file__).with_name("paper_battery.csv"), dtype=str)
#: The paper's battery as tuples, in ``paper_battery.csv`` order (see above).
BATTERY = tuple(_TABLE1.itertuples(index=False, name=None))


def _authors_category(corpus: str, category: str) -> str:
    """The authors' category of a Table 1 background: NOISEX-92 babble, MUSAN and speech-like
    recordings are ``speech_like``, the rest ``non_speech``."""
    if corpus in ("noisex92", "musan") or category == "speech-like":
        return "speech_like"
    return "non_speech"


#: ``bg_id`` → the authors' category (their spec labels ``musan_music`` ``speech_like`` too).
AUTHORS_CATEGORY = {b[0]: _authors_category(b[1], b[3]) for b in BATTERY}


def _esc50_clip(cdir: Path, bg_id: str, esc_class: str) -> Path:
    """The first fold-1 take-A clip of ESC-50 class ``esc_class`` (``audio/1-*-A-<class>.wav``);
    :class:`CorpusError` when there is none."""
    audio = need_dir(cdir / esc50.ROOT, "ESC-50") / "audio"
    found = sorted(audio.glob(f"1-*-A-{esc_class}.wav"))
    if not found:
        raise CorpusError(
            f"{bg_id}: ESC-50 has no fold-1 take-A clip of class {esc_class} "
            f"(audio/1-*-A-{esc_class}.wav); run stage 1 (download) again"
        )
    return found[0]


def battery_specs(ws, *, seed: int | None = None, registry=None) -> list:
    """Stage 3 of ``paper``: the 20 background specs of Table 1, in the authors' order (``seed``
    unused; ``registry`` replaces :data:`CORPORA`): ``bg_id, category, description, sources``
    (absolute), ``combine="concat"``, ``source_package, licence, attribution, synthetic=False``,
    ``authors_category``.

    Raises
    ------
    CorpusError
        A corpus folder or a selected file is missing (run stage 1).
    """
    reg = CORPORA if registry is None else registry
    specs = []
    for bg_id, corpus, sel, category, desc in BATTERY:
        c = reg[corpus]
        cdir = corpus_dir(ws, corpus, registry=reg)
        attribution = c.attribution
        licence = c.licence
        if corpus == "esc50":
            src = _esc50_clip(cdir, bg_id, sel)
            attribution = f"{c.attribution}; freesound.org clip {src.stem.split('-')[1]}"
        else:
            base = {"ms_snsd": cdir / ms_snsd.ROOT, "musan": cdir / musan.ROOT}.get(corpus, cdir)
            found = sorted(need_dir(base, c.title).glob(sel))
            if found:
                src = found[0]
            else:
                src = base / sel
            if "librivox" in sel:
                licence = "public domain (LibriVox) in MUSAN, CC BY 4.0"
        if not src.is_file():
            raise CorpusError(
                f"{bg_id}: source file {src} is missing; run stage 1 (download) again"
            )
        specs.append(
            {
                "bg_id": bg_id,
                "category": category,
                "description": desc,
                "sources": [str(src)],
                "combine": "concat",
                "source_package": c.title,
                "licence": licence,
                "attribution": attribution,
                "synthetic": False,
                "authors_category": AUTHORS_CATEGORY[bg_id],
            }
        )
    return specs


def main(argv=None) -> int:
    """``python -m aiplib.sources.corpora.paper download [--corpus NAME ...] [--base-url URL]``:
    stage 1; returns the exit status (1, the error on stderr, when a download failed)."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.sources.corpora.paper")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("download", help="download the paper's corpora (stage 1)")
    d.add_argument(
        "--corpus", action="append", choices=sorted(CORPORA), help="repeatable; default all"
    )
    d.add_argument(
        "--base-url", help="mirror root holding one folder per corpus (like $AIP_MIRROR)"
    )
    d.add_argument(
        "--data-root", help="parent of the profile folders (default $AIP_DATA_ROOT or data/)"
    )
    d.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    ws = workspace("paper", data_root=args.data_root)
    try:
        done = download_all(
            ws, corpora=args.corpus, base_urls=args.base_url, force_download=args.force
        )
    except DownloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, path in done.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
