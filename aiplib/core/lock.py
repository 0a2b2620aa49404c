"""One writer per data folder: the ``flock`` every stage and ``make all`` take on
``data/<profile>/.aip-lock``.

``python -m aiplib.core.lock run ROOT [--mode exclusive|shard] [--wait S] [--command TEXT] -- CMD
...`` runs ``CMD`` holding the lock and exits with its status (:data:`BUSY_STATUS` with one line
naming the holder when the folder is in use; ``--wait S`` or ``$AIP_LOCK_WAIT`` waits up to S
seconds).

- ``exclusive`` (every stage, ``make all``, ``make merge``): no other holder of either mode; the
  holder
  record ``{"pid", "host", "command", "mode", "started", "token"}`` is written into ``.aip-lock``.
- ``shard`` (stage 7 with ``SHARD=i/n``): a shared ``flock``, so shards run together but no stage
  rewrites the manifests under them; records in ``.aip-lock.d/<host>-<pid>-<token>.json``.

The command inherits the locked descriptor, so the kernel keeps the lock until it ends. A record
whose writer no longer holds the ``flock`` is stale and taken over (the next run says whose it was).
A run inside a holder of the same ROOT (``AIP_LOCK_HELD``/``AIP_LOCK_TOKEN``: ``make all`` → each
stage) runs at once.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no locking
    fcntl = None

#: Exit status of a run that found the folder in use (``EX_TEMPFAIL`` of sysexits.h).
BUSY_STATUS = 75
#: The lock file inside the workspace root; shard records go to ``.aip-lock.d/``.
LOCK_NAME = ".aip-lock"
#: Lock modes: ``exclusive`` (no other holder) and ``shard`` (shared among stage-7 shards).
MODES = ("exclusive", "shard")
#: True where :func:`fcntl.flock` exists (POSIX); elsewhere :func:`try_flock` always succeeds.
LOCKING_SUPPORTED = fcntl is not None
#: ``errno`` values of a ``flock`` refused because another process holds a conflicting lock.
_BUSY_ERRNOS = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class FolderBusyError(RuntimeError):
    """The data folder is held by another run; ``str(exc)`` is the one line shown to the user."""


def open_lock_file(path) -> int:
    """Open (create, mode 0644) the lock file ``path`` for reading and writing; returns the
    descriptor to pass to :func:`try_flock` (closing it releases the lock).

    Raises :class:`OSError` if the file cannot be opened or created.
    """
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)


def try_flock(fd: int, *, shared: bool = False) -> bool:
    """Take a ``flock`` on ``fd`` without waiting: exclusive, or shared with ``shared=True``.

    Returns False when another open file holds a conflicting lock (also in this process), True when
    the lock is taken (always True without ``fcntl``, see :data:`LOCKING_SUPPORTED`). The kernel
    drops the lock when every descriptor of the open file is closed, or the process ends.

    Raises
    ------
    OSError
        A failure other than a conflicting holder (a bad descriptor, no locks on this file system).
    """
    if fcntl is None:
        return True
    flag = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        fcntl.flock(fd, flag | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY_ERRNOS:
            return False
        raise
    return True


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):
        return True  # another user's process, or a record we cannot read: assume alive
    return True


def _read_record(path: Path) -> dict | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None


def _describe(rec: dict | None) -> str:
    if not rec:
        return "another process (no holder record)"
    return (
        f"pid {rec.get('pid')} on host {rec.get('host')} ({rec.get('mode', 'exclusive')}: "
        f"{rec.get('command') or '?'}, since {rec.get('started', '?')})"
    )


def holders(root) -> list[dict]:
    """Holder records of ``root``'s lock: the exclusive one, then the shards by start and command
    (a shard record of a pid not running on this host is removed)."""
    root = Path(root)
    rec = _read_record(root / LOCK_NAME)
    host = socket.gethostname()
    shards = []
    for p in sorted((root / f"{LOCK_NAME}.d").glob("*.json")):
        r = _read_record(p)
        if r and r.get("host") == host and not _pid_alive(r.get("pid")):
            p.unlink(missing_ok=True)
        elif r:
            shards.append(r)
    shards.sort(key=lambda r: (str(r.get("started")), str(r.get("command"))))
    return ([rec] if rec else []) + shards


def _busy_line(root: Path, mode: str) -> str:
    live = holders(root)
    if mode == "shard":  # a shard is refused only by an exclusive holder
        live = [r for r in live if r.get("mode", "exclusive") == "exclusive"] or live
    who = "; ".join(_describe(r) for r in live[:3]) or _describe(None)
    more = f" and {len(live) - 3} more" if len(live) > 3 else ""
    return (
        f"data folder {root} is in use by {who}{more}: one run writes a data folder at a time; "
        "wait for it to end, or set LOCK_WAIT=<seconds> to wait"
    )


def acquire(
    root, *, mode: str = "exclusive", command: str = "", wait_s: float = 0.0, poll_s: float = 0.5
):
    """Take the lock of the workspace ``root``.

    ``root`` is the workspace root (created if missing); ``command`` what runs (shown to another
    run); ``wait_s`` how long to wait for the holder (0: stop at once), trying every ``poll_s`` s.
    Returns ``(fd, record, record_path, taken_over)``: the locked descriptor (keep it open), the
    holder record written, where, and the stale record taken over (or None).

    Raises
    ------
    FolderBusyError
        If another run holds a conflicting lock after ``wait_s`` seconds.
    ValueError
        If ``mode`` is unknown.
    """
    if mode not in MODES:
        raise ValueError(f"lock mode {mode!r} is not one of {', '.join(MODES)}")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    fd = open_lock_file(path)
    try:
        _wait_for_flock(fd, root, mode=mode, wait_s=wait_s, poll_s=poll_s)
    except BaseException:
        os.close(fd)
        raise
    rec = _new_record(command, mode)
    # we hold the flock, so whoever wrote the exclusive record no longer holds it: stale
    taken_over = _read_record(path) or None
    if mode == "exclusive" or taken_over:  # the exclusive record is ours now, or stale: cleared
        os.ftruncate(fd, 0)
    if mode == "exclusive":
        os.pwrite(fd, json.dumps(rec).encode(), 0)
        rec_path = path
    else:
        rec_path = _write_shard_record(root, rec)
    return fd, rec, rec_path, taken_over


def _wait_for_flock(fd: int, root: Path, *, mode: str, wait_s: float, poll_s: float) -> None:
    """Take the ``flock`` of ``mode``, trying every ``poll_s`` s for up to ``wait_s`` s (one line
    on stderr says it waits); :class:`FolderBusyError` when the time is up."""
    deadline = time.monotonic() + max(0.0, float(wait_s))
    said = False
    while not try_flock(fd, shared=mode != "exclusive"):
        line = _busy_line(root, mode)
        if time.monotonic() >= deadline:
            raise FolderBusyError(line) from None
        if not said:
            holder = line.split(": one run")[0]
            print(f"waiting up to {wait_s:g} s: {holder}", file=sys.stderr, flush=True)
            said = True
        time.sleep(poll_s)


def _new_record(command: str, mode: str) -> dict:
    """The holder record of this process: pid, host, command, mode, start time (UTC), token."""
    return dict(
        pid=os.getpid(),
        host=socket.gethostname(),
        command=command,
        mode=mode,
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        token=uuid.uuid4().hex,
    )


def _write_shard_record(root: Path, rec: dict) -> Path:
    """Write a shard holder's record into ``.aip-lock.d/`` (after removing dead shards' records)."""
    d = root / f"{LOCK_NAME}.d"
    d.mkdir(exist_ok=True)
    holders(root)  # removes the records of dead shards on this host
    rec_path = d / f"{rec['host']}-{rec['pid']}-{rec['token'][:8]}.json"
    rec_path.write_text(json.dumps(rec), encoding="utf-8")
    return rec_path


def _release(fd: int, rec_path: Path, mode: str) -> None:
    try:
        if mode == "exclusive":
            os.ftruncate(fd, 0)
        else:
            rec_path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _held_by_ancestor(root: Path) -> bool:
    held = os.environ.get("AIP_LOCK_HELD")
    token = os.environ.get("AIP_LOCK_TOKEN")
    if not held or not token:
        return False
    try:
        same = Path(held).resolve() == root.resolve()
    except OSError:
        return False
    return same and any(r.get("token") == token for r in holders(root))


def run(
    root, cmd: list[str], *, mode: str = "exclusive", command: str = "", wait_s: float = 0.0
) -> int:
    """Run ``cmd`` holding the lock of ``root``; returns its exit status.

    Raises
    ------
    FolderBusyError
        As :func:`acquire`.
    """
    root = Path(root)
    if not cmd:
        raise ValueError("no command to run")
    if _held_by_ancestor(root):
        return subprocess.call(cmd)
    fd, rec, rec_path, old = acquire(
        root, mode=mode, command=command or " ".join(cmd), wait_s=wait_s
    )
    if old:
        state = (
            "ended"
            if old.get("host") == rec["host"] and not _pid_alive(old.get("pid"))
            else "no longer holds it"
        )
        print(
            f"note: took over the stale lock of {root} left by {_describe(old)}, which {state}",
            file=sys.stderr,
            flush=True,
        )
    env = dict(os.environ, AIP_LOCK_HELD=str(root), AIP_LOCK_TOKEN=rec["token"])
    try:
        # the command inherits the locked descriptor: it keeps the lock if we die
        proc = subprocess.Popen(cmd, env=env, pass_fds=(fd,))
    except BaseException:
        _release(fd, rec_path, mode)
        raise

    def forward(signum, _frame):
        proc.send_signal(signum)

    old_handlers = {}
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        old_handlers[s] = signal.signal(s, forward)
    try:
        return proc.wait()
    finally:
        for s, h in old_handlers.items():
            signal.signal(s, h)
        _release(fd, rec_path, mode)


def main(argv=None) -> int:
    """Command line: ``run ROOT [--mode M] [--wait S] [--command T] -- CMD ...`` (the module text)
    and ``show ROOT`` (prints the holder records)."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.core.lock")
    sub = ap.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run a command holding the data folder's lock")
    r.add_argument("root")
    r.add_argument("--mode", choices=MODES, default="exclusive")
    r.add_argument(
        "--wait",
        type=float,
        default=None,
        help="seconds to wait for the holder (default $AIP_LOCK_WAIT, else 0: stop at once)",
    )
    r.add_argument("--command", default="")
    sub.add_parser("show", help="print who holds the lock").add_argument("root")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    cmd = argv[cut + 1 :]
    if a.action == "show":
        for rec in holders(a.root):
            print(_describe(rec))
        return 0
    wait = a.wait if a.wait is not None else float(os.environ.get("AIP_LOCK_WAIT") or 0)
    try:
        return run(a.root, cmd, mode=a.mode, command=a.command, wait_s=wait)
    except FolderBusyError as exc:
        print(f"make: {exc}", file=sys.stderr)
        return BUSY_STATUS


if __name__ == "__main__":
    sys.exit(main())
