"""``microg4m verify``, offline: sources served by a loopback HTTP server and local films,
downloaded for real; then changed, removed and kept, and checked again."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from conftest import ffmpeg, get_footage
from loopback import serve
from microg4m import cli
from microg4m.stages import download, verify
from microg4m.formats import provenance
from microg4m.formats.records import records_frame


def _clip(src, out, seconds):
    ffmpeg("-i", str(src), "-t", str(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-an", str(out))
    return out


@pytest.fixture()
def dataset(tmp_path):
    """Two served sources and two films downloaded, and their re-download manifest."""
    www, films = tmp_path / "www", tmp_path / "films"
    www.mkdir(), films.mkdir()
    _clip(get_footage("pianist"), www / "a.mp4", 2)
    _clip(get_footage("pianist"), www / "b.mp4", 3)
    _clip(get_footage("dancer"), films / "f1.mp4", 2)
    _clip(get_footage("dancer"), films / "f2.mp4", 3)
    with serve(www) as base:
        out = tmp_path / "results" / "download" / "all.tsv"
        sources = [{"source_id": "a", "url": f"{base}/a.mp4", "clip_type": "r"},
                   {"source_id": "b", "url": f"{base}/b.mp4", "clip_type": "r"},
                   {"source_id": "f1", "url": str(films / "f1.mp4"), "clip_type": "m"},
                   {"source_id": "f2", "url": str(films / "f2.mp4"), "clip_type": "m"}]
        records = download.run(sources, out)
        assert all(r["status"] == "ok" for r in records), records
        export = tmp_path / "export"
        provenance.write_export_files(export, records_frame([out]), {s["source_id"]: 1 for s in sources})
        yield {"www": www, "films": films, "export": export, "base": base}


def statuses(df: pd.DataFrame) -> dict:
    return dict(zip(df["source_id"], df["status"]))


def test_an_unchanged_dataset_verifies_as_the_same(dataset):
    manifest = pd.read_csv(dataset["export"] / "redownload.tsv", sep="\t", dtype=str)
    assert list(manifest.columns) == provenance.REDOWNLOAD_COLUMNS and len(manifest) == 4
    df = verify.run(dataset["export"])
    assert statuses(df) == {"a": "same", "b": "same", "f1": "same", "f2": "same"}
    assert (df["sha256_now"] == df["sha256_then"]).all()


def test_changed_removed_and_missing_sources_are_named(dataset, tmp_path):
    www, films = dataset["www"], dataset["films"]
    shutil.copyfile(www / "b.mp4", www / "a.mp4")  # the server now has another file under a's URL
    (www / "b.mp4").unlink()  # b is gone: HTTP 404
    (films / "f1.mp4").unlink()
    with open(films / "f2.mp4", "ab") as fh:
        fh.write(b"\0")
    out = tmp_path / "verify.tsv"
    df = verify.run(dataset["export"] / "redownload.tsv", out)
    assert statuses(df) == {"a": "changed", "b": "unavailable", "f1": "missing", "f2": "changed"}
    rows = df.set_index("source_id")
    assert rows.loc["b", "reason_class"] == "unavailable" and "404" in rows.loc["b", "reason"]
    assert rows.loc["f1", "reason_class"] == "missing_file"
    assert rows.loc["a", "sha256_now"] != rows.loc["a", "sha256_then"]
    assert pd.read_csv(out, sep="\t", dtype=str, keep_default_na=False).equals(df.astype(str))


def test_without_hashing_it_only_asks_whether_the_urls_are_there(dataset):
    (dataset["www"] / "b.mp4").unlink()
    df = verify.run(dataset["export"], hash=False)
    assert statuses(df) == {"a": "available", "b": "unavailable", "f1": "same", "f2": "same"}


def test_the_command_line(dataset, tmp_path, capsys):
    out = tmp_path / "v.tsv"
    assert cli.main(["verify", str(dataset["export"]), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "verify: 4 same" in captured.err
    assert statuses(pd.read_csv(out, sep="\t", dtype=str)) == {"a": "same", "b": "same", "f1": "same", "f2": "same"}


def test_a_file_that_is_not_a_manifest_is_refused(tmp_path):
    bad = tmp_path / "x.tsv"
    bad.write_text("a\tb\n1\t2\n")
    with pytest.raises(ValueError, match="not a re-download manifest"):
        verify.run(bad)
