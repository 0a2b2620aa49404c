"""Stages 1–3 of the ``paper`` profile: the paper's corpora, item banks and background battery.

Stage 1 (:func:`download_all`) downloads six public corpora (seven files) with the resumable,
verified downloader of :mod:`aiplib.download`; stage 2 (:func:`build_item_banks`) selects the paper's item
banks from them; stage 3 (:func:`battery_specs`) lists the 20 backgrounds of Table 1 as background
specs for :func:`aiplib.backgrounds.curate_battery` (the same curation code as the demo).

Layout under the workspace ``data/paper/`` (archives are kept next to their extracted data)::

    backgrounds/esc50/master.zip            + ESC-50-master/{audio,meta}/
    backgrounds/ms_snsd/master.zip          + MS-SNSD-master/{noise_train,noise_test,...}/
    backgrounds/noisex92/babble.wav
    backgrounds/musan/musan.tar.gz          + musan/{music,speech,noise}/
    speech_asr/librispeech/test-clean.tar.gz, test-other.tar.gz + LibriSpeech/test-{clean,other}/
    speech_asr/common_voice/                (only the 80 kept Common Voice clips, stage 2)
    kws/speech_commands/speech_commands_v0.02.tar.gz + speech_commands_v0.02/<word>/*.wav
    checks/download_progress.json           (one entry per completed file)

Mirrors: every corpus has a default base URL; the file URL is ``<base>/<file name>``. The base is
taken, in this order, from the ``base_urls`` argument, ``$AIP_MIRROR_<CORPUS>`` (e.g.
``AIP_MIRROR_LIBRISPEECH``), ``$AIP_MIRROR/<corpus>`` (one root holding a folder per corpus, which
is what ``make 01 PROFILE=paper MIRROR=...`` sets) and the publisher's URL. A mirror must serve the
original bytes: published checksums are still checked.

Sources and licences
--------------------
.. [1] K. J. Piczak, "ESC: Dataset for Environmental Sound Classification", ACM Multimedia 2015.
   github.com/karolpiczak/ESC-50. CC BY-NC 3.0 (clips from freesound.org).
.. [2] C. K. A. Reddy et al., "A scalable noisy speech dataset and online subjective test
   framework", Interspeech 2019. github.com/microsoft/MS-SNSD. Code MIT; noise clips from
   Freesound (CC0 1.0) and DEMAND (CC BY-SA 3.0).
.. [3] A. Varga and H. J. M. Steeneken, "Assessment for automatic speech recognition: II.
   NOISEX-92", Speech Communication 12(3), 1993. No explicit licence; the original Rice SPIB page is
   gone, so the default is a public GitHub mirror (github.com/speechdnn/Noises, ``NoiseX-92/``).
.. [4] D. Snyder, G. Chen and D. Povey, "MUSAN: A Music, Speech, and Noise Corpus",
   arXiv:1510.08484, 2015. openslr.org/17. CC BY 4.0 (per-file terms in each folder's LICENSE).
.. [5] V. Panayotov, G. Chen, D. Povey and S. Khudanpur, "Librispeech: an ASR corpus based on
   public domain audio books", ICASSP 2015. openslr.org/12. CC BY 4.0.
.. [6] P. Warden, "Speech Commands: A Dataset for Limited-Vocabulary Speech Recognition",
   arXiv:1804.03209, 2018. CC BY 4.0.
.. [7] R. Ardila et al., "Common Voice: A Massively-Multilingual Speech Corpus", LREC 2020.
   Common Voice 17.0 via the Hugging Face mirror ``fsicoli/common_voice_17_0``. CC0 1.0.
"""
from __future__ import annotations

import dataclasses
import io
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..audio import SR, load_audio, write_wav
from ..download import DownloadError, fetch, set_cache_env
from ..errors import AiplibError, AiplibParameterError, MissingPackageError
from ..jsonl import read_jsonl, write_jsonl

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = [
    "DownloadError", "CorpusError", "RemoteFile", "Corpus", "CORPORA", "corpus_dir", "base_url_for",
    "download_corpus", "download_all", "download_esc50", "download_ms_snsd", "download_noisex92",
    "download_musan", "download_librispeech", "download_speech_commands",
    "prepare_esc50", "prepare_ms_snsd", "prepare_musan", "prepare_librispeech",
    "prepare_speech_commands", "KEYWORDS", "CV_DATASET", "CV_ACCENT_GROUPS", "CV_ALLOCATION",
    "accent_group", "load_common_voice", "select_common_voice", "build_item_banks",
    "build_item_banks_paper", "BATTERY", "battery_specs", "battery_specs_paper", "set_cache_env",
    "N_LIBRISPEECH", "N_COMMON_VOICE", "N_KWS_PER_KEYWORD", "N_KWS_NONTARGET",
]


class CorpusError(AiplibError):
    """A corpus is missing, incomplete, or too small for the paper's selection (a shortfall)."""


# ============================================================================================
# registry (data, not code)
# ============================================================================================
@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One file of a corpus.

    Attributes
    ----------
    name : str
        File name at the base URL and on disk.
    md5, sha256 : str or None
        Published (or pinned) digests; ``None`` when the publisher gives none (then the announced
        size is checked and the SHA-256 recorded in ``checks/download_progress.json``).
    approx_gb : float
        Approximate size in GB (documentation and planning only; never checked).
    extract_subdir : str or None
        Folder (relative to the corpus folder) to extract into; ``""`` = the corpus folder itself;
        ``None`` = not an archive.
    """

    name: str
    md5: str | None = None
    sha256: str | None = None
    approx_gb: float = 0.0
    extract_subdir: str | None = ""


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A downloadable corpus: where it comes from, where it goes, its licence.

    Attributes
    ----------
    name : str
        Registry key, also the folder name and the ``AIP_MIRROR_<NAME>`` suffix.
    title : str
    kind : str
        Workspace sub-folder: ``backgrounds``, ``speech_asr`` or ``kws``.
    base_url : str
        Publisher's base URL (files are fetched from ``<base_url>/<file.name>``).
    files : tuple of RemoteFile
    licence, attribution, homepage : str
    extract_factor : float
        Extracted size / archive size, for the disk-space check.
    notes : str
    """

    name: str
    title: str
    kind: str
    base_url: str
    files: tuple
    licence: str
    attribution: str
    homepage: str
    extract_factor: float = 1.1
    notes: str = ""

    @property
    def env_var(self) -> str:
        """Name of the environment variable holding this corpus's mirror base URL."""
        return f"AIP_MIRROR_{self.name.upper()}"


