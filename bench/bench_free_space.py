"""What a clip and its JPEG frames take per pixel on real footage: the figures behind the
space check's estimates (microg4m/common/free_space.py, ``check_free_space``).

    .venv/bin/python bench/bench_free_space.py

Each piece of package footage (and Debian's vtest.avi where installed) is cut by the trim
stage's own code at the default settings (x264 CRF 23 ``veryfast``, align exact) and every
kept clip's frames written by the frames stage's own code (JPEG ``-q:v 2``). Printed per
footage: bytes per pixel of a frame in the clips and in the JPEGs, and what the check
estimates against what was written (an estimate below 1.0x would let a job start that the
disk cannot hold; the constants are typical figures, not the worst case).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from microg4m.common import footage, free_space, media  # noqa: E402
from microg4m.engines import hardware  # noqa: E402
from microg4m.formats.manifest import read_manifest  # noqa: E402
from microg4m.stages import frames, trim  # noqa: E402

VIDEOS = ("dancer", "pianist", "bikes", "carphone", "vtest")


def measure(name: str, work: Path) -> dict | None:
    try:
        src = footage.footage(name)
    except footage.FootageMissing as exc:
        print(f"{name}: skipped ({exc})")
        return None
    info = media.probe(src)
    record = {"source_id": name, "clip_type": "r", "status": "ok", "path": str(src), "duration": info.duration,
              "width": info.width, "height": info.height}
    clip_dir = work / "clips" / name
    clip_dir.mkdir(parents=True)
    _, rows = trim.trim_source(record, Path("/"), clip_dir)
    from microg4m.formats.manifest import write_manifest

    write_manifest(clip_dir / "manifest.tsv", rows)
    kept = read_manifest(clip_dir / "manifest.tsv")
    kept = kept[kept["status"] == "ok"]
    (work / f"{name}.tsv").write_text("clip_id\tkeep\treason\n" + "".join(f"{c}\t1\t\n" for c in kept["clip_id"]))
    frames.run(clip_dir / "manifest.tsv", work / f"{name}.tsv", work / "frames" / name, work / f"{name}.done.tsv",
               check_free_space=False)
    pixels = sum(int(r.frames) * int(r.width) * int(r.height) for r in kept.itertuples())
    clip_bytes = sum((clip_dir / f"{c}.mp4").stat().st_size for c in kept["clip_id"])
    jpeg_bytes = sum(p.stat().st_size for p in (work / "frames" / name).rglob("*.jpg") if not p.is_symlink())
    est_clips = free_space.clips_bytes([record])
    est_frames = free_space.frames_bytes(kept.itertuples())
    return {"name": name, "size": f"{info.width}x{info.height}", "clips": len(kept),
            "clip_bpp": clip_bytes / pixels, "jpeg_bpp": jpeg_bytes / pixels,
            "clips_est": est_clips / max(1, sum((clip_dir / p.name).stat().st_size for p in clip_dir.glob("*.mp4"))),
            "frames_est": est_frames / jpeg_bytes}


def main() -> None:
    print(f"CPU: {hardware.cpu_model()} ({hardware.isa_summary()})")
    print(f"estimates: clip {free_space.CLIP_BYTES_PER_PIXEL} bytes/pixel, JPEG {free_space.JPEG_BYTES_PER_PIXEL} "
          "bytes/pixel")
    print(f"{'footage':10} {'size':>9} {'clips':>5} {'clip B/px':>9} {'JPEG B/px':>9} {'clips est.':>10} "
          f"{'frames est.':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in VIDEOS:
            r = measure(name, Path(tmp) / name)
            if r:
                print(f"{r['name']:10} {r['size']:>9} {r['clips']:>5} {r['clip_bpp']:9.4f} {r['jpeg_bpp']:9.3f} "
                      f"{r['clips_est']:9.1f}x {r['frames_est']:10.1f}x")


if __name__ == "__main__":
    main()
