"""Do the detect runtimes change any box or clip decision? (not run in CI)

Takes a finished results folder (e.g. of the demo: ``snakemake --cores all``), runs the
detect stage again on every source's clips with each runtime, then the filter with the
same scene cuts and settings, and compares with that folder's own detection cache and
decisions: boxes per frame, largest box and confidence difference (boxes matched in the
cache's order), and clips whose keep/reject decision changed.

    .venv/bin/python bench/compare_runtimes.py results --runtimes torch,openvino,onnx

Prints a table and writes ``bench/out/compare_runtimes.csv``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO, git_rev, write_csv  # noqa: E402

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from microg4m.stages import detect, filter as clip_filter
from microg4m.engines import runtime as rt  # noqa: E402
from microg4m.formats.decisions import read_decisions
from microg4m.formats.detections import read_detections


def compare_caches(a, b) -> dict:
    """Boxes of two detection caches frame by frame, in their order."""
    ga = {k: g[["x1", "y1", "x2", "y2", "conf", "cls"]].to_numpy() for k, g in a.groupby(["clip_id", "frame"])}
    gb = {k: g[["x1", "y1", "x2", "y2", "conf", "cls"]].to_numpy() for k, g in b.groupby(["clip_id", "frame"])}
    frames_differ = dxy = dconf = 0.0
    for k in set(ga) | set(gb):
        x, y = ga.get(k, np.zeros((0, 6))), gb.get(k, np.zeros((0, 6)))
        if x.shape != y.shape or not np.array_equal(x[:, 5], y[:, 5]):
            frames_differ += 1
            n = min(len(x), len(y))
            x, y = x[:n], y[:n]
        if len(x):
            dxy = max(dxy, float(np.abs(x[:, :4] - y[:, :4]).max()))
            dconf = max(dconf, float(np.abs(x[:, 4] - y[:, 4]).max()))
    return dict(boxes_ref=len(a), boxes=len(b), frames_with_other_boxes=int(frames_differ),
                max_box_diff_px=round(dxy, 4), max_conf_diff=float(f"{dconf:.3g}"))


def kept(value) -> bool:
    return str(value).strip().lower() in ("1", "true")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="a finished results folder")
    p.add_argument("--runtimes", default="torch,openvino,onnx")
    p.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--csv", type=Path, default=REPO / "bench" / "out" / "compare_runtimes.csv")
    args = p.parse_args(argv)
    cfg = yaml.safe_load(args.config.read_text())
    det = {k: v for k, v in cfg["detect"].items() if k not in ("runtime", "device")}
    flt = {k: v for k, v in cfg["filter"].items() if k != "screening"}
    units = sorted(m.parent.name for m in (args.results / "clips").glob("*/manifest.tsv"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare_runtimes.") as tmp:
        tmp = Path(tmp)
        for runtime in args.runtimes.split(","):
            try:
                rt.choose_runtime(runtime, "cpu")
            except ValueError as exc:
                print(f"skip {runtime}: {exc}")
                continue
            changed, clips = [], 0
            totals = dict(boxes_ref=0, boxes=0, frames_with_other_boxes=0, max_box_diff_px=0.0, max_conf_diff=0.0)
            for unit in units:
                manifest = args.results / "clips" / unit / "manifest.tsv"
                out = tmp / runtime / f"{unit}.parquet"
                detect.run(manifest, out, runtime=runtime, device="cpu", threads=args.threads,
                           cache=tmp / "exports", **det)
                c = compare_caches(read_detections(args.results / "detections" / f"{unit}.parquet"),
                                   read_detections(out))
                for k in ("boxes_ref", "boxes", "frames_with_other_boxes"):
                    totals[k] += c[k]
                for k in ("max_box_diff_px", "max_conf_diff"):
                    totals[k] = max(totals[k], c[k])
                ours = clip_filter.run(manifest, out, args.results / "scenes" / f"{unit}.tsv",
                                       tmp / runtime / f"{unit}.tsv", **flt)
                ref = read_decisions(args.results / "filter" / f"{unit}.tsv")
                was = {c: kept(k) for c, k in zip(ref["clip_id"], ref["keep"])}
                now = {c: kept(k) for c, k in zip(ours["clip_id"], ours["keep"])}
                clips += len(now)
                changed += [c for c in now if was.get(c) != now[c]]
            rows.append(dict(runtime=runtime, sources=len(units), clips=clips, decisions_changed=len(changed),
                             changed=" ".join(changed), **totals, rev=git_rev()))
            print(rows[-1], flush=True)
    print(f"{'runtime':<9} {'clips':>5} {'changed':>7} {'boxes':>7} {'ref':>7} {'frames≠':>7} "
          f"{'max Δpx':>8} {'max Δconf':>9}")
    for r in rows:
        print(f"{r['runtime']:<9} {r['clips']:>5} {r['decisions_changed']:>7} {r['boxes']:>7} {r['boxes_ref']:>7} "
              f"{r['frames_with_other_boxes']:>7} {r['max_box_diff_px']:>8} {r['max_conf_diff']:>9}")
    write_csv(args.csv, rows)
    print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
