"""``microg4m``: run any one stage on given inputs, outside Snakemake (for debugging).

Each sub-command calls the same stage function that the workflow's rule calls, with
the defaults of config/config.yaml; ``microg4m STAGE --help`` lists its options.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path



def _defaults() -> dict:
    """Stage settings from the JSON schema's defaults (= config/config.yaml's values)."""
    from microg4m import config

    return config.defaults()


def _settings(args: argparse.Namespace, cfg: dict, dotted: str, overrides: dict | None = None) -> dict:
    """The defaults of config section ``dotted`` with the options given on the command line
    in their place, validated as the workflow validates its config."""
    from microg4m import config

    section = config.get(cfg, dotted)
    out = dict(section)
    for key in section:
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    out.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return config.validate_section(dotted, out)


def _scalar(text: str):
    """A command-line value as int, float or string (for settings that take several types)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _boolean(text: str) -> bool:
    words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
    try:
        return words[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected true or false") from None


def _kind(node: dict):
    """The argparse type of a setting, from its schema node's type."""
    types = set(node["type"]) if isinstance(node.get("type"), list) else {node.get("type")}
    types.discard("null")
    single = {"integer": int, "number": float, "string": str, "boolean": _boolean}
    return single[types.pop()] if len(types) == 1 and next(iter(types)) in single else _scalar


def _add_options(parser: argparse.ArgumentParser, cfg: dict, dotted: str, skip=()) -> None:
    """An option per scalar setting of config section ``dotted`` (None = the config's value)."""
    from microg4m import config

    node = config.schema()
    for part in dotted.split("."):
        node = node["properties"][part]
    for key, default in config.get(cfg, dotted).items():
        if key in skip or isinstance(default, (dict, list)):
            continue
        parser.add_argument(f"--{key.replace('_', '-')}", dest=key, type=_kind(node["properties"][key]),
                            default=None, help=f"(default: {default})")


def main(argv: list[str] | None = None) -> int:
    cfg = _defaults()
    parser = argparse.ArgumentParser(prog="microg4m", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument("--ffmpeg", default=cfg["ffmpeg"], metavar="BINARY",
                        help="ffmpeg binary (default: the one pinned by imageio-ffmpeg)")
    sub = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")

    p = sub.add_parser("download", help="fetch one source with yt-dlp (or link a local film)")
    p.add_argument("source_id"), p.add_argument("url"), p.add_argument("out_dir")
    p.add_argument("--clip-type", choices=["r", "m"], default="r")
    _add_options(p, cfg, "download")

    p = sub.add_parser("trim", help="cut a video into exact 3 s / 30 fps clips")
    p.add_argument("video"), p.add_argument("out_dir")
    p.add_argument("--source-id", help="clip name prefix (default: the file name)")
    p.add_argument("--clip-type", choices=["r", "m"], default="r")
    _add_options(p, cfg, "trim")

    p = sub.add_parser("detect", help="YOLO person detections of a clip folder into a parquet cache")
    p.add_argument("manifest"), p.add_argument("out")
    _add_options(p, cfg, "detect")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads for inference (default: all)")
    p.add_argument("--export-cache", default=None, metavar="DIR",
                   help="folder of exported models (default: $MICROG4M_EXPORT_CACHE, else ~/.cache/microg4m/exports)")

    p = sub.add_parser("scenes", help="scene cuts (and gradual transitions) of the clips of a manifest")
    p.add_argument("manifest"), p.add_argument("out")
    p.add_argument("--cache", help="folder to keep TransNetV2's predictions in (detector transnetv2 or both)")
    p.add_argument("--device", default=cfg["detect"]["device"],
                   help=f"where TransNetV2 runs: auto, cpu, cuda, cuda:N (default: detect.device, {cfg['detect']['device']})")
    _add_options(p, cfg, "scenes")

    p = sub.add_parser("filter", help="keep/reject decisions from detections and cuts")
    p.add_argument("manifest"), p.add_argument("detections"), p.add_argument("scenes"), p.add_argument("out")
    p.add_argument("--quality", help="the quality table (needed when a threshold on its scores is set)")
    _add_options(p, cfg, "filter")

    p = sub.add_parser("quality", help="quality scores (text, camera motion, sharpness, exposure) of the clips")
    p.add_argument("manifest"), p.add_argument("scenes"), p.add_argument("out")
    _add_options(p, cfg, "quality")

    p = sub.add_parser("motion", help="optical-flow motion level of the clips of a manifest")
    p.add_argument("manifest"), p.add_argument("out")
    _add_options(p, cfg, "motion")

    p = sub.add_parser("track", help="BoT-SORT person boxes of the kept clips")
    for name in ("manifest", "detections", "decisions", "motion", "out"):
        p.add_argument(name)
    p.add_argument("--contact-sheet", help="PNG contact sheet to write")
    p.add_argument("--previews-dir", help="write per-clip preview mp4s here")
    _add_options(p, cfg, "track", skip=("previews",))

    p = sub.add_parser("corrections", help="apply CVAT for video exports to the tracks of their clips")
    for name in ("tracks", "manifest", "decisions", "out", "report"):
        p.add_argument(name)
    p.add_argument("files", nargs="*", help="CVAT for video 1.1 exports (.xml or CVAT's .zip) of clips of this manifest")

    p = sub.add_parser("track-files", help="MOTChallenge text and CVAT for video XML per kept clip")
    for name in ("manifest", "decisions", "tracks", "mot_dir", "cvat_dir"):
        p.add_argument(name)

    p = sub.add_parser("signatures", help="perceptual hash sequences of the kept clips of a manifest")
    p.add_argument("manifest"), p.add_argument("decisions"), p.add_argument("out", help="signature table (.parquet)")
    _add_options(p, cfg, "duplicates.signature")

    p = sub.add_parser("reference-signatures",
                       help="signatures of any videos (e.g. a public test set), to flag contamination")
    p.add_argument("name", help="the set's name (the source of its clips)")
    p.add_argument("out", help="signature table (.parquet)"), p.add_argument("videos", nargs="+")
    _add_options(p, cfg, "duplicates.signature")

    p = sub.add_parser("duplicates", help="near-duplicate clip pairs across sources from signature tables")
    p.add_argument("out", help="pairs table (.tsv)"), p.add_argument("signatures", nargs="+")
    p.add_argument("--cache", required=True, help="folder of the incremental cache")
    p.add_argument("--reference", action="append", default=[], help="signature table of a reference set")
    p.add_argument("--contamination", help="table of the matches with reference sets (.tsv)")
    p.add_argument("--no-mirror", action="store_true", help="do not match mirrored copies")
    p.add_argument("--step-s", type=float, default=cfg["duplicates"]["signature"]["step_s"],
                   help="sampling step of the signatures (default: %(default)s)")
    _add_options(p, cfg, "duplicates.match", skip=("mirror",))

    p = sub.add_parser("export", help="AVA CSVs, splits, frame lists and statistics from a results folder")
    p.add_argument("results", help="results folder of a run (clips/, filter/, tracks/)")
    p.add_argument("out_dir")
    p.add_argument("--actions", default=None), p.add_argument("--label-map", default=cfg["export"]["label_map"])
    p.add_argument("--group-by", choices=["clip", "source"], default="clip")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--duplicates", choices=["group", "drop", "report"], default=cfg["export"]["split"]["duplicates"],
                   help="near-duplicate pairs (RESULTS/duplicates/pairs.tsv, when there): (default: %(default)s)")

    p = sub.add_parser("vqa-draft", help="draft captions and QA pairs of the kept clips with a VLM endpoint")
    p.add_argument("manifest"), p.add_argument("decisions"), p.add_argument("out", help="drafts JSON to write")
    p.add_argument("--downloads", help="download table of the unit (gives the prompt's $title)")
    p.add_argument("--no-unanswerable", action="store_true", help="keep no 'Not mentioned' pair")
    _add_options(p, cfg, "vqa.draft", skip=("enabled", "unanswerable"))

    p = sub.add_parser("vqa-export", help="vqa_and_captioning.json and statistics of the reviewed clips")
    p.add_argument("results", help="results folder of a run (clips/, filter/)")
    p.add_argument("out_dir")
    p.add_argument("--reviews", default=cfg["vqa"]["reviews"], help="(default: %(default)s)")

    p = sub.add_parser("release", help="the dataset release (Hugging Face layout, Croissant, WebDataset shards) "
                                       "from a results folder")
    p.add_argument("results", help="results folder of a run (export/, clips/, ...)"), p.add_argument("out_dir")
    p.add_argument("--configfile", default=None,
                   help="the run's config (default: config/config.yaml when there, else the defaults)")
    p.add_argument("--export", default=None, help="export folder (default: RESULTS/export)")
    p.add_argument("--vqa", default=None, help="vqa_and_captioning.json (default: RESULTS/vqa/'s, when there)")
    for key in ("previous", "withdrawn", "licences", "metadata", "version", "license"):
        p.add_argument(f"--{key}", default=None, help=f"release.{key} (default: the config's)")
    p.add_argument("--videos", choices=["auto", "true", "false"], default=None, help="release.videos")
    p.add_argument("--blur-faces", type=_boolean, default=None, help="release.blur_faces (true/false)")
    p.add_argument("--shards", type=_boolean, default=None, help="release.shards.enabled (true/false)")

    p = sub.add_parser("ledger", help="status of every source and clip of a results folder")
    p.add_argument("results")

    p = sub.add_parser("where", help="the unit of a clip or source of a results folder, and its files")
    p.add_argument("name", help="a clip id, a source id or a unit")
    p.add_argument("--results", default=cfg["results"], help="results folder of a run (default: %(default)s)")

    p = sub.add_parser("verify", help="are the sources of a finished dataset still there, and the same files?")
    p.add_argument("manifest", help="an export folder, or its redownload.tsv")
    p.add_argument("--out", default=None, help="table to write (TSV); it is printed too")
    p.add_argument("--no-hash", action="store_true",
                   help="only ask yt-dlp whether each URL is still available (no download, no hash)")
    _add_options(p, cfg, "download", skip=("format", "retries", "backoff_seconds"))

    p = sub.add_parser("demo-media", help="make one of the demo videos from package footage")
    p.add_argument("name"), p.add_argument("out")

    from .annotate import options as annotate_options

    p = sub.add_parser("annotate", help="serve the page to screen clips and label actions (local browser)")
    annotate_options.add_arguments(p)

    from .annotate.team import options as team_options

    p = sub.add_parser("team", help="team mode of the annotation page: accounts, double annotation, adjudication")
    team_options.add_arguments(p)

    from .evaluate import cli as evaluate_cli

    p = sub.add_parser("evaluate", help="the benchmark: HAR, caption and VQA metrics, the VLM baseline")
    evaluate_cli.add_arguments(p, cfg)

    from .annotate import labels_cli

    p = sub.add_parser("labels", help="action labels in CVAT or Label Studio: tasks out, their exports back in")
    labels_cli.add_arguments(p)

    p = sub.add_parser("agreement", help="compare and merge the actions files of several annotators")
    p.add_argument("files", nargs="+", help="actions CSVs (video_id,movie_or_real,person_id,action)")
    p.add_argument("--out", required=True, help="merged actions CSV to write")
    p.add_argument("--rule", choices=["majority", "union", "all"], default="majority")
    p.add_argument("--label-map", default="annotations/label_map.pbtxt")
    p.add_argument("--report-dir", default=None, help="folder for agreement_*.tsv (default: that of --out)")

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        from microg4m.common import media

        media.use_ffmpeg(args.ffmpeg)
        result = _dispatch(args, cfg)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"microg4m {args.stage}: error: {exc}", file=sys.stderr)
        return 1
    if result is not None:
        print(json.dumps(result, indent=2, default=str) if isinstance(result, dict) else result)
    return 0


