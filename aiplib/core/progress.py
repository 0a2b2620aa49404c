"""Progress of long loops: a tqdm bar in JupyterLab, plain-text lines under ``make``.

Two modes, chosen per process by the environment:

* **plain** (``AIP_PLAIN_PROGRESS=1``, exported by ``scripts/run_stage.sh`` for every stage run by
  ``make``): no bar; one text line on stderr at the start, then one every
  ``AIP_PROGRESS_INTERVAL`` seconds (default :data:`DEFAULT_INTERVAL_S`, 10 s) while the loop runs
  (at most one per interval; a heartbeat thread writes it even while a slow batch runs), and a
  final line when it ends. Every line starts with :data:`MARKER` (``[progress]``), so
  ``make all 2>&1 | grep -c '\\[progress\\]'`` counts them. Under papermill the kernel's stderr is
  streamed to the terminal (``--stderr-file /dev/stderr``) and kept in the executed notebook, which
  therefore ends with the loop's final state (``N/N … done``), not a frozen "0% | 0/3416" widget.
* **bar** (anything else, e.g. an interactive JupyterLab session): a ``tqdm.auto`` bar, as before.

Example line::

    [progress] whisper_tiny_en · asr+asr_steer_p5 · 1234/3538 stim (34.9%) · 2.85 stim/s · elapsed 7m13s · ETA 13m28s

The rate is the mean since the loop started (done / elapsed), the ETA ``(total - done) / rate``.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Iterable, Iterator, TypeVar

__all__ = ["MARKER", "ENV_PLAIN", "ENV_INTERVAL", "DEFAULT_INTERVAL_S", "plain_mode", "interval_s",
           "format_duration", "Progress", "track", "note"]

MARKER = "[progress]"
"""First token of every plain progress line."""
ENV_PLAIN = "AIP_PLAIN_PROGRESS"
"""Environment variable: ``1`` (or true/yes/on) selects plain lines instead of tqdm bars."""
ENV_INTERVAL = "AIP_PROGRESS_INTERVAL"
"""Environment variable: minimum seconds between two periodic plain lines (default 10)."""
DEFAULT_INTERVAL_S = 10.0

T = TypeVar("T")


def plain_mode() -> bool:
    """True when ``AIP_PLAIN_PROGRESS`` is ``1``/``true``/``yes``/``on`` (case-insensitive)."""
    return os.environ.get(ENV_PLAIN, "").strip().lower() in {"1", "true", "yes", "on"}


def interval_s() -> float:
    """Seconds between periodic plain lines: ``AIP_PROGRESS_INTERVAL`` if it is a number > 0, else 10."""
    try:
        v = float(os.environ.get(ENV_INTERVAL, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return v if v > 0 else DEFAULT_INTERVAL_S


def format_duration(seconds: float | None) -> str:
    """``3723.4`` → ``"1h02m03s"``, ``125`` → ``"2m05s"``, ``9.6`` → ``"10s"``; None → ``"?"``.

    Parameters
    ----------
    seconds : float or None
        Duration in s (rounded to whole seconds; negative values count as 0).
    """
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    s = max(0, int(round(seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"


def _write(line: str, stream=None) -> None:
    out = stream if stream is not None else sys.stderr  # looked up now: the kernel's stream
    out.write(line + "\n")
    try:
        out.flush()
    except (AttributeError, ValueError):  # closed or flush-less stream: the line is written anyway
        pass


def note(text: str, *, plain: bool | None = None, stream=None) -> str:
    """Print one summary line (``[progress] text``): on stderr in plain mode, else on stdout.

    Parameters
    ----------
    text : str
        The message (one line).
    plain : bool, optional
        Force the mode; default :func:`plain_mode`.
    stream : file-like, optional
        Where to write (default ``sys.stderr`` in plain mode, ``sys.stdout`` otherwise).

    Returns
    -------
    str
        The line written (without newline).
    """
    plain = plain_mode() if plain is None else plain
    line = f"{MARKER} {text}"
    _write(line, stream if stream is not None else (None if plain else sys.stdout))
    return line


class Progress:
    """Progress of one loop of ``total`` units: plain lines or a tqdm bar (see the module doc).

    Use as a context manager (``with Progress(n, "label") as p: ... p.update(k)``); leaving the
    block writes the final line (``done`` when ``done == total``, else ``stopped``) or closes the bar.

    Parameters
    ----------
    total : int >= 0
        Units of work.
    label : str
        What runs, e.g. ``"whisper_tiny_en · asr+asr_steer_p5"``.
    unit : str
        Unit name in lines and bar (``"stim"``, ``"bg"`` …).
    enabled : bool
        False shows nothing (the object still counts).
    plain : bool, optional
        Force plain lines (True) or a bar (False); default :func:`plain_mode`.
    interval : float > 0, optional
        Minimum seconds between periodic plain lines; default :func:`interval_s`.
    clock : callable, optional
        Monotonic clock in s (default ``time.monotonic``); tests pass a fake one.
    stream : file-like, optional
        Where plain lines go (default ``sys.stderr`` at the time of writing).
    heartbeat : bool, optional
        Plain mode: a background thread also writes the line when ``interval`` s pass without an
        update (a slow batch still shows the loop is alive, with the elapsed time and ETA moving).
        Default: on with the real clock, off with a fake ``clock``.

    Attributes
    ----------
    done : int
        Units done so far.
    lines : list of str
        Every plain line written (also kept when ``stream`` is a real stream).
    """

    def __init__(self, total: int, label: str, *, unit: str = "it", enabled: bool = True,
                 plain: bool | None = None, interval: float | None = None,
                 clock: Callable[[], float] | None = None, stream=None, heartbeat: bool | None = None):
        self.total, self.label, self.unit = int(total), str(label), unit
        self.enabled = bool(enabled)
        self.plain = plain_mode() if plain is None else bool(plain)
        self.interval = float(interval) if interval is not None else interval_s()
        self.clock = clock or time.monotonic
        self.stream = stream
        self.done = 0
        self.lines: list[str] = []
        self.closed = False
        self.t0 = self.clock()
        self._last_line = self.t0
        self._bar = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if not self.enabled:
            return
        if self.plain:
            self._emit(self.line(start=True))
            if heartbeat if heartbeat is not None else clock is None:
                self._thread = threading.Thread(target=self._beat, name="aiplib-progress", daemon=True)
                self._thread.start()
        else:
            from tqdm.auto import tqdm  # noqa: PLC0415

            self._bar = tqdm(total=self.total, desc=self.label, unit=self.unit, dynamic_ncols=True)

    # ------------------------------------------------------------------ numbers
    @property
    def elapsed(self) -> float:
        """Seconds since the loop started."""
        return self.clock() - self.t0

    def rate(self, elapsed: float | None = None) -> float | None:
        """Mean units per second since the start (None before any time has passed)."""
        el = self.elapsed if elapsed is None else elapsed
        return self.done / el if el > 0 else None

    def line(self, *, start: bool = False, final: bool = False) -> str:
        """The plain line for the current state (see the module doc for its form)."""
        head = f"{MARKER} {self.label} · {self.done}/{self.total} {self.unit}"
        if start:
            return f"{head} · start"
        el = self.elapsed
        pct = f" ({100.0 * self.done / self.total:.1f}%)" if self.total else ""
        r = self.rate(el)
        rate = f"{r:.3g} {self.unit}/s" if r is not None else f"? {self.unit}/s"
        tail = f"elapsed {format_duration(el)}"
        if final:
            state = "done" if self.done >= self.total else "stopped"
            return f"{head}{pct} · {rate} · {tail} · {state}"
        eta = format_duration((self.total - self.done) / r) if r else "?"
        return f"{head}{pct} · {rate} · {tail} · ETA {eta}"

    # ------------------------------------------------------------------ actions
    def _emit(self, line: str) -> None:
        self.lines.append(line)
        _write(line, self.stream)

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.interval)):
            self._maybe_emit()

    def _maybe_emit(self) -> None:
        with self._lock:
            if self.closed:
                return
            now = self.clock()
            if now - self._last_line >= self.interval and self.done < self.total:
                self._last_line = now
                self._emit(self.line())

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units; in plain mode write a line if ``interval`` s have passed since
        the last one."""
        with self._lock:
            self.done += int(n)
        if not self.enabled or self.closed:
            return
        if self._bar is not None:
            self._bar.update(int(n))
            return
        self._maybe_emit()

    def close(self) -> None:
        """Write the final line (plain) or close the bar; idempotent."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            self._emit(self.line(final=True))

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(items: Iterable[T], label: str, *, total: int | None = None, unit: str = "it",
          enabled: bool = True, **kw) -> Iterator[T]:
    """Iterate over ``items`` showing a :class:`Progress` (one unit per item).

    Parameters
    ----------
    items : iterable
        What to loop over.
    label, unit, enabled, **kw
        As :class:`Progress`.
    total : int, optional
        Default ``len(items)``.

    Yields
    ------
    Each item of ``items``; the final line is written when the loop ends or is left.
    """
    n = len(items) if total is None else total  # type: ignore[arg-type]
    with Progress(n, label, unit=unit, enabled=enabled, **kw) as p:
        for x in items:
            yield x
            p.update(1)
