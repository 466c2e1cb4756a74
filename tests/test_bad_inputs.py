"""Bad inputs through the real workflow: each is recorded with a clear reason, the rest completes.

One real Snakemake run (real yt-dlp on file:// URLs, real ffmpeg, real YOLO at a small
image size) over a sources table with one row per bad case plus one good source. The
sources go in units of several sources (the default, ``sources_per_job: auto``: two units
of 11 on the tests' 2 CPUs), so a bad source shares its jobs with others: nothing it does
may cost them their results. The run must exit 0 (no job may
fail on bad media), the good source must reach the export with kept clips, and every
source must carry the expected status and a reason naming the cause in the download
table, the trim status, the manifest and the ledger.

The sources-table validation cases (duplicate id, ids with ``../`` or ``/``) are
checked separately: the run stops before any job, naming the row and the field.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import ffmpeg, get_footage
from microg4m.common import media
from microg4m.formats.records import RECORD_COLUMNS
from microg4m.formats.results_index import ResultsIndex
from microg4m.stages.ledger import COLUMNS as LEDGER_COLUMNS
from microg4m.formats.manifest import COLUMNS as MANIFEST_COLUMNS
from microg4m.stages.trim import STATUS_COLUMNS
from workflow import make_workdir, once_per_session, snakemake

H264 = ["-an", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
# File names (relative to the workdir) that the shell-metacharacter rows would create
# if any part of the pipeline ever passed a URL or a path through a shell.
MARKERS = ("PWNED_A", "PWNED_B", "PWNED_C", "PWNED_D", "PWNED_E")
METACHAR_NAME = "meta;touch PWNED_A;$(touch PWNED_B)`touch PWNED_C`|x&&y>z #.mp4"
UTF8_CLIP, UTF8_FILM = "naïve clip.mp4", "Café #1 東京.mkv"


def make_media(d: Path) -> dict[str, Path]:
    """Every bad (and one good) source video, made from package footage with ffmpeg."""
    d.mkdir(parents=True, exist_ok=True)
    dancer, pianist = str(get_footage("dancer")), str(get_footage("pianist"))
    m = {}

    def make(name, *args):
        m[name] = d / name
        ffmpeg(*args, str(m[name]))

    make("good.mp4", "-i", dancer, "-t", "6.5", *H264)
    # truncated at half: moov at the end (nothing readable) and moov first (half readable)
    make("full_end.mp4", "-i", dancer, "-t", "6.5", *H264)
    make("full_start.mp4", "-i", dancer, "-t", "6.5", *H264, "-movflags", "+faststart")
    for src, name in (("full_end.mp4", "truncated.mp4"), ("full_start.mp4", "truncated_faststart.mp4")):
        data = m.pop(src).read_bytes()
        m[name] = d / name
        m[name].write_bytes(data[: len(data) // 2])
    m["zero.mp4"] = d / "zero.mp4"
    m["zero.mp4"].write_bytes(b"")
    m["text.mp4"] = d / "text.mp4"
    m["text.mp4"].write_text("this is a text file, not a video\n")
    make("audio.mp4", "-f", "lavfi", "-i", "sine=frequency=440:duration=4", "-c:a", "aac")
    make("short.mp4", "-i", pianist, "-t", "2", *H264)
    make("oneframe.mp4", "-i", dancer, "-frames:v", "1", *H264)
    make("corrupt.mp4", "-i", dancer, "-t", "9.5", *H264, "-movflags", "+faststart")
    data = bytearray(m["corrupt.mp4"].read_bytes())
    lo, hi = len(data) * 2 // 5, len(data) * 3 // 5  # garbage over the middle fifth
    data[lo:hi] = random.Random(7).randbytes(hi - lo)
    m["corrupt.mp4"].write_bytes(bytes(data))
    make("portrait.mp4", "-i", dancer, "-t", "3.5", "-vf", "scale=1080:1920,setsar=1", *H264)
    make("fps60.mp4", "-i", dancer, "-t", "3.5", "-vf", "minterpolate=fps=60:mi_mode=dup", *H264)
    # irregular frame intervals kept as they are (variable frame rate)
    make("vfr.mkv", "-i", dancer, "-t", "3.5", "-vf", "setpts='(N+0.45*mod(N\\,2))/24/TB'",
         "-fps_mode", "passthrough", *H264)
    make(METACHAR_NAME, "-i", dancer, "-t", "3.5", *H264)
    # file names that are not UTF-8 (byte 0xE9, Latin-1 é), given as caf%E9 in file:// URLs,
    # and UTF-8 names given percent-encoded (as Path.as_uri() writes them)
    for name in ("caf\udce9.mp4", "film\udce9.mkv", UTF8_CLIP, UTF8_FILM):
        make(name, "-i", pianist, "-t", "3.5", *H264)
    return m


# source_id -> (file in the media folder or a URL, clip type)
def sources_rows(media_dir: Path, marker_dir: Path) -> list[tuple[str, str, str]]:
    def url(name):
        if "\udce9" in name:  # a byte that is not UTF-8: only a %-escape can carry it
            return "file://" + str(media_dir / name).replace("\udce9", "%E9")
        if name in (UTF8_CLIP, UTF8_FILM):
            return (media_dir / name).as_uri()  # file:///...Caf%C3%A9%20%231...
        return "file://" + str(media_dir / name)

    bad_url = (f"http://127.0.0.1:9/a.mp4;touch {marker_dir}/PWNED_D && $(touch {marker_dir}/PWNED_E) "
               f"| `touch PWNED_A` #")
    return [
        ("good", url("good.mp4"), "r"),
        ("truncated", url("truncated.mp4"), "r"),
        ("truncated_faststart", url("truncated_faststart.mp4"), "r"),
        ("zero", url("zero.mp4"), "r"),
        ("zero_film", url("zero.mp4"), "m"),
        ("text", url("text.mp4"), "r"),
        ("audio", url("audio.mp4"), "r"),
        ("short", url("short.mp4"), "r"),
        ("oneframe", url("oneframe.mp4"), "r"),
        ("corrupt", url("corrupt.mp4"), "r"),
        ("portrait", url("portrait.mp4"), "r"),
        ("fps60", url("fps60.mp4"), "r"),
        ("vfr", url("vfr.mkv"), "r"),
        ("no_http", "http://127.0.0.1:9/does-not-exist.mp4", "r"),
        ("no_file", url("does-not-exist.mp4"), "r"),
        ("no_film", url("does-not-exist.mkv"), "m"),
        ("meta_url", bad_url, "r"),
        ("meta_file", url(METACHAR_NAME), "r"),
        ("nonutf8_r", url("caf\udce9.mp4"), "r"),
        ("nonutf8_film", url("film\udce9.mkv"), "m"),
        ("utf8_r", url(UTF8_CLIP), "r"),
        ("utf8_film", url(UTF8_FILM), "m"),
    ]


def _run(base: Path) -> Path:
    media_dir = base / "media"
    make_media(media_dir)
    rows = sources_rows(media_dir, base)
    table = "source_id\turl\tclip_type\n" + "".join(f"{s}\t{u}\t{t}\n" for s, u, t in rows)
    wd = make_workdir(base / "wd", sources=table,
                      config={"download": {"retries": 1, "backoff_seconds": 0},
                              "detect": {"imgsz": 160},
                              # no labels (not the demo's): template mode, every kept clip in the splits
                              "export": {"actions": "annotations/actions.csv"}})
    proc = snakemake(wd)
    (wd / "snakemake.out").write_text(proc.stdout + proc.stderr, errors="replace")
    return wd


def bad_inputs_run(tmp_path_factory) -> Path:
    """The workdir of the one real run over every bad input: made once per pytest session,
    also when xdist runs this module and tests/test_ledger.py on two workers (their base
    folders are siblings; the second waits on the lock and reuses the first's run)."""
    base = once_per_session(tmp_path_factory, "bad_inputs", _run)
    return base / "wd"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return bad_inputs_run(tmp_path_factory)


def read_tables(res: Path, pattern: str, columns: list[str]) -> pd.DataFrame:
    """Concatenate per-unit tables; each must be strict UTF-8 with exactly ``columns``."""
    frames = []
    for path in sorted(res.glob(pattern)):
        path.read_bytes().decode("utf-8")  # strict: raises on any invalid byte
        df = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        assert list(df.columns) == columns, path
        frames.append(df)
    assert frames, pattern
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def tables(run):
    res = run / "results"
    dl = read_tables(res, "download/*.tsv", RECORD_COLUMNS).set_index("source_id")
    st = read_tables(res, "clips/*/status.tsv", STATUS_COLUMNS).set_index("source_id")
    mf = read_tables(res, "clips/*/manifest.tsv", MANIFEST_COLUMNS)
    ledger = read_tables(res, "ledger.tsv", LEDGER_COLUMNS)
    return dl, st, mf, ledger


def source_row(ledger, sid):
    rows = ledger[(ledger.level == "source") & (ledger.source_id == sid)]
    assert len(rows) == 1, sid
    return rows.iloc[0]


def test_every_source_is_recorded_once(run, tables):
    dl, st, mf, ledger = tables
    ids = [s for s, _, _ in sources_rows(run.parent / "media", run.parent)]
    assert sorted(dl.index) == sorted(ids) and dl.index.is_unique
    assert sorted(st.index) == sorted(ids) and st.index.is_unique
    assert sorted(ledger[ledger.level == "source"].source_id) == sorted(ids)


def test_the_good_source_reaches_the_export(run, tables):
    dl, st, mf, ledger = tables
    assert dl.loc["good", "status"] == "ok" and st.loc["good", "clips"] == "2"
    kept = ledger[(ledger.level == "clip") & (ledger.status == "kept")]
    assert {"good_000", "good_001"} <= set(kept.clip_id)
    boxes = pd.read_csv(run / "results" / "export" / "boxes.csv", dtype={"video_id": str})
    assert {"good_000", "good_001"} <= set(boxes.video_id)
    lists = pd.concat(pd.read_csv(p, sep=" ", dtype=str)
                      for p in sorted((run / "results" / "export" / "frame_lists").glob("*.csv")))
    assert (lists.video_id == "good_000").sum() == 90 and (lists.video_id == "good_001").sum() == 90
    # every kept clip of any source made it to the export, none of a rejected one
    assert set(lists.video_id) == set(kept.clip_id)


@pytest.mark.parametrize("sid, clip_type, words, reason_class", [
    ("truncated", "r", ["not a video", "moov atom not found"], "not_a_video"),
    # not yt-dlp's "did not get any data"
    ("zero", "r", ["not a video", "zero.mp4: empty file (0 bytes)"], "not_a_video"),
    ("zero_film", "m", ["not a video", "empty file (0 bytes)"], "not_a_video"),
    ("text", "r", ["not a video", "not a readable video"], "not_a_video"),
    ("audio", "r", ["not a video", "no video stream (only audio)"], "not_a_video"),
    ("no_http", "r", ["connection refused"], "network"),
    ("no_file", "r", ["no such file", "does-not-exist.mp4"], "missing_file"),
    ("no_film", "m", ["does-not-exist.mkv", "does not exist"], "missing_file"),
    ("meta_url", "r", ["connection refused"], "network"),
    # %E9 is not UTF-8: kept literally, that file name does not exist (caf\xe9.mp4 does)
    ("nonutf8_r", "r", ["no such file", "caf%e9.mp4"], "missing_file"),
    ("nonutf8_film", "m", ["film%e9.mkv", "does not exist"], "missing_file"),
])
def test_failed_sources_have_a_reason_and_no_clips(tables, sid, clip_type, words, reason_class):
    dl, st, mf, ledger = tables
    rec = dl.loc[sid]
    assert rec["status"] == "failed" and rec["path"] == "" and rec["clip_type"] == clip_type
    for w in words:
        assert w in rec["reason"].lower(), (sid, rec["reason"])
    # the reason class and its advice, in the download record and the ledger
    assert rec["reason_class"] == reason_class and rec["advice"], (sid, rec["reason"], rec["reason_class"])
    assert source_row(ledger, sid)["reason_class"] == reason_class
    assert source_row(ledger, sid)["advice"] == rec["advice"]
    assert st.loc[sid, "status"] == "skipped" and st.loc[sid, "reason"] == f"download failed: {rec['reason']}"
    assert st.loc[sid, "clips"] == "0" and (mf.source_id == sid).sum() == 0
    src = source_row(ledger, sid)
    assert src["status"] == "failed" and src["reason"] == rec["reason"]


@pytest.mark.parametrize("sid, dropped_frames", [("short", 58), ("oneframe", 1)])
def test_too_short_gives_zero_clips_not_an_error(tables, sid, dropped_frames):
    dl, st, mf, ledger = tables
    assert dl.loc[sid, "status"] == "ok"
    assert st.loc[sid, "status"] == "ok" and st.loc[sid, "clips"] == "0"
    assert "source too short" in st.loc[sid, "reason"]
    rows = mf[mf.source_id == sid]
    assert list(rows.status) == ["dropped"] and rows.frames.astype(int).tolist() == [dropped_frames]
    assert "shorter than 3 s" in rows.reason.iloc[0]
    src = source_row(ledger, sid)
    assert src["status"] == "downloaded" and "source too short" in src["reason"]
    clip = ledger[(ledger.level == "clip") & (ledger.source_id == sid)]
    assert list(clip.status) == ["rejected"] and clip.reason.iloc[0].startswith("trim: final clip shorter")


@pytest.mark.parametrize("sid, what, clips", [
    ("truncated_faststart", "source truncated", 1),  # half of 6.5 s still decodes
    ("corrupt", "source has corrupt data", 3),
])
def test_damaged_sources_keep_their_good_clips_and_say_why(run, tables, sid, what, clips):
    dl, st, mf, ledger = tables
    assert dl.loc[sid, "status"] == "ok"
    assert st.loc[sid, "status"] == "ok" and st.loc[sid, "clips"] == str(clips)
    assert st.loc[sid, "reason"].startswith(what) and "ffmpeg decoding errors" in st.loc[sid, "reason"]
    assert " @ 0x" not in st.loc[sid, "reason"]  # no pointer addresses: the record is reproducible
    ok = mf[(mf.source_id == sid) & (mf.status == "ok")]
    assert len(ok) == clips and (ok.frames == "90").all()
    for clip in ok.clip_id:
        assert media.count_frames(ResultsIndex(run / "results").clip(clip).path) == 90
    assert source_row(ledger, sid)["reason"].startswith(what)


@pytest.mark.parametrize("sid, width, height", [
    ("portrait", 1080, 1920), ("fps60", 518, 496), ("vfr", 518, 496), ("meta_file", 518, 496),
    ("utf8_r", 640, 480), ("utf8_film", 640, 480),
])
def test_odd_but_valid_sources_give_exact_clips(run, tables, sid, width, height):
    dl, st, mf, ledger = tables
    assert dl.loc[sid, "status"] == "ok" and dl.loc[sid, "reason"] == ""
    assert st.loc[sid, "status"] == "ok" and st.loc[sid, "clips"] == "1"
    ok = mf[(mf.source_id == sid) & (mf.status == "ok")]
    assert ok.clip_id.tolist() == [f"{sid}_000"]
    assert (int(ok.width.iloc[0]), int(ok.height.iloc[0])) == (width, height)
    clip = ResultsIndex(run / "results").clip(f"{sid}_000").path
    assert media.count_frames(clip) == 90 and media.probe(clip).fps == pytest.approx(30, abs=0.01)
    # every ok clip went on through filter (and track when kept): a decision in the ledger
    row = ledger[ledger.clip_id == f"{sid}_000"].iloc[0]
    assert row["filter"] in {"kept", "few_persons", "scene_cut"} and row["status"] in {"kept", "rejected"}


def test_titles_that_are_not_utf8_stay_valid_records(run, tables):
    dl, st, mf, ledger = tables
    assert dl.loc["utf8_film", "title"] == "Café #1 東京"  # a film's title is its file name
    assert dl.loc["utf8_r", "title"] == "naïve clip"  # yt-dlp's title of a direct link
    assert dl.loc["nonutf8_r", "url"].endswith("caf%E9.mp4")  # the table's text, as given
    for path in (run / "results").rglob("*"):
        if path.suffix in {".tsv", ".csv", ".txt", ".pbtxt"}:
            path.read_bytes().decode("utf-8")  # strict


def test_shell_metacharacters_are_never_run(run, tables):
    dl, st, mf, ledger = tables
    assert dl.loc["meta_url", "url"].startswith("http://127.0.0.1:9/a.mp4;touch ")
    assert dl.loc["meta_url", "url"].endswith("#")  # a '#' inside a URL is not a comment
    assert dl.loc["meta_file", "status"] == "ok"  # the odd file name is just a name
    for folder in (run, run.parent, Path.cwd()):
        for marker in MARKERS:
            assert not (folder / marker).exists(), folder / marker


def test_nothing_is_written_outside_the_results_folder(run):
    outside = {p.name for p in run.iterdir()} - {"results", "config", "annotations", ".snakemake",
                                                  "snakemake.out", ".yolo"}
    assert not outside, outside
    assert not list((run / "results").rglob(".*.tmp*")), "a temporary file survived"


# --- validation of the sources table: the run stops before any job ----------------------

def test_bad_ids_stop_the_run_before_any_job_naming_row_and_field(tmp_path):
    good = get_footage("dancer").as_uri()
    table = ("source_id\turl\tclip_type\n"
             f"ok1\t{good}\tr\n"
             f"../escape\t{good}\tr\n"
             f"a/b\t{good}\tr\n"
             f"ok1\t{good}\tr\n"
             f"/abs\t{good}\tm\n")
    wd = make_workdir(tmp_path, sources=table)
    proc = snakemake(wd, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for expected in ("row 2 (line 3), field source_id: '../escape' may only contain",
                     "row 3 (line 4), field source_id: 'a/b' may only contain",
                     "row 4 (line 5), field source_id: 'ok1' duplicates row 1",
                     "row 5 (line 6), field source_id: '/abs' may only contain"):
        assert expected in out, out[-3000:]
    assert "sources.tsv" in out
    assert not (wd / "results").exists() and not (tmp_path / "escape").exists()
    assert not re.search(r"^rule \w+:", out, re.M), "a job started"


def test_a_table_that_is_not_utf8_stops_the_run_naming_line_and_source(tmp_path):
    good = get_footage("dancer").as_uri()
    wd = make_workdir(tmp_path, sources="")
    (wd / "config" / "sources.tsv").write_bytes(
        f"source_id\turl\tclip_type\nok1\t{good}\tr\n".encode() + b"amelie\tfilms/Am\xe9lie.mp4\tm\n")
    proc = snakemake(wd, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "sources.tsv: not UTF-8" in out and "line 3 (source_id 'amelie'), field url: byte 0xe9" in out, out[-3000:]
    assert not (wd / "results").exists() and not re.search(r"^rule \w+:", out, re.M)


# --- the pieces behind the records above, alone ------------------------------------------

def test_decoding_errors_summary_is_deterministic():
    from microg4m.stages.trim import decode_problems

    a = ("[h264 @ 0x55d31c6c2440] Invalid NAL unit size (2117 > 2069).\n"
         "[h264 @ 0x55d31c6c2440] missing picture in access unit with size 2073\n"
         "[in#0/mov,mp4,m4a,3gp,3g2,mj2 @ 0x55d31c5b3100] stream 0, offset 0x32ae8: partial file\n")
    b = ("[in#0/mov,mp4,m4a,3gp,3g2,mj2 @ 0x5600aa000000] stream 0, offset 0x32ae8: partial file\n"
         "    Last message repeated 1 times\n"
         "[h264 @ 0x5600ab000000] missing picture in access unit with size 2999\n"
         "[h264 @ 0x5600ab000000] Invalid NAL unit size (-7 > 3).\n")
    assert decode_problems(a) == decode_problems(b) != ""
    assert decode_problems(a).startswith("source truncated: ffmpeg decoding errors (")
    assert decode_problems("[h264 @ 0x1] error while decoding MB 3 4\n").startswith("source has corrupt data")
    assert decode_problems("") == ""


def test_file_urls_are_percent_decoded(tmp_path):
    from microg4m.formats.sources import normalize_url

    video = tmp_path / "Café #1 a b.mp4"
    url, local = normalize_url(video.as_uri())  # file:///...Caf%C3%A9%20%231%20a%20b.mp4
    assert local == video and url == video.as_uri()
    # an escape that is not UTF-8 stays literal: no file name Snakemake could not track
    url, local = normalize_url(f"file://{tmp_path}/caf%E9.mp4")
    assert local.name == "caf%E9.mp4"


def test_hash_inside_a_row_is_not_a_comment(tmp_path):
    from microg4m.formats.sources import SourcesError, load_sources

    path = tmp_path / "sources.tsv"
    path.write_text("source_id\turl\tclip_type\n# a comment line\n"
                    "a\thttps://example.org/v.mp4#t=30\tr\n\nb\tfilms/Episode #3.mkv\tm\n")
    df = load_sources(path)
    assert list(df.url) == ["https://example.org/v.mp4#t=30", "films/Episode #3.mkv"]
    path.write_text("source_id\turl\tclip_type\n# a comment line\na\tx.mp4\tr\n\na\ty.mp4\tr\n")
    with pytest.raises(SourcesError, match=r"row 2 \(line 5\), field source_id: 'a' duplicates row 1"):
        load_sources(path)
