"""``openai`` backend: an OpenAI-compatible HTTP endpoint (OpenAI, vLLM ``serve``, …;
``docs/SERVING.md``).

Registry entry (extra fields)::

    qwen2_audio_7b_vllm:
      backend: openai
      model_type: api
      base_url: http://localhost:8000/v1
      base_url_env: AIP_VLLM_BASE_URL    # optional: overrides base_url when set
      model: Qwen/Qwen2-Audio-7B-Instruct
      api_key_env: OPENAI_API_KEY        # the variable's NAME; never the key
      prompt_style: chat                 # chat → chat completions; initial_prompt → transcriptions
      concurrency: 8                     # requests in flight at once (default 1)
      batch_size: 16                     # rows per generate() call (≥ concurrency)

``initial_prompt`` posts the stimulus (16 kHz mono 16-bit WAV) to ``/audio/transcriptions`` with the
task text as ``prompt``; ``chat`` posts one user turn to ``/chat/completions``
(:func:`chat_payload`). Both use ``temperature=0``; ``generate_kwargs`` are merged in. The key is
read from ``api_key_env`` at each request and sent only as ``Authorization: Bearer …``. Requests go
through :func:`aiplib.io.http.http_session`: HTTP 429, 500, 502, 503, 504 and connection failures
are retried (``engine_args``: ``max_retries`` 5, ``backoff_s`` · 2^(retry−1) up to
``max_backoff_s``, a ``Retry-After`` honoured within that cap). On load, ``GET /models`` (5 s, not
retried) checks that a server serves ``model`` (``engine_args: {probe: false}`` skips it).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
import requests
from urllib3 import encode_multipart_formdata

from aiplib.core.errors import AiplibError, ModelUnavailableError
from aiplib.inference.models.adapters import wav_bytes  # 16-bit PCM WAV in memory
from aiplib.inference.models.base import (
    Recogniser,
    answer_each,
    check_parallelism,
    run_concurrently,
)
from aiplib.inference.models.ct2_numerics import cpu_record
from aiplib.io.audio import SR
from aiplib.io.http import (
    RETRY_STATUSES,
    RetryPolicy,
    attempts_made,
    failure_reason,
    http_session,
    is_name_resolution_failure,
)

#: ``engine_args`` of an entry that sets none: retries, first backoff (s), longest wait (s), probe.
_DEFAULTS = {"max_retries": 5, "backoff_s": 1.0, "max_backoff_s": 30.0, "probe": True}
#: Seconds the load-time ``GET /models`` waits for the server (at most ``timeout_s``).
_PROBE_TIMEOUT_S = 5.0
#: Seconds one request may take when neither the options nor the entry set ``timeout_s``.
_DEFAULT_TIMEOUT_S = 120.0


def server_numerics() -> dict:
    """The ``numerics`` record of an ``openai`` run: the client machine's CPU (:func:`cpu_record` of
    :mod:`~aiplib.inference.models.ct2_numerics`) and ``"computed_by"``, a note that the server
    decodes on hardware aiplib does not see."""
    record = cpu_record()
    record["computed_by"] = (
        "the server at base_url; its hardware and numeric path are not seen by aiplib"
    )
    return record


class OpenAIBackendError(AiplibError, RuntimeError):
    """An endpoint call failed for good (message: status and a short, key-free reason)."""


def chat_payload(
    model: str, wav: bytes, prompt: str | None, *, max_tokens: int, extra: dict | None = None
) -> dict:
    """The chat-completions request body for one stimulus: ``{"model", "messages", "temperature": 0,
    "max_tokens", **extra}``, one user turn of the audio as an ``input_audio`` part (base64 16 kHz
    mono 16-bit WAV) then the task text (if any), the OpenAI schema vLLM accepts for its audio
    models."""
    audio = {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(wav).decode("ascii"), "format": "wav"},
    }
    content = [audio, *([{"type": "text", "text": prompt}] if prompt else [])]
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": int(max_tokens),
        **dict(extra or {}),
    }


@dataclass(frozen=True)
class OpenAIOptions:
    """Overrides of an ``openai`` entry's settings (None: the entry's value): ``timeout_s`` (seconds
    per request, default the entry's or 120), ``max_retries``, ``backoff_s``, ``max_backoff_s``,
    ``probe`` (``engine_args``), ``batch_size``, ``concurrency`` (requests in flight, default 1);
    ``path`` is ignored."""

    timeout_s: float | None = None
    max_retries: int | None = None
    backoff_s: float | None = None
    max_backoff_s: float | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    probe: bool | None = None
    path: str | None = None


class OpenAIRecogniser(Recogniser):
    """An OpenAI-compatible endpoint behind the Recogniser interface (``options``:
    :class:`OpenAIOptions`).

    Raises
    ------
    ModelUnavailableError
        ``api_key_env`` names a variable that is not set; no server answers at ``base_url``; the
        server does not serve ``model``.
    AiplibParameterError
        ``concurrency`` or ``batch_size`` is not a positive integer.
    """

    def __init__(self, entry, options: OpenAIOptions | None = None):
        o = options or OpenAIOptions()
        self.name = entry.id
        self.entry = entry
        self.base_url_env = entry.extra.get("base_url_env") or None
        self.base_url = _base_url(entry, self.base_url_env)
        self.model = str(entry.extra["model"])
        self.key_env = entry.extra.get("api_key_env") or None
        _require_key(entry.id, self.key_env)
        engine_args = {**_DEFAULTS, **dict(entry.extra.get("engine_args") or {})}
        self.max_retries = int(_given_or(o.max_retries, engine_args["max_retries"]))
        self.backoff_s = float(_given_or(o.backoff_s, engine_args["backoff_s"]))
        self.max_backoff_s = float(_given_or(o.max_backoff_s, engine_args["max_backoff_s"]))
        self.timeout_s = float(o.timeout_s or entry.extra.get("timeout_s") or _DEFAULT_TIMEOUT_S)
        self.mode = "transcriptions" if entry.prompt_style == "initial_prompt" else "chat"
        self.batch_size = int(o.batch_size or entry.batch_size or 1)
        self.concurrency = int(o.concurrency or entry.extra.get("concurrency") or 1)
        check_parallelism(entry.id, self.batch_size, self.concurrency)
        # Qwen2.5-Omni: the thinker's limit (1024, as in the paper) replaces max_new_tokens
        self.max_tokens = int(entry.thinker_max_new_tokens or entry.max_new_tokens)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[bool, str]] = {}
        self._in_flight = 0
        self._stats = _new_stats()
        policy = RetryPolicy(
            retries=self.max_retries,
            backoff_s=self.backoff_s,
            max_backoff_s=self.max_backoff_s,
            pool_size=self.concurrency,
        )
        self._session = http_session(policy)
        if _given_or(o.probe, bool(engine_args["probe"])):
            self._probe()

    def info(self) -> dict:
        """Endpoint, model, mode, concurrency, retry policy (never the key)."""
        return {
            "model": self.name,
            "backend": "openai",
            "base_url": self.base_url,
            "base_url_env": self.base_url_env,
            "server_model": self.model,
            "mode": self.mode,
            "api_key_env": self.key_env,
            "max_retries": self.max_retries,
            "backoff_s": self.backoff_s,
            "timeout_s": self.timeout_s,
            "concurrency": self.concurrency,
            "max_tokens": self.max_tokens if self.mode == "chat" else None,
            "batch_size": self.batch_size,
            "path": self.mode,
            "window": None,
            "weights_path": None,
            "revision": self.entry.revision,
            "numerics": server_numerics(),
            "stats": self.stats(),
        }

    def stats(self) -> dict:
        """Requests, retries, errors, seconds inside ``generate``, stimuli/s, RTFx, most requests in
        flight at once."""
        with self._lock:
            s = dict(self._stats)
        s["seconds"] = round(s["seconds"], 3)
        s["stimuli_per_s"] = round(s["n_stimuli"] / s["seconds"], 3) if s["seconds"] > 0 else None
        s["rtfx"] = round(s["audio_s"] / s["seconds"], 3) if s["seconds"] > 0 else None
        return s

    def generate(self, audios, prompts):
        """One request per stimulus, up to ``concurrency`` at once (:meth:`Recogniser.generate`); a
        failure
        raises :class:`OpenAIBackendError` once every request of the batch has finished.
        """
        clips, texts = self.checked(audios, prompts)

        def attempt(i):
            return self._attempt(clips[i], texts[i])

        def run(todo):
            t0 = time.perf_counter()
            out = run_concurrently(attempt, todo, self.concurrency, f"aip-{self.name}")
            with self._lock:
                self._stats["seconds"] += time.perf_counter() - t0
                self._stats["audio_s"] += sum(len(clips[i]) for i in todo) / SR
                self._stats["n_stimuli"] += len(todo)
            return out

        return answer_each(self._cache, clips, texts, run, OpenAIBackendError)

    def close(self) -> None:
        """Forget cached answers and close the session's connections (idempotent; a later request
        opens new ones)."""
        self._cache = {}
        self._session.close()

    def _attempt(self, y: np.ndarray, prompt: str | None) -> tuple[bool, str]:
        with self._lock:
            self._in_flight += 1
            self._stats["max_in_flight"] = max(self._stats["max_in_flight"], self._in_flight)
        try:
            return True, self._one(y, prompt).strip()
        except OpenAIBackendError as exc:
            with self._lock:
                self._stats["n_errors"] += 1
            return False, str(exc)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _one(self, y: np.ndarray, prompt: str | None) -> str:
        wav = wav_bytes(y)
        extra = dict(self.entry.extra.get("generate_kwargs") or {})
        if self.mode == "transcriptions":
            fields = {
                "model": self.model,
                "temperature": "0",
                "response_format": "json",
                "language": "en",
                **({"prompt": prompt} if prompt else {}),
                **{k: str(v) for k, v in extra.items()},
            }
            body, ctype = encode_multipart_formdata(
                {**fields, "file": ("audio.wav", wav, "audio/wav")}
            )
            data = self._post("/audio/transcriptions", body, ctype)
            text = data.get("text") if isinstance(data, dict) else None
        else:
            payload = chat_payload(self.model, wav, prompt, max_tokens=self.max_tokens, extra=extra)
            data = self._post("/chat/completions", json.dumps(payload).encode(), "application/json")
            try:
                text = data["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                text = None
        if not isinstance(text, str):
            raise OpenAIBackendError("malformed response (no text)")
        return text

    def _headers(self, ctype: str | None = None) -> dict:
        """Request headers: JSON accepted, ``ctype`` as Content-Type, the key read now."""
        headers = {"Accept": "application/json"}
        if ctype:
            headers["Content-Type"] = ctype
        if self.key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self.key_env, "")
        return headers

    def _probe(self) -> None:
        """``GET /models`` once (no retry): :class:`ModelUnavailableError` when no server answers or
        it serves other models; any HTTP error status passes (the requests will tell more)."""
        timeout = min(self.timeout_s, _PROBE_TIMEOUT_S)
        try:
            with http_session(RetryPolicy(retries=0)) as session:
                resp = session.get(
                    self.base_url + "/models", headers=self._headers(), timeout=timeout
                )
        except requests.RequestException as exc:
            raise ModelUnavailableError(self._no_server(exc)) from None
        if not _is_success(resp.status_code):
            return  # something answers (401, 404, 405 …)
        served = _served_models(resp.content)
        if served and self.model not in served:
            raise ModelUnavailableError(
                f"{self.name}: the server at {self.base_url} serves "
                f"{', '.join(map(str, served[:5]))}, not {self.model}; "
                f"start `vllm serve {self.model}` there (see docs/SERVING.md)"
            )

    def _no_server(self, exc: requests.RequestException) -> str:
        """The message of a probe that reached no server."""
        message = (
            f"{self.name}: no server answers at {self.base_url} "
            f"({type(failure_reason(exc)).__name__}); start it first "
            f"(vLLM: `vllm serve {self.model} …`, see docs/SERVING.md)"
        )
        if self.base_url_env:
            message += f" or set {self.base_url_env} to its URL"
        return message

    def _scrub(self, text: str) -> str:
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        text = text.replace(key, "***") if key else text
        return text.replace("\n", " ")[:200]

    def _post(self, route: str, body: bytes, ctype: str) -> dict:
        """POST ``body`` to ``route`` (retried by the session) and return the JSON answer.

        Raises :class:`OpenAIBackendError`: ``connection failed (<error>) after N attempts``,
        ``HTTP <status>: <server's message>`` (``after N attempts`` for a retried status), or a
        malformed (not JSON) answer.
        """
        try:
            resp = self._session.post(
                self.base_url + route,
                data=body,
                headers=self._headers(ctype),
                timeout=self.timeout_s,
            )
        except requests.RequestException as exc:
            n = self._attempts_after_failure(exc)
            self._count_requests(n)
            reason = type(failure_reason(exc)).__name__
            raise OpenAIBackendError(f"connection failed ({reason}) after {n} attempts") from None
        with resp:
            n = attempts_made(resp)
            self._count_requests(n)
            if not _is_success(resp.status_code):
                raise OpenAIBackendError(self._http_failure(resp, n))
            try:
                return json.loads(resp.content.decode("utf-8"))
            except ValueError:
                raise OpenAIBackendError("malformed response (not JSON)") from None

    def _attempts_after_failure(self, exc: requests.RequestException) -> int:
        """Requests sent before ``exc``: every retry for a connection failure or timeout, one when
        the host name does not resolve (not retried) or the error is not a network one."""
        if is_name_resolution_failure(exc):
            return 1
        if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
            return self.max_retries + 1
        return 1

    def _count_requests(self, n: int) -> None:
        """Add ``n`` requests (``n − 1`` of them retries) to the statistics."""
        with self._lock:
            self._stats["n_requests"] += n
            self._stats["n_retries"] += n - 1

    def _http_failure(self, resp: requests.Response, n: int) -> str:
        """``HTTP <status>[: <server's message, key scrubbed>]``, plus ``after N attempts`` when the
        status is one that is retried."""
        detail = _error_detail(resp.content)
        message = f"HTTP {resp.status_code}"
        if detail:
            message += f": {self._scrub(detail)}"
        if resp.status_code in RETRY_STATUSES:
            message += f" after {n} attempts"
        return message


def _given_or(value, default):
    """``value`` unless it is None, else ``default``."""
    if value is None:
        return default
    return value


def _base_url(entry, base_url_env: str | None) -> str:
    """The endpoint: ``$<base_url_env>`` when set and not empty, else the entry's ``base_url``;
    without a trailing slash."""
    url = os.environ.get(base_url_env, "").strip() if base_url_env else ""
    return (url or str(entry.extra["base_url"])).rstrip("/")


def _require_key(entry_id: str, key_env: str | None) -> None:
    """:class:`ModelUnavailableError` when the entry names a key variable that is not set."""
    if key_env and not os.environ.get(key_env):
        raise ModelUnavailableError(
            f"{entry_id}: set the environment variable {key_env} to the "
            "endpoint's API key (it is read from there only)"
        )


def _new_stats() -> dict:
    """The counters of :meth:`OpenAIRecogniser.stats`, all zero."""
    return {
        "n_requests": 0,
        "n_retries": 0,
        "seconds": 0.0,
        "audio_s": 0.0,
        "n_stimuli": 0,
        "n_errors": 0,
        "max_in_flight": 0,
    }


def _is_success(status: int) -> bool:
    """True for a 2xx status (urllib's rule: anything else is an HTTP error)."""
    return 200 <= status < 300


def _error_detail(content: bytes) -> str:
    """The ``error.message`` (or ``error``) of an error answer's JSON body; "" when it has none."""
    try:
        detail = json.loads(content.decode("utf-8", "replace")).get("error", {})
    except (ValueError, AttributeError):
        return ""
    if isinstance(detail, dict):
        return str(detail.get("message") or "")
    return str(detail or "")


def _served_models(content: bytes) -> list:
    """Model ids of a ``GET /models`` answer (``data[].id``); empty when it is not that JSON."""
    try:
        return [m.get("id") for m in json.loads(content.decode("utf-8")).get("data", [])]
    except (ValueError, AttributeError, TypeError):
        return []


def load(
    entry,
    *,
    path: str | None = None,
    batch_size: int | None = None,
    timeout_s: float | None = None,
    max_retries: int | None = None,
    backoff_s: float | None = None,
    max_backoff_s: float | None = None,
    concurrency: int | None = None,
    probe: bool | None = None,
) -> OpenAIRecogniser:
    """The backend's entry point (:func:`aiplib.inference.models.load_model`): the fields of
    :class:`OpenAIOptions` (None: the entry's value)."""
    options = OpenAIOptions(
        timeout_s=timeout_s,
        max_retries=max_retries,
        backoff_s=backoff_s,
        max_backoff_s=max_backoff_s,
        batch_size=batch_size,
        concurrency=concurrency,
        probe=probe,
        path=path,
    )
    return OpenAIRecogniser(entry, options)
