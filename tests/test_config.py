"""The one config reader (microg4m/config.py), and that the workflow, the command line,
the annotation page and team mode all go through it: a bad setting is refused by each,
naming the setting, the value and the reason."""

import subprocess
import sys
from argparse import Namespace

import pytest
import yaml

from microg4m import config
from microg4m.annotate import options as annotate_options
from microg4m.annotate.team import options as team_options
from workflow import REPO


def test_validate_fills_the_schemas_defaults_and_keeps_what_is_set():
    cfg = config.validate({"detect": {"precision": "bf16"}, "team": {"server": {"threads": 2}}})
    assert cfg["detect"]["precision"] == "bf16" and cfg["detect"]["imgsz"] == config.defaults()["detect"]["imgsz"]
    assert cfg["team"]["server"]["threads"] == 2
    assert cfg["team"]["server"]["shutdown_timeout"] == config.defaults()["team"]["server"]["shutdown_timeout"]
    assert config.validate({}) == config.defaults()  # the defaults alone are a valid config
    # each default is a copy: filling one config does not change the next one's
    first = config.validate({})
    first["download"]["extractor_args"]["youtube"] = {"x": "y"}
    assert config.validate({})["download"]["extractor_args"] == {}


@pytest.mark.parametrize("cfg, message", [
    ({"detect": {"precision": "f32"}}, "detect.precision = 'f32': 'f32' is not one of"),
    ({"team": {"annotators_per_clip": 0}}, "team.annotators_per_clip = 0: 0 is less than the minimum of 1"),
    ({"filter": {"min_person_share": "high"}}, "filter.min_person_share = 'high': 'high' is not of type"),
    ({"detect": {"precison": "bf16"}}, "detect: Additional properties are not allowed ('precison' was unexpected)"),
])
def test_a_bad_setting_is_named_with_its_value_and_the_reason(cfg, message):
    with pytest.raises(ValueError, match="^my.yaml: " + message.replace("(", r"\(").replace(")", r"\)")):
        config.validate(cfg, "my.yaml")


def test_load_reads_the_file_then_the_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"results": "out", "team": {"annotators_per_clip": 3}}))
    cfg = config.load(path, overrides={"team.annotators_per_clip": None, "export.actions": "a.csv"})
    assert (cfg["results"], cfg["team"]["annotators_per_clip"], cfg["export"]["actions"]) == ("out", 3, "a.csv")
    with pytest.raises(ValueError, match=f"--configfile {path} with the command line's options: "
                                         "team.session_hours = -1"):
        config.load(path, overrides={"team.session_hours": -1})
    path.write_text("- a list\n")
    with pytest.raises(ValueError, match="not a mapping"):
        config.load(path)


def test_the_workflow_refuses_a_bad_setting_before_any_job(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"detect": {"precision": "f32"}}))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--configfile",
                           "config/config.yaml", str(bad)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "--configfile: detect.precision = 'f32': 'f32' is not one of" in proc.stdout + proc.stderr


def test_the_command_line_validates_a_stages_settings(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", "detect", str(tmp_path / "m.tsv"),
                           str(tmp_path / "d.parquet"), "--precision", "f32"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "microg4m detect: error: command line: detect.precision = 'f32'" in proc.stderr
    assert not (tmp_path / "d.parquet").exists()
    # a boolean setting takes true/false, not any text (bool('false') would be True)
    proc = subprocess.run([sys.executable, "-m", "microg4m.cli", "detect", "m", "o", "--skip-rejected", "maybe"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--skip-rejected: 'maybe': expected true or false" in proc.stderr


def page_args(**kw) -> Namespace:
    base = dict(configfile=None, results=None, actions=None, screening=None, label_map=None, vqa_reviews=None,
                annotator="")
    return Namespace(**(base | kw))


def test_the_annotation_page_takes_its_files_from_the_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"results": "runs/a", "filter": {"screening": "ann/excluded.txt"},
                                    "export": {"actions": "ann/labels.csv"}, "vqa": {"reviews": "ann/vqa.json"}}))
    files = annotate_options.paths(page_args(configfile=str(path)))
    assert files == annotate_options.Paths(results="runs/a", actions="ann/labels.csv", screening="ann/excluded.txt",
                                           label_map=config.defaults()["export"]["label_map"],
                                           vqa_reviews="ann/vqa.json",
                                           frame_cache_mb=config.defaults()["annotate"]["frame_cache_mb"],
                                           detections={"detections": None, "score": 0.5, "iou_min": 0.5})
    assert annotate_options.paths(page_args(configfile=str(path), annotator="alice")).actions == \
        "ann/labels.alice.csv"
    given = annotate_options.paths(page_args(configfile=str(path), actions="x/mine.csv", results="r"))
    assert (given.actions, given.vqa_reviews, given.results) == ("x/mine.csv", "x/vqa_reviews.json", "r")
    path.write_text(yaml.safe_dump({"annotate": {"detections": "model/dets.csv", "detection_iou": 0.3}}))
    assert annotate_options.paths(page_args(configfile=str(path))).detections == {
        "detections": "model/dets.csv", "score": 0.5, "iou_min": 0.3}
    assert annotate_options.paths(page_args(configfile=str(path), suggest="d.csv", suggest_score=0.7)).detections \
        == {"detections": "d.csv", "score": 0.7, "iou_min": 0.3}  # --suggest and --suggest-score win
    path.write_text(yaml.safe_dump({"export": {"actions": 3}}))
    with pytest.raises(ValueError, match="export.actions = 3: 3 is not of type 'string'"):
        annotate_options.paths(page_args(configfile=str(path)))


def test_team_mode_takes_its_settings_from_the_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"team": {"annotators_per_clip": 3, "server": {"threads": 4}},
                                    "annotate": {"frame_cache_mb": 64}}))
    args = Namespace(configfile=str(path), results=None, database=None, actions=None, screening=None,
                     label_map=None, report_dir=None, per_clip=None, session_hours=None, threads=None)
    s = team_options.settings(args)
    assert (s.per_clip, s.server["threads"], s.database) == (3, 4, config.defaults()["team"]["database"])
    assert s.frame_cache_mb == 64
    args.threads = 0
    with pytest.raises(ValueError, match="team.server.threads = 0"):
        team_options.settings(args)


@pytest.mark.parametrize("overlays", [[], ["config/presets/fast.yaml"], ["config/presets/strict.yaml"],
                                      ["config/microg4m.yaml"],
                                      [".test/demo/config.yaml"], [".test/bad-inputs/config.yaml"],
                                      [".test/corrections/config.yaml"]])
def test_the_workflow_sees_the_config_snakemakes_own_validate_would_give(overlays):
    """config.validate replaced snakemake.utils.validate in common.smk: the stages get the same settings."""
    import copy

    from snakemake.utils import validate as snakemake_validate

    def overlay(into: dict, cfg: dict) -> None:  # as Snakemake merges --configfile files
        for key, value in cfg.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                overlay(into[key], value)
            else:
                into[key] = copy.deepcopy(value)

    cfg: dict = {}
    for path in ["config/config.yaml", *overlays]:
        overlay(cfg, yaml.safe_load((REPO / path).read_text()) or {})
    theirs, ours = copy.deepcopy(cfg), copy.deepcopy(cfg)
    snakemake_validate(theirs, str(config.CONFIG_SCHEMA))
    assert config.validate(ours) == theirs
