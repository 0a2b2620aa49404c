#!/usr/bin/env bash
# Run one notebook stage with papermill: the recipe of `make run-stage` (see Makefile).
#
#   scripts/run_stage.sh STAGE NOTEBOOK_DIR OUT_DIR [papermill arguments ...]
#
# Executes NOTEBOOK_DIR/STAGE.ipynb (working directory NOTEBOOK_DIR) into OUT_DIR/STAGE.running.ipynb,
# keeps papermill's messages in OUT_DIR/STAGE.log and shows them live without Python traceback
# frames (they stay in the log). On success the executed copy becomes OUT_DIR/STAGE.ipynb (and an
# earlier STAGE.failed.ipynb is removed); on
# failure it is kept as OUT_DIR/STAGE.failed.ipynb (the last good copy is never replaced) and the
# script ends with the reason: the failing cell and its error, or one line when the kernel died
# (killed by the system, most often out of memory, or by kill -9). Exit status 1 on failure.
# Every path may contain spaces. Environment: PAPERMILL (default .venv/bin/papermill), FILTER_PYTHON
# (default .venv/bin/python, runs the live filter), AIP_PROFILE and AIP_DATA_ROOT (passed on),
# AIP_RUN_TAG (appended to the output names, e.g. OUT_DIR/STAGE.shard-0-of-4.ipynb: make sets it
# for stage 7 with SHARD=i/n, so shards running at once never share an executed copy or log),
# AIP_LOCK_WAIT (seconds to wait for another run of the same data folder; default 0: stop at once).
# One writer per data folder: the stage runs under the lock of OUT_DIR's parent (the workspace
# data/<profile>, python -m aiplib.core.lock): a second run of the same folder stops with one line naming
# the holder (exit status 75); a stage-7 shard (AIP_RUN_TAG=.shard-*) takes the shared "shard" mode, so
# shards run together; inside `make all` (which holds the lock) a stage runs at once.
# A failure ends with one line giving the exception type and its whole message (continuation lines
# joined, a long one cut after 6 lines naming the log; read from papermill's stream as it passes, so it
# is known even when the log cannot be written, e.g. on a full disk). A stop signal ends with one line
# saying the stage was stopped (see the papermill call below).
# Parameters (-p/-r NAME VALUE, -y YAML) reach the notebook only if its parameters cell declares them
# (aiplib.core.papermill_args, papermill's inspect_notebook): make passes one set to every stage; a name that no notebook
# of NOTEBOOK_DIR declares (a typo) stops the stage before papermill starts, with one line naming the closest declared name.
set -u -o pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 STAGE NOTEBOOK_DIR OUT_DIR [papermill arguments ...]" >&2
  exit 2
fi
stage=$1 nbdir=$2 out=$3
shift 3
papermill=${PAPERMILL:-.venv/bin/papermill}
filter_python=${FILTER_PYTHON:-.venv/bin/python}
tag=${AIP_RUN_TAG:-}  # e.g. ".shard-0-of-4": this run's own executed copy and log (stage-7 shards run at once)
log="$out/$stage$tag.log"
running="$out/$stage$tag.running.ipynb"
root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)

# Take the data folder's lock (aiplib/core/lock.py), then run this script again inside it.
if [ -z "${AIP_STAGE_LOCKED:-}" ]; then
  mkdir -p -- "$out" || exit 1
  mode=exclusive
  case "$stage$tag" in 07_*.shard-*) mode=shard ;; esac
  AIP_STAGE_LOCKED=1 PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" exec "$filter_python" -m aiplib.core.lock run \
    "$(dirname -- "$out")" --mode "$mode" --command "stage $stage$tag (profile ${AIP_PROFILE:-demo})" \
    -- bash "${BASH_SOURCE[0]}" "$stage" "$nbdir" "$out" "$@"
fi
unset AIP_STAGE_LOCKED

mkdir -p -- "$out" || exit 1
echo "=== stage $stage (profile ${AIP_PROFILE:-demo}) ==="

