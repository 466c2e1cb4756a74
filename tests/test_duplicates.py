"""Near-duplicates: re-uploads of package footage, each with one change, found and kept in one split.

The footage (dancer, pianist, bikes, vtest) is cut into sources, and each source is
"re-uploaded" seven times with the real ffmpeg, with one change each: re-encoded at low
quality, rescaled, cropped by 10 %, mirrored, letterboxed, started 1.3 s later, and at
30 fps (dancer and bikes are 25 fps, vtest 10 fps). Every source, original or not, goes
through the real trim stage (3-s, 30 fps clips) and the signatures stage; carphone and
the two still photos (zidane, bus) are unrelated footage.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, ffmpeg, get_footage
from microg4m.stages import duplicate_sheets, duplicates, export, signatures, trim
from microg4m.formats import split_duplicates
from microg4m.engines.hash_index import HashIndex, popcount
from microg4m.formats.manifest import clip_file, read_manifest
from microg4m.common.media import read_frames
from microg4m.formats.duplicates import CONTAMINATION_COLUMNS, PAIR_COLUMNS, read_pairs
from microg4m.formats.signatures import read_signatures
from microg4m.formats.tracks import COLUMNS as TRACK_COLUMNS

LABEL_MAP = REPO / "annotations" / "label_map.pbtxt"
ORIGINALS = {"dancer": (5, 9), "pianist": (10, 6), "bikes": (0, 6), "vtest": (20, 6)}  # footage: (start s, length s)
SHIFT_S = 1.3
CHANGES = {  # one change per re-upload (ffmpeg options after the input)
    "reencode": ["-crf", "42"],  # low quality
    "rescale": ["-vf", "scale=trunc(iw*0.5/2)*2:trunc(ih*0.5/2)*2"],
    "crop": ["-vf", "crop=trunc(iw*0.9/2)*2:trunc(ih*0.9/2)*2"],  # 10 % off width and height, centred
    "mirror": ["-vf", "hflip"],
    "letterbox": ["-vf", "pad=iw:trunc(ih*1.4/2)*2:0:(oh-ih)/2:black"],
    "shift": [],  # the original from SHIFT_S on (-ss before the input)
    "fps30": ["-vf", "fps=30"],
}
UNRELATED = ["carphone", "zidane", "bus"]


def encode(src: Path, out: Path, *args: str, start: float | None = None, seconds: float | None = None) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    pre = ["-ss", str(start)] if start is not None else []
    dur = ["-t", str(seconds)] if seconds is not None else []
    crf = [] if "-crf" in args else ["-crf", "20"]
    ffmpeg(*pre, "-i", str(src), *dur, "-an", *args, "-c:v", "libx264", "-preset", "veryfast", *crf,
           "-pix_fmt", "yuv420p", str(out))
    return out


def still_video(image: Path, out: Path) -> Path:
    """A 6-s video of a photo with a slow zoom (the camera moves; the scene does not)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    ffmpeg("-loop", "1", "-i", str(image), "-t", "6", "-vf",
           "scale=640:-2,zoompan=z='1+0.002*on':d=1:s=640x360:fps=25", "-c:v", "libx264",
           "-preset", "veryfast", "-pix_fmt", "yuv420p", str(out))
    return out


