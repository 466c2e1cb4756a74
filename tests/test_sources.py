import re

import pytest

from microg4m.formats.sources import SourcesError, load_sources, normalize_url


def write(tmp_path, text):
    p = tmp_path / "sources.tsv"
    p.write_text(text)
    return p


def test_valid_table_keeps_order_and_strings(tmp_path):
    df = load_sources(write(tmp_path, "source_id\turl\tclip_type\n-Y04Zic1-r4\t-Y04Zic1-r4\tr\nApollo13\tfilms/Apollo13.mp4\tm\n"))
    assert list(df.index) == ["-Y04Zic1-r4", "Apollo13"]
    assert normalize_url(df.loc["-Y04Zic1-r4", "url"])[0] == "https://www.youtube.com/watch?v=-Y04Zic1-r4"


@pytest.mark.parametrize(
    "row, expected",
    [
        ("a\t\tr", "row 1 (line 2), field url: missing value"),
        ("../evil\tx.mp4\tr", "row 1 (line 2), field source_id: '../evil' may only contain"),
        ("a/b\tx.mp4\tr", "field source_id: 'a/b' may only contain"),
        ("a\tx.mp4\tq", "field clip_type: 'q' is not one of r (real), m (movie)"),
        ("a\tx.mp4\tr\na\ty.mp4\tr", "row 2 (line 3), field source_id: 'a' duplicates row 1"),
    ],
)
def test_bad_rows_are_named(tmp_path, row, expected):
    with pytest.raises(SourcesError) as err:
        load_sources(write(tmp_path, "source_id\turl\tclip_type\n" + row + "\n"))
    assert expected in str(err.value)
    assert "sources.tsv" in str(err.value)


def test_missing_column(tmp_path):
    with pytest.raises(SourcesError, match="missing column.*clip_type"):
        load_sources(write(tmp_path, "source_id\turl\na\tb\n"))


def test_released_source_list_is_complete():
    from tests.workflow import REPO

    df = load_sources(REPO / "config" / "sources" / "microg4m.tsv")
    ref = (REPO.parent / "shared" / "reference" / "microg4m" / "dataset" / "video_id_list.csv")
    assert len(df) == 48 and (df.clip_type == "r").sum() == 42 and (df.clip_type == "m").sum() == 6
    if ref.is_file():
        ids = [line.split(",")[2] for line in ref.read_text().splitlines()[1:]]
        assert sorted(ids) == sorted(df.index)


def test_a_table_that_is_not_utf8_names_the_line_the_source_and_the_field(tmp_path):
    """A film name saved in Latin-1 (é = byte 0xE9): named by line, source id and field."""
    p = tmp_path / "sources.tsv"
    p.write_bytes(b"source_id\turl\tclip_type\nok\tfilms/ok.mp4\tm\n"
                  b"amelie\tfilms/Am\xe9lie.mp4\tm\ncaf\xe9\tfilms/x.mp4\tm\n")
    with pytest.raises(SourcesError) as err:
        load_sources(p)
    msg = str(err.value)
    assert f"sources table {p}: not UTF-8" in msg and "save it as UTF-8" in msg
    assert "line 3 (source_id 'amelie'), field url: byte 0xe9 (byte 16 of the line) is not UTF-8" in msg
    assert "line 4 (source id not readable), field source_id: byte 0xe9 (byte 4 of the line)" in msg
    assert "line 2" not in msg and "codec can't decode" not in msg


@pytest.mark.parametrize("data, expected", [
    (b"", "empty file (0 bytes)"),
    (b"\n  \n", "empty (only blank lines)"),
    (b"source_id\turl\tclip_type\n", "no sources (the header line and no rows)"),
])
def test_an_empty_table_is_reported_as_empty(tmp_path, data, expected):
    p = tmp_path / "sources.tsv"
    p.write_bytes(data)
    with pytest.raises(SourcesError, match=re.escape(f"sources table {p}: {expected}")):
        load_sources(p)


def test_a_utf8_table_with_a_bom_or_crlf_still_loads(tmp_path):
    p = tmp_path / "sources.tsv"
    p.write_bytes("\ufeffsource_id\turl\tclip_type\r\namelie\tfilms/Amélie.mp4\tm\r\n".encode())
    assert load_sources(p).to_dict("records") == [
        {"source_id": "amelie", "url": "films/Amélie.mp4", "clip_type": "m"}]