CORPORA: dict[str, Corpus] = {
    "esc50": Corpus(
        name="esc50", title="ESC-50", kind="backgrounds",
        base_url="https://github.com/karoldvl/ESC-50/archive",
        files=(RemoteFile("master.zip", approx_gb=0.65),),
        licence="CC BY-NC 3.0", homepage="https://github.com/karolpiczak/ESC-50",
        attribution="K. J. Piczak, ESC: Dataset for Environmental Sound Classification, ACM MM 2015",
        notes="GitHub archive of the master branch: no published checksum and no range support "
              "(an interrupted download restarts); the SHA-256 is recorded."),
    "ms_snsd": Corpus(
        name="ms_snsd", title="MS-SNSD", kind="backgrounds",
        base_url="https://github.com/microsoft/MS-SNSD/archive",
        files=(RemoteFile("master.zip", approx_gb=2.5),),
        licence="noise: CC0 1.0 (Freesound) or CC BY-SA 3.0 (DEMAND); code MIT",
        homepage="https://github.com/microsoft/MS-SNSD",
        attribution="C. K. A. Reddy et al., A scalable noisy speech dataset and online subjective "
                    "test framework, Interspeech 2019",
        notes="The GitHub archive zip of the repository (rather than `git clone`): testable offline "
              "and resumable by mirrors that support ranges; no published checksum."),
    "noisex92": Corpus(
        name="noisex92", title="NOISEX-92 babble", kind="backgrounds",
        base_url="https://raw.githubusercontent.com/speechdnn/Noises/master/NoiseX-92",
        files=(RemoteFile("babble.wav", approx_gb=0.01, extract_subdir=None),),
        licence="no explicit licence (NOISEX-92 database, research use)",
        homepage="https://github.com/speechdnn/Noises",
        attribution="A. Varga and H. J. M. Steeneken, Assessment for automatic speech recognition II: "
                    "NOISEX-92, Speech Communication 12(3), 1993",
        extract_factor=0.0,
        notes="A public mirror (the original Rice SPIB site is gone); override with "
              "AIP_MIRROR_NOISEX92 if it moves."),
    "musan": Corpus(
        name="musan", title="MUSAN", kind="backgrounds",
        base_url="https://www.openslr.org/resources/17",
        files=(RemoteFile("musan.tar.gz", md5="0c472d4fc0c5141eca47ad1ffeb2a7df", approx_gb=11.0),),
        licence="CC BY 4.0 (per-file terms in each folder's LICENSE)", homepage="https://www.openslr.org/17/",
        attribution="D. Snyder, G. Chen and D. Povey, MUSAN: A Music, Speech, and Noise Corpus, "
                    "arXiv:1510.08484, 2015"),
    "librispeech": Corpus(
        name="librispeech", title="LibriSpeech test-clean and test-other", kind="speech_asr",
        base_url="https://www.openslr.org/resources/12",
        files=(RemoteFile("test-clean.tar.gz", md5="32fa31d27d2e1cad72775fee3f4849a9", approx_gb=0.35),
               RemoteFile("test-other.tar.gz", md5="fb5a50374b501bb3bac4815ee91d3135", approx_gb=0.33)),
        licence="CC BY 4.0", homepage="https://www.openslr.org/12/",
        attribution="V. Panayotov et al., Librispeech: an ASR corpus based on public domain audio "
                    "books, ICASSP 2015"),
    "speech_commands": Corpus(
        name="speech_commands", title="Google Speech Commands v0.02", kind="kws",
        base_url="http://download.tensorflow.org/data",
        files=(RemoteFile("speech_commands_v0.02.tar.gz",
                          sha256="af14739ee7dc311471de98f5f9d2c9191b18aedfe957f4a6ff791c709868ff58",
                          approx_gb=2.4, extract_subdir="speech_commands_v0.02"),),
        licence="CC BY 4.0", homepage="https://arxiv.org/abs/1804.03209",
        attribution="P. Warden, Speech Commands: A Dataset for Limited-Vocabulary Speech Recognition, "
                    "arXiv:1804.03209, 2018",
        notes="The publisher gives no checksum; the SHA-256 is the one pinned by torchaudio's "
              "SPEECHCOMMANDS loader. The archive has no top folder, so it is extracted into "
              "speech_commands_v0.02/."),
}
"""The corpora of stage 1, keyed by name (the folder name and mirror-variable suffix)."""


def _registry(registry):
    return CORPORA if registry is None else registry


def _get(name: str, registry=None) -> Corpus:
    reg = _registry(registry)
    if name not in reg:
        raise KeyError(f"unknown corpus {name!r}; valid names: {', '.join(sorted(reg))}")
    return reg[name]


def _kind_dir(ws, kind: str) -> Path:
    """``<ws.root>/<kind>``: the one place that decides where the paper's raw corpora live."""
    return Path(ws.root) / kind


def corpus_dir(ws, name: str, *, registry=None) -> Path:
    """Folder of corpus ``name`` in workspace ``ws``: ``<ws.root>/<kind>/<name>``.

    Raises
    ------
    KeyError
        If ``name`` is not in the registry (the message lists the valid names).
    """
    c = _get(name, registry)
    return _kind_dir(ws, c.kind) / c.name


def base_url_for(name: str, base_urls=None, *, registry=None) -> str:
    """Base URL of corpus ``name``: argument > ``$AIP_MIRROR_<NAME>`` > ``$AIP_MIRROR/<name>`` > default.

    Parameters
    ----------
    name : str
    base_urls : dict or str, optional
        ``{name: base_url}``, or one string used as ``$AIP_MIRROR`` would be (``<root>/<name>``).

    Returns
    -------
    str without a trailing slash.
    """
    c = _get(name, registry)
    if isinstance(base_urls, str):
        return base_urls.rstrip("/") + "/" + name
    if base_urls and base_urls.get(name):
        return base_urls[name].rstrip("/")
    if os.environ.get(c.env_var):
        return os.environ[c.env_var].rstrip("/")
    if os.environ.get("AIP_MIRROR"):
        return os.environ["AIP_MIRROR"].rstrip("/") + "/" + name
    return c.base_url.rstrip("/")


def _mirror_hint(c: Corpus) -> str:
    return (f"To use a mirror, set {c.env_var}=<base URL holding {', '.join(f.name for f in c.files)}> "
            f"(or AIP_MIRROR=<root URL with one folder per corpus>, or pass base_urls/--base-url), "
            f"e.g. `make 01 PROFILE=paper MIRROR=https://my.mirror/aip-corpora`.")