def trim_and_sign(results: Path, source_id: str, video: Path) -> Path:
    """The real trim stage, every clip kept (no detection here), then the signatures stage."""
    table = results / "download" / f"{source_id}.tsv"
    table.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"source_id": source_id, "clip_type": "r", "status": "ok", "path": str(video.resolve()),
                   "reason": ""}]).to_csv(table, sep="\t", index=False)
    manifest = results / "clips" / source_id / "manifest.tsv"
    trim.run(table, manifest, manifest.parent / "status.tsv")
    m = read_manifest(manifest)
    decisions = results / "filter" / f"{source_id}.tsv"
    decisions.parent.mkdir(parents=True, exist_ok=True)
    m[m.status == "ok"].assign(person_share=1.0, cuts="", keep=1, reason="kept")[
        ["clip_id", "person_share", "cuts", "keep", "reason"]].to_csv(decisions, sep="\t", index=False)
    out = results / "signatures" / f"{source_id}.parquet"
    signatures.run(manifest, decisions, out)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """results/ with the originals, their re-uploads and the unrelated sources, signed."""
    base = tmp_path_factory.mktemp("dups")
    videos, results = base / "videos", base / "results"
    sources = {}
    for name, (start, seconds) in ORIGINALS.items():
        orig = encode(get_footage(name), videos / f"{name}.mp4", start=start, seconds=seconds)
        sources[name] = orig
        for change, args in CHANGES.items():
            sources[f"{name}_{change}"] = encode(orig, videos / f"{name}_{change}.mp4", *args,
                                                 start=SHIFT_S if change == "shift" else None)
    sources["carphone"] = get_footage("carphone")
    for name in ("zidane", "bus"):
        sources[name] = still_video(get_footage(name), videos / f"{name}.mp4")
    sigs = {sid: trim_and_sign(results, sid, v) for sid, v in sources.items()}
    pairs = results / "duplicates" / "pairs.tsv"
    summary = duplicates.run(list(sigs.values()), pairs, cache_dir=results / "duplicates" / "cache")
    return {"base": base, "results": results, "videos": videos, "signatures": sigs,
            "pairs": read_pairs(pairs), "summary": summary}


def footage_of(source_id: str) -> str:
    return source_id.split("_")[0]


def expected_originals(clip: str) -> dict[str, float]:
    """The original clip(s) a re-uploaded clip shows, with offset_s of (original, re-upload)."""
    source, seq = clip.rsplit("_", 1)
    name, change = source.split("_", 1)
    k = int(seq)
    if change == "shift":  # re-upload clip k starts SHIFT_S into original clip k
        return {f"{name}_{k:03d}": SHIFT_S, f"{name}_{k + 1:03d}": SHIFT_S - 3}
    return {f"{name}_{k:03d}": 0.0}


def matches_of(pairs: pd.DataFrame, clip: str) -> dict[str, tuple[float, bool]]:
    """Partner clip -> (offset_s seen from the partner as clip_a, mirrored)."""
    out = {}
    for r in pairs[(pairs.clip_a == clip) | (pairs.clip_b == clip)].itertuples():
        if r.clip_b == clip:
            out[r.clip_a] = (r.offset_s, r.mirrored)
        else:
            out[r.clip_b] = (-r.offset_s, r.mirrored)
    return out


def reuploaded_clips(corpus) -> list[str]:
    clips = []
    for sid, path in corpus["signatures"].items():
        if "_" in sid:
            clips += sorted(read_signatures(path)["clip_id"].unique())
    return clips


# ---------------------------------------------------------------- what it must show


def test_reuploaded_clips_are_matched_to_their_originals(corpus):
    pairs = corpus["pairs"]
    found = {}
    for clip in reuploaded_clips(corpus):
        change = clip.rsplit("_", 1)[0].split("_", 1)[1]
        partners = matches_of(pairs, clip)
        found.setdefault(change, []).append(any(o in partners for o in expected_originals(clip)))
    per_change = {c: f"{sum(v)}/{len(v)}" for c, v in found.items()}
    everything = [x for v in found.values() for x in v]
    print("\nmatched per change:", per_change)
    sims = {}
    for r in pairs.itertuples():  # the similarity of each re-upload with its own original(s)
        for orig, copy in ((r.clip_a, r.clip_b), (r.clip_b, r.clip_a)):
            if copy.count("_") == 2 and orig in expected_originals(copy):
                sims.setdefault(copy.rsplit("_", 1)[0].split("_", 1)[1], []).append(r.similarity)
    print("similarity with the original, min / median per change:",
          {c: f"{min(v):.2f} / {np.median(v):.2f}" for c, v in sorted(sims.items())})
    assert set(found) == set(CHANGES) and len(everything) >= 55  # 6 changes x 9 clips, shift 5
    assert sum(everything) / len(everything) >= 0.95, per_change
    assert all(sum(v) / len(v) >= 0.9 for v in found.values()), per_change


