"""aiplib.core.atomic (one atomic writer) and aiplib.io.http (one retrying HTTP session)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from urllib3.util.retry import RequestHistory

from aiplib.core.atomic import atomic_path, part_path, write_bytes_atomic, write_text_atomic
from aiplib.io.http import BackoffRetry, RetryPolicy, attempts_made, http_session


def test_atomic_writes_replace_and_leave_no_part(tmp_path):
    path = tmp_path / "sub" / "a.txt"
    assert write_text_atomic(path, "one\n") == path
    write_bytes_atomic(path, b"two\n")
    assert path.read_bytes() == b"two\n"
    assert not part_path(path).exists()


def test_failed_atomic_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("half", encoding="utf-8")
            raise RuntimeError("writer failed")
    assert path.read_text(encoding="utf-8") == "old"
    assert not part_path(path).exists()


def test_backoff_starts_at_the_factor_and_doubles():
    retry = BackoffRetry(total=5, backoff_factor=0.5, backoff_max=1.5)
    waits = []
    for _ in range(4):
        retry = retry.new(history=(*retry.history, RequestHistory("GET", "/", None, 503, None)))
        waits.append(retry.get_backoff_time())
    assert waits == [0.5, 1.0, 1.5, 1.5]


class _Always503(BaseHTTPRequestHandler):
    calls = []

    def log_message(self, *a):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).calls.append(1)
        self.send_response(503)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"no")


def test_session_retries_a_post_and_returns_the_last_answer():
    _Always503.calls = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Always503)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with http_session(RetryPolicy(retries=2, backoff_s=0.0)) as session:
            resp = session.post(f"http://127.0.0.1:{srv.server_address[1]}/x", data=b"{}",
                                timeout=5)
        assert resp.status_code == 503 and attempts_made(resp) == 3 and len(_Always503.calls) == 3
    finally:
        srv.shutdown()
        srv.server_close()
