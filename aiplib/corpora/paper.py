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
    "prepare_speech_commands", "read_librispeech_speakers", "KEYWORDS", "CV_DATASET", "CV_SPLIT",
    "ACCENT_GROUPS_FILE", "read_accent_groups", "CV_ACCENT_GROUPS", "accent_group", "load_common_voice",
    "select_common_voice", "build_item_banks", "build_item_banks_paper", "SELECTION_RULES", "BATTERY",
    "AUTHORS_CATEGORY", "battery_specs", "battery_specs_paper", "set_cache_env", "AUTHORS_SEED",
    "N_LIBRISPEECH", "N_COMMON_VOICE", "N_KWS",
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


from ..tasks import KEYWORDS  # noqa: E402 - the default keyword set, aiplib/tasks.yaml
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
"""Hugging Face id of the Common Voice 17.0 mirror streamed in stage 2 (config ``en``). It is a
*loading-script* data set: it needs ``datasets<4`` (4.0 removed script support; the authors used
3.5.1, which the ``paper`` extra pins)."""
CV_SPLIT = "validation"
"""The split the authors stream (their ``scripts/02_build_banks.py``)."""

ACCENT_GROUPS_FILE = Path(__file__).resolve().parent.parent / "data" / "cv_accent_groups.csv"
"""``aiplib/data/cv_accent_groups.csv``: columns ``cv_accent`` (a Common Voice 17 ``accent``
string, exactly) and ``accent_group`` (the group label). The 11 rows are the 11 accent groups of
the authors' README, labelled as in their figure script (``accent_clean_map`` of
``scripts/generate_results_new_2.py``); the project page says ten."""

AUTHORS_SEED = 42
"""``RANDOM_SEED`` of the authors' ``scripts/02_build_banks.py`` (``random.Random(42)``)."""
N_LIBRISPEECH = 100
"""LibriSpeech utterances in the ASR bank (authors' ``ASR_N``)."""
N_COMMON_VOICE = 80
"""Accent-labelled Common Voice 17 clips in the ASR bank (authors' ``CV_N``)."""
N_KWS = 120
"""Speech Commands items in the KWS bank (authors' ``KWS_N``)."""
KWS_NONTARGET_FOLDERS = ("_background_noise_", "silence")
"""Folders the authors draw non-target KWS items from (``silence`` does not exist in v0.02)."""
N_PROBE_KEYWORDS, N_PROBES_PER_KEYWORD = 4, 3
"""Injection probes: the last 3 clips (name order) of each of the first 4 keywords."""

SELECTION_RULES = {
    "librispeech": "authors' scripts/02_build_banks.py: every utterance of test-clean then test-other "
                   "(sorted *.trans.txt, file order), random.Random(42).shuffle, first {n}",
    "common_voice": "authors' scripts/02_build_banks.py: fsicoli/common_voice_17_0 en validation stream "
                    "(unshuffled), first {n} clips whose accent and gender are both given and not 'unknown'",
    "kws": "authors' scripts/02_build_banks.py: random.Random(42); per keyword (yes..go) sorted clips "
           "shuffled, first {per_kw}; _background_noise_/silence clips shuffled, first {per_nt}; probes = last "
           "3 sorted clips of yes/no/up/down; all shuffled, first {n}",
}
"""Text of the ``selection_rule`` field of each item bank record."""


def read_accent_groups(path=None) -> dict:
    """Read the accent-group mapping.

    Parameters
    ----------
    path : str or Path, optional
        CSV with ``cv_accent,accent_group``; default :data:`ACCENT_GROUPS_FILE`.

    Returns
    -------
    dict
        Common Voice accent string → group label, in file order.

    Raises
    ------
    CorpusError
        A column is missing or an accent string appears twice.
    """
    import csv

    with open(path or ACCENT_GROUPS_FILE, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"cv_accent", "accent_group"} <= set(rows[0]):
        raise CorpusError(f"{path or ACCENT_GROUPS_FILE} needs the columns cv_accent,accent_group")
    out = {}
    for r in rows:
        key = r["cv_accent"].strip()
        if key in out:
            raise CorpusError(f"accent {key!r} is listed twice in {path or ACCENT_GROUPS_FILE}")
        out[key] = r["accent_group"].strip()
    return out


CV_ACCENT_GROUPS = read_accent_groups()
"""Common Voice accent string → one of the 11 accent groups (from :data:`ACCENT_GROUPS_FILE`)."""