def test_shifted_start_gives_the_offset_and_mirrors_are_flagged(corpus):
    """On moving footage (dancer, bikes) the offset is the shift (to the sampling step),
    and mirrored copies are matched through their mirror hashes."""
    pairs = corpus["pairs"]
    for clip in reuploaded_clips(corpus):
        source = clip.rsplit("_", 1)[0]
        name, change = source.split("_", 1)
        partners = matches_of(pairs, clip)
        for orig, offset in expected_originals(clip).items():
            if orig not in partners:
                continue
            got_offset, mirrored = partners[orig]
            assert mirrored == (change == "mirror"), (clip, orig)
            if name in ("dancer", "bikes"):
                assert got_offset == pytest.approx(offset, abs=0.1 + 1e-9), (clip, orig, got_offset)


def test_unrelated_footage_gives_no_pair(corpus):
    pairs = corpus["pairs"]
    cross = pairs[pairs.source_a.map(footage_of) != pairs.source_b.map(footage_of)]
    assert cross.empty, cross.to_string()
    # not only through the index: every clip pair of unrelated footage, aligned at every
    # lag, plain and mirrored, stays below the threshold
    cat = duplicates.Catalog([duplicates.split_table(read_signatures(p), False, str(p))
                              for p in corpus["signatures"].values()], step_s=0.1)
    foot = cat.clips["source_id"].map(footage_of).to_numpy()
    a, b = np.triu_indices(len(foot), 1)
    other = foot[a] != foot[b]
    lags = np.arange(-29, 30)  # 3-s clips, 30 frames
    cands = pd.DataFrame({"a": np.repeat(a[other], 2 * len(lags)), "b": np.repeat(b[other], 2 * len(lags)),
                          "mirrored": np.tile(np.repeat([False, True], len(lags)), int(other.sum())),
                          "lag": np.tile(lags, 2 * int(other.sum()))})
    best = 1 - duplicates.align(cat, cands, min_overlap_s=1.0)["mean_d"].astype(float).min() / 32
    print(f"\nbest similarity of {other.sum()} unrelated clip pairs (any lag, plain or mirrored): {best:.3f}")
    assert best < 0.4
    assert not pairs.source_a.isin(UNRELATED).any() and not pairs.source_b.isin(UNRELATED).any()
    assert (pairs.source_a != pairs.source_b).all()  # across sources only
    assert pairs.similarity.between(0.5, 1).all()


def export_inputs(results: Path, tmp: Path, labelled: bool = False) -> dict:
    """export.run's inputs for the corpus: one tracked person per clip (frames 10-30);
    with ``labelled``, an action label for each."""
    manifests = sorted(results.glob("clips/*/manifest.tsv"))
    rows, labels = [], []
    for m in manifests:
        df = read_manifest(m)
        for r in df[df.status == "ok"].itertuples():
            rows += [(r.clip_id, f, 1, 10, 10, r.width - 10, r.height - 10, 0.9) for f in (10, 20, 30)]
            labels.append(f"{r.clip_id},r,1,12")
    tracks = tmp / "tracks.csv"
    pd.DataFrame(rows, columns=TRACK_COLUMNS).to_csv(tracks, index=False)
    inputs = dict(manifests=manifests, decisions=sorted(results.glob("filter/*.tsv")), tracks=[tracks],
                  label_map=LABEL_MAP, duplicate_pairs=results / "duplicates" / "pairs.tsv")
    if labelled:
        actions = tmp / "actions.csv"
        actions.write_text("video_id,movie_or_real,person_id,action\n" + "\n".join(labels) + "\n")
        inputs["actions"] = actions
    return inputs


