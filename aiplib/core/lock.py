"""One writer per data folder: the ``flock`` every stage and ``make all`` take on
``data/<profile>/.aip-lock``.

``python -m aiplib.core.lock run ROOT [--mode exclusive|shard] [--wait S] [--command TEXT] -- CMD
...`` runs ``CMD`` holding the lock and exits with its status (:data:`BUSY_STATUS` with one line
naming the holder when the folder is in use; ``--wait S`` or ``$AIP_LOCK_WAIT`` waits up to S
seconds).

- ``exclusive`` (every stage, ``make all``, ``make merge``, ``make clean``): no other holder of
  either mode; the holder record ``{"pid", "host", "command", "mode", "started", "token"}`` is
  written into ``.aip-lock``.
- ``shard`` (stage 7 with ``SHARD=i/n``): a shared ``flock``, so shards run together but no stage
  rewrites the manifests under them; records in ``.aip-lock.d/<host>-<pid>-<token>.json``.

The command inherits the locked descriptor, so it keeps the lock until it ends. A record
whose writer no longer holds the ``flock`` is stale and taken over (the next run says whose it was).
A run inside a holder of the same ROOT (``AIP_LOCK_HELD``/``AIP_LOCK_TOKEN``: ``make all`` → each
stage) runs at once.

Stopping: the command runs in its own process group; SIGTERM, SIGINT or SIGHUP to the holder (make
sends SIGTERM to its recipe, a terminal's Ctrl-C reaches make's group) goes to that whole group
(papermill ends, and its kernel with it), and the holder keeps the lock and its record until every
process of the run has ended: the group and any process carrying the run's ``AIP_LOCK_TOKEN`` (the
Jupyter kernel runs in a session of its own). What is still running :data:`STOP_GRACE_S` seconds
after the signal gets SIGKILL. SIGTSTP and SIGCONT (Ctrl-Z, ``fg``) reach the group too. A lock file
that cannot be opened or written (read-only file or folder, full disk) stops with one line
(:class:`LockFileError`, exit status :data:`LOCK_FILE_STATUS`). A lock file deleted while waited for
(``make clean`` removes the folder under its lock) is opened again.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
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
#: Exit status when the lock file cannot be opened or written (``EX_CANTCREAT`` of sysexits.h).
LOCK_FILE_STATUS = 73
#: Signals that stop a run: forwarded to the command's process group, then the holder waits.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: Seconds the processes of a stopped run get to end (papermill's kernel shutdown takes up to ~5 s)
#: before the rest are killed (SIGKILL); ``$AIP_STOP_GRACE`` overrides.
STOP_GRACE_S = 20.0
#: The environment variable holding the token of the run's holder record (``AIP_LOCK_TOKEN``).
TOKEN_VARIABLE = "AIP_LOCK_TOKEN"


class FolderBusyError(RuntimeError):
    """The data folder is held by another run; ``str(exc)`` is the one line shown to the user."""


class LockFileError(OSError):
    """The lock file (or the data folder) cannot be created, opened or written; ``str(exc)`` is the
    one line shown to the user (the path, the system's reason, what to do)."""


def _lock_file_line(root: Path, path: Path, exc: OSError) -> str:
    """One line for an :class:`OSError` met on the lock file ``path`` of ``root``."""
    reason = exc.strerror or str(exc)
    where = exc.filename or path
    if exc.errno == errno.ENOSPC:
        todo = f"free space on the disk of {root}"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        todo = f"give yourself write permission to {root} and {path.name} in it (chmod u+w)"
    else:
        todo = f"check {root}"
    return (
        f"data folder {root}: cannot write its lock file {where} ({reason}); nothing was run: "
        f"{todo}, then run the same command again"
    )


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
    LockFileError
        If the folder or its lock file cannot be created, opened or written (one line).
    ValueError
        If ``mode`` is unknown.
    """
    if mode not in MODES:
        raise ValueError(f"lock mode {mode!r} is not one of {', '.join(MODES)}")
    root = Path(root)
    path = root / LOCK_NAME
    fd = _open_current(root, path, mode=mode, wait_s=wait_s, poll_s=poll_s)
    try:
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
    except OSError as exc:
        os.close(fd)
        raise LockFileError(_lock_file_line(root, path, exc)) from exc
    except BaseException:
        os.close(fd)
        raise
    return fd, rec, rec_path, taken_over


def _open_current(root: Path, path: Path, *, mode: str, wait_s: float, poll_s: float) -> int:
    """Open ``path`` (creating ``root``) and take its ``flock`` (:func:`_wait_for_flock`); when the
    file was deleted or replaced meanwhile (``make clean`` removes the folder under its lock), open
    the new one and try again. Returns the locked descriptor.

    Raises :class:`LockFileError` (one line) when the folder or file cannot be created or opened.
    """
    while True:
        try:
            root.mkdir(parents=True, exist_ok=True)
            fd = open_lock_file(path)
        except OSError as exc:
            raise LockFileError(_lock_file_line(root, path, exc)) from exc
        try:
            _wait_for_flock(fd, root, mode=mode, wait_s=wait_s, poll_s=poll_s)
            if _is_current(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _is_current(fd: int, path: Path) -> bool:
    """True when ``path`` still names the open file ``fd`` (not deleted or replaced)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


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
    """Run ``cmd`` holding the lock of ``root``; returns its exit status (128 + N when signal N
    ended it, as a shell reports it).

    ``cmd`` runs in a process group of its own: a stop signal (:data:`STOP_SIGNALS`) reaches the
    whole group, and the lock and its holder record are kept until every process of the run has
    ended (:func:`run_pids`; SIGKILL after :data:`STOP_GRACE_S` s). Inside a holder of the same
    ``root`` the command runs at once (signals passed on to it).

    Raises
    ------
    FolderBusyError, LockFileError
        As :func:`acquire`.
    ValueError
        If ``cmd`` is empty.
    """
    root = Path(root)
    if not cmd:
        raise ValueError("no command to run")
    if _held_by_ancestor(root):
        nested = _StopForwarder(group=False)
        with nested.installed():
            proc = subprocess.Popen(cmd)
            nested.pid = proc.pid
            return _exit_status(proc.wait())
    fd, rec, rec_path, old = acquire(
        root, mode=mode, command=command or " ".join(cmd), wait_s=wait_s
    )
    if old:
        _say_taken_over(root, rec, old)
    env = dict(os.environ, AIP_LOCK_HELD=str(root), AIP_LOCK_TOKEN=rec["token"])
    stop = _StopForwarder(group=True, token=rec["token"], command=rec["command"])
    try:
        with stop.installed():
            # the command inherits the locked descriptor: it keeps the lock if we die
            proc = subprocess.Popen(cmd, env=env, pass_fds=(fd,), process_group=0)
            stop.pid = proc.pid
            if stop.signum is not None:  # arrived while the command was starting
                stop.send(stop.signum)
            status = proc.wait()
            if stop.signum is not None:
                stop.wait_for_run()
    finally:
        _release(fd, rec_path, mode)
    return _exit_status(status)


def _exit_status(status: int) -> int:
    """A :class:`subprocess.Popen` return code as a shell's status (signal N: 128 + N)."""
    return 128 - status if status < 0 else status


def _say_taken_over(root: Path, rec: dict, old: dict) -> None:
    """The note that ``rec`` took over the stale record ``old`` of ``root``."""
    same_host = old.get("host") == rec["host"]
    state = "ended" if same_host and not _pid_alive(old.get("pid")) else "no longer holds it"
    print(
        f"note: took over the stale lock of {root} left by {_describe(old)}, which {state}",
        file=sys.stderr,
        flush=True,
    )


class _StopForwarder:
    """Signal handlers of a holder: a stop signal (:data:`STOP_SIGNALS`) is noted in ``signum`` and
    sent on to the command ``pid`` (to its process group with ``group``, as are SIGTSTP, which
    then stops the holder, and SIGCONT). With ``token``, what of the run is left ``grace_s``
    seconds after the first stop signal is killed (:meth:`kill_rest`)."""

    def __init__(self, *, group: bool, token: str | None = None, command: str = ""):
        self.group = group
        self.token = token
        self.command = command
        self.pid: int | None = None
        self.signum: int | None = None
        self.grace_s = float(os.environ.get("AIP_STOP_GRACE") or STOP_GRACE_S)
        self.deadline: float | None = None
        self.killed: list[int] | None = None
        self.timer: threading.Timer | None = None
        self.kill_lock = threading.Lock()

    def handle(self, signum, _frame) -> None:
        if signum in STOP_SIGNALS and self.signum is None:
            self.signum = signum
            if self.token is not None:
                self.deadline = time.monotonic() + self.grace_s
                self.timer = threading.Timer(self.grace_s, self.kill_rest)
                self.timer.daemon = True
                self.timer.start()
        self.send(signum)
        if signum == signal.SIGTSTP:
            os.kill(os.getpid(), signal.SIGSTOP)

    def send(self, signum: int) -> None:
        if self.pid is None:
            return
        try:
            if self.group:
                os.killpg(self.pid, signum)
            else:
                os.kill(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    @contextlib.contextmanager
    def installed(self):
        signums = list(STOP_SIGNALS)
        if self.group:
            signums += [signal.SIGTSTP, signal.SIGCONT]
        old = {s: signal.signal(s, self.handle) for s in signums}
        try:
            yield self
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            if self.timer is not None:
                self.timer.cancel()

    def kill_rest(self) -> None:
        """SIGKILL every process of the run still there (once), saying so on stderr."""
        with self.kill_lock:
            left = run_pids(self.token, self.pid)
            if self.killed is not None or not left:
                return
            self.killed = left
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.send(signal.SIGKILL)
        name = signal.Signals(self.signum).name
        print(
            f"make: {self.command} did not end within {self.grace_s:g} s of {name}; killed what "
            f"was left (pid {', '.join(map(str, left))})",
            file=sys.stderr,
            flush=True,
        )

    def wait_for_run(self) -> None:
        """Wait until no process of the run is left (:func:`run_pids`): until the grace period
        ends, then (after :meth:`kill_rest`) up to 5 s more."""
        if not _wait_until_gone(self.token, self.pid, self.deadline):
            self.kill_rest()
            _wait_until_gone(self.token, self.pid, time.monotonic() + 5.0)


def _wait_until_gone(token: str, pgid: int | None, deadline: float) -> bool:
    """Poll :func:`run_pids` every 0.1 s until it is empty (True) or ``deadline`` passes."""
    while run_pids(token, pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def run_pids(token: str, pgid: int | None = None) -> list[int]:
    """Pids of the live processes of a run: those whose environment holds ``AIP_LOCK_TOKEN=token``
    (what the holder started, its Jupyter kernel included, which runs in a session of its own) and
    the members of process group ``pgid``; zombies and this process left out.

    Read from ``/proc`` (Linux). Elsewhere only the group is probed (``killpg(pgid, 0)``) and
    ``[pgid]`` is returned while it has a member.
    """
    proc = Path("/proc")
    if not (proc / "self" / "environ").exists():
        return [pgid] if pgid is not None and _group_alive(pgid) else []
    needle = f"\0{TOKEN_VARIABLE}={token}\0".encode()
    pids = []
    for d in proc.iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            stat = (d / "stat").read_bytes()
            fields = stat[stat.rindex(b")") + 2 :].split()
            if fields[0] == b"Z":
                continue
            in_group = pgid is not None and int(fields[2]) == pgid
            if in_group or needle in b"\0" + (d / "environ").read_bytes():
                pids.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or another user's process
    return sorted(pids)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    except LockFileError as exc:
        print(f"make: {exc}", file=sys.stderr)
        return LOCK_FILE_STATUS


if __name__ == "__main__":
    sys.exit(main())
