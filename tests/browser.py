"""Headless Chromium for the page tests: Debian's binary (driven by Playwright, no
download), and reading the boxes drawn on the page's canvas back from its pixels."""

from __future__ import annotations

import contextlib
from pathlib import Path

import cv2
import numpy as np

from microg4m.report.preview import PALETTE

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def person_bgr(person: int) -> tuple:
    """The colour (BGR) the page draws person ``person``'s box in: the previews' palette."""
    return PALETTE[(person - 1) % len(PALETTE)]


def canvas_shot(page) -> tuple[np.ndarray, float, float]:
    """Screenshot of the canvas (BGR) and its display scale (screen px per canvas px)."""
    img = cv2.imdecode(np.frombuffer(page.locator("#canvas").screenshot(), np.uint8), cv2.IMREAD_COLOR)
    cw, ch = page.evaluate("() => { const c = document.getElementById('canvas'); return [c.width, c.height]; }")
    return img, img.shape[1] / cw, img.shape[0] / ch


def near(img: np.ndarray, x: float, y: float, bgr, tol: int = 45) -> bool:
    """Some pixel within 1 px of (x, y) has the colour ``bgr``."""
    xi, yi = int(round(x)), int(round(y))
    patch = img[yi - 1:yi + 2, xi - 1:xi + 2].reshape(-1, 3).astype(int)
    return bool((np.abs(patch - np.array(bgr)).max(axis=1) <= tol).any())


def left_edge(page, box, scale):
    """Screen position of the middle of a box's left edge (box in clip pixels)."""
    k = page.evaluate("() => document.getElementById('canvas').width / S.clip.width")
    x1, y1, _, y2 = box
    return x1 * k * scale[0], (y1 + y2) / 2 * k * scale[1]


def wait_drawn(page, frame: int) -> None:
    page.wait_for_function(
        "n => S.frame === n && S.images[n - 1].complete && S.images[n - 1].naturalWidth > 0", arg=frame)
    page.wait_for_timeout(150)  # the frame's onload draws it


@contextlib.contextmanager
def chromium_page(url: str):
    """``(page, errors)``: ``url`` in a 1280x800 page of headless Chromium, and the page's
    script errors as they come."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            yield page, errors
        finally:
            browser.close()