# ============================================================================================
# stage 1: downloads
# ============================================================================================
def download_corpus(name: str, target_dir, *, base_url: str | None = None, force_download: bool = False,
                    progress_file=None, registry=None, **kwargs) -> Path:
    """Download, verify and extract every file of corpus ``name`` into ``target_dir``.

    Parameters
    ----------
    name : str
        A key of :data:`CORPORA` (or of ``registry``).
    target_dir : str or Path
        The corpus folder (archives are kept there, next to the extracted data).
    base_url : str, optional
        Overrides the mirror resolution of :func:`base_url_for`.
    force_download : bool
        Download and extract again even when complete.
    progress_file : str or Path, optional
        ``checks/download_progress.json``; completed files recorded there are skipped.
    registry : dict, optional
        Replacement for :data:`CORPORA` (tests, private mirrors with other checksums).
    **kwargs
        Passed to :func:`aiplib.download.fetch` (``retries``, ``timeout``, ``progress``).

    Returns
    -------
    Path
        ``target_dir``.

    Raises
    ------
    KeyError
        Unknown corpus.
    DownloadError
        Unreachable URL (the message names it and says how to use a mirror), checksum mismatch,
        unsafe archive or too little disk space.
    """
    c = _get(name, registry)
    target_dir = Path(target_dir)
    base = (base_url.rstrip("/") if base_url else base_url_for(name, registry=registry))
    for f in c.files:
        fetch(f"{base}/{f.name}", target_dir / f.name, key=f"{name}/{f.name}",
              extract_to=None if f.extract_subdir is None else target_dir / f.extract_subdir,
              md5=f.md5, sha256=f.sha256, progress_file=progress_file,
              extract_factor=c.extract_factor, hint=_mirror_hint(c), force=force_download, **kwargs)
    return target_dir


def _doc_download(name):
    c = CORPORA[name]

    def fn(target_dir, *, base_url=None, force_download=False, progress_file=None, registry=None, **kwargs):
        return download_corpus(name, target_dir, base_url=base_url, force_download=force_download,
                               progress_file=progress_file, registry=registry, **kwargs)

    fn.__name__ = fn.__qualname__ = f"download_{name}"
    fn.__doc__ = f"""Download {c.title} into ``target_dir`` (see :func:`download_corpus`).

    Files: {', '.join(f.name for f in c.files)} from ``{c.base_url}`` (mirror: ``${c.env_var}``).
    {c.notes}

    Source: {c.attribution}. {c.homepage}. Licence: {c.licence}.

    Parameters
    ----------
    target_dir : str or Path
    base_url : str, optional
    force_download : bool
    progress_file : str or Path, optional
    registry : dict, optional

    Returns
    -------
    Path

    Raises
    ------
    DownloadError
    """
    return fn


download_esc50 = _doc_download("esc50")
download_ms_snsd = _doc_download("ms_snsd")
download_noisex92 = _doc_download("noisex92")
download_musan = _doc_download("musan")
download_librispeech = _doc_download("librispeech")
download_speech_commands = _doc_download("speech_commands")


def download_all(ws, corpora=None, base_urls=None, *, force_download: bool = False, registry=None,
                 **kwargs) -> dict:
    """Stage 1 of ``paper``: download every corpus (or those named) into the workspace.

    Each corpus is tried even when an earlier one failed; files already complete are skipped
    (``checks/download_progress.json``), partial files are resumed, nothing is deleted. The caches
    are pointed into ``models/cache/`` first (:func:`set_cache_env`).

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    corpora : list of str, optional
        Names from :data:`CORPORA`; default all.
    base_urls : dict or str, optional
        ``{name: base_url}``, or one mirror root holding a folder per corpus.
    force_download : bool
    registry : dict, optional
        Replacement for :data:`CORPORA`.
    **kwargs
        Passed to :func:`aiplib.download.fetch`.

    Returns
    -------
    dict
        ``{name: Path of the corpus folder}``.

    Raises
    ------
    KeyError
        Unknown corpus name.
    DownloadError
        After trying all corpora, when any failed; the message lists every failure with its URL
        and how to use a mirror.
    """
    set_cache_env()
    reg = _registry(registry)
    names = list(reg) if corpora is None else list(corpora)
    for n in names:
        _get(n, reg)
    progress_file = Path(ws.root) / "checks" / "download_progress.json"
    out, errors = {}, []
    for n in names:
        try:
            out[n] = download_corpus(n, corpus_dir(ws, n, registry=reg),
                                     base_url=base_url_for(n, base_urls, registry=reg),
                                     force_download=force_download, progress_file=progress_file,
                                     registry=reg, **kwargs)
        except DownloadError as exc:
            errors.append((n, exc))
    if errors:
        if len(errors) == 1:
            raise errors[0][1]
        lines = "\n".join(f"- {n}: {e.url}: {e.reason}" if e.url else f"- {n}: {e}" for n, e in errors)
        net = [n for n, e in errors if e.url]
        hint = ""
        if net:
            hint = (f"\nFiles already downloaded are kept and partial files are resumed on the next run. "
                    f"To use a mirror, set AIP_MIRROR_<CORPUS>=<base URL> (here "
                    f"{', '.join(_get(n, reg).env_var for n in net)}), or AIP_MIRROR=<root URL with one "
                    f"folder per corpus>, or pass base_urls / --base-url, e.g. "
                    f"`make 01 PROFILE=paper MIRROR=https://my.mirror/aip-corpora`.")
        raise DownloadError(f"{len(errors)} of {len(names)} corpora could not be downloaded:\n{lines}{hint}")
    return out


# ============================================================================================
# corpus readers (lhotse-style prepare_x)
# ============================================================================================
def _need_dir(path: Path, corpus: str) -> Path:
    if not path.is_dir():
        raise CorpusError(f"{corpus} not found at {path}; run stage 1 (notebook 01, `make 01 PROFILE=paper`)")
    return path


