"""A protocol stand-in for a vision-language model server: NOT a model.

No real VLM can run on the test machine, so the drafting stage is tested against this
small HTTP server on 127.0.0.1. It speaks the OpenAI chat-completions protocol as vLLM,
Ollama and llama.cpp's server do (``POST /v1/chat/completions``), checks each request's
shape (the model name, the ``Authorization: Bearer`` key, the images as JPEG data URLs
that really decode, their count and size) and answers with deterministic canned text.
Per clip it can also answer slowly, with an error status, with a body that is not JSON,
or with text that is not the asked-for JSON, so that retries and failure records are
exercised. What the captions say is fixed text, not a description of the frames. For the
HAR baseline's requests (tests/test_evaluate_vlm.py) an ``answer`` function gives the
reply from the prompt and the decoded frames.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np

CAPTION = ("An astronaut in a blue shirt floats beside white lockers and a handrail, then reaches for a "
           "silver camera with the right hand.")
CANDIDATES = [
    {"Q": "What is the astronaut wearing?", "A": "A blue shirt."},
    {"Q": "Where does the astronaut float?", "A": "Beside white lockers and a handrail."},
    {"Q": "What does the astronaut reach for?", "A": "A silver camera."},
    {"Q": "Which hand does the astronaut use to reach for the camera?", "A": "The right hand."},
    {"Q": "What sound does the camera make?", "A": "A click."},
    {"Q": "Why does the astronaut want the camera?", "A": "To take a picture of the crew."},
    {"Q": "What is the name of the astronaut?", "A": "not mentioned."},
    {"Q": "What color are the astronaut's shoes?", "A": "Not mentioned"},
    {"Q": "What is the astronaut wearing?", "A": "A blue shirt."},
    {"Q": "What happens after the astronaut floats beside the lockers?",
     "A": "The astronaut reaches for a silver camera."},
    {"Q": "How does the astronaut move?", "A": "The astronaut floats."},
]
# behaviours, per clip
OK, SLOW_ONCE, ERROR_ONCE, DOWN, MALFORMED_QA, NOT_JSON = (
    "ok", "slow_once", "error_once", "down", "malformed_qa", "not_json")


class StubVLM:
    def __init__(self, *, model: str, api_key: str | None, frames: int, frame_size: int,
                 behaviour: dict[str, str] | None = None, slow_seconds: float = 2.0, reply_delay: float = 0.0,
                 answer=None):
        self.model, self.api_key, self.frames, self.frame_size = model, api_key, frames, frame_size
        self.behaviour = behaviour or {}
        # answer(text, images) -> reply: the message content of a request with images, in place of
        # the caption (the HAR baseline's requests); images as decoded BGR arrays
        self.answer = answer
        self.slow_seconds, self.reply_delay = slow_seconds, reply_delay
        self.lock = threading.Lock()
        self.requests: list[dict] = []  # kind, clip, status
        self.problems: list[str] = []  # requests of the wrong shape
        self.in_flight = self.max_in_flight = 0
        self._seen: dict[tuple[str, str], int] = {}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                with stub.lock:
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    stub.handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    # ------------------------------------------------------------ one request
    def _problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def _check(self, h, body) -> tuple[str, str | None, str]:
        """(kind caption|qa, clip id, prompt text); records shape problems."""
        if h.path != "/v1/chat/completions":
            self._problem(f"path {h.path}")
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return "auth", None, ""
        if body.get("model") != self.model:
            self._problem(f"model {body.get('model')!r}")
        if not isinstance(body.get("temperature"), (int, float)) or not isinstance(body.get("max_tokens"), int):
            self._problem("temperature / max_tokens missing")
        msgs = body.get("messages")
        if not (isinstance(msgs, list) and msgs and msgs[-1].get("role") == "user"):
            self._problem(f"messages {str(msgs)[:80]}")
            return "bad", None, ""
        parts = msgs[-1]["content"]
        texts = [p["text"] for p in parts if p.get("type") == "text"]
        images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
        text = "\n".join(texts)
        m = re.search(r"Clip: ([A-Za-z0-9_-]+)", text)  # the tests' prompts name the clip
        clip = m.group(1) if m else None
        if not images:
            return "qa", clip, text
        if len(images) != self.frames:
            self._problem(f"{len(images)} images, expected {self.frames}")
        for url in images:
            if not url.startswith("data:image/jpeg;base64,"):
                self._problem(f"image url {url[:40]!r}")
                continue
            raw = base64.b64decode(url.split(",", 1)[1])
            img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
            if not raw.startswith(b"\xff\xd8") or img is None:
                self._problem("an image is not a JPEG")
            elif max(img.shape[:2]) > self.frame_size:
                self._problem(f"image {img.shape[1]}x{img.shape[0]} larger than {self.frame_size}")
        return "caption", clip, text

    def handle(self, h) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length", 0)))
        try:
            body = json.loads(raw)
        except ValueError:
            self._problem("request body is not JSON")
            return self.send(h, 400, {"error": {"message": "bad JSON"}})
        kind, clip, text = self._check(h, body)
        images = [p["image_url"]["url"] for p in (body.get("messages") or [{}])[-1].get("content", [])
                  if isinstance(p, dict) and p.get("type") == "image_url"] if kind == "caption" else []
        with self.lock:
            n = self._seen[(kind, clip)] = self._seen.get((kind, clip), 0) + 1
        behaviour = self.behaviour.get(clip, OK)
        if kind == "auth":
            status = 401
        elif behaviour == DOWN:
            status = 500
        elif behaviour == ERROR_ONCE and kind == "caption" and n == 1:
            status = 503
        else:
            status = 200
        with self.lock:  # before the reply: a client that has its answer finds its request here
            self.requests.append({"kind": kind, "clip": clip, "status": status, "n": n})
        if status == 401:
            self.send(h, 401, {"error": {"message": "invalid API key"}})
        elif status == 500:
            self.send(h, 500, {"error": {"message": "model worker crashed"}})
        elif status == 503:
            self.send(h, 503, {"error": {"message": "server busy, try again"}})
        elif behaviour == NOT_JSON and kind == "caption":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            payload = b"<html>502 Bad Gateway</html>"
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
        else:
            if behaviour == SLOW_ONCE and kind == "caption" and n == 1:
                time.sleep(self.slow_seconds)
            elif self.reply_delay:
                time.sleep(self.reply_delay)
            if kind == "caption" and self.answer is not None:
                reply = self.answer(text, [self.decode(u) for u in images])
            elif kind == "caption":
                reply = CAPTION
            elif behaviour == MALFORMED_QA:
                reply = "Sure! Here are some great questions about the clip: what, who and where."
            else:
                reply = "Here are the pairs:\n```json\n" + json.dumps(CANDIDATES, indent=1) + "\n```"
            self.send(h, 200, {
                "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    @staticmethod
    def decode(url: str):
        return cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)

    @staticmethod
    def send(h, status: int, doc: dict) -> None:
        payload = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)