def accent_group(value, groups=None) -> str | None:
    """The accent group of a Common Voice ``accent`` value (exact match after stripping spaces).

    Parameters
    ----------
    value : str or None
    groups : dict, optional
        Default :data:`CV_ACCENT_GROUPS`.

    Returns
    -------
    str or None
        The group, or ``None`` for an empty, unlisted or multi-accent value (these clips stay in the
        bank as the authors kept them; they are reported apart from the 11 groups).
    """
    if not value or not isinstance(value, str):
        return None
    return (CV_ACCENT_GROUPS if groups is None else groups).get(value.strip())


def _datasets_major(version: str) -> int:
    m = re.match(r"(\d+)", str(version))
    return int(m.group(1)) if m else 0


def load_common_voice(*, split: str = CV_SPLIT, dataset_id: str = CV_DATASET, config: str = "en"):
    """Stream Common Voice 17 (English) from the Hugging Face hub [7]_, as the authors did.

    ``datasets`` is imported here only. ``fsicoli/common_voice_17_0`` is a loading-script data set,
    so it is loaded with ``trust_remote_code=True`` and needs ``datasets<4``. The stream is not
    shuffled (the authors take the first labelled clips). Audio is left undecoded
    (``Audio(decode=False)``); :func:`select_common_voice` decodes the kept clips.

    Parameters
    ----------
    split : str
        Default ``validation`` (the authors' split).
    dataset_id, config : str

    Returns
    -------
    datasets.IterableDataset
        Records with ``client_id, path, audio, sentence, up_votes, down_votes, age, gender, accent …``.

    Raises
    ------
    MissingPackageError
        ``datasets`` is not installed, or is 4.0 or newer (no loading scripts): the message gives
        the ``pip install 'datasets>=3.5,<4'`` command.
    AiplibError
        The hub cannot be reached or refuses the data set (accept its terms, ``hf auth login``).
    """
    set_cache_env()
    fix = "pip install 'datasets>=3.5,<4'` (or `pip install -e \".[paper]\"`; the authors used 3.5.1)"
    try:
        import datasets
    except ImportError:
        raise MissingPackageError(f"stage 2 of the paper profile streams Common Voice with Hugging Face "
                                  f"`datasets`; install it with `{fix}") from None
    version = getattr(datasets, "__version__", "0")
    if _datasets_major(version) >= 4:
        raise MissingPackageError(
            f"{dataset_id} is a loading-script data set and datasets {version} no longer runs loading "
            f"scripts (removed in datasets 4.0); install a 3.x release with `{fix}")
    try:
        ds = datasets.load_dataset(dataset_id, config, split=split, streaming=True, trust_remote_code=True)
    except Exception as exc:  # network, gating: all end here
        raise AiplibError(f"cannot stream {dataset_id} ({config}, {split}) from the Hugging Face hub: {exc}. "
                          f"Check the network or HF_ENDPOINT, accept the data set's terms on its hub page "
                          f"and log in with `hf auth login`.") from None
    try:
        ds = ds.cast_column("audio", datasets.Audio(decode=False))
    except Exception:  # noqa: BLE001 - a stream without that column / an old datasets: decode as given
        pass
    return ds


def _resample(y: np.ndarray, sr: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float32)
    if y.ndim > 1:
        y = y.mean(axis=-1) if y.shape[-1] <= 8 else y.mean(axis=0)
    if sr != SR:
        import librosa

        y = librosa.resample(y, orig_sr=sr, target_sr=SR, res_type="soxr_hq")
    return np.ascontiguousarray(y, dtype=np.float32)


def _cv_native(record):
    """→ (samples at the native rate, float32 mono, native rate in Hz) of a Common Voice record."""
    import soundfile as sf

    a = record.get("audio")
    if isinstance(a, dict) and a.get("array") is not None:
        arr = np.asarray(a["array"], dtype=np.float32)
        if arr.ndim > 1:  # (n, channels) or (channels, n) → mono
            arr = arr.mean(axis=-1) if arr.shape[-1] <= 8 else arr.mean(axis=0)
        return arr, int(a["sampling_rate"])
    raw, name = None, Path(str((a or {}).get("path") or record.get("path") or "clip.mp3")).name
    if isinstance(a, dict) and a.get("bytes"):
        raw = a["bytes"]
    elif isinstance(a, dict) and a.get("path") and Path(a["path"]).is_file():
        raw = Path(a["path"]).read_bytes()
    if raw is None:
        raise CorpusError(f"Common Voice record {record.get('path')!r} carries no audio")
    try:
        arr, sr = sf.read(io.BytesIO(raw), dtype="float32", always_2d=True)
        return arr.mean(axis=1), int(sr)
    except Exception:  # noqa: BLE001 - an MP3 libsndfile cannot read: ffmpeg through load_audio
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / name
            p.write_bytes(raw)
            return load_audio(p), SR