def prepare_esc50(corpus_dir) -> pandas.DataFrame:
    """Read ESC-50's ``meta/esc50.csv`` [1]_.

    Parameters
    ----------
    corpus_dir : str or Path
        The corpus folder holding ``ESC-50-master/``.

    Returns
    -------
    pandas.DataFrame
        ``filename, fold, target, category, esc10, src_file, take, path`` (``path`` absolute).

    Raises
    ------
    CorpusError
        If the folder or the metadata file is missing.
    """
    import pandas as pd

    root = _need_dir(Path(corpus_dir) / "ESC-50-master", "ESC-50")
    meta = root / "meta" / "esc50.csv"
    if not meta.is_file():
        raise CorpusError(f"ESC-50 metadata {meta} is missing; run stage 1 again with force_download=True")
    df = pd.read_csv(meta, dtype={"src_file": str, "take": str})
    df["path"] = [str(root / "audio" / f) for f in df["filename"]]
    return df


def prepare_ms_snsd(corpus_dir) -> pandas.DataFrame:
    """List MS-SNSD's noise files [2]_.

    Returns
    -------
    pandas.DataFrame
        ``split`` (``noise_train``/``noise_test``), ``noise_type`` (``AirConditioner`` …),
        ``index`` (int), ``path``; sorted.

    Raises
    ------
    CorpusError
        If the corpus folder is missing.
    """
    import pandas as pd

    root = _need_dir(Path(corpus_dir) / "MS-SNSD-master", "MS-SNSD")
    rows = []
    for split in ("noise_train", "noise_test"):
        for p in sorted((root / split).glob("*.wav")):
            m = re.match(r"(.+?)_(\d+)$", p.stem)
            rows.append({"split": split, "noise_type": m.group(1) if m else p.stem,
                         "index": int(m.group(2)) if m else 0, "path": str(p)})
    return pd.DataFrame(rows, columns=["split", "noise_type", "index", "path"])


def prepare_musan(corpus_dir) -> pandas.DataFrame:
    """List MUSAN's recordings [4]_.

    Returns
    -------
    pandas.DataFrame
        ``subset`` (music/speech/noise), ``source`` (fma, librivox …), ``rec_id``, ``path``.

    Raises
    ------
    CorpusError
        If the corpus folder is missing.
    """
    import pandas as pd

    root = _need_dir(Path(corpus_dir) / "musan", "MUSAN")
    rows = [{"subset": p.parent.parent.name, "source": p.parent.name, "rec_id": p.stem, "path": str(p)}
            for p in sorted(root.glob("*/*/*.wav"))]
    return pd.DataFrame(rows, columns=["subset", "source", "rec_id", "path"])


def prepare_librispeech(corpus_dir, parts=("test-clean", "test-other"), *,
                        with_duration: bool = True) -> pandas.DataFrame:
    """Read LibriSpeech utterances and transcripts [5]_.

    Parameters
    ----------
    corpus_dir : str or Path
        Folder holding ``LibriSpeech/<part>/<speaker>/<chapter>/``.
    parts : sequence of str
    with_duration : bool
        Read each file's header for ``duration_s``.

    Returns
    -------
    pandas.DataFrame
        ``utt_id, part, speaker, chapter, text, path, duration_s`` (s), sorted by part and id.

    Raises
    ------
    CorpusError
        If a part's folder is missing.
    """
    import pandas as pd
    import soundfile as sf

    rows = []
    for part in parts:
        proot = _need_dir(Path(corpus_dir) / "LibriSpeech" / part, f"LibriSpeech {part}")
        for trans in sorted(proot.glob("*/*/*.trans.txt")):
            for line in trans.read_text(encoding="utf-8").splitlines():
                if not line.strip():
                    continue
                utt, _, text = line.strip().partition(" ")
                audio = trans.parent / f"{utt}.flac"
                if not audio.is_file():
                    continue
                spk, chap, _ = utt.split("-")
                rows.append({"utt_id": utt, "part": part, "speaker": spk, "chapter": chap, "text": text,
                             "path": str(audio),
                             "duration_s": float(sf.info(str(audio)).duration) if with_duration else np.nan})
    return pd.DataFrame(rows, columns=["utt_id", "part", "speaker", "chapter", "text", "path", "duration_s"])


KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
"""The ten Speech Commands keywords (targets)."""


def prepare_speech_commands(corpus_dir, *, split: str | None = "test") -> pandas.DataFrame:
    """List Speech Commands v0.02 clips [6]_.

    Parameters
    ----------
    corpus_dir : str or Path
        Folder holding ``speech_commands_v0.02/``.
    split : {"test", "validation", "train", None}
        ``test``/``validation`` use ``testing_list.txt``/``validation_list.txt``; ``train`` is the
        rest; ``None`` keeps every clip. ``_background_noise_`` is always left out.

    Returns
    -------
    pandas.DataFrame
        ``label, speaker, rel, path, is_target``, sorted by ``rel``.

    Raises
    ------
    CorpusError
        If the folder or the list file needed for ``split`` is missing.
    """
    import pandas as pd

    root = _need_dir(Path(corpus_dir) / "speech_commands_v0.02", "Speech Commands v0.02")
    rels = sorted(p.relative_to(root).as_posix() for p in root.glob("*/*.wav")
                  if p.parent.name != "_background_noise_")
    if split is not None:
        lists = {"test": "testing_list.txt", "validation": "validation_list.txt"}
        if split in lists:
            lf = root / lists[split]
            if not lf.is_file():
                raise CorpusError(f"Speech Commands list {lf} is missing; run stage 1 again")
            keep = set(lf.read_text(encoding="utf-8").split())
            rels = [r for r in rels if r in keep]
        elif split == "train":
            held = set()
            for name in ("testing_list.txt", "validation_list.txt"):
                if (root / name).is_file():
                    held |= set((root / name).read_text(encoding="utf-8").split())
            rels = [r for r in rels if r not in held]
        else:
            raise AiplibParameterError(f"split must be test, validation, train or None, got {split!r}")
    rows = [{"label": r.split("/")[0], "speaker": Path(r).stem.split("_nohash_")[0], "rel": r,
             "path": str(root / r), "is_target": r.split("/")[0] in KEYWORDS} for r in rels]
    return pd.DataFrame(rows, columns=["label", "speaker", "rel", "path", "is_target"])


# ============================================================================================
# stage 2: Common Voice (streamed)
# ============================================================================================
CV_DATASET = "fsicoli/common_voice_17_0"
"""Hugging Face id of the Common Voice 17.0 mirror streamed in stage 2 (config ``en``)."""

