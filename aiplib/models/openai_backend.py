"""``openai`` backend: an OpenAI-compatible HTTP endpoint (OpenAI, vLLM ``serve``, …).

Registry entry (extra fields)::

    vllm_qwen2_audio:
      backend: openai
      family: api
      base_url: http://localhost:8000/v1
      model: Qwen/Qwen2-Audio-7B-Instruct
      api_key_env: OPENAI_API_KEY        # the variable's NAME; never the key
      prompt_style: chat                 # chat → chat completions; initial_prompt → transcriptions

Endpoints (``base_url`` includes the ``/v1`` part)
-------------------------------------------------
``prompt_style: initial_prompt`` (recognisers)
    ``POST {base_url}/audio/transcriptions``, multipart: the stimulus as ``audio.wav`` (16 kHz
    mono 16-bit), ``model``, ``temperature=0``, ``response_format=json``, ``language=en`` and
    the task text as ``prompt`` (Whisper's initial prompt); the response is ``text``.
``prompt_style: chat`` (Speech LLMs)
    ``POST {base_url}/chat/completions``: one user turn with the audio as ``input_audio``
    (base64 WAV) followed by the task text, ``temperature=0``, ``max_tokens=max_new_tokens``;
    the response is ``choices[0].message.content``.

``entry.extra["generate_kwargs"]`` is merged into the request (JSON body or form fields).

The key
-------
Read from the environment variable named by ``api_key_env`` at each request and sent only as
``Authorization: Bearer …``. It is never stored on the recogniser, never returned by ``info()``
and scrubbed from every error message; without ``api_key_env`` no header is sent.

Retries
-------
HTTP 429 and 5xx answers and connection failures are retried up to ``max_retries`` times
(5) with exponential backoff (``backoff_s`` · 2^attempt, at most ``max_backoff_s``; a numeric
``Retry-After`` header is honoured within the same cap). Set them in ``engine_args``. Any
other failure raises :class:`OpenAIBackendError` (``HTTP 401`` …), which the stage-7 runner
turns into an ``__ERROR__`` row.
"""
from __future__ import annotations

import base64
import json
import os
import time
import urllib.error
import urllib.request
import uuid

import numpy as np

from ..audio import SR, valid_audio
from ..errors import AiplibError, AiplibParameterError, ModelUnavailableError
from .base import Recogniser

__all__ = ["OpenAIRecogniser", "OpenAIBackendError", "load", "RETRY_STATUS"]

RETRY_STATUS = frozenset({429, 500, 502, 503, 504}) | frozenset(range(505, 600))
"""HTTP statuses that are retried."""
_DEFAULTS = {"max_retries": 5, "backoff_s": 1.0, "max_backoff_s": 30.0}


class OpenAIBackendError(AiplibError, RuntimeError):
    """An endpoint call failed for good (message: status and a short, key-free reason)."""