def _index(results):
    """The results index of a run's folder (its problems on stderr); ValueError without units."""
    from microg4m.formats.results_index import ResultsIndex

    index = ResultsIndex(results)
    if not index.units():
        raise ValueError(f"{results}: no units (no units.tsv and no clips/*/manifest.tsv: not the results "
                         "folder of a run?)")
    for problem in index.problems():
        print(f"microg4m: {problem}", file=sys.stderr)
    return index


def _unit_files(results) -> list:
    """The files of every current unit of a results folder (UnitFiles, in unit order)."""
    index = _index(results)
    return [index.files(u) for u in index.units()]


def _shown(path: Path) -> str:
    """A path as the user typed the folder's: relative to the current folder when inside it."""
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _where(index, name: str) -> dict:
    """The unit of a clip, source or unit of a results folder, its sources and the files
    that are there; for a clip also its own files, status and persons."""
    clip = index.get(name)
    units = index.units()
    if clip is not None:
        unit = clip.unit
    elif name in units:
        unit = name
    else:
        try:
            unit = index.unit_of(name)
        except KeyError:
            raise ValueError(f"{name!r} is no clip, source or unit of {index.root}") from None
    files = index.files(unit)
    out = {"unit": unit, "sources": units[unit]}
    if clip is not None:
        out["clip"] = {"clip_id": clip.clip_id, "source_id": clip.source_id, "trim": clip.status,
                       "keep": clip.keep, "reason": clip.reason or clip.trim_reason,
                       "persons": index.persons(name) if clip.kept else []}
        out["clip_files"] = {k: _shown(v) for k, v in vars(index.clip_files(name)).items() if v.exists()}
    paths = {k: v for k, v in vars(files).items() if isinstance(v, Path)}
    out["files"] = {k: _shown(v) for k, v in paths.items() if v.exists()} | {"final_tracks": _shown(files.final_tracks)}
    out["forcerun"] = f"snakemake --cores all --forcerun {_shown(files.tracks)}"
    return out


