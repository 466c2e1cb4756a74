"""A vision-language model behind an OpenAI-compatible chat endpoint (vLLM, Ollama,
llama.cpp's server, or any other server of ``POST /v1/chat/completions``).

Frames go in the request as JPEG data URLs (``image_url`` parts), the standard way all
three accept images. Requests use the ``openai`` client with its own retries turned off:
:meth:`Endpoint.ask` retries timeouts, connection errors, HTTP 429/5xx and malformed
replies with exponential backoff, and raises :class:`DraftFailed` with the last reason
(HTTP 4xx other than 429, e.g. a wrong model name or key, is not retried).
"""

from __future__ import annotations

import base64
import os
import time
from typing import Callable, TypeVar

import cv2
import numpy as np
import openai

from microg4m import CLIP_FRAMES
from microg4m.common.media import iter_frames

T = TypeVar("T")


class DraftFailed(RuntimeError):
    """No usable reply after the retries; the message is the reason recorded for the clip."""

    def __init__(self, message: str, attempts: int):
        super().__init__(message)
        self.attempts = attempts


class Malformed(ValueError):
    """A reply that came back but cannot be used (empty, not a chat completion, bad JSON)."""


def frame_indices(total: int, n: int) -> list[int]:
    """``n`` frame indices (0-based) spread evenly over ``total``: the middle of each of
    ``n`` equal parts (8 of 90 -> 5, 16, 28, ...)."""
    n = max(1, min(n, total))
    return [int((2 * k + 1) * total / (2 * n)) for k in range(n)]


def sample_frames(path, n: int, size: int, quality: int = 85, total: int = CLIP_FRAMES) -> list[str]:
    """``n`` frames spread evenly over the clip's ``total`` frames as
    ``data:image/jpeg;base64,...`` URLs, the longer side scaled down to ``size`` pixels
    (never up). Only the chosen frames are kept while decoding."""
    wanted = set(frame_indices(total, n))
    urls = [data_url(img, size, quality, f"{path}: frame {i + 1}")
            for i, img in enumerate(iter_frames(path, limit=max(wanted) + 1)) if i in wanted]
    if not urls:
        raise ValueError(f"{path}: no decodable frames")
    return urls


def fit(img: np.ndarray, size: int) -> tuple[np.ndarray, float]:
    """The frame with its longer side scaled down to ``size`` pixels (never up), and the scale."""
    h, w = img.shape[:2]
    k = size / max(h, w)
    if k >= 1:
        return img, 1.0
    return cv2.resize(img, (max(1, round(w * k)), max(1, round(h * k))), interpolation=cv2.INTER_AREA), k


def data_url(img: np.ndarray, size: int, quality: int = 85, what: str = "a frame") -> str:
    """A BGR frame as a ``data:image/jpeg;base64,...`` URL, the longer side scaled down to
    ``size`` pixels (never up)."""
    img, _ = fit(img, size)
    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(img), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ValueError(f"{what}: JPEG encoding failed")
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii")


def api_key(env_name: str | None) -> str | None:
    """The API key from the environment variable named in the config (never the config)."""
    if not env_name:
        return None
    key = os.environ.get(env_name)
    if not key:
        raise ValueError(f"api_key_env: the environment variable {env_name} is not set (or empty)")
    return key


def _reason(exc: Exception) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection error ({type(cause).__name__}: {cause})" if cause else "connection error"
    if isinstance(exc, openai.APIStatusError):
        body = exc.response.text if exc.response is not None else ""
        return f"HTTP {exc.status_code}: {' '.join(body.split())[:200]}"
    if isinstance(exc, Malformed):
        return f"malformed reply: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return True


class Endpoint:
    def __init__(self, *, url: str, model: str, api_key_env: str | None = None, timeout_seconds: float = 120,
                 retries: int = 3, backoff_seconds: float = 2, temperature: float = 0.2, max_tokens: int = 512,
                 sleep: Callable[[float], None] = time.sleep):
        self.model = model
        self.retries = max(1, int(retries))
        self.backoff = float(backoff_seconds)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.sleep = sleep
        # the client's own retries are off: ours also cover malformed replies and are configurable
        self.client = openai.OpenAI(base_url=url, api_key=api_key(api_key_env) or "no-key",
                                    timeout=float(timeout_seconds), max_retries=0)

    def _reply_text(self, images: list[str], text: str) -> str:
        content = [{"type": "image_url", "image_url": {"url": u}} for u in images]
        content.append({"type": "text", "text": text})
        resp = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": content}],
            temperature=self.temperature, max_tokens=self.max_tokens)
        try:
            reply = resp.choices[0].message.content
        except (AttributeError, IndexError, TypeError, KeyError):
            raise Malformed(f"not a chat completion: {str(resp)[:120]!r}") from None
        if not isinstance(reply, str) or not reply.strip():
            raise Malformed("empty message content")
        return reply

    def ask(self, text: str, parse: Callable[[str], T], images: list[str] = ()) -> tuple[T, int]:
        """``(parse(reply), attempts)``; ``parse`` raises ValueError for a malformed reply."""
        last = ""
        for attempt in range(1, self.retries + 1):
            try:
                try:
                    reply = self._reply_text(list(images), text)
                except Malformed:
                    raise
                except ValueError as exc:  # a body the client could not decode
                    raise Malformed(f"{type(exc).__name__}: {exc}") from None
                try:
                    return parse(reply), attempt
                except ValueError as exc:
                    raise Malformed(str(exc)) from None
            except (openai.OpenAIError, Malformed) as exc:
                last = _reason(exc)
                if not _retryable(exc):
                    raise DraftFailed(f"{last} (not retried)", attempt) from None
            if attempt < self.retries:
                self.sleep(self.backoff * 2 ** (attempt - 1))
        raise DraftFailed(f"{last} (after {self.retries} attempts)", self.retries)
