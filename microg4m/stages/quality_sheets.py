"""Quality sheets stage: pages of the quality scores for the Snakemake report. Per score,
its distribution over the run's clips and the clips at both ends as thumbnails, so that a
curator can set a ``filter.*`` threshold by looking.

One PNG per score (``SCORES``): a histogram of the score over every clip of the quality
tables (kept and rejected alike; the thresholds set in ``filter.*`` drawn as lines), and
under it the middle frame of the ``EXTREMES`` clips with the lowest and of those with the
highest value, each labelled with its clip id and value. The camera classes get a bar
chart with a thumbnail of the strongest-moving clip of each class. Each clip is decoded
once, up to its middle frame.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import cv2
import numpy as np
import pandas as pd

from microg4m.common.atomic import atomic_path
from microg4m.formats.manifest import clip_file, read_manifest
from microg4m.formats.quality import read_quality

log = logging.getLogger(__name__)

# score -> (title, the filter thresholds drawn on its histogram)
SCORES = {
    "text_share": ("share of frames with burnt-in text", ["max_text_share"]),
    "text_area": ("mean share of the picture covered by text", ["max_text_area"]),
    "camera_magnitude": ("camera motion (share of the frame diagonal per frame)", ["max_camera_magnitude"]),
    "sharpness": ("sharpness (Laplacian variance / gray variance)", ["min_sharpness"]),
    "exposure": ("exposure (mean luma, 0-1)", ["min_exposure", "max_exposure"]),
    "clipped": ("share of crushed or blown pixels", ["max_clipped"]),
    "transitions": ("transitions (scenes.detector)", []),
}
EXTREMES = 4
THUMB = (192, 108)  # width, height


def middle_frame(path: Path) -> np.ndarray | None:
    """The clip's middle frame (BGR), or None when it does not decode."""
    cap = cv2.VideoCapture(str(path))
    try:
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 90)
        frame = None
        for _ in range(max(1, n // 2)):
            if not cap.grab():
                break
            frame = True
        if frame is None:
            return None
        ok, img = cap.retrieve()
        return img if ok else None
    finally:
        cap.release()


def load(quality_tables, manifests) -> pd.DataFrame:
    """Every clip's scores with the path of its file (``path``)."""
    files = {}
    for m in manifests:
        table = read_manifest(m)
        for clip in table.loc[table["status"] == "ok", "clip_id"]:
            files[clip] = clip_file(m, clip)
    parts = [read_quality(q) for q in quality_tables]
    scores = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["clip_id"])
    scores["path"] = scores["clip_id"].map(files)
    return scores.sort_values("clip_id", kind="stable").reset_index(drop=True)


def extremes(scores: pd.DataFrame, score: str, k: int = EXTREMES) -> tuple[list[str], list[str]]:
    """The ids of the ``k`` clips with the lowest ``score`` (lowest first) and of the ``k``
    with the highest (highest last), ties by clip id; a clip in both only among the low."""
    order = scores.sort_values([score, "clip_id"], kind="stable")["clip_id"].tolist()
    low = order[:k]
    return low, [c for c in order[-k:] if c not in low]


def _thumb(img: np.ndarray | None) -> np.ndarray:
    w, h = THUMB
    canvas = np.full((h, w, 3), 40, np.uint8)
    if img is None:
        return canvas
    k = min(w / img.shape[1], h / img.shape[0])
    small = cv2.resize(img, (max(1, int(img.shape[1] * k)), max(1, int(img.shape[0] * k))),
                       interpolation=cv2.INTER_AREA)
    y, x = (h - small.shape[0]) // 2, (w - small.shape[1]) // 2
    canvas[y:y + small.shape[0], x:x + small.shape[1]] = small
    return canvas[:, :, ::-1]  # RGB for matplotlib


def _page(out: Path, title: str, plot, thumbs: list[tuple[str, np.ndarray]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = max(4, min(2 * EXTREMES, len(thumbs)))
    rows = 1 + (len(thumbs) + cols - 1) // cols if thumbs else 1
    fig = plt.figure(figsize=(2.1 * cols, 2.6 + 1.5 * (rows - 1)))
    grid = fig.add_gridspec(rows, cols, height_ratios=[2.6] + [1.5] * (rows - 1))
    ax = fig.add_subplot(grid[0, :])
    plot(ax)
    ax.set_title(title, fontsize=10)
    for i, (label, img) in enumerate(thumbs):
        t = fig.add_subplot(grid[1 + i // cols, i % cols])
        t.imshow(img)
        t.set_title(label, fontsize=7)
        t.axis("off")
    fig.tight_layout()
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=90)
    plt.close(fig)


def write(quality_tables, manifests, out_dir: str | os.PathLike, thresholds: dict | None = None) -> list[Path]:
    """Write the pages into ``out_dir`` (a folder); return their paths. ``thresholds``: the
    filter.* quality thresholds that are set (drawn on the histograms)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scores = load(quality_tables, manifests)
    thresholds = thresholds or {}
    picked: dict[str, list[tuple[str, str]]] = {}  # page -> (clip, label)
    value = scores.set_index("clip_id") if not scores.empty else None
    for score in SCORES:
        if scores.empty:
            break
        low, high = extremes(scores, score)
        picked[score] = [(c, f"low: {c}\n{value.at[c, score]:.4g}") for c in low] + \
                        [(c, f"high: {c}\n{value.at[c, score]:.4g}") for c in high]
    camera = scores.groupby("camera")["camera_magnitude"].idxmax() if not scores.empty else pd.Series(dtype=int)
    picked["camera"] = [(scores.at[i, "clip_id"], f"{cls}: {scores.at[i, 'clip_id']}") for cls, i in camera.items()]
    needed = {clip for items in picked.values() for clip, _ in items}
    frames = {clip: _thumb(middle_frame(path) if isinstance(path, Path) else None)
              for clip, path in zip(scores["clip_id"], scores["path"]) if clip in needed}
    pages = []
    for score, (title, keys) in SCORES.items():
        def plot(ax, score=score, keys=keys):
            values = scores[score].to_numpy(float) if not scores.empty else np.zeros(0)
            ax.hist(values, bins=min(30, max(5, len(values))), color="#2e86c1")
            for key in keys:
                if thresholds.get(key) is not None:
                    ax.axvline(float(thresholds[key]), color="#c0392b", linestyle="--", label=f"filter.{key}")
            if any(thresholds.get(k) is not None for k in keys):
                ax.legend(fontsize=7)
            ax.set_xlabel(score)
            ax.set_ylabel("clips")

        path = out / f"{score}.png"
        _page(path, f"{title}: {len(scores)} clips; lowest and highest", plot,
              [(label, frames[clip]) for clip, label in picked.get(score, [])])
        pages.append(path)

    def bars(ax):
        counts = scores["camera"].value_counts().sort_index() if not scores.empty else pd.Series(dtype=int)
        ax.bar(counts.index.astype(str), counts.to_numpy(), color="#2e86c1")
        ax.set_ylabel("clips")

    path = out / "camera.png"
    _page(path, f"camera class: {len(scores)} clips; the strongest-moving clip of each", bars,
          [(label, frames[clip]) for clip, label in picked["camera"]])
    pages.append(path)
    log.info("quality pages: %d clips, %d thumbnails", len(scores), len(frames))
    return pages
