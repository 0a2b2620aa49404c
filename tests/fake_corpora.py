"""Small fake corpora with the real folder layouts, and a local HTTP server that serves them.

Used by ``tests/test_download.py`` and ``tests/test_paper.py``. Every archive is built here from
short noise/tone signals (no real recordings); the layouts and metadata files mirror:

* ESC-50 ``master.zip`` → ``ESC-50-master/{audio/<fold>-<src>-<take>-<target>.wav, meta/esc50.csv}``
* MS-SNSD ``master.zip`` → ``MS-SNSD-master/{noise_train,noise_test,clean_test}/*.wav`` + README
* NOISEX-92 ``babble.wav`` (19.98 kHz, as the original)
* MUSAN ``musan.tar.gz`` → ``musan/{music/fma,speech/librivox,noise/free-sound}/*.wav`` + LICENSE/ANNOTATIONS
* LibriSpeech ``test-{clean,other}.tar.gz`` → ``LibriSpeech/<part>/<spk>/<chap>/<spk>-<chap>-<utt>.flac`` + ``.trans.txt``
* Speech Commands ``speech_commands_v0.02.tar.gz`` (no top folder) → ``<word>/<hash>_nohash_<n>.wav``,
  ``testing_list.txt``, ``validation_list.txt``, ``_background_noise_/``

The server (:class:`FakeServer`) answers ``GET``/``HEAD`` on ``127.0.0.1`` with ``Range`` support,
logs every request, and can cut a response off halfway (``cut_once``) or ignore ranges.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import soundfile as sf

from aiplib.sources.corpora import paper, speech_commands

ESC_TARGETS = {"dog": 0, "rooster": 1, "cat": 5, "rain": 10, "sea_waves": 11, "crackling_fire": 12,
               "wind": 16, "thunderstorm": 19, "footsteps": 25, "keyboard_typing": 32,
               "vacuum_cleaner": 36, "clock_tick": 38, "helicopter": 40, "engine": 44}
LS_SPEAKERS = {"test-clean": [("1089", "134686"), ("1188", "133604"), ("121", "121726"), ("1221", "135766")],
               "test-other": [("1688", "142285"), ("1998", "15444"), ("2033", "164914"), ("2414", "128291")]}
LS_UTTS_PER_SPEAKER = 15          # 60 usable per part (+1 too short), 50 needed
SC_SPEAKERS_PER_KEYWORD = 12      # 11 in testing_list.txt, 1 in training
SC_NONTARGET_WORDS = ("backward", "bed", "bird", "cat", "dog", "eight", "five", "follow", "forward",
                      "four", "happy", "house", "marvin", "sheila", "wow")   # 15 ≥ 13 needed
MUSAN_FILES = ("music/fma/music-fma-0000.wav", "music/fma/music-fma-0001.wav", "music/fma/music-fma-0062.wav",
               "speech/librivox/speech-librivox-0000.wav", "speech/librivox/speech-librivox-0001.wav",
               "noise/free-sound/noise-free-sound-0000.wav")
SNSD_FILES = ("noise_train/AirConditioner_1.wav", "noise_train/AirConditioner_2.wav",
              "noise_train/AirportAnnouncements_1.wav", "noise_train/AirportAnnouncements_7.wav",
              "noise_train/Babble_1.wav",
              "noise_train/CafeTeria_1.wav", "noise_train/CafeTeria_2.wav", "noise_train/Restaurant_1.wav",
              "noise_train/Square_1.wav", "noise_test/AirConditioner_1.wav", "noise_test/Typing_1.wav",
              "clean_test/clnsp1.wav")


def wav_bytes(seconds: float, sr: int = 16000, *, seed: int = 0, fmt: str = "WAV",
              subtype: str = "PCM_16") -> bytes:
    """A short non-silent test signal (tone + noise) encoded as WAV or FLAC bytes."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sr)
    t = np.arange(n) / sr
    y = 0.2 * np.sin(2 * np.pi * (150 + 40 * (seed % 17)) * t) + 0.05 * rng.standard_normal(n)
    buf = io.BytesIO()
    sf.write(buf, y.astype(np.float32), sr, format=fmt, subtype=subtype)
    return buf.getvalue()


