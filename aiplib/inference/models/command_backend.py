"""``command`` backend: any program that prints the transcript of the audio file it is given.

Registry entry (extra fields)::

    my_external_asr:
      backend: command
      model_type: external
      command: "my-asr --lang en {file}"
      timeout_s: 120
      concurrency: 2      # programs running at once (default 1)
      batch_size: 2       # stimuli per generate() call (>= concurrency)

The command is split with ``shlex`` and run without a shell; in every argument ``{file}`` (required)
becomes a temporary 16 kHz mono 16-bit WAV of the stimulus (in a private 0700 folder), ``{prompt}``
the task text, ``$VAR`` / ``${VAR}`` an environment variable. Standard output, stripped, is the
response; standard error is discarded. A failure raises :class:`CommandError`. With
``concurrency`` N, up to N copies of the program run at once, each on its own stimulus; every
answer stays with its stimulus, so the rows are the same as one at a time.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from aiplib.core.errors import AiplibError, AiplibParameterError, ModelUnavailableError
from aiplib.inference.models.base import (
    Recogniser,
    answer_each,
    check_parallelism,
    run_concurrently,
)
from aiplib.inference.models.ct2_numerics import cpu_record
from aiplib.io.audio import SR

#: Seconds a command may run per call unless its entry sets ``timeout_s``.
DEFAULT_TIMEOUT_S = 120.0


def command_numerics() -> dict:
    """The ``numerics`` record of a ``command`` run: this machine's CPU (:func:`cpu_record` of
    :mod:`~aiplib.inference.models.ct2_numerics`) and ``"computed_by"``, a note that the program's
    own numeric path (backend, ISA, threads) is not seen by aiplib."""
    record = cpu_record()
    record["computed_by"] = (
        "the external program, on this machine; its numeric path is not seen by aiplib"
    )
    return record


class CommandError(AiplibError, RuntimeError):
    """A command-backend call failed; the message is only ``exit status N``, ``timeout`` (the
    process group is killed) or ``cannot start``, never the command line or its output."""


def argv_template(entry) -> list[str]:
    """The entry's ``command`` split like a shell would; it must name ``{file}``."""
    template = str(entry.extra.get("command") or "")
    try:
        argv = shlex.split(template)
    except ValueError:
        raise AiplibParameterError(
            f"{entry.id}: the command cannot be parsed (unbalanced quotes)"
        ) from None
    if not any("{file}" in a for a in argv):
        raise AiplibParameterError(
            f"{entry.id}: the command must contain {{file}} (the WAV to transcribe)"
        )
    return argv


def _timeout_s(entry, timeout_s: float | None) -> float:
    """Seconds per call: ``timeout_s``, else the entry's, else :data:`DEFAULT_TIMEOUT_S`; a
    positive number."""
    t = timeout_s if timeout_s is not None else entry.extra.get("timeout_s", DEFAULT_TIMEOUT_S)
    if t is None or isinstance(t, bool) or float(t) <= 0:
        raise AiplibParameterError(
            f"{entry.id}: timeout_s must be a positive number of seconds, got {t!r}"
        )
    return float(t)


def program_problem(entry) -> str | None:
    """Why the program of a ``command`` entry cannot be started, or None when it can.

    The program (the command's first word, ``$VAR`` expanded) is looked up as a shell would: a
    path (one with a ``/``; a relative path in a models file was made absolute from the file's
    folder when the file was read) must be an executable file, and the message names its absolute
    path; a bare name is looked up on ``PATH``. Only the program is named, never the command line.

    Raises
    ------
    AiplibParameterError
        The command cannot be parsed or has no ``{file}`` (:func:`argv_template`).
    """
    program = os.path.expandvars(argv_template(entry)[0])
    if shutil.which(program) is not None:
        return None
    if "/" in program:
        return (
            f"program {os.path.abspath(program)} not found or not executable (a relative path in a "
            "models file is taken from the file's folder)"
        )
    return f"program {program!r} not found on PATH (or not executable)"