CV_ACCENT_GROUPS = {
    "United States": ("united states",),
    "England": ("england",),
    "India and South Asia": ("india and south asia", "india", "pakistan", "sri lanka", "bangladesh"),
    "Australia": ("australia",),
    "Canada": ("canad",),
    "Scotland": ("scottish", "scotland"),
    "Ireland": ("irish", "ireland"),
    "Southern Africa": ("southern africa", "south africa", "zimbabwe", "namibia"),
    "New Zealand": ("new zealand",),
    "Philippines": ("filipino", "philippin"),
    "Hong Kong, Singapore and Malaysia": ("hong kong", "singapor", "malaysia"),
}
"""The 11 accent groups: group name → lower-case substrings of Common Voice 17's free-text
``accent(s)`` field (e.g. "United States English", "India and South Asia (India, Pakistan, Sri
Lanka)", "Southern African (South Africa, Zimbabwe, Namibia)", "Hong Kong English"). A value that
matches two groups (a speaker listing several accents) or none is not used."""

CV_ALLOCATION = {g: 7 for g in CV_ACCENT_GROUPS}
CV_ALLOCATION.update({"United States": 8, "England": 8, "India and South Asia": 8})
"""Clips per accent group: 7 each, plus one for the three largest groups = 80."""

N_LIBRISPEECH = 100
"""LibriSpeech utterances in the ASR bank: 50 test-clean + 50 test-other."""
N_COMMON_VOICE = 80
"""Accent-labelled Common Voice 17 clips in the ASR bank (:data:`CV_ALLOCATION`)."""
N_KWS_PER_KEYWORD = 10
"""Target clips per keyword (10 keywords → 100 targets)."""
N_KWS_NONTARGET = 13
"""Non-target clips, one each from 13 different non-keyword words: 100 + 13 = the paper's 113."""


def accent_group(value) -> str | None:
    """Map a Common Voice ``accent``/``accents`` value to one of :data:`CV_ACCENT_GROUPS`.

    Parameters
    ----------
    value : str or None

    Returns
    -------
    str or None
        The group name, or ``None`` when the value is empty, unknown or matches several groups.
    """
    if not value or not isinstance(value, str):
        return None
    v = value.lower()
    hits = {g for g, keys in CV_ACCENT_GROUPS.items() if any(k in v for k in keys)}
    return hits.pop() if len(hits) == 1 else None


def load_common_voice(*, split: str = "test", dataset_id: str = CV_DATASET, config: str = "en",
                      seed: int | None = None, buffer_size: int = 2000):
    """Stream Common Voice 17 (English) from the Hugging Face hub [7]_.

    ``datasets`` is imported here only. Audio is left undecoded (``Audio(decode=False)``) so that
    records of unwanted accents cost no decoding; :func:`select_common_voice` decodes kept ones.

    Parameters
    ----------
    split : str
    dataset_id, config : str
    seed : int, optional
        When given, the stream is shuffled with a seeded buffer of ``buffer_size`` records.
    buffer_size : int > 0

    Returns
    -------
    datasets.IterableDataset
        Records with ``client_id, path, audio, sentence, up_votes, down_votes, accent(s) …``.

    Raises
    ------
    MissingPackageError
        If ``datasets`` is not installed.
    AiplibError
        If the hub cannot be reached or refuses the data set (gated: accept its terms and
        ``huggingface-cli login``).
    """
    set_cache_env()
    try:
        import datasets
    except ImportError:
        raise MissingPackageError("stage 2 of the paper profile streams Common Voice with Hugging Face "
                                  "`datasets`; install it with `pip install datasets`") from None
    try:
        try:
            ds = datasets.load_dataset(dataset_id, config, split=split, streaming=True, trust_remote_code=True)
        except TypeError:
            ds = datasets.load_dataset(dataset_id, config, split=split, streaming=True)
    except Exception as exc:  # network, gating, script support: all end here
        raise AiplibError(f"cannot stream {dataset_id} ({config}, {split}) from the Hugging Face hub: {exc}. "
                          f"Check the network or HF_ENDPOINT, accept the data set's terms on its hub page "
                          f"and log in with `huggingface-cli login`.") from None
    try:
        ds = ds.cast_column("audio", datasets.Audio(decode=False))
    except Exception:
        pass
    if seed is not None and hasattr(ds, "shuffle"):
        ds = ds.shuffle(seed=seed, buffer_size=buffer_size)
    return ds


def _resample(y: np.ndarray, sr: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float32)
    if y.ndim > 1:
        y = y.mean(axis=-1) if y.shape[-1] <= 8 else y.mean(axis=0)
    if sr != SR:
        import librosa

        y = librosa.resample(y, orig_sr=sr, target_sr=SR, res_type="soxr_hq")
    return np.ascontiguousarray(y, dtype=np.float32)


def _cv_audio(record):
    """→ (y at 16 kHz, original bytes or None, original file name, native array, native sr)."""
    import soundfile as sf

    a = record.get("audio")
    name = Path(str((a or {}).get("path") or record.get("path") or "clip.wav")).name
    if isinstance(a, dict) and a.get("array") is not None:
        arr = np.asarray(a["array"], dtype=np.float32)
        if arr.ndim > 1:  # (n, channels) or (channels, n) → mono
            arr = arr.mean(axis=-1) if arr.shape[-1] <= 8 else arr.mean(axis=0)
        sr = int(a["sampling_rate"])
        return _resample(arr, sr), a.get("bytes"), name, arr, sr
    if isinstance(a, dict) and a.get("bytes"):
        raw = a["bytes"]
        try:
            arr, sr = sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)
            arr = arr.mean(axis=1)
            return _resample(arr, sr), raw, name, arr, sr
        except Exception:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                p = Path(tmp) / name
                p.write_bytes(raw)
                return load_audio(p), raw, name, None, None
    path = (a or {}).get("path") if isinstance(a, dict) else (a if isinstance(a, str) else None)
    if path and Path(path).is_file():
        return load_audio(path), Path(path).read_bytes(), name, None, None
    raise CorpusError(f"Common Voice record {record.get('path')!r} carries no audio")