def _labelled(value) -> bool:
    return bool(value) and isinstance(value, str) and value.strip().lower() != "unknown"


def select_common_voice(dataset, out_dir, *, n: int = N_COMMON_VOICE, groups=None) -> list:
    """The authors' Common Voice rule: the first ``n`` clips of the stream with accent and gender given.

    As the authors' ``scripts/02_build_banks.py``: records are read in stream order; a record is
    kept when its ``accent`` and ``gender`` are both non-empty and not ``unknown`` (nothing else is
    filtered); the k-th kept clip (k from 0) gets the id ``cv_<first 8 characters of client_id>_<k>``
    and is saved as ``<out_dir>/<id>.wav`` at its native rate (16-bit PCM, as their
    ``soundfile.write``). Reading stops after ``n`` clips.

    Parameters
    ----------
    dataset : iterable of dict
        A Hugging Face ``IterableDataset`` or any iterable of records with ``audio`` (dict with
        ``array`` + ``sampling_rate``, or ``bytes``/``path``), ``sentence``, ``client_id``,
        ``accent`` (or ``accents``), ``gender``, ``age`` (duck typing; tests use a list of dicts).
    out_dir : str or Path
        ``data/paper/speech_asr/common_voice/``.
    n : int > 0
    groups : dict, optional
        Accent string → group; default :data:`CV_ACCENT_GROUPS`.

    Returns
    -------
    list of dict
        One per kept clip, in stream order: ``item_id, y`` (np.ndarray [shape=(samples,)], float32,
        16 kHz, read back from the saved file), ``text, speaker, gender, age, accent`` (raw),
        ``accent_group`` (or None), ``source_file`` (the saved WAV).

    Raises
    ------
    CorpusError
        The stream ends before ``n`` labelled clips (the message gives the numbers).
    """
    import soundfile as sf

    picked = []
    for rec in dataset:
        if len(picked) >= n:
            break
        accent = rec.get("accent") or rec.get("accents") or ""
        gender = rec.get("gender") or ""
        if not (_labelled(accent) and _labelled(gender)):
            continue
        arr, sr = _cv_native(rec)
        item_id = f"cv_{str(rec.get('client_id') or '')[:8]}_{len(picked)}"
        picked.append({"item_id": item_id, "arr": arr, "sr": sr, "text": rec.get("sentence", "") or "",
                       "speaker": str(rec.get("client_id") or ""), "gender": gender,
                       "age": rec.get("age") or "unknown", "accent": accent})
    if len(picked) < n:
        raise CorpusError(f"the Common Voice stream ended after {len(picked)} clip(s) with accent and gender "
                          f"labels, {n} needed")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    kept = []
    for c in picked:
        src = out_dir / f"{c.pop('item_id')}.wav"
        sf.write(str(src), c.pop("arr"), c.pop("sr"), subtype="PCM_16")
        kept.append({"item_id": src.stem, "y": load_audio(src), **c, "accent_group": accent_group(c["accent"], groups),
                     "source_file": src})
    return kept