def _wav_bytes(y: np.ndarray) -> bytes:
    import io  # noqa: PLC0415

    import soundfile as sf  # noqa: PLC0415

    buf = io.BytesIO()
    sf.write(buf, y, SR, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def _multipart(fields: dict, file_bytes: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for k, v in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="audio.wav"\r\n'
                 f"Content-Type: audio/wav\r\n\r\n".encode() + file_bytes + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class OpenAIRecogniser(Recogniser):
    """An OpenAI-compatible endpoint behind the Recogniser interface.

    Parameters
    ----------
    entry : ModelEntry
        An ``openai`` entry (``base_url``, ``model``, optional ``api_key_env``).
    timeout_s : float > 0, optional
        Seconds per HTTP request; default ``entry.extra["timeout_s"]`` or 120.
    max_retries, backoff_s, max_backoff_s : optional
        Override ``entry.extra["engine_args"]`` (see the module notes).
    batch_size : int > 0, optional
        Stimuli per ``generate`` call the runner should send (default ``entry.batch_size``).
    path : str, optional
        Ignored.

    Raises
    ------
    ModelUnavailableError
        ``api_key_env`` names a variable that is not set.
    """

    def __init__(self, entry, *, timeout_s: float | None = None, max_retries: int | None = None,
                 backoff_s: float | None = None, max_backoff_s: float | None = None,
                 batch_size: int | None = None, path: str | None = None):
        del path
        self.name, self.entry = entry.id, entry
        self.base_url = str(entry.extra["base_url"]).rstrip("/")
        self.model = str(entry.extra["model"])
        self.key_env = entry.extra.get("api_key_env") or None
        if self.key_env and not os.environ.get(self.key_env):
            raise ModelUnavailableError(f"{entry.id}: set the environment variable {self.key_env} to the "
                                        "endpoint's API key (it is read from there only)")
        ea = {**_DEFAULTS, **dict(entry.extra.get("engine_args") or {})}
        self.max_retries = int(max_retries if max_retries is not None else ea["max_retries"])
        self.backoff_s = float(backoff_s if backoff_s is not None else ea["backoff_s"])
        self.max_backoff_s = float(max_backoff_s if max_backoff_s is not None else ea["max_backoff_s"])
        self.timeout_s = float(timeout_s or entry.extra.get("timeout_s") or 120.0)
        self.mode = "transcriptions" if entry.prompt_style == "initial_prompt" else "chat"
        self.batch_size = int(batch_size or entry.batch_size or 1)
        self.max_samples = int(round(float(entry.max_audio_s) * SR))
        self._stats = {"n_requests": 0, "n_retries": 0, "seconds": 0.0, "audio_s": 0.0, "n_stimuli": 0}

    # ------------------------------------------------------------------ interface
    def info(self) -> dict:
        """Endpoint, model, mode, retry policy (never the key)."""
        return {"model": self.name, "backend": "openai", "base_url": self.base_url, "server_model": self.model,
                "mode": self.mode, "api_key_env": self.key_env, "max_retries": self.max_retries,
                "backoff_s": self.backoff_s, "timeout_s": self.timeout_s, "path": self.mode, "window": None,
                "weights_path": None, "revision": self.entry.revision, "stats": self.stats()}

    def stats(self) -> dict:
        s = dict(self._stats)
        s["seconds"] = round(s["seconds"], 3)
        s["stimuli_per_s"] = round(s["n_stimuli"] / s["seconds"], 3) if s["seconds"] > 0 else None
        s["rtfx"] = round(s["audio_s"] / s["seconds"], 3) if s["seconds"] > 0 else None
        return s

    def generate(self, audios, prompts):
        """One request per stimulus (see :meth:`Recogniser.generate`).

        Raises
        ------
        OpenAIBackendError
            A request failed for good (after the retries for 429 / 5xx).
        AiplibParameterError
            Lists of different lengths or an invalid waveform.
        """
        if len(audios) != len(prompts):
            raise AiplibParameterError(f"got {len(audios)} waveforms but {len(prompts)} prompts")
        out = []
        for i, (a, p) in enumerate(zip(audios, prompts)):
            y = np.asarray(valid_audio(np.asarray(a), name=f"audio[{i}]")[: self.max_samples], dtype=np.float32)
            p = p.strip() if isinstance(p, str) and p.strip() else None
            t0 = time.perf_counter()
            out.append(self._one(y, p).strip())
            self._stats["seconds"] += time.perf_counter() - t0
            self._stats["audio_s"] += len(y) / SR
            self._stats["n_stimuli"] += 1
        return out

    # ------------------------------------------------------------------ requests
    def _one(self, y: np.ndarray, prompt: str | None) -> str:
        wav = _wav_bytes(y)
        extra = dict(self.entry.extra.get("generate_kwargs") or {})
        if self.mode == "transcriptions":
            fields = {"model": self.model, "temperature": "0", "response_format": "json", "language": "en"}
            if prompt:
                fields["prompt"] = prompt
            fields.update({k: str(v) for k, v in extra.items()})
            body, ctype = _multipart(fields, wav)
            data = self._post("/audio/transcriptions", body, ctype)
            text = data.get("text")
        else:
            content = [{"type": "input_audio",
                        "input_audio": {"data": base64.b64encode(wav).decode("ascii"), "format": "wav"}}]
            if prompt:
                content.append({"type": "text", "text": prompt})
            payload = {"model": self.model, "messages": [{"role": "user", "content": content}],
                       "temperature": 0, "max_tokens": int(self.entry.max_new_tokens), **extra}
            data = self._post("/chat/completions", json.dumps(payload).encode(), "application/json")
            try:
                text = data["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                text = None
        if not isinstance(text, str):
            raise OpenAIBackendError("malformed response (no text)")
        return text

    def _scrub(self, text: str) -> str:
        key = os.environ.get(self.key_env, "") if self.key_env else ""
        text = text.replace(key, "***") if key else text
        return text.replace("\n", " ")[:200]

    def _post(self, route: str, body: bytes, ctype: str) -> dict:
        headers = {"Content-Type": ctype, "Accept": "application/json"}
        if self.key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self.key_env, "")
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._stats["n_retries"] += 1
            req = urllib.request.Request(self.base_url + route, data=body, headers=headers, method="POST")
            self._stats["n_requests"] += 1
            retry_after = None
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - URL from the registry
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
                ra = exc.headers.get("Retry-After") if exc.headers else None
                try:
                    retry_after = float(ra) if ra is not None else None
                except ValueError:
                    retry_after = None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"connection failed ({type(reason).__name__})"
            if attempt < self.max_retries:
                delay = self.backoff_s * (2 ** attempt)
                if retry_after is not None:
                    delay = max(delay, retry_after)
                time.sleep(min(self.max_backoff_s, delay))
        raise OpenAIBackendError(f"{last} after {self.max_retries + 1} attempts")


def load(entry, **opts) -> OpenAIRecogniser:
    """Backend entry point used by :func:`aiplib.models.load_model` (``opts`` → constructor)."""
    return OpenAIRecogniser(entry, **opts)
