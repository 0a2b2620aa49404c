"""Progress of long loops: a ``tqdm.auto`` bar in JupyterLab, tqdm's text meter as plain lines under
``make``.

With ``AIP_PLAIN_PROGRESS=1`` (exported by ``scripts/run_stage.sh``) each redraw of the meter is one
line on stderr starting with :data:`MARKER`, so ``grep -c '\\[progress\\]'`` counts them::

    [progress] whisper_tiny_en · asr+asr_steer_p5:  35%|###5      | 1234/3538 [07:13<13:28,
    2.85stim/s]

tqdm takes its defaults from ``TQDM_*`` environment variables read when it is imported
(``scripts/run_stage.sh`` sets ``TQDM_MININTERVAL=10``: at most one line per 10 s). While a loop
runs, a line is also written when ``maxinterval`` s (``TQDM_MAXINTERVAL``, default 10) pass without
one, so a slow batch still shows the elapsed time moving.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Iterator, Sequence, TypeVar

from tqdm.auto import tqdm as auto_tqdm
from tqdm.std import tqdm as std_tqdm

#: First token of every plain progress line.
MARKER = "[progress]"
#: Environment variable: ``1`` (or true/yes/on) selects plain lines instead of a tqdm bar.
ENV_PLAIN = "AIP_PLAIN_PROGRESS"

#: The item type of :func:`track`.
T = TypeVar("T")


def plain_mode() -> bool:
    """True when ``AIP_PLAIN_PROGRESS`` is ``1``/``true``/``yes``/``on`` (case-insensitive)."""
    return os.environ.get(ENV_PLAIN, "").strip().lower() in {"1", "true", "yes", "on"}


class _Lines:
    """A file for tqdm that writes each redraw (``\\r`` + meter) as one line to ``stream``."""

    def __init__(self, lines: list, stream=None):
        self.lines = lines
        self.stream = stream

    def write(self, s: str) -> None:
        """Append the redraw ``s`` (without ``\\r`` and trailing space) to ``lines`` and write it
        as one line; an empty redraw is skipped."""
        line = s.replace("\r", "").rstrip()
        if not line:
            return
        self.lines.append(line)
        out = self.stream
        if out is None:
            out = sys.stderr  # the kernel's stream, looked up now
        out.write(line + "\n")
        out.flush()

    def flush(self) -> None:
        """Nothing to do: :meth:`write` flushes each line."""


def note(text: str, *, plain: bool | None = None, stream=None) -> str:
    """Print ``[progress] text`` on stderr in plain mode, else on stdout; return the line."""
    line = f"{MARKER} {text}"
    if plain is None:
        plain = plain_mode()
    out = stream
    if not out:
        out = sys.stderr if plain else sys.stdout
    out.write(line + "\n")
    out.flush()
    return line


class Progress:
    """Progress of one loop of ``total`` units (a context manager; leaving it closes the bar).

    ``total`` units (int >= 0) of ``label`` (``"whisper_tiny_en · asr+asr_steer_p5"``) counted in
    ``unit``; ``enabled=False`` shows nothing; ``plain`` plain lines or a ``tqdm.auto`` bar (default
    :func:`plain_mode`); ``interval`` seconds between lines (tqdm's ``mininterval`` and
    ``maxinterval``; default tqdm's); ``stream`` where plain lines go (default ``sys.stderr``).
    ``done`` counts the units done, ``lines`` holds every plain line written.
    """

    def __init__(
        self,
        total: int,
        label: str,
        *,
        unit: str = "it",
        enabled: bool = True,
        plain: bool | None = None,
        interval: float | None = None,
        stream=None,
    ):
        self.done = 0
        self.lines = []
        if plain is None:
            plain = plain_mode()
        self.plain = bool(plain)
        options = dict(total=int(total), unit=unit, disable=not enabled)
        if interval is not None:
            options.update(mininterval=interval, maxinterval=interval)
        if self.plain:
            # position 0: lines, never cursor moves between bars
            self.bar = std_tqdm(
                desc=f"{MARKER} {label}",
                file=_Lines(self.lines, stream),
                miniters=1,
                ascii=True,
                position=0,
                **options,
            )
        else:
            self.bar = auto_tqdm(desc=label, dynamic_ncols=True, **options)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="aiplib-progress", daemon=True)
        if self.plain and enabled:
            self._thread.start()

    def _beat(self) -> None:
        """Redraw the bar when ``maxinterval`` s passed without a line (the heartbeat thread)."""
        bar = self.bar
        while not self._stop.wait(min(1.0, bar.maxinterval)):
            if time.time() - bar.last_print_t >= bar.maxinterval:
                bar.refresh()
                bar.last_print_t = time.time()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units."""
        self.done += int(n)
        self.bar.update(int(n))

    def close(self) -> None:
        """Write the final state and close the bar; idempotent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def track(
    items: Sequence[T],
    label: str,
    *,
    unit: str = "it",
    enabled: bool = True,
    plain: bool | None = None,
    interval: float | None = None,
    stream=None,
) -> Iterator[T]:
    """Iterate over ``items`` (of ``len(items)`` units) showing a :class:`Progress` of one unit per
    item.

    ``label``, ``unit``, ``enabled``, ``plain``, ``interval`` (s) and ``stream`` are those of
    :class:`Progress`.
    """
    progress = Progress(
        len(items), label, unit=unit, enabled=enabled, plain=plain, interval=interval, stream=stream
    )
    with progress as p:
        for x in items:
            yield x
            p.update(1)
