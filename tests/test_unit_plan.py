"""results/units.tsv: the unit plan's writer and its one reader."""

from __future__ import annotations

import pytest

from microg4m.formats.unit_plan import read_plan, write_plan


def test_the_plan_reads_back_in_its_order(tmp_path):
    plan = {"batch00001": ["talk", "talk_2"], "batch00000": ["dancer"]}
    write_plan(tmp_path / "units.tsv", plan)
    back = read_plan(tmp_path / "units.tsv")
    assert back == plan and list(back) == list(plan)


def test_a_source_in_two_units_is_refused_naming_it(tmp_path):
    (tmp_path / "units.tsv").write_text("unit\tsource_id\nbatch00000\ta\nbatch00001\ta\n")
    with pytest.raises(ValueError, match=r"units.tsv: source\(s\) in more than one unit: a"):
        read_plan(tmp_path / "units.tsv")


def test_a_file_without_the_columns_is_refused(tmp_path):
    (tmp_path / "units.tsv").write_text("clip_id\tkeep\nx\t1\n")
    with pytest.raises(ValueError, match="not a unit plan"):
        read_plan(tmp_path / "units.tsv")
