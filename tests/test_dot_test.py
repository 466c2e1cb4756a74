"""The workflow's test configs (``.test/<case>/config.yaml``, as in the Snakemake catalog's
workflows), each run for real with ``--configfile`` in a copy of the repository's config,
annotations and ``.test/``, and checked for what ``.test/README.md`` says it must give."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from workflow import REPO, snakemake

CASES = sorted(p.parent.name for p in (REPO / ".test").glob("*/config.yaml"))


def test_every_case_is_checked():
    # demo: run once by tests/test_default_path.py, which checks it and every human step on it
    assert CASES == ["bad-inputs", "corrections", "demo"]


def run_case(tmp_path: Path, case: str) -> Path:
    """The results folder of one real run of a case."""
    wd = tmp_path / "wd"
    wd.mkdir()
    for name in ("config", "annotations", ".test"):
        shutil.copytree(REPO / name, wd / name, ignore=shutil.ignore_patterns("results"))
    snakemake(wd, "--configfile", str(wd / ".test" / case / "config.yaml"))
    assert snakemake(wd, "-n", "--configfile", str(wd / ".test" / case / "config.yaml")).stdout.count(
        "Nothing to be done") == 1
    return wd / ".test" / case / "results"


def ledger(res: Path) -> pd.DataFrame:
    return pd.read_csv(res / "ledger.tsv", sep="\t", dtype=str, keep_default_na=False)


def test_bad_inputs(tmp_path):
    res = run_case(tmp_path, "bad-inputs")
    rows = ledger(res)
    sources = rows.query("level == 'source'").set_index("source_id")
    bad = {"text": "not a readable video", "empty": "empty file (0 bytes)", "truncated": "moov atom not found",
           "no_file": "No such file or directory", "no_film": "does not exist", "no_http": "Connection refused"}
    assert sorted(sources.index) == sorted(["good", *bad])
    for sid, words in bad.items():
        assert sources.at[sid, "status"] == "failed", sid
        assert words in sources.at[sid, "reason"], sid
    kept = rows.query("level == 'clip' and source_id == 'good' and status == 'kept'")
    assert len(kept) > 0
    template = pd.read_csv(res / "export" / "annotation_template.csv", dtype=str)  # no labels: template mode
    assert set(template.video_id) == set(kept.clip_id)


def test_corrections(tmp_path):
    res = run_case(tmp_path, "corrections")
    report = pd.read_csv(res / "corrected" / "dancer.tsv", sep="\t", dtype=str, keep_default_na=False)
    assert report[["clip_id", "status"]].values.tolist() == [["dancer_001", "applied"]]
    inputs = (res / "export" / "input_report.tsv").read_text()
    assert ".test/corrections/cvat/broken.xml\t\tnot XML" in inputs
    boxes = pd.read_csv(res / "export" / "boxes.csv", dtype={"video_id": str}).set_index(["video_id", "person_id"])
    w, h = 518, 496  # the demo's dancer clips (config comment: the box moved to (40, 30)-(240, 330))
    got = boxes.loc[("dancer_001", 1), ["xmin", "ymin", "xmax", "ymax"]].to_numpy(float)
    np.testing.assert_allclose(got, np.round(np.array([40, 30, 240, 330]) / [w, h, w, h], 3))
    assert not (res / "corrected" / "dancer.csv").read_bytes() == (res / "tracks" / "dancer.csv").read_bytes()


@pytest.mark.parametrize("case", CASES)
def test_case_writes_only_under_its_results(case):
    text = (REPO / ".test" / case / "config.yaml").read_text()
    assert f"results: .test/{case}/results" in text