def _dispatch(args: argparse.Namespace, cfg: dict):
    stage = args.stage
    if stage == "download":
        from microg4m.stages import download

        out = Path(args.out_dir) / f"{args.source_id}.tsv"
        source = {"source_id": args.source_id, "url": args.url, "clip_type": args.clip_type}
        return download.run([source], out, **_settings(args, cfg, "download"))[0]
    if stage == "trim":
        from microg4m.stages import download, trim

        video = Path(args.video)
        sid = args.source_id or video.stem
        out_dir = Path(args.out_dir)
        table = out_dir / "download" / f"{sid}.tsv"
        record = download.run([{"source_id": sid, "url": str(video.resolve()), "clip_type": args.clip_type}],
                                 table)[0]
        if record["status"] != "ok":
            raise ValueError(f"{video}: {record['reason']}")
        clips = out_dir / "clips" / sid
        return trim.run(table, clips / "manifest.tsv", clips / "status.tsv", **_settings(args, cfg, "trim"))[0]
    if stage == "detect":
        import tempfile

        from microg4m.stages import detect, detector

        settings = _settings(args, cfg, "detect")
        with tempfile.TemporaryDirectory() as tmp:  # as the workflow: the detector first (int8: on these clips)
            record = Path(tmp) / "detector.json"
            detector.run(record, manifests=[args.manifest], cache=args.export_cache, **settings)
            return detect.run(args.manifest, args.out, threads=args.threads, cache=args.export_cache,
                              detector=record, **settings)
    if stage == "scenes":
        from microg4m.stages import scenes

        return scenes.run(args.manifest, args.out, cache=args.cache, device=args.device, **_settings(args, cfg, "scenes"))
    if stage == "filter":
        from microg4m.formats.decisions import read_screening
        from microg4m.stages import filter as clip_filter

        settings = _settings(args, cfg, "filter")
        screened = read_screening(settings.pop("screening"))
        return clip_filter.run(args.manifest, args.detections, args.scenes, args.out, screened=screened,
                               quality=args.quality, **settings)
    if stage == "quality":
        from microg4m.stages import quality

        return quality.run(args.manifest, args.scenes, args.out, **_settings(args, cfg, "quality"))
    if stage == "motion":
        from microg4m.stages import motion

        return motion.run(args.manifest, args.out, **_settings(args, cfg, "motion"))
    if stage == "track":
        from microg4m.stages import track

        settings = _settings(args, cfg, "track")
        settings.pop("previews", None)
        return track.run(args.manifest, args.detections, args.decisions, args.motion, args.out,
                         contact_sheet=args.contact_sheet, previews_dir=args.previews_dir, **settings)
    if stage == "corrections":
        from microg4m.stages import corrections

        rep = corrections.run(args.tracks, args.manifest, args.decisions, args.files, args.out, args.report)
        return rep.to_csv(sep="\t", index=False)
    if stage == "track-files":
        from microg4m.stages import track_files as trackfiles

        return trackfiles.run(args.manifest, args.decisions, args.tracks, args.mot_dir, args.cvat_dir)
    if stage == "export":
        from microg4m.stages import export

        res = Path(args.results)
        units = _unit_files(res)
        pairs = res / "duplicates" / "pairs.tsv"
        downloads = [f.download for f in units]
        return export.run(manifests=[f.manifest for f in units], decisions=[f.decisions for f in units],
                          tracks=[f.final_tracks for f in units],
                          out_dir=args.out_dir, actions=args.actions, label_map=args.label_map,
                          seed=args.seed, group_by=args.group_by, duplicates=args.duplicates,
                          downloads=downloads if all(p.is_file() for p in downloads) else None,
                          duplicate_pairs=pairs if pairs.is_file() else None,
                          quality=[f.quality for f in units if f.quality.is_file()] or None)
    if stage == "signatures":
        from microg4m.stages import signatures

        return signatures.run(args.manifest, args.decisions, args.out,
                              **_settings(args, cfg, "duplicates.signature"))
    if stage == "reference-signatures":
        from microg4m.stages import signatures

        return signatures.run_videos(args.videos, args.out, set_name=args.name,
                                     **_settings(args, cfg, "duplicates.signature"))
    if stage == "duplicates":
        from microg4m.stages import duplicates

        return duplicates.run(args.signatures, args.out, cache_dir=args.cache, references=args.reference,
                              contamination=args.contamination, step_s=args.step_s,
                              **_settings(args, cfg, "duplicates.match", {"mirror": False if args.no_mirror else None}))
    if stage == "vqa-draft":
        from microg4m.vqa import draft as vqa_draft

        settings = _settings(args, cfg, "vqa.draft")
        settings.pop("enabled")
        settings["unanswerable"] = not args.no_unanswerable
        return vqa_draft.run(args.manifest, args.decisions, args.out, downloads=args.downloads, **settings)
    if stage == "vqa-export":
        from microg4m.vqa import export as vqa_export

        units = _unit_files(args.results)
        return vqa_export.run(manifests=[f.manifest for f in units], decisions=[f.decisions for f in units],
                              reviews=args.reviews, out_dir=args.out_dir)
    if stage == "release":
        from microg4m import config
        from microg4m.release import settings as release_settings
        from microg4m.stages import release

        videos = {"auto": "auto", "true": True, "false": False}.get(args.videos)
        given = {f"release.{k}": getattr(args, k) for k in ("previous", "withdrawn", "licences", "metadata",
                                                             "version", "license", "blur_faces")}
        run_cfg = config.load(args.configfile, given | {"release.videos": videos, "release.shards.enabled": args.shards})
        res = Path(args.results)
        there = lambda path: path if path.is_file() else None  # noqa: E731
        rel = run_cfg["release"]
        return release.run(results=res, out_dir=args.out_dir, export_dir=args.export or res / "export",
                           vqa=args.vqa or there(res / "vqa" / "vqa_and_captioning.json"),
                           previous=rel["previous"], withdrawn=rel["withdrawn"], licences=rel["licences"],
                           metadata=rel["metadata"],
                           team_summary=there(Path(run_cfg["team"]["report_dir"]) / "summary.json"),
                           duplicate_pairs=there(res / "duplicates" / "pairs.tsv"), funnel=there(res / "funnel.tsv"),
                           provenance_table=there(res / "provenance.tsv"),
                           detector=there(res / "models" / "detector.json"), versions=there(res / "versions.tsv"),
                           split=run_cfg["export"]["split"], pipeline=release_settings.pipeline(run_cfg),
                           encode=release_settings.encode(run_cfg), **release_settings.stage_settings(rel))
    if stage == "ledger":
        from microg4m.stages import ledger

        from microg4m.formats.unit_plan import FILE, source_order

        units = _unit_files(args.results)
        plan = Path(args.results) / FILE
        df = ledger.build([f.download for f in units], [f.status for f in units], [f.manifest for f in units],
                          [f.decisions for f in units], [f.final_tracks for f in units],
                          source_order(plan) if plan.is_file() else None,
                          quality=[f.quality for f in units if f.quality.is_file()])
        return df.to_csv(sep="\t", index=False)
    if stage == "where":
        return _where(_index(args.results), args.name)
    if stage == "verify":
        from microg4m.stages import verify

        settings = _settings(args, cfg, "download")
        df = verify.run(args.manifest, args.out, hash=not args.no_hash, **settings)
        counts = df["status"].value_counts()
        print("verify: " + ", ".join(f"{n} {s}" for s, n in counts.items()), file=sys.stderr)
        return df.to_csv(sep="\t", index=False)
    if stage == "annotate":
        from .annotate import app as annotate_app

        return annotate_app.serve(args)
    if stage == "team":
        from .annotate.team import cli as team_cli

        return team_cli.run(args)
    if stage == "labels":
        from .annotate import labels_cli

        return labels_cli.run(args)
    if stage == "agreement":
        from .annotate import agreement

        return agreement.run(args.files, args.out, label_map=args.label_map, rule=args.rule,
                             report_dir=args.report_dir)
    if stage == "evaluate":
        from .evaluate import cli as evaluate_cli

        return evaluate_cli.run(args, cfg)
    if stage == "demo-media":
        from microg4m.stages import demo

        return str(demo.make(args.name, args.out))
    raise AssertionError(stage)


if __name__ == "__main__":
    sys.exit(main())