# ============================================================================================
# stage 2: item banks (the authors' rules)
# ============================================================================================
def read_librispeech_speakers(corpus_dir) -> dict:
    """Speaker → ``female``/``male``/``unknown`` from ``LibriSpeech/SPEAKERS.TXT`` (as the authors read it).

    Returns
    -------
    dict
        Empty when the file is missing.
    """
    path = Path(corpus_dir) / "LibriSpeech" / "SPEAKERS.TXT"
    out = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(";"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2:
            out[parts[0]] = {"F": "female", "M": "male"}.get(parts[1], "unknown")
    return out


def _kws_candidates(sc_root: Path, n: int, rng) -> list:
    """The authors' KWS candidate list before the final shuffle (dicts, in their order)."""
    per_kw, per_nt = n // len(KEYWORDS) + 2, n // 4

    def wavs(folder):
        d = sc_root / folder
        return sorted(d.glob("*.wav")) if d.is_dir() else []

    items = []
    for kw in KEYWORDS:
        files = wavs(kw)
        rng.shuffle(files)
        items += [{"item_id": f"kws_{kw}_{w.stem}", "file": w, "label": kw, "is_target": True, "probe_id": None}
                  for w in files[:per_kw]]
    for folder in KWS_NONTARGET_FOLDERS:
        files = wavs(folder)
        rng.shuffle(files)
        items += [{"item_id": f"kws_nt_{folder}_{w.stem}", "file": w, "label": folder, "is_target": False,
                   "probe_id": None} for w in files[:per_nt]]
    for kw in KEYWORDS[:N_PROBE_KEYWORDS]:
        for w in wavs(kw)[-N_PROBES_PER_KEYWORD:]:
            pid = f"probe_{kw}_{w.stem}"
            items.append({"item_id": pid, "file": w, "label": kw, "is_target": False, "probe_id": pid})
    return items


def build_item_banks(ws, *, seed: int | None = None, cv_dataset=None, n_librispeech: int = N_LIBRISPEECH,
                     n_common_voice: int = N_COMMON_VOICE, n_kws: int = N_KWS, overwrite: bool = False,
                     registry=None) -> dict:
    """Stage 2 of ``paper``: the authors' item banks, ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl``.

    The rules are those of the authors' ``scripts/02_build_banks.py`` (each record says so in
    ``selection_rule``):

    * ASR, LibriSpeech [5]_: every utterance of test-clean then test-other (transcript files in
      sorted order, lines in file order), shuffled with ``random.Random(42)``, the first
      ``n_librispeech`` (100). Item id = the utterance id; gender from ``SPEAKERS.TXT``; accent
      ``american_english`` (the authors' label; no accent group).
    * ASR, Common Voice 17 [7]_: :func:`select_common_voice` on the ``validation`` stream, the first
      ``n_common_voice`` (80) clips with accent and gender; ``accent_group`` from
      ``aiplib/data/cv_accent_groups.csv``.
    * KWS, Speech Commands v0.02 [6]_ (every clip, not only the test list): ``random.Random(42)``;
      per keyword the sorted clips shuffled and the first ``n_kws // 10 + 2``; the
      ``_background_noise_`` (and ``silence``) clips shuffled, the first ``n_kws // 4``; injection
      probes = the last 3 clips of yes/no/up/down (``is_target`` false, ``probe_id`` set); the whole
      list shuffled with the same generator and the first ``n_kws`` (120) kept.

    Item audio: 16 kHz mono float32 WAV at ``itembanks/audio/<family>/<item_id>.wav``. Fields follow
    ``docs/ARCHITECTURE.md`` plus ``selection_rule``; ASR adds ``gender`` and ``accent``, KWS adds
    ``probe_id``. When both files exist and ``overwrite`` is false they are read back.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
    seed : int, optional
        Ignored: the authors' rules always use ``random.Random(42)`` (:data:`AUTHORS_SEED`). Kept
        so that every profile's stage 2 takes the notebook's ``seed``.
    cv_dataset : iterable of dict, optional
        The Common Voice stream; default :func:`load_common_voice` (needs ``datasets<4`` and the hub).
    n_librispeech, n_common_voice, n_kws : int > 0
        The authors' sizes (100, 80, 120); their smoke test uses 5 each.
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
        A corpus is missing (run stage 1) or too small for the counts, naming what is short.
    MissingPackageError
        ``cv_dataset`` not given and ``datasets`` missing or ≥ 4.
    """
    import random

    import pandas as pd

    del seed
    ib = Path(ws.root) / "itembanks"
    asr_path, kws_path = ib / "asr.jsonl", ib / "kws.jsonl"
    if not overwrite and asr_path.is_file() and kws_path.is_file():
        return {"asr": pd.DataFrame(read_jsonl(asr_path)), "kws": pd.DataFrame(read_jsonl(kws_path))}
    audio_dir = ib / "audio"

    # ---- select (metadata only: nothing is written before every count is met) ----------------
    ls_dir = corpus_dir(ws, "librispeech", registry=registry)
    ls = prepare_librispeech(ls_dir, with_duration=False)
    ls_items = ls.to_dict("records")
    random.Random(AUTHORS_SEED).shuffle(ls_items)
    ls_items = ls_items[:n_librispeech]
    sc_root = _need_dir(corpus_dir(ws, "speech_commands", registry=registry) / "speech_commands_v0.02",
                        "Speech Commands v0.02")
    rng = random.Random(AUTHORS_SEED)
    kws_items = _kws_candidates(sc_root, n_kws, rng)
    rng.shuffle(kws_items)
    kws_items = kws_items[:n_kws]
    short = []
    if len(ls_items) < n_librispeech:
        short.append(f"LibriSpeech test-clean+test-other: {len(ls_items)} utterances, {n_librispeech} needed")
    if len(kws_items) < n_kws:
        short.append(f"Speech Commands: {len(kws_items)} candidate clips, {n_kws} needed")
    if short:
        raise CorpusError("the corpora are too small for the paper's item banks — " + "; ".join(short))
    if cv_dataset is None:
        cv_dataset = load_common_voice()
    cv_dir = _kind_dir(ws, "speech_asr") / "common_voice"
    cv_kept = select_common_voice(cv_dataset, cv_dir, n=n_common_voice)

    # ---- write item audio and rows ------------------------------------------------------------
    def item(family, item_id, y, **fields):
        out = write_wav(audio_dir / family / f"{item_id}.wav", y)
        return {"item_id": item_id, "path": ws.rel(out), **fields, "duration_s": round(y.size / SR, 4)}

    ls_c, sc_c = CORPORA["librispeech"], CORPORA["speech_commands"]
    genders = read_librispeech_speakers(ls_dir)
    rule_ls = SELECTION_RULES["librispeech"].format(n=n_librispeech)
    rule_cv = SELECTION_RULES["common_voice"].format(n=n_common_voice)
    rule_kws = SELECTION_RULES["kws"].format(n=n_kws, per_kw=n_kws // len(KEYWORDS) + 2, per_nt=n_kws // 4)
    asr_rows = []
    for r in ls_items:
        asr_rows.append(item("asr", r["utt_id"], load_audio(r["path"]), source_file=ws.rel(r["path"]),
                             source=f"LibriSpeech {r['part']}", licence=ls_c.licence,
                             attribution=f"{ls_c.attribution}; LibriVox reader {r['speaker']}",
                             speaker=f"ls_{r['speaker']}", accent_group=None, synthetic=False, text=r["text"],
                             gender=genders.get(r["speaker"], "unknown"), accent="american_english",
                             selection_rule=rule_ls))
    for c in cv_kept:
        asr_rows.append(item("asr", c["item_id"], c["y"], source_file=ws.rel(c["source_file"]),
                             source="Common Voice 17.0 (en, validation)", licence="CC0 1.0",
                             attribution=f"Mozilla Common Voice 17.0 via {CV_DATASET} (Ardila et al., LREC 2020)",
                             speaker=f"cv_{c['speaker'][:16]}", accent_group=c["accent_group"],
                             synthetic=False, text=c["text"], gender=c["gender"], accent=c["accent"],
                             selection_rule=rule_cv))
    kws_rows = []
    for r in kws_items:
        kws_rows.append(item("kws", r["item_id"], load_audio(r["file"]), source_file=ws.rel(r["file"]),
                             source="Speech Commands v0.02", licence=sc_c.licence, attribution=sc_c.attribution,
                             speaker=f"sc2_{r['file'].stem.split('_nohash_')[0]}", accent_group=None,
                             synthetic=False, label=r["label"], is_target=r["is_target"], probe_id=r["probe_id"],
                             selection_rule=rule_kws))

    # ---- assert the counts, drop files of an earlier selection, write the banks ----------------
    n_asr = n_librispeech + n_common_voice
    if len(asr_rows) != n_asr or len({r["item_id"] for r in asr_rows}) != n_asr:
        raise CorpusError(f"ASR item bank has {len(asr_rows)} items "
                          f"({len({r['item_id'] for r in asr_rows})} unique), {n_asr} expected")
    if len(kws_rows) != n_kws or len({r["item_id"] for r in kws_rows}) != n_kws:
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
    # bg_id (the authors'), corpus, selector, category, description
    ("esc_rain", "esc50", 10, "stationary", "rain (ESC-50)"),
    ("esc_seawave", "esc50", 11, "stationary", "sea waves (ESC-50)"),
    ("esc_engine", "esc50", 44, "stationary", "engine (ESC-50)"),
    ("esc_vacuum", "esc50", 36, "stationary", "vacuum cleaner (ESC-50)"),
    ("esc_footsteps", "esc50", 25, "transient", "footsteps (ESC-50)"),
    ("esc_fire", "esc50", 12, "transient", "crackling fire (ESC-50)"),
    ("esc_helicopter", "esc50", 40, "stationary", "helicopter (ESC-50)"),
    ("esc_clock", "esc50", 38, "transient", "clock tick (ESC-50)"),
    ("esc_keyboard", "esc50", 32, "transient", "keyboard typing (ESC-50)"),
    ("esc_dog", "esc50", 0, "transient", "dog barking (ESC-50)"),
    ("esc_rooster", "esc50", 1, "transient", "rooster (ESC-50)"),
    ("esc_wind", "esc50", 16, "stationary", "wind (ESC-50)"),
    ("snsd_cafeteria", "ms_snsd", "noise_train/CafeTeria_1.wav", "speech-like", "cafeteria (MS-SNSD)"),
    ("snsd_restaurant", "ms_snsd", "noise_train/Restaurant_1.wav", "speech-like", "restaurant (MS-SNSD)"),
    ("snsd_square", "ms_snsd", "noise_train/Square_1.wav", "speech-like", "town square (MS-SNSD)"),
    ("snsd_airport", "ms_snsd", "noise_train/AirportAnnouncements_7.wav", "speech-like",
     "airport announcements (MS-SNSD)"),
    ("noisex_babble", "noisex92", "babble.wav", "speech-like", "babble (NOISEX-92)"),
    ("musan_music", "musan", "music/fma/music-fma-0062.wav", "music", "music (MUSAN, Free Music Archive)"),
    ("musan_hubbub", "musan", "speech/librivox/speech-librivox-0001.*", "speech-like",
     "read speech, one LibriVox talker (MUSAN)"),
    ("snsd_airconditioner", "ms_snsd", "noise_train/AirConditioner_1.wav", "stationary",
     "air conditioner (MS-SNSD)"),
)
"""Table 1 as the authors' ``BATTERY_SPEC`` (``scripts/03_curate_battery.py``), in their order and
with their ``bg_id``s: ``(bg_id, corpus, selector, category, description)``. Selectors: an ESC-50
class number (the first file, in name order, of ``audio/1-*-A-<class>.wav``: fold 1, take A), or a
path (glob) inside the corpus folder (MS-SNSD ``MS-SNSD-master/``, MUSAN ``musan/``). ``category``
is ours (``docs/ARCHITECTURE.md``); the authors' (``non_speech``/``speech_like``) is in
:data:`AUTHORS_CATEGORY`. The authors tile/cut each to 30 s and normalise it to −23 LUFS
(curation: :mod:`aiplib.backgrounds`)."""

AUTHORS_CATEGORY = {b[0]: ("speech_like" if b[1] in ("noisex92", "musan") or b[3] == "speech-like"
                           else "non_speech") for b in BATTERY}
"""``bg_id`` → the authors' category (their spec labels ``musan_music`` ``speech_like`` too)."""


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
        synthetic=False``) plus ``authors_category``, in the authors' order.

    Raises
    ------
    CorpusError
        A corpus folder or a selected file is missing (run stage 1).
    """
    reg = _registry(registry)
    specs = []
    for bg_id, corpus, sel, category, desc in BATTERY:
        c = reg[corpus]
        cdir = corpus_dir(ws, corpus, registry=reg)
        attribution, licence = c.attribution, c.licence
        if corpus == "esc50":
            audio = _need_dir(cdir / "ESC-50-master", "ESC-50") / "audio"
            found = sorted(audio.glob(f"1-*-A-{sel}.wav"))
            if not found:
                raise CorpusError(f"{bg_id}: ESC-50 has no fold-1 take-A clip of class {sel} "
                                  f"(audio/1-*-A-{sel}.wav); run stage 1 (download) again")
            src = found[0]
            attribution = f"{c.attribution}; freesound.org clip {src.stem.split('-')[1]}"
        else:
            base = {"ms_snsd": cdir / "MS-SNSD-master", "musan": cdir / "musan"}.get(corpus, cdir)
            found = sorted(_need_dir(base, c.title).glob(sel))
            src = found[0] if found else base / sel
            if "librivox" in sel:
                licence = "public domain (LibriVox) in MUSAN, CC BY 4.0"
        if not src.is_file():
            raise CorpusError(f"{bg_id}: source file {src} is missing; run stage 1 (download) again")
        specs.append({"bg_id": bg_id, "category": category, "description": desc, "sources": [str(src)],
                      "combine": "concat", "source_package": c.title, "licence": licence,
                      "attribution": attribution, "synthetic": False,
                      "authors_category": AUTHORS_CATEGORY[bg_id]})
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