# Keep only the parameters this notebook declares (NUL-separated, so values with spaces survive).
if [ -f "$nbdir/$stage.ipynb" ]; then
  mapfile -d '' -t pm_args < <(PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$filter_python" \
    -m aiplib.core.papermill_args filter-args "$nbdir/$stage.ipynb" "$@")
  wait $! || { echo "make: stage $stage FAILED before papermill started" >&2; exit 1; }
else
  pm_args=("$@")  # papermill reports the missing notebook
fi

# After a success: the stage record (aiplib/core/stage_records.py: hashes of the notebook, aiplib,
# these parameters, the environment, the files read and written since start_ns), which lets
# `make all` and `make NN` skip the stage while nothing changes. Only when make asks for it
# (AIP_STAGE_RECORD=1, `make run-stage`), not for a stage-7 shard.
start_ns=$(date +%s%N)
record_stage() {
  [ -z "$tag" ] && [ -n "${AIP_STAGE_RECORD:-}" ] || return 0
  PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$filter_python" -m aiplib.core.stage_records record "$stage" \
    --notebooks "$nbdir" --out "$out" --start-ns "$start_ns" -- ${pm_args[@]+"${pm_args[@]}"} ||
    echo "warning: no stage record written for $stage; the next \`make all\` runs it again" >&2
}

# Pass stderr through unchanged (progress bars included) until a traceback starts at the beginning of
# a line; hide the rest (it is in the log). Two known-benign kernel lines are also left off the screen
# (only: each is matched from the start of its line; both stay in the log):
# - "[IPKernelApp] WARNING | Kernel is running over TCP without encryption...": ipykernel >= 7.3 logs
#   it at every kernel start unless the kernel manager provisions CurveZMQ keys
#   (KernelManager.transport_encryption = "auto", which the .venv kernelspec supports) or uses IPC
#   transport. papermill's command line cannot configure the kernel manager (no config option;
#   nbclient builds it from an empty traitlets config), so the line is filtered here. The kernel and
#   papermill talk over the loopback interface of this machine.
# - "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.": jupyter_client's shutdown_kernel
#   interrupts the kernel (SIGINT) before it sends the shutdown request, so a kernel still inside a
#   message handler when a stage ends logs it. A real interrupt of a cell is a cell error instead
#   (papermill's "Exception encountered", reported below as a failure).
hide_traceback='
import os, sys
mark = b"Traceback (most recent call last):"
benign = (b"[IPKernelApp] WARNING | Kernel is running over TCP without encryption.",
          b"[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel")
head = b"[IPKernelApp] "
buf, hidden = b"", False
import re
exc_line = re.compile(rb"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt)(?::.*)?$")
ansi = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")
reason, pending, more, joining = b"", b"", [], False
stop_join = re.compile(rb"^(?:Traceback \(most recent call last\)|During handling|The above exception)")
def note(data):  # the last line that names an exception (type: message), ANSI colours removed,
    global reason, pending, joining  # and the continuation lines of the message (up to a blank line)
    pending += data
    *lines, pending = re.split(rb"\r\n|[\r\n]", pending)
    for ln in lines:
        ln = ansi.sub(b"", ln).strip()
        if exc_line.match(ln) and not ln.startswith(b"Exception encountered"):
            reason, joining = ln, True
            more.clear()
        elif joining and ln and not stop_join.match(ln) and len(more) < 10000:
            more.append(ln)
        else:
            joining = False
def whole_reason(keep=6):  # one line: the message joined ("a:" + " b", else "a; b"), long ones cut
    text = reason
    for ln in more[:keep] if len(more) > keep + 1 else more:
        text += (b" " if text.endswith(b":") else b"; ") + ln
    if len(more) > keep + 1:
        text += b" ... and %d more lines (the whole message is in %s)" % (len(more) - keep, log)
    return text
log = os.fsencode(sys.argv[1]) if len(sys.argv) > 1 else b"the log"
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    note(chunk)
    if hidden:
        continue
    buf += chunk
    out = []
    while True:  # complete lines (ended by \n or \r: progress bars redraw with \r)
        ends = [k for k in (buf.find(b"\n"), buf.find(b"\r")) if k >= 0]
        if not ends:
            break
        line, buf = buf[:min(ends) + 1], buf[min(ends) + 1:]
        if line.startswith(mark):
            hidden, buf = True, b""
            break
        if not line.startswith(benign):
            out.append(line)
    # an unfinished line is shown at once, unless it may still become a traceback or a benign line
    if buf and not (mark.startswith(buf) or head.startswith(buf) or buf.startswith(head)):
        out.append(buf)
        buf = b""
    os.write(2, b"".join(out))
if not hidden and not buf.startswith((mark, *benign)):
    os.write(2, buf)
note(b"\n")
os.write(1, b"reason " + whole_reason() + b"\n")
'

# papermill's stdout goes to ours (fd 3); its stderr to the log and, filtered, to our stderr. The
# kernel's stderr (the plain `[progress]` lines of aiplib.core.progress, selected by AIP_PLAIN_PROGRESS=1,
# at most one per TQDM_MININTERVAL s, and warnings) is streamed there live (--stderr-file); papermill's
# own per-cell bar is off.
# The filter's stdout (captured here) is one line "reason <last exception line and the rest of its
# message, joined>", then the statuses.
# A stop signal (SIGTERM, SIGINT, SIGHUP) reaches this script's whole process group (python -m
# aiplib.core.lock runs it in a group of its own and passes the signal on; make sends SIGTERM to its
# recipe, Ctrl-C reaches make): papermill ends (on SIGINT it shuts its kernel down; on SIGTERM it
# dies and the kernel, whose parent is gone, ends within a second: ipykernel's parent poller; the
# lock's holder waits for both), while this script, its subshell, tee and the filter stay to the end
# (tee and the filter ignore the signal, so the log and the reason are complete); the last line
# then says the stage was stopped.
stopped=""
trap 'stopped=TERM' TERM
trap 'stopped=INT' INT
trap 'stopped=HUP' HUP
exec 3>&1
result=$( { trap : TERM INT HUP
    AIP_PLAIN_PROGRESS=${AIP_PLAIN_PROGRESS:-1} TQDM_MININTERVAL=${TQDM_MININTERVAL:-10} "$papermill" --cwd "$nbdir" "$nbdir/$stage.ipynb" "$running" \
    ${pm_args[@]+"${pm_args[@]}"} --log-level WARNING --no-progress-bar --stderr-file /dev/stderr 2>&1 1>&3 3>&- \
    | { trap '' TERM INT HUP; exec tee "$log"; } 3>&- \
    | { trap '' TERM INT HUP; exec "$filter_python" -c "$hide_traceback" "$log"; } 3>&-
    echo "status ${PIPESTATUS[*]}"; } )
exec 3>&-
read -r _ status tee_status _ <<<"$(tail -n 1 <<<"$result")"
reason=$(grep -m1 "^reason " <<<"$result" | cut -c8-)
if [ "${tee_status:-0}" -ne 0 ]; then
  echo "warning: the log $log could not be written in full (see tee's message above)" >&2
fi
redo="re-running \`make ${stage%%_*}\` with the same variables resumes where it stopped"
if [ -n "$stopped" ] && [ "${status:-1}" -ne 0 ]; then
  mv -f -- "$running" "$out/$stage$tag.failed.ipynb" 2>/dev/null
  echo "" >&2
  echo "executed copy: $out/$stage$tag.failed.ipynb; full log: $log" >&2
  echo "make: stage $stage STOPPED by SIG$stopped (papermill and its kernel have ended); finished work is kept, so $redo" >&2
  exit $((128 + $(kill -l "$stopped")))
fi
if [ "${status:-1}" -eq 0 ]; then
  # the copy of an earlier failed run no longer describes the stage: it goes with the success
  mv -f -- "$running" "$out/$stage$tag.ipynb" && { rm -f -- "$out/$stage$tag.failed.ipynb"; record_stage; exit 0; }
  echo "make: stage $stage FAILED: the executed copy could not be moved to $out/$stage$tag.ipynb; finished work is kept" >&2
  exit 1
fi

mv -f -- "$running" "$out/$stage$tag.failed.ipynb" 2>/dev/null
echo "" >&2
in_log() { [ -f "$log" ] && grep "$@" -- "$log" 2>/dev/null; }  # a regular file only (not a device)
if in_log -qE "DeadKernelError|Kernel died" || [[ "$reason" == *DeadKernelError* ]]; then
  echo "executed copy: $out/$stage$tag.failed.ipynb; full log: $log" >&2
  echo "make: stage $stage FAILED: the kernel died (killed by the system, most often for lack of memory, or by kill -9); finished work is kept, so $redo" >&2
  exit 1
fi
if in_log -q "^Exception encountered at"; then
  echo "make: stage $stage FAILED — notebook $nbdir/$stage.ipynb" >&2
  in_log -A4 "^Exception encountered at" | grep -v "^---" >&2
else
  echo "make: stage $stage FAILED — notebook $nbdir/$stage.ipynb (papermill exit status $status)" >&2
fi
echo "executed copy: $out/$stage$tag.failed.ipynb; full log: $log" >&2
[ -n "$reason" ] || reason=$(in_log -v "^[[:space:]]" | grep . | tail -n 1)
[ -n "$reason" ] || reason="papermill exit status $status (no exception message in its output)"
case "$reason" in
  *"No space left on device"*) hint="; free space on the disk of $(dirname -- "$out"), then $redo" ;;
  *"Permission denied"*) hint="; give write permission to the data folder, then $redo" ;;
  *) hint=", so once the cause is fixed $redo" ;;
esac
echo "make: stage $stage FAILED: $reason — finished work is kept$hint" >&2
exit 1