def make_zip(files: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def make_targz(files: dict) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        dirs = set()
        for name in files:
            parts = name.strip("./").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tf.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def speakers_txt() -> bytes:
    """``SPEAKERS.TXT`` in LibriSpeech's format: every fake speaker, sex alternating F, M by id order."""
    lines = ["; ID      |SEX| SUBSET           |MINUTES| NAME"]
    spk = sorted((s for v in LS_SPEAKERS.values() for s, _ in v), key=int)
    for i, s in enumerate(spk):
        part = next(p for p, v in LS_SPEAKERS.items() if s in {x for x, _ in v})
        lines.append(f"{s:<7}| {'FM'[i % 2]} | {part:<16} | 10.00 | Reader {s}")
    return ("\n".join(lines) + "\n").encode()


def build_archives() -> dict:
    """Build every fake corpus file.

    Returns
    -------
    dict
        ``{corpus: {file name: bytes}}`` and, under ``"_expected"``, the number of audio files each
        extraction must yield.
    """
    seed = iter(range(10_000))
    out, expected = {}, {}

    # ESC-50: two clips per class (fold 1 take A, fold 2 take B)
    files, rows = {}, ["filename,fold,target,category,esc10,src_file,take"]
    for cat, target in ESC_TARGETS.items():
        for fold, take, src in ((1, "A", 100000 + target), (2, "B", 200000 + target)):
            fn = f"{fold}-{src}-{take}-{target}.wav"
            files[f"ESC-50-master/audio/{fn}"] = wav_bytes(0.3, 44100, seed=next(seed))
            rows.append(f"{fn},{fold},{target},{cat},False,{src},{take}")
    files["ESC-50-master/meta/esc50.csv"] = ("\n".join(rows) + "\n").encode()
    files["ESC-50-master/README.md"] = b"# ESC-50 (fake)\n"
    files["ESC-50-master/LICENSE"] = b"CC BY-NC 3.0\n"
    out["esc50"] = {"master.zip": make_zip(files)}
    expected["esc50"] = 2 * len(ESC_TARGETS)

    files = {f"MS-SNSD-master/{p}": wav_bytes(0.4, 16000, seed=next(seed)) for p in SNSD_FILES}
    files["MS-SNSD-master/README.md"] = b"# MS-SNSD (fake)\n"
    files["MS-SNSD-master/noisyspeech_synthesizer.cfg"] = b"[noisy_speech]\nsampling_rate: 16000\n"
    out["ms_snsd"] = {"master.zip": make_zip(files)}
    expected["ms_snsd"] = len(SNSD_FILES)

    out["noisex92"] = {"babble.wav": wav_bytes(0.6, 19980, seed=next(seed))}
    expected["noisex92"] = 1

    files = {f"musan/{p}": wav_bytes(0.4, 16000, seed=next(seed)) for p in MUSAN_FILES}
    for sub in ("music/fma", "speech/librivox", "noise/free-sound"):
        files[f"musan/{sub}/ANNOTATIONS"] = b"id\n"
        files[f"musan/{sub}/LICENSE"] = b"fake licence\n"
    files["musan/README"] = b"MUSAN (fake)\n"
    out["musan"] = {"musan.tar.gz": make_targz(files)}
    expected["musan"] = len(MUSAN_FILES)

    out["librispeech"] = {}
    for part, speakers in LS_SPEAKERS.items():
        files = {f"LibriSpeech/{n}": f"{n} (fake)\n".encode()
                 for n in ("BOOKS.TXT", "CHAPTERS.TXT", "LICENSE.TXT", "README.TXT")}
        files["LibriSpeech/SPEAKERS.TXT"] = speakers_txt()
        for spk, chap in speakers:
            lines = []
            for u in range(LS_UTTS_PER_SPEAKER + (1 if spk == speakers[0][0] else 0)):
                utt = f"{spk}-{chap}-{u:04d}"
                dur = 0.5 if u == LS_UTTS_PER_SPEAKER else 1.1  # one too short per part
                files[f"LibriSpeech/{part}/{spk}/{chap}/{utt}.flac"] = wav_bytes(dur, 16000, seed=next(seed), fmt="FLAC")
                lines.append(f"{utt} FAKE UTTERANCE NUMBER {u} OF SPEAKER {spk}")
            files[f"LibriSpeech/{part}/{spk}/{chap}/{spk}-{chap}.trans.txt"] = ("\n".join(lines) + "\n").encode()
        out["librispeech"][f"{part}.tar.gz"] = make_targz(files)
    expected["librispeech"] = sum(len(s) * LS_UTTS_PER_SPEAKER + 1 for s in LS_SPEAKERS.values())

    files, test_list, val_list = {}, [], []
    for word in speech_commands.KEYWORDS + SC_NONTARGET_WORDS:
        n_spk = SC_SPEAKERS_PER_KEYWORD if word in speech_commands.KEYWORDS else 2
        for k in range(n_spk):
            spk = hashlib.sha1(f"{word}{k}".encode()).hexdigest()[:8]
            rel = f"{word}/{spk}_nohash_0.wav"
            files[f"./{rel}"] = wav_bytes(0.25, 16000, seed=next(seed))
            (test_list if k < n_spk - 1 else val_list).append(rel)
    files["./_background_noise_/white_noise.wav"] = wav_bytes(0.5, 16000, seed=next(seed))
    files["./_background_noise_/README.md"] = b"background noise (fake)\n"
    files["./testing_list.txt"] = ("\n".join(test_list) + "\n").encode()
    files["./validation_list.txt"] = ("\n".join(val_list) + "\n").encode()
    files["./LICENSE"] = b"CC BY 4.0\n"
    files["./README.md"] = b"Speech Commands v0.02 (fake)\n"
    out["speech_commands"] = {"speech_commands_v0.02.tar.gz": make_targz(files)}
    expected["speech_commands"] = len(speech_commands.KEYWORDS) * SC_SPEAKERS_PER_KEYWORD + 2 * len(SC_NONTARGET_WORDS) + 1
    out["_expected"] = expected
    return out


def fake_registry(archives: dict) -> dict:
    """:data:`paper.CORPORA` with each published digest replaced by the fake file's digest."""
    reg = {}
    for name, c in paper.CORPORA.items():
        files = []
        for f in c.files:
            data = archives[name][f.name]
            files.append(dataclasses.replace(
                f, md5=hashlib.md5(data).hexdigest() if f.md5 else None,
                sha256=hashlib.sha256(data).hexdigest() if f.sha256 else None))
        reg[name] = dataclasses.replace(c, files=tuple(files))
    return reg


CV_ACCENTS = ("United States English", "England English", "India and South Asia (India, Pakistan, Sri Lanka)",
              "Canadian English", "West Indies and Bermuda (Bahamas, Bermuda, Jamaica, Trinidad)",
              "Scottish English", "Irish English", "Australian English",
              "Southern African (South Africa, Zimbabwe, Namibia)", "Hong Kong English", "New Zealand English",
              "United States English,England English")   # the last one is in no group


def fake_cv_records(n_labelled: int = 84, *, sr: int = 48000) -> list:
    """A fake Common Voice 17 ``validation`` stream shaped like the loading script's records.

    Decoys that the authors' rule skips come first and then every 7th record (no accent, no gender,
    ``unknown`` accent or gender); ``n_labelled`` labelled records cycle through :data:`CV_ACCENTS`.
    Every 10th labelled record carries WAV bytes instead of a decoded array.
    """
    recs, k = [], 0

    def rec(accent, gender, *, as_bytes=False):
        nonlocal k
        k += 1
        dur = 1.0 + 0.1 * (k % 5)
        y = (0.3 * np.sin(2 * np.pi * (200 + k) * np.arange(int(dur * sr)) / sr)).astype(np.float32)
        name = f"common_voice_en_{k:06d}.mp3"
        audio = ({"path": name, "bytes": wav_bytes(dur, sr, seed=k), "array": None} if as_bytes else
                 {"path": name, "array": y, "sampling_rate": sr})
        return {"client_id": hashlib.sha1(f"client{k}".encode()).hexdigest(), "path": name, "audio": audio,
                "sentence": f"fake sentence number {k}", "up_votes": 2, "down_votes": 0, "age": "twenties",
                "gender": gender, "accent": accent, "locale": "en", "segment": "", "variant": ""}

    decoys = [("", "male_masculine"), ("United States English", ""), ("unknown", "female_feminine"),
              ("England English", "Unknown")]
    recs += [rec(a, g) for a, g in decoys]
    for i in range(n_labelled):
        if i % 7 == 6:
            recs.append(rec(*decoys[i % len(decoys)]))
        recs.append(rec(CV_ACCENTS[i % len(CV_ACCENTS)], ("female_feminine", "male_masculine")[i % 2],
                        as_bytes=(i % 10 == 9)))
    return recs


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeCorpora/1.0"

    def log_message(self, *args):  # keep test output quiet
        pass

    def _serve(self, body: bool):
        srv = self.server
        srv.log.append({"method": self.command, "path": self.path, "range": self.headers.get("Range")})
        data = srv.files.get(self.path.split("?")[0])
        if data is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and not srv.ignore_range and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not body:
            return
        payload = data[start:]
        cut = srv.cut_once.pop(self.path, None)
        if cut is not None:
            self.wfile.write(payload[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)

    def do_GET(self):
        self._serve(True)

    def do_HEAD(self):
        self._serve(False)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """Clients that hang up early (a refused download, a cut-off test) are expected: no traceback."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class FakeServer:
    """Serve ``{url path: bytes}`` on ``http://127.0.0.1:<port>``; use as a context manager.

    Attributes
    ----------
    url : str
        Root URL without a trailing slash.
    log : list of dict
        One entry per request: ``method, path, range``.
    cut_once : dict
        ``{path: n}``: the next GET of ``path`` sends only ``n`` body bytes and closes.
    ignore_range : bool
        Answer every request with the whole file (``200``), like a server without range support.
    """

    def __init__(self, files: dict):
        self.httpd = _QuietServer(("127.0.0.1", 0), _Handler)
        self.httpd.files = dict(files)
        self.httpd.log = []
        self.httpd.cut_once = {}
        self.httpd.ignore_range = False
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    files = property(lambda self: self.httpd.files)
    log = property(lambda self: self.httpd.log)
    cut_once = property(lambda self: self.httpd.cut_once)

    @property
    def ignore_range(self):
        return self.httpd.ignore_range

    @ignore_range.setter
    def ignore_range(self, value):
        self.httpd.ignore_range = value

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self):
        if not self.thread.is_alive():
            self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve_corpora(archives: dict) -> FakeServer:
    """A started :class:`FakeServer` with every fake corpus file at ``/<corpus>/<file>``."""
    files = {f"/{c}/{name}": data for c, d in archives.items() if not c.startswith("_")
             for name, data in d.items()}
    return FakeServer(files).start()


def closed_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (connection refused at once)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"
