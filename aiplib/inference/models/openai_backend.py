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
read from ``api_key_env`` at each request and sent only as ``Authorization: Bearer …``. HTTP 429 /
5xx and connection failures are retried (``engine_args``: ``max_retries`` 5, ``backoff_s`` ·
2^attempt up to ``max_backoff_s``, a numeric ``Retry-After`` honoured within that cap). On load,
``GET /models`` (5 s) checks that a server serves ``model`` (``engine_args: {probe: false}`` skips
it).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from urllib3 import encode_multipart_formdata

from aiplib.core.errors import AiplibError, AiplibParameterError, ModelUnavailableError
from aiplib.inference.models.adapters import wav_bytes  # 16-bit PCM WAV in memory
from aiplib.inference.models.base import Recogniser, answer_each
from aiplib.inference.models.ct2_numerics import cpu_record
from aiplib.io.audio import SR

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({429, *range(500, 600)})  # HTTP statuses that are retried
_DEFAULTS = {"max_retries": 5, "backoff_s": 1.0, "max_backoff_s": 30.0, "probe": True}
_PROBE_TIMEOUT_S = 5.0


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
        self.name, self.entry = entry.id, entry
        self.base_url_env = entry.extra.get("base_url_env") or None
        url = os.environ.get(self.base_url_env, "").strip() if self.base_url_env else ""
        self.base_url = (url or str(entry.extra["base_url"])).rstrip("/")
        self.model = str(entry.extra["model"])
        self.key_env = entry.extra.get("api_key_env") or None
        if self.key_env and not os.environ.get(self.key_env):
            raise ModelUnavailableError(
                f"{entry.id}: set the environment variable {self.key_env} to the "
                "endpoint's API key (it is read from there only)"
            )
        ea = {**_DEFAULTS, **dict(entry.extra.get("engine_args") or {})}
        for k, cast in (("max_retries", int), ("backoff_s", float), ("max_backoff_s", float)):
            setattr(self, k, cast(ea[k] if getattr(o, k) is None else getattr(o, k)))
        self.timeout_s = float(o.timeout_s or entry.extra.get("timeout_s") or 120.0)
        self.mode = "transcriptions" if entry.prompt_style == "initial_prompt" else "chat"
        self.batch_size = int(o.batch_size or entry.batch_size or 1)
        self.concurrency = int(o.concurrency or entry.extra.get("concurrency") or 1)
        for name, v in (("batch_size", self.batch_size), ("concurrency", self.concurrency)):
            if v <= 0:
                raise AiplibParameterError(
                    f"{entry.id}: {name} must be a positive integer, got {v!r}"
                )
        if self.batch_size < self.concurrency:
            log.warning(
                "%s: batch_size %d < concurrency %d: at most %d requests will be in flight",
                entry.id,
                self.batch_size,
                self.concurrency,
                self.batch_size,
            )
        # Qwen2.5-Omni: the thinker's limit (1024, as in the paper) replaces max_new_tokens
        self.max_tokens = int(entry.thinker_max_new_tokens or entry.max_new_tokens)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[bool, str]] = {}
        self._in_flight = 0
        self._stats = {
            "n_requests": 0,
            "n_retries": 0,
            "seconds": 0.0,
            "audio_s": 0.0,
            "n_stimuli": 0,
            "n_errors": 0,
            "max_in_flight": 0,
        }
        if o.probe if o.probe is not None else bool(ea["probe"]):
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

        def run(todo):
            t0, workers = time.perf_counter(), min(self.concurrency, len(todo))
            if workers == 1:
                out = [self._attempt(clips[i], texts[i]) for i in todo]
            else:
                with ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix=f"aip-{self.name}"
                ) as pool:
                    out = list(pool.map(lambda i: self._attempt(clips[i], texts[i]), todo))
            with self._lock:
                self._stats["seconds"] += time.perf_counter() - t0
                self._stats["audio_s"] += sum(len(clips[i]) for i in todo) / SR
                self._stats["n_stimuli"] += len(todo)
            return out

        return answer_each(self._cache, clips, texts, run, OpenAIBackendError)

    def close(self) -> None:
        """Forget cached answers (idempotent; there is no connection to close)."""
        self._cache = {}

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
        return {
            "Accept": "application/json",
            **({"Content-Type": ctype} if ctype else {}),
            **(
                {"Authorization": "Bearer " + os.environ.get(self.key_env, "")}
                if self.key_env
                else {}
            ),
        }

    def _probe(self) -> None:
        req = urllib.request.Request(
            self.base_url + "/models", headers=self._headers(), method="GET"
        )
        try:
            with urllib.request.urlopen(req, timeout=min(self.timeout_s, _PROBE_TIMEOUT_S)) as resp:  # noqa: S310
                raw = resp.read()
        except urllib.error.HTTPError:
            return  # something answers (401, 404, 405 …): the requests will tell more
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ModelUnavailableError(
                f"{self.name}: no server answers at {self.base_url} ({type(reason).__name__}); start it "
                f"first (vLLM: `vllm serve {self.model} …`, see docs/SERVING.md)"
                + (f" or set {self.base_url_env} to its URL" if self.base_url_env else "")
            ) from None
        try:
            served = [m.get("id") for m in json.loads(raw.decode("utf-8")).get("data", [])]
        except (ValueError, AttributeError, TypeError):
            return
        if served and self.model not in served:
            raise ModelUnavailableError(
                f"{self.name}: the server at {self.base_url} serves {', '.join(map(str, served[:5]))}, "
                f"not {self.model}; start `vllm serve {self.model}` there (see docs/SERVING.md)"
            )

    def _scrub(self, text: str) -> str:
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        text = text.replace(key, "***") if key else text
        return text.replace("\n", " ")[:200]

    def _post(self, route: str, body: bytes, ctype: str) -> dict:
        headers = self._headers(ctype)
        last = ""
        for attempt in range(self.max_retries + 1):
            with self._lock:
                self._stats["n_requests"] += 1
                self._stats["n_retries"] += bool(attempt)
            req = urllib.request.Request(
                self.base_url + route, data=body, headers=headers, method="POST"
            )
            retry_after = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310
                    raw = resp.read()
                try:
                    return json.loads(raw.decode("utf-8"))
                except ValueError:
                    raise OpenAIBackendError("malformed response (not JSON)") from None
            except urllib.error.HTTPError as exc:
                status = exc.code
                try:
                    detail = json.loads(exc.read().decode("utf-8", "replace")).get("error", {})
                    detail = detail.get("message", "") if isinstance(detail, dict) else str(detail)
                except Exception:  # noqa: BLE001
                    detail = ""
                last = f"HTTP {status}" + (f": {self._scrub(detail)}" if detail else "")
                if status not in RETRY_STATUS:
                    raise OpenAIBackendError(last) from None
                with contextlib.suppress(
                    AttributeError, TypeError, ValueError
                ):  # none, or not a number
                    retry_after = float(exc.headers.get("Retry-After"))
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"connection failed ({type(reason).__name__})"
            if (
                attempt < self.max_retries
            ):  # a Retry-After longer than the backoff is honoured (within the cap)
                time.sleep(
                    min(self.max_backoff_s, max(self.backoff_s * (2**attempt), retry_after or 0.0))
                )
        raise OpenAIBackendError(f"{last} after {self.max_retries + 1} attempts")


def load(entry, **opts) -> OpenAIRecogniser:
    """The backend's entry point (:func:`aiplib.inference.models.load_model`): ``opts`` are
    :class:`OpenAIOptions`."""
    return OpenAIRecogniser(entry, OpenAIOptions(**opts))
