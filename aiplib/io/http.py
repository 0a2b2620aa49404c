"""One HTTP stack: a :class:`requests.Session` whose adapter retries with
:class:`urllib3.util.Retry`.

Used by the corpus downloader (:mod:`aiplib.sources.download`) and the ``openai`` backend
(:mod:`aiplib.inference.models.openai_backend`); neither has a retry loop of its own.

A request is retried ``retries`` times after a connection failure, a read timeout, or an answer
with a status in :data:`RETRY_STATUSES`. The n-th retry waits ``backoff_s`` · 2^(n−1) seconds (up
to ``max_backoff_s``), or the server's ``Retry-After`` (429, 503; capped at ``max_backoff_s``)
when it names one. A host name that cannot be resolved is not retried (no network, or a wrong URL).
When the retries are used up on a status, the last answer is returned, so the caller can read its
status and body; when they are used up on a connection failure, :class:`requests.ConnectionError`
(or :class:`requests.Timeout`) is raised.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from itertools import takewhile

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, NameResolutionError
from urllib3.util.retry import Retry

#: HTTP statuses that are retried: too many requests, and the server errors that pass.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Methods retried: the idempotent ones, and POST (the callers' POSTs are idempotent decodes).
RETRY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST"})


@dataclass(frozen=True)
class RetryPolicy:
    """How a session retries: ``retries`` (retries after the first attempt, 0: none), ``backoff_s``
    (seconds before the first retry, doubled for each further one), ``max_backoff_s`` (cap of one
    wait, also of a ``Retry-After``), ``pool_size`` (connections kept per host: the requests in
    flight at once)."""

    retries: int = 2
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    pool_size: int = 10


class BackoffRetry(Retry):
    """:class:`urllib3.util.Retry` whose first retry already waits ``backoff_factor`` seconds
    (urllib3 starts at 0), and which gives up at once when the host name cannot be resolved."""

    def get_backoff_time(self) -> float:
        """``backoff_factor`` · 2^(n−1) seconds for the n-th consecutive retry, at most
        ``backoff_max``."""
        errors = list(takewhile(_not_a_redirect, reversed(self.history)))
        if not errors or self.backoff_factor <= 0:
            return 0.0
        return float(min(self.backoff_max, self.backoff_factor * 2 ** (len(errors) - 1)))

    def increment(
        self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None
    ):
        """As :meth:`urllib3.util.Retry.increment`, but a name-resolution failure raises
        :class:`urllib3.exceptions.MaxRetryError` at once."""
        if isinstance(error, NameResolutionError):
            raise MaxRetryError(_pool, url, error) from error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _not_a_redirect(entry) -> bool:
    """True for a retry history entry that was not a redirect."""
    return entry.redirect_location is None


def retry_for(policy: RetryPolicy) -> BackoffRetry:
    """The :class:`BackoffRetry` of ``policy``: connection, read and status retries share the
    ``retries`` budget; the last answer is returned instead of raising when it runs out."""
    return BackoffRetry(
        total=policy.retries,
        connect=policy.retries,
        read=policy.retries,
        status=policy.retries,
        redirect=False,
        other=0,
        allowed_methods=RETRY_METHODS,
        status_forcelist=RETRY_STATUSES,
        backoff_factor=policy.backoff_s,
        backoff_max=policy.max_backoff_s,
        retry_after_max=policy.max_backoff_s,
        respect_retry_after_header=True,
        raise_on_status=False,
    )


def http_session(policy: RetryPolicy | None = None) -> requests.Session:
    """A :class:`requests.Session` retrying as ``policy`` (default :class:`RetryPolicy`) for
    ``http://`` and ``https://`` URLs. Close it (or use it as a context manager) when done."""
    policy = policy or RetryPolicy()
    adapter = HTTPAdapter(
        max_retries=retry_for(policy), pool_connections=1, pool_maxsize=max(1, policy.pool_size)
    )
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def attempts_made(response: requests.Response) -> int:
    """How many times the request of ``response`` was sent: 1 plus the retries urllib3 made."""
    retries = getattr(response.raw, "retries", None)
    history = getattr(retries, "history", None) or ()
    return 1 + len(history)


def failure_reason(exc: requests.RequestException) -> BaseException:
    """The error underneath a :mod:`requests` exception, for a message naming its type: the socket
    error under urllib3's :class:`~urllib3.exceptions.MaxRetryError` (``ConnectionRefusedError``,
    ``TimeoutError`` …), else its ``reason``, else ``exc`` itself."""
    inner = exc.args[0] if exc.args else None
    if not isinstance(inner, MaxRetryError) or inner.reason is None:
        return exc
    reason = inner.reason
    if isinstance(reason.__cause__, OSError):  # the socket's own error (ConnectionRefusedError …)
        return reason.__cause__
    return reason


def is_name_resolution_failure(exc: BaseException) -> bool:
    """True when ``exc`` (a :mod:`requests` or urllib3 error) says the host name cannot be
    resolved."""
    if isinstance(exc, requests.RequestException):
        exc = failure_reason(exc)
    return isinstance(exc, (NameResolutionError, socket.gaierror))