class CommandRecogniser(Recogniser):
    """An external program behind the Recogniser interface.

    ``timeout_s`` (seconds per call) defaults to ``entry.extra["timeout_s"]`` or 120, ``batch_size``
    to the entry's (default 1); ``entry.extra["concurrency"]`` (default 1) calls run at once.

    Raises
    ------
    AiplibParameterError
        The command has no ``{file}``, ``timeout_s`` is not positive, or ``batch_size`` or
        ``concurrency`` is not a positive integer.
    ModelUnavailableError
        The program is not found (:func:`program_problem`; only the program is named).
    """

    def __init__(
        self, entry, *, timeout_s: float | None = None, batch_size: int | None = None, path=None
    ):
        self.name = entry.id
        self.entry = entry
        self.argv_template = argv_template(entry)
        self.timeout_s = _timeout_s(entry, timeout_s)
        self.batch_size = int(batch_size or entry.batch_size or 1)
        self.concurrency = int(entry.extra.get("concurrency") or 1)
        check_parallelism(entry.id, self.batch_size, self.concurrency)
        self._lock = threading.Lock()
        self.program = shutil.which(os.path.expandvars(self.argv_template[0]))
        if self.program is None:
            raise ModelUnavailableError(f"{entry.id}: {program_problem(entry)}")
        self._tmp = tempfile.mkdtemp(prefix="aip_cmd_")
        os.chmod(self._tmp, 0o700)
        self._cache: dict[str, tuple[bool, str]] = {}
        self._stats = {"n_calls": 0, "n_errors": 0, "seconds": 0.0, "audio_s": 0.0}

    def info(self) -> dict:
        """Program name, timeout and counts (never the command line)."""
        return {
            "model": self.name,
            "backend": "command",
            "program": Path(self.program).name,
            "timeout_s": self.timeout_s,
            "batch_size": self.batch_size,
            "concurrency": self.concurrency,
            "path": "command",
            "window": None,
            "weights_path": None,
            "numerics": command_numerics(),
            "stats": self.stats(),
        }

    def stats(self) -> dict:
        with self._lock:
            s = dict(self._stats)
        s["seconds"] = round(s["seconds"], 3)
        s["rtfx"] = round(s["audio_s"] / s["seconds"], 3) if s["seconds"] > 0 else None
        return s

    def _call(self, audio: np.ndarray, prompt: str | None) -> str:
        fd, wav = tempfile.mkstemp(suffix=".wav", dir=self._tmp)
        os.close(fd)
        t0 = time.perf_counter()
        try:
            import soundfile as sf  # noqa: PLC0415

            sf.write(wav, audio, SR, subtype="PCM_16", format="WAV")
            argv = [
                os.path.expandvars(a).replace("{file}", wav).replace("{prompt}", prompt or "")
                for a in self.argv_template
            ]
            argv[0] = self.program  # the program found on PATH at load
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError:
                raise CommandError("cannot start") from None
            try:
                out, _ = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
                proc.communicate()
                raise CommandError("timeout") from None
            if proc.returncode != 0:
                raise CommandError(f"exit status {proc.returncode}") from None
            return out.decode("utf-8", errors="replace").strip()
        finally:
            Path(wav).unlink(missing_ok=True)
            with self._lock:
                self._stats["n_calls"] += 1
                self._stats["seconds"] += time.perf_counter() - t0
                self._stats["audio_s"] += len(audio) / SR

    def generate(self, audios, prompts):
        """Run the program once per stimulus, up to ``concurrency`` at once
        (:meth:`Recogniser.generate`); :class:`CommandError` once every call of the batch has
        finished, if any failed."""
        clips, texts = self.checked(audios, prompts)

        def attempt(i):
            try:
                return True, self._call(clips[i], texts[i])
            except CommandError as exc:
                with self._lock:
                    self._stats["n_errors"] += 1
                return False, str(exc)

        def run(todo):
            return run_concurrently(attempt, todo, self.concurrency, f"aip-{self.name}")

        return answer_each(self._cache, clips, texts, run, CommandError)

    def close(self) -> None:
        """Delete the temporary folder (idempotent)."""
        shutil.rmtree(getattr(self, "_tmp", ""), ignore_errors=True)
        self._cache = {}


#: The backend's entry point, ``load(entry, **options)`` (aiplib.inference.models.load_model).
load = CommandRecogniser
