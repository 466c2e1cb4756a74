"""The built-in demo through Snakemake (real ffmpeg, real yt-dlp on local files)."""

import pandas as pd
import pytest

from microg4m.common import media
from microg4m.formats.records import read_records
from microg4m.formats.manifest import read_manifest
from workflow import make_workdir, snakemake


@pytest.fixture(scope="module")
def demo_through_trim(tmp_path_factory):
    wd = make_workdir(tmp_path_factory.mktemp("demo_trim"), config={"sources_per_job": "auto"})
    snakemake(wd, "--until", "trim")
    return wd


def test_every_source_has_a_status_record(demo_through_trim):
    res = demo_through_trim / "results"
    # one table per job unit (sources_per_job: auto), a record per source
    records = {r["source_id"]: r for p in (res / "download").glob("*.tsv") for r in read_records(p)}
    assert set(records) == {"dancer", "pianist", "zidane", "scenecut", "noperson", "short", "carphone", "missing"}
    assert records["missing"]["status"] == "failed"
    assert "Connection refused" in records["missing"]["reason"]
    assert all(r["status"] == "ok" for k, r in records.items() if k != "missing")


def test_downloadable_sources_have_exact_clips(demo_through_trim):
    res = demo_through_trim / "results"
    expected = {"dancer": 3, "pianist": 2, "zidane": 2, "scenecut": 2, "noperson": 1, "short": 0, "carphone": 1, "missing": 0}
    units = sorted(p.parent for p in (res / "clips").glob("*/manifest.tsv"))
    clips = pd.concat([read_manifest(u / "manifest.tsv").assign(unit=u) for u in units])
    for src, n in expected.items():
        ok = clips[(clips.source_id == src) & (clips.status == "ok")]
        assert len(ok) == n, src
        for clip, unit in zip(ok.clip_id, ok.unit):
            assert media.count_frames(unit / f"{clip}.mp4") == 90
    status = {r["source_id"]: r for u in units for r in read_records(u / "status.tsv")}
    assert set(status) == set(expected)
    assert status["missing"]["status"] == "skipped" and "download failed" in status["missing"]["reason"]


def test_bad_sources_row_stops_before_any_job(tmp_path):
    wd = make_workdir(tmp_path, sources="source_id\turl\tclip_type\n../up\tx.mp4\tr\n")
    proc = snakemake(wd, "-n", check=False)
    assert proc.returncode != 0
    assert "row 1 (line 2), field source_id: '../up'" in proc.stdout + proc.stderr
    assert not (wd / "results").exists()