def select_common_voice(dataset, out_dir, *, seed: int = 0, allocation=None, pool_factor: int = 3,
                        max_per_speaker: int = 1, min_duration_s: float = 1.0,
                        max_duration_s: float = 15.0) -> list:
    """Pick accent-labelled Common Voice clips from a stream and save the kept originals.

    The stream is read once. A record is a candidate when its accent maps to exactly one group
    (:func:`accent_group`), its sentence is not empty, it has no more down- than up-votes, it
    lasts ``min_duration_s``–``max_duration_s`` and its speaker has fewer than ``max_per_speaker``
    candidates. Reading stops when every group holds ``pool_factor × allocation`` candidates (or
    the stream ends); then ``allocation[g]`` clips per group are drawn with a seeded generator.

    Parameters
    ----------
    dataset : iterable of dict
        A Hugging Face ``IterableDataset`` or any iterable of records with ``audio`` (dict with
        ``array`` + ``sampling_rate``, or ``bytes``/``path``), ``sentence``, ``client_id``,
        ``path`` and ``accent`` or ``accents`` (duck typing; tests use a list of dicts).
    out_dir : str or Path
        Where the kept originals are saved (``data/paper/speech_asr/common_voice/``).
    seed : int
    allocation : dict, optional
        Group → number of clips; default :data:`CV_ALLOCATION` (80).
    pool_factor : int >= 1
    max_per_speaker : int >= 1
    min_duration_s, max_duration_s : float, s

    Returns
    -------
    list of dict
        One per kept clip: ``item_id, y`` (np.ndarray [shape=(n,)], float32, 16 kHz), ``text``,
        ``speaker``, ``accent_group``, ``accent`` (raw), ``source_file`` (saved original).

    Raises
    ------
    CorpusError
        When a group has fewer usable clips than allocated; the message lists every short group
        with the numbers found and needed.
    """
    allocation = dict(CV_ALLOCATION if allocation is None else allocation)
    for g in allocation:
        if g not in CV_ACCENT_GROUPS:
            raise KeyError(f"unknown accent group {g!r}; valid: {', '.join(CV_ACCENT_GROUPS)}")
    cap = {g: n * max(1, pool_factor) for g, n in allocation.items()}
    pools: dict[str, list] = defaultdict(list)
    per_speaker: dict[str, int] = defaultdict(int)
    for rec in dataset:
        raw_accent = rec.get("accent") or rec.get("accents")
        g = accent_group(raw_accent)
        if g is None or g not in cap or len(pools[g]) >= cap[g]:
            continue
        text = (rec.get("sentence") or "").strip()
        if not text:
            continue
        up, down = rec.get("up_votes"), rec.get("down_votes")
        if up is not None and down is not None and int(down) > int(up):
            continue
        spk = str(rec.get("client_id") or "")
        if per_speaker[spk] >= max_per_speaker:
            continue
        y, raw, name, arr, sr = _cv_audio(rec)
        dur = y.size / SR
        if not (min_duration_s <= dur <= max_duration_s):
            continue
        per_speaker[spk] += 1
        pools[g].append({"y": y, "raw": raw, "name": name, "arr": arr, "sr": sr, "text": text,
                         "speaker": spk, "accent": raw_accent, "accent_group": g})
        if all(len(pools[k]) >= cap[k] for k in cap):
            break
    short = [f"{g}: {len(pools[g])} usable clip(s), {n} needed" for g, n in allocation.items()
             if len(pools[g]) < n]
    if short:
        raise CorpusError("Common Voice has too few usable clips for the paper's accent groups — "
                          + "; ".join(short) + ". Use another split (split='validation') or a "
                          "smaller allocation.")
    rng = np.random.default_rng(seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = []
    for g, n in allocation.items():
        pool = sorted(pools[g], key=lambda c: c["name"])
        for i in sorted(rng.choice(len(pool), size=n, replace=False)):
            c = pool[int(i)]
            stem = Path(c["name"]).stem
            if c["raw"]:
                src = out_dir / c["name"]
                src.write_bytes(c["raw"])
            elif c["arr"] is not None:
                src = write_wav(out_dir / f"{stem}.wav", c["arr"], sr=c["sr"])
            else:
                src = write_wav(out_dir / f"{stem}.wav", c["y"])
            kept.append({"item_id": f"cv_{stem}", "y": c["y"], "text": c["text"], "speaker": c["speaker"],
                         "accent_group": g, "accent": c["accent"], "source_file": src})
    return kept


# ============================================================================================
# stage 2: item banks
# ============================================================================================
def _spread(df, n: int, rng, *, key: str, by: str = "speaker"):
    """Seeded selection of ``n`` rows spread over ``by`` (round-robin over shuffled groups).

    Rows are first put in ``key`` order so the result depends only on the data and ``rng``.
    """
    df = df.sort_values(key).reset_index(drop=True)
    order = rng.permutation(len(df))
    df = df.iloc[order].reset_index(drop=True)
    df["_rank"] = df.groupby(by).cumcount()
    df["_pos"] = np.arange(len(df))
    return df.sort_values(["_rank", "_pos"]).head(n).drop(columns=["_rank", "_pos"])






def build_item_banks(ws, *, seed: int = 0, cv_dataset=None, n_librispeech: int = N_LIBRISPEECH,
                     cv_allocation=None, n_per_keyword: int = N_KWS_PER_KEYWORD,
                     n_nontarget: int = N_KWS_NONTARGET, min_duration_s: float = 1.0,
                     max_duration_s: float = 20.0, overwrite: bool = False, registry=None) -> dict:
    """Stage 2 of ``paper``: write ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl``.

    * ASR (180 items): ``n_librispeech`` LibriSpeech utterances [5]_, half test-clean and half
      test-other, spread over speakers, ``min_duration_s``–``max_duration_s`` long; plus 80
      accent-labelled Common Voice 17 clips [7]_ over 11 accent groups (:data:`CV_ALLOCATION`),
      streamed, with only the kept originals saved under ``speech_asr/common_voice/``.
    * KWS (113 items): from the Speech Commands v0.02 test list [6]_, ``n_per_keyword`` clips of
      each of the 10 keywords from different speakers (100 targets) and ``n_nontarget`` clips of
      13 different non-keywords, one each (13 non-targets).

    Selection is seeded (``numpy.random.default_rng(seed)``); the counts are asserted. Item audio is
    written as 16 kHz mono float32 WAV to ``itembanks/audio/<family>/<item_id>.wav``. Fields follow
    ``docs/ARCHITECTURE.md``. When both files exist and ``overwrite`` is false they are read back.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    seed : int
    cv_dataset : iterable of dict, optional
        The Common Voice stream; default :func:`load_common_voice` (needs ``datasets`` and the hub).
    n_librispeech : int > 0, even
    cv_allocation : dict, optional
        Group → clips; default :data:`CV_ALLOCATION`.
    n_per_keyword, n_nontarget : int > 0
    min_duration_s, max_duration_s : float, s
        LibriSpeech duration limits (the backgrounds are 30 s long).
    overwrite : bool
    registry : dict, optional
        Replacement for :data:`CORPORA` (only its kinds/names are used, for the folders).

    Returns
    -------
    dict
        ``{"asr": pandas.DataFrame, "kws": pandas.DataFrame}``.

    Raises
    ------
    CorpusError
        A corpus is missing (run stage 1) or too small for the counts (a shortfall), naming what
        is short.
    MissingPackageError
        ``cv_dataset`` not given and ``datasets`` not installed.
    """
    import pandas as pd

    ib = Path(ws.root) / "itembanks"
    asr_path, kws_path = ib / "asr.jsonl", ib / "kws.jsonl"
    if not overwrite and asr_path.is_file() and kws_path.is_file():
        return {"asr": pd.DataFrame(read_jsonl(asr_path)), "kws": pd.DataFrame(read_jsonl(kws_path))}
    rng = np.random.default_rng(seed)
    audio_dir = ib / "audio"
    if n_librispeech % 2:
        raise AiplibParameterError(f"n_librispeech must be even (half test-clean, half test-other), got {n_librispeech}")

    # ---- select (metadata only: nothing is written before every count is met) ----------------
    ls = prepare_librispeech(corpus_dir(ws, "librispeech", registry=registry))
    ls = ls[(ls.duration_s >= min_duration_s) & (ls.duration_s <= max_duration_s)]
    sc = prepare_speech_commands(corpus_dir(ws, "speech_commands", registry=registry), split="test")
    short, ls_sel, kws_sel = [], [], []
    for part in ("test-clean", "test-other"):
        cand = ls[ls.part == part]
        need = n_librispeech // 2
        if len(cand) < need:
            short.append(f"LibriSpeech {part}: {len(cand)} utterances of {min_duration_s}–{max_duration_s} s, "
                         f"{need} needed")
        else:
            ls_sel.append(_spread(cand, need, rng, key="utt_id").sort_values("utt_id"))
    for kw in KEYWORDS:
        cand = sc[sc.label == kw]
        if cand.speaker.nunique() < n_per_keyword:
            short.append(f"Speech Commands keyword {kw!r}: {cand.speaker.nunique()} speakers in the test "
                         f"list, {n_per_keyword} needed")
        else:
            kws_sel.append(_spread(cand, n_per_keyword, rng, key="rel"))
    words = sorted(set(sc.label[~sc.is_target]))
    if len(words) < n_nontarget:
        short.append(f"Speech Commands non-targets: {len(words)} non-keyword words, {n_nontarget} needed")
    if short:
        raise CorpusError("the corpora are too small for the paper's item banks — " + "; ".join(short))
    for w in sorted(rng.choice(words, size=n_nontarget, replace=False)):
        cand = sc[sc.label == w].sort_values("rel")
        kws_sel.append(cand.iloc[[int(rng.integers(len(cand)))]])
    allocation = dict(CV_ALLOCATION if cv_allocation is None else cv_allocation)
    if cv_dataset is None:
        cv_dataset = load_common_voice(seed=seed)
    cv_dir = _kind_dir(ws, "speech_asr") / "common_voice"
    cv_kept = select_common_voice(cv_dataset, cv_dir, seed=seed, allocation=allocation)

    # ---- write item audio and rows ------------------------------------------------------------
    def item(family, item_id, y, **fields):
        out = write_wav(audio_dir / family / f"{item_id}.wav", y)
        return {"item_id": item_id, "path": ws.rel(out), **fields, "duration_s": round(y.size / SR, 4)}

    ls_c, sc_c = CORPORA["librispeech"], CORPORA["speech_commands"]
    asr_rows = []
    for r in pd.concat(ls_sel).itertuples():
        asr_rows.append(item("asr", f"ls_{r.part}_{r.utt_id}", load_audio(r.path), source_file=ws.rel(r.path),
                             source=f"LibriSpeech {r.part}", licence=ls_c.licence,
                             attribution=f"{ls_c.attribution}; LibriVox reader {r.speaker}",
                             speaker=f"ls_{r.speaker}", accent_group=None, synthetic=False, text=r.text))
    for c in cv_kept:
        asr_rows.append(item("asr", c["item_id"], c["y"], source_file=ws.rel(c["source_file"]),
                             source="Common Voice 17.0 (en)", licence="CC0 1.0",
                             attribution=f"Mozilla Common Voice 17.0 via {CV_DATASET} (Ardila et al., LREC 2020)",
                             speaker=f"cv_{c['speaker'][:16]}", accent_group=c["accent_group"],
                             synthetic=False, text=c["text"]))
    kws_rows = []
    for r in pd.concat(kws_sel).sort_values("rel").itertuples():
        kws_rows.append(item("kws", f"sc2_{r.label}_{Path(r.rel).stem}", load_audio(r.path),
                             source_file=ws.rel(r.path), source="Speech Commands v0.02 (test)",
                             licence=sc_c.licence, attribution=sc_c.attribution, speaker=f"sc2_{r.speaker}",
                             accent_group=None, synthetic=False, label=r.label, is_target=bool(r.is_target)))

    # ---- assert the counts, drop files of an earlier selection, write the banks ----------------
    n_asr = n_librispeech + sum(allocation.values())
    n_kws = n_per_keyword * len(KEYWORDS) + n_nontarget
    if len(asr_rows) != n_asr or len({r["item_id"] for r in asr_rows}) != n_asr:
        raise CorpusError(f"ASR item bank has {len(asr_rows)} items "
                          f"({len({r['item_id'] for r in asr_rows})} unique), {n_asr} expected")
    if (len(kws_rows) != n_kws or len({r["item_id"] for r in kws_rows}) != n_kws
            or sum(r["is_target"] for r in kws_rows) != n_per_keyword * len(KEYWORDS)):
        raise CorpusError(f"KWS item bank has {len(kws_rows)} items, {n_kws} expected")
    for family, rows in (("asr", asr_rows), ("kws", kws_rows)):
        keep = {ws.path(r["path"]).name for r in rows}
        for f in (audio_dir / family).glob("*.wav"):
            if f.name not in keep:
                f.unlink()
    keep = {Path(c["source_file"]).name for c in cv_kept}
    for f in cv_dir.iterdir():
        if f.is_file() and f.name not in keep:
            f.unlink()
    write_jsonl(asr_path, asr_rows)
    write_jsonl(kws_path, kws_rows)
    return {"asr": pd.DataFrame(asr_rows), "kws": pd.DataFrame(kws_rows)}


build_item_banks_paper = build_item_banks


# ============================================================================================
# stage 3: the battery of Table 1
# ============================================================================================
BATTERY = (
    # bg_id, corpus, selector, category, description
    ("esc50_rain", "esc50", "rain", "stationary", "rain (ESC-50)"),
    ("esc50_sea_waves", "esc50", "sea_waves", "stationary", "sea waves (ESC-50)"),
    ("esc50_engine", "esc50", "engine", "stationary", "engine (ESC-50)"),
    ("esc50_vacuum_cleaner", "esc50", "vacuum_cleaner", "stationary", "vacuum cleaner (ESC-50)"),
    ("esc50_footsteps", "esc50", "footsteps", "transient", "footsteps (ESC-50)"),
    ("esc50_crackling_fire", "esc50", "crackling_fire", "transient", "crackling fire (ESC-50)"),
    ("esc50_helicopter", "esc50", "helicopter", "stationary", "helicopter (ESC-50)"),
    ("esc50_clock_tick", "esc50", "clock_tick", "transient", "clock tick (ESC-50)"),
    ("esc50_keyboard_typing", "esc50", "keyboard_typing", "transient", "keyboard typing (ESC-50)"),
    ("esc50_dog", "esc50", "dog", "transient", "dog barking (ESC-50)"),
    ("esc50_rooster", "esc50", "rooster", "transient", "rooster (ESC-50)"),
    ("esc50_wind", "esc50", "wind", "stationary", "wind (ESC-50)"),
    ("mssnsd_cafeteria", "ms_snsd", "CafeTeria", "speech-like", "cafeteria (MS-SNSD)"),
    ("mssnsd_restaurant", "ms_snsd", "Restaurant", "speech-like", "restaurant (MS-SNSD)"),
    ("mssnsd_square", "ms_snsd", "Square", "speech-like", "town square (MS-SNSD)"),
    ("mssnsd_airport_announcements", "ms_snsd", "AirportAnnouncements", "speech-like",
     "airport announcements (MS-SNSD)"),
    ("mssnsd_air_conditioner", "ms_snsd", "AirConditioner", "stationary", "air conditioner (MS-SNSD)"),
    ("noisex_babble", "noisex92", "babble.wav", "speech-like", "babble (NOISEX-92)"),
    ("musan_music", "musan", "music/fma/music-fma-0001.wav", "music", "music (MUSAN, Free Music Archive)"),
    ("musan_hubbub", "musan", "speech/librivox/speech-librivox-0001.wav", "speech-like",
     "read speech, one LibriVox talker (MUSAN)"),
)
"""Table 1: ``(bg_id, corpus, selector, category, description)``. Selectors: an ESC-50 category
(clip = the first file of fold 1, take A, in name order), an MS-SNSD noise type (file
``noise_train/<type>_1.wav``, else the lowest-numbered one), or a path inside the corpus."""


def battery_specs(ws, *, registry=None) -> list:
    """Stage 3 of ``paper``: the 20 background specs of Table 1 for ``curate_battery``.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    registry : dict, optional
        Replacement for :data:`CORPORA` (folders and licences).

    Returns
    -------
    list of dict
        Background specs as in ``docs/ARCHITECTURE.md`` (``bg_id, category, description, sources``
        (absolute paths), ``combine="concat"``, ``source_package, licence, attribution,
        synthetic=False``), in Table 1 order.

    Raises
    ------
    CorpusError
        A corpus folder or a selected file is missing (run stage 1).
    """
    reg = _registry(registry)
    esc = None
    snsd = None
    specs = []
    for bg_id, corpus, sel, category, desc in BATTERY:
        c = reg[corpus]
        cdir = corpus_dir(ws, corpus, registry=reg)
        attribution = c.attribution
        licence = c.licence
        if corpus == "esc50":
            if esc is None:
                esc = prepare_esc50(cdir)
            rows = esc[esc.category == sel].sort_values(["fold", "take", "filename"])
            pref = rows[(rows["fold"] == 1) & (rows["take"].astype(str) == "A")]
            rows = pref if len(pref) else rows
            if not len(rows):
                raise CorpusError(f"ESC-50 has no clip of class {sel!r}; the download is incomplete")
            row = rows.iloc[0]
            src = Path(row.path)
            attribution = f"{c.attribution}; freesound.org clip {row.src_file}"
        elif corpus == "ms_snsd":
            if snsd is None:
                snsd = prepare_ms_snsd(cdir)
            rows = snsd[snsd.noise_type == sel]
            rows = rows.assign(_pref=(rows.split != "noise_train").astype(int) * 1000 + rows["index"])
            rows = rows.sort_values(["_pref", "path"])
            if not len(rows):
                raise CorpusError(f"MS-SNSD has no {sel!r} noise file in {cdir}; the download is incomplete")
            src = Path(rows.iloc[0].path)
        elif corpus == "noisex92":
            src = cdir / sel
        else:
            src = cdir / "musan" / sel
            if "librivox" in sel:
                licence = "public domain (LibriVox) in MUSAN, CC BY 4.0"
        if not src.is_file():
            raise CorpusError(f"{bg_id}: source file {src} is missing; run stage 1 (download) again")
        specs.append({"bg_id": bg_id, "category": category, "description": desc, "sources": [str(src)],
                      "combine": "concat", "source_package": c.title, "licence": licence,
                      "attribution": attribution, "synthetic": False})
    return specs


battery_specs_paper = battery_specs


# ============================================================================================
# command line: python -m aiplib.corpora.paper download [--corpus NAME ...] [--base-url URL]
# ============================================================================================
def main(argv=None) -> int:
    """Command line for stage 1: ``python -m aiplib.corpora.paper download``.

    Returns
    -------
    int
        Exit status (1 with the error message on stderr when a download failed).
    """
    import argparse
    import sys

    from ..workspace import workspace

    ap = argparse.ArgumentParser(prog="python -m aiplib.corpora.paper")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("download", help="download the paper's corpora (stage 1)")
    d.add_argument("--corpus", action="append", choices=sorted(CORPORA), help="repeatable; default all")
    d.add_argument("--base-url", help="mirror root holding one folder per corpus (like $AIP_MIRROR)")
    d.add_argument("--data-root", help="parent of the profile folders (default $AIP_DATA_ROOT or data/)")
    d.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    ws = workspace("paper", data_root=args.data_root)
    try:
        done = download_all(ws, corpora=args.corpus, base_urls=args.base_url, force_download=args.force)
    except DownloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, path in done.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