def split_of(out: Path) -> dict[str, str]:
    return {c: s for s in ("train", "val", "test") for c in (out / "splits" / f"{s}_video_ids.txt").read_text().split()}


def test_source_splits_keep_duplicates_together(corpus, tmp_path):
    inputs = export_inputs(corpus["results"], tmp_path)
    out = tmp_path / "grouped"
    summary = export.run(**inputs, out_dir=out, group_by="source", duplicates="group")
    table = pd.read_csv(out / "duplicates.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert len(table) == len(corpus["pairs"]) == summary["duplicate_pairs"] > 0
    splits = split_of(out)
    assert (table.clip_a.map(splits) == table.clip_b.map(splits)).all()
    assert set(table.decision) == {"same split"} and summary["duplicates_crossing"] == 0
    # every footage with its re-uploads is one unit; the unrelated sources are their own
    by_footage = {}
    for clip, split in splits.items():
        by_footage.setdefault(footage_of(clip.rsplit("_", 1)[0]), set()).add(split)
    assert all(len(s) == 1 for s in by_footage.values()), by_footage

    by_source = pd.read_csv(out / "duplicates_by_source.tsv", sep="\t", dtype=str)
    assert by_source.columns.tolist() == split_duplicates.SOURCE_COLUMNS
    assert ("dancer", "dancer_mirror") in set(zip(by_source.source_a, by_source.source_b))
    assert by_source.pairs.astype(int).sum() == len(table)

    # the same split by source without the grouping lets duplicates cross: the test can fail
    report = tmp_path / "report"
    summary = export.run(**inputs, out_dir=report, group_by="source", duplicates="report")
    crossing = pd.read_csv(report / "duplicates.tsv", sep="\t").decision.eq("crosses splits").sum()
    assert crossing == summary["duplicates_crossing"] > 0
    warned = pd.read_csv(report / "input_report.tsv", sep="\t", keep_default_na=False)
    assert (warned.problem.str.startswith("near-duplicate clips in two splits")).sum() == crossing


def test_clip_mode_label_report_warns_about_every_crossing_pair(corpus, tmp_path):
    inputs = export_inputs(corpus["results"], tmp_path, labelled=True)
    out = tmp_path / "clips"
    summary = export.run(**inputs, out_dir=out, group_by="clip", duplicates="group")
    table = pd.read_csv(out / "duplicates.tsv", sep="\t", keep_default_na=False)
    crossing = table[table.decision == "crosses splits"]
    assert len(crossing) == summary["duplicates_crossing"] > 0
    rep = pd.read_csv(out / "label_report.tsv", sep="\t", dtype=str, keep_default_na=False)
    warnings = rep[rep.problem.str.startswith("near-duplicate clips in two splits")]
    assert len(warnings) == len(crossing)
    for r in crossing.itertuples():
        assert warnings.problem.str.contains(f"{r.clip_a} ({r.split_a}) and {r.clip_b} ({r.split_b})",
                                             regex=False).any()
    # the split itself is the reference's clip split, duplicates or not
    plain = export.run(**{k: v for k, v in inputs.items() if k != "duplicate_pairs"}, out_dir=tmp_path / "plain")
    assert split_of(out) == split_of(tmp_path / "plain") and "duplicate_pairs" not in plain


def test_drop_leaves_one_clip_of_each_pair(corpus, tmp_path):
    inputs = export_inputs(corpus["results"], tmp_path, labelled=True)
    out = tmp_path / "drop"
    summary = export.run(**inputs, out_dir=out, group_by="clip", duplicates="drop")
    exported = set(split_of(out))
    pairs = corpus["pairs"]
    assert not (pairs.clip_a.isin(exported) & pairs.clip_b.isin(exported)).any()
    assert summary["duplicates_dropped"] > 0 and summary["duplicates_crossing"] == 0
    # the originals come first in clip id order and stay; their copies go
    assert {"dancer_000", "dancer_001", "dancer_002", "bikes_000", "pianist_000", "carphone_000",
            "zidane_000", "bus_000"} <= exported
    assert not any(c.startswith(("dancer_mirror_", "bikes_crop_")) for c in exported)
    rep = pd.read_csv(out / "input_report.tsv", sep="\t", keep_default_na=False)
    dropped = rep[rep.problem.str.startswith("dropped: near-duplicate of")]
    assert len(dropped) == summary["duplicates_dropped"]
    labels = pd.read_csv(out / "label_report.tsv", sep="\t", keep_default_na=False)
    assert labels.problem.str.contains(r"clip not kept \(near-duplicate of", regex=True).sum() == len(dropped)
    assert all(c not in exported for c in dropped["item"])


def test_adding_a_source_compares_only_it_and_gives_the_fresh_result(corpus, tmp_path):
    sigs = corpus["signatures"]
    new = "dancer_mirror"
    before = [p for s, p in sigs.items() if s != new]
    cache, out = tmp_path / "cache", tmp_path / "pairs.tsv"
    first = duplicates.run(before, out, cache_dir=cache)
    assert first["compared"] == first["clips"]  # a first run compares everything
    added = duplicates.run(list(sigs.values()), out, cache_dir=cache)
    new_clips = read_signatures(sigs[new])["clip_id"].nunique()
    assert added == {**added, "compared": new_clips, "files_new_or_changed": 1}
    again = duplicates.run(list(sigs.values()), out, cache_dir=cache)
    assert again["compared"] == 0 and again["pairs"] == added["pairs"]
    fresh = tmp_path / "fresh.tsv"
    duplicates.run(list(sigs.values()), fresh, cache_dir=tmp_path / "fresh_cache")
    assert out.read_bytes() == fresh.read_bytes()
    assert out.read_bytes() == (corpus["results"] / "duplicates" / "pairs.tsv").read_bytes()
    # a changed setting compares everything again
    changed = duplicates.run(list(sigs.values()), out, cache_dir=cache, min_similarity=0.7)
    assert changed["compared"] == changed["clips"] and changed["pairs"] < added["pairs"]


def test_reference_set_flags_contamination(corpus, tmp_path):
    """A 'public test set' holding a mirrored, cropped copy of the dancer footage: the
    dancer clips are flagged, the rest is not, and no pair is made of it."""
    videos = corpus["videos"]
    test_set = [encode(videos / "dancer.mp4", tmp_path / "set" / "clip_a.mp4", "-vf", "hflip,crop=iw*0.9:ih*0.9",
                       start=1.0, seconds=5),
                encode(get_footage("pianist"), tmp_path / "set" / "clip_b.mp4", start=80, seconds=4)]
    ref = tmp_path / "public_test.parquet"
    assert signatures.run_videos(test_set, ref, set_name="public_test")["clips"] == 2
    contamination = tmp_path / "contamination.tsv"
    summary = duplicates.run(list(corpus["signatures"].values()), tmp_path / "pairs.tsv", cache_dir=tmp_path / "c",
                             references=[ref], contamination=contamination)
    found = pd.read_csv(contamination, sep="\t", dtype=str)
    assert found.columns.tolist() == CONTAMINATION_COLUMNS
    assert set(found.reference_set) == {"public_test"} and summary["contaminated"] == len(found)
    flagged = set(found.clip_id)
    assert {"dancer_000", "dancer_001"} <= flagged
    assert all(footage_of(c.rsplit("_", 1)[0]) in ("dancer", "pianist") for c in flagged)
    assert (tmp_path / "pairs.tsv").read_bytes() == (corpus["results"] / "duplicates" / "pairs.tsv").read_bytes()

    inputs = export_inputs(corpus["results"], tmp_path)
    out = tmp_path / "export"
    s = export.run(**inputs, out_dir=out, group_by="source", contamination=contamination)
    table = pd.read_csv(out / "contamination.tsv", sep="\t", dtype=str)
    assert set(table.clip_id) == flagged and table.split.isin(["train", "val", "test"]).all()
    rep = pd.read_csv(out / "input_report.tsv", sep="\t", keep_default_na=False)
    assert set(rep.loc[rep.input == "duplicates.reference", "item"]) == flagged and s["contaminated"] == len(flagged)


def test_report_pages_show_each_pair_side_by_side(corpus, tmp_path):
    results = corpus["results"]
    out = tmp_path / "sheets"
    got = duplicate_sheets.run(results / "duplicates" / "pairs.tsv", sorted(results.glob("clips/*/manifest.tsv")), out)
    n = len(corpus["pairs"])
    shown = min(n, duplicate_sheets.MAX_PAIRS)
    assert got == {"pairs": n, "shown": shown, "pages": -(-shown // duplicate_sheets.PAIRS_PER_PAGE)}
    import cv2

    page = cv2.imread(str(out / "pairs_001.png"))
    row = duplicate_sheets.HEADER + duplicate_sheets.THUMB[1] + 10
    assert page.shape[:2] == (row * duplicate_sheets.PAIRS_PER_PAGE, 2 * duplicate_sheets.THUMB[0] + 8)
    order = duplicate_sheets.shown(corpus["pairs"])
    n_source_pairs = len(corpus["pairs"].groupby(["source_a", "source_b"]))
    assert not order.head(n_source_pairs).duplicated(["source_a", "source_b"]).any()  # each source pair once first
    first = order.iloc[0]
    left = page[duplicate_sheets.HEADER : duplicate_sheets.HEADER + duplicate_sheets.THUMB[1], : duplicate_sheets.THUMB[0]]
    right = page[duplicate_sheets.HEADER : duplicate_sheets.HEADER + duplicate_sheets.THUMB[1], -duplicate_sheets.THUMB[0]:]
    assert left.std() > 10 and right.std() > 10, "both thumbnails show a frame"
    if not first.mirrored and first.similarity > 0.9:
        assert np.abs(left.astype(int) - right.astype(int)).mean() < 40  # the same picture
    empty = tmp_path / "none.tsv"
    empty.write_text("\t".join(PAIR_COLUMNS) + "\n")
    assert duplicate_sheets.run(empty, [], tmp_path / "none") == {"pairs": 0, "shown": 0, "pages": 1}


def test_report_frames_are_those_decoded_one_at_a_time(corpus):
    """The sheets decode each clip once for all its thumbnails: the frame at each time is
    the one a decode from the start up to that time ends on (past the end: the last)."""
    manifest = corpus["results"] / "clips" / "dancer" / "manifest.tsv"
    clip = read_manifest(manifest).query("status == 'ok'").clip_id.iloc[0]
    path = clip_file(manifest, clip)
    decoded = read_frames(path)
    times = {0.0, 0.51, 1.5, 2.99, 60.0}
    got = duplicate_sheets.frames_at(path, times)
    assert set(got) == times
    for t in times:
        want = decoded[min(len(decoded) - 1, int(t * 30))]
        assert np.array_equal(got[t], want), t
    assert duplicate_sheets.frames_at(path.with_name("missing.mp4"), {1.0}) == {1.0: None}


# ---------------------------------------------------------------- bad inputs


def test_bad_clip_and_bad_tables_are_named_and_the_rest_goes_on(corpus, tmp_path, caplog):
    results = corpus["results"]
    src = tmp_path / "clips" / "broken"
    src.mkdir(parents=True)
    manifest = results / "clips" / "dancer" / "manifest.tsv"
    m = read_manifest(manifest)
    m = m[m.status == "ok"].head(2).assign(source_id="broken")
    m["clip_id"] = ["broken_000", "broken_001"]
    m.to_csv(src / "manifest.tsv", sep="\t", index=False)
    shutil.copy(results / "clips" / "dancer" / "dancer_000.mp4", src / "broken_000.mp4")
    (src / "broken_001.mp4").write_bytes(b"not a video")
    decisions = tmp_path / "broken.tsv"
    m.assign(keep=1)[["clip_id", "keep"]].to_csv(decisions, sep="\t", index=False)
    got = signatures.run(src / "manifest.tsv", decisions, tmp_path / "broken.parquet")
    assert got["clips"] == 1 and got["failed"] == 1
    assert "broken_001" in caplog.text and "no signature" in caplog.text

    junk = tmp_path / "junk.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(junk)
    coarse = tmp_path / "coarse.parquet"  # a reference set signed at another step
    signatures.run_videos([corpus["videos"] / "dancer.mp4"], coarse, set_name="coarse", step_s=0.25)
    summary = duplicates.run([corpus["signatures"]["dancer"], corpus["signatures"]["dancer_mirror"], junk,
                              tmp_path / "missing.parquet"], tmp_path / "p.tsv", cache_dir=tmp_path / "c",
                             references=[coarse], contamination=tmp_path / "contamination.tsv")
    assert summary["pairs"] > 0 and summary["contaminated"] == 0
    assert "junk.parquet: unreadable signature table" in caplog.text and "missing.parquet: no such" in caplog.text
    assert "coarse.parquet: unreadable signature table (sampled every 0.25 s, not every 0.1 s" in caplog.text

    bad_pairs = tmp_path / "bad_pairs.tsv"
    bad_pairs.write_text("clip_a\tclip_b\nx\ty\n")
    inputs = export_inputs(results, tmp_path) | {"duplicate_pairs": bad_pairs}
    export.run(**inputs, out_dir=tmp_path / "export", group_by="source")
    rep = (tmp_path / "export" / "input_report.tsv").read_text()
    assert "bad_pairs.tsv" in rep and "unreadable duplicates table" in rep and "missing column(s)" in rep
    with pytest.raises(ValueError, match="export.split.duplicates must be one of group, drop, report"):
        export.run(**inputs, out_dir=tmp_path / "x", duplicates="merge")


# ---------------------------------------------------------------- pure logic (next to the real tests above)


def test_index_finds_every_entry_within_its_guaranteed_radius():
    rng = np.random.default_rng(7)
    entries = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, 5000, dtype=np.int64)
    for chunks, flips in ((3, 1), (4, 1), (4, 0)):
        index = HashIndex(entries, chunks, flips)
        r = index.guaranteed_radius()
        assert r == chunks * (flips + 1) - 1
        picks = rng.choice(len(entries), 300, replace=False)
        queries = entries[picks].copy().view(np.uint64)
        for i in range(len(queries)):  # r random bits flipped: still found, and only the right entry that near
            for b in rng.choice(64, r, replace=False):
                queries[i] ^= np.uint64(1) << np.uint64(b)
        qi, ei, d = index.search(queries.view(np.int64), radius=r)
        found = set(zip(qi.tolist(), ei.tolist()))
        assert all((i, int(p)) in found for i, p in enumerate(picks)), (chunks, flips)
        assert (d == popcount(queries[qi] ^ entries[ei].view(np.uint64))).all() and (d <= r).all()


def test_linked_sources_form_connected_components():
    groups = {f"{s}_000": s for s in "abcdef"}
    pairs = pd.DataFrame({"clip_a": ["a_000", "c_000", "e_000"], "clip_b": ["b_000", "b_000", "f_000"]})
    linked = split_duplicates.linked_groups(pairs, groups)
    assert linked == {"a_000": "a", "b_000": "a", "c_000": "a", "d_000": "d", "e_000": "e", "f_000": "e"}


def test_drop_keeps_the_first_clip_and_a_chain_keeps_its_ends():
    pairs = pd.DataFrame({"clip_a": ["a_000", "b_000", "a_000"], "clip_b": ["b_000", "c_000", "d_000"]})
    assert split_duplicates.drop_clips(pairs) == {"b_000": "a_000", "d_000": "a_000"}  # c is no duplicate of a
