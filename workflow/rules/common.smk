import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.io import strip_wildcard_constraints

from microg4m import config as _config
from microg4m.common import units as _units
from microg4m.engines import exact as _exact
from microg4m.engines.runtime import uses_gpu
from microg4m.formats import download_settings as _download_settings
from microg4m.formats import quality_rules as _quality_rules
from microg4m.formats import recorded_faults as _recorded_faults
from microg4m.formats.decisions import read_screening
from microg4m.formats.sources import load_sources, normalize_url
from microg4m.release import settings as _release
from microg4m.stages import cache as _cache
from microg4m.stages import corrections as _corrections
from microg4m.stages import demo as _demo
from microg4m.stages import units as _units_stage
from microg4m.stages import versions as _versions

# The one config reader (microg4m/config.py): validated, the schema's defaults filled in.
_config.validate(config, "--configfile")

# The sources table is validated before any job runs; a bad row stops here with a
# message naming the row, the field and the reason.
SOURCES = load_sources(config["sources"])
RESULTS = config["results"]
# Jobs submitted to a cluster (the submitting Snakemake and each job's own)
ON_CLUSTER = workflow.non_local_exec or workflow.remote_exec


def on_gpu(device):
    """Whether a job whose device setting is ``device`` runs on a GPU, as far as it is known
    while the DAG is built: cuda... always; auto on a workstation when it shows an NVIDIA
    GPU. On a cluster the node decides what auto is, inside the job (detector, detect,
    track resolve it there): the profile sends the GPU jobs to the GPU partition with their
    `gpu` resource (workflow/profiles/slurm), not the GPU of the submitting machine."""
    device = str(device).strip().lower()
    return device.startswith("cuda") or (
        device == "auto" and not ON_CLUSTER and uses_gpu(device)
    )


# Only jobs that run on a GPU take the `gpu` resource: detector and detect on a GPU; track
# only with a ReID model on a GPU (BoT-SORT itself runs on the CPU)
DETECT_ON_GPU = on_gpu(config["detect"]["device"])
TRACK_ON_GPU = bool(config["track"]["reid_weights"]) and on_gpu(
    config["track"]["device"]
)


def job_slots():
    """What sources_per_job: auto fills: this machine's CPUs (not --cores, so that a re-run
    with other --cores keeps every unit and its results); on a cluster (the submitting
    Snakemake and each job's own) a fixed number, so both see the same units."""
    if ON_CLUSTER:
        return _units.CLUSTER_SLOTS
    return len(os.sched_getaffinity(0))


# The unit plan (microg4m/common/units.py): under auto packed by each source's estimated
# work (its frames at the detector's input size) and kept across runs (results/units.tsv), so that adding a source changes one unit.
PLANNED = _units_stage.plan_for(
    SOURCES,
    config["sources_per_job"],
    job_slots(),
    RESULTS,
    fps=config["trim"]["fps"],
    imgsz=config["detect"]["imgsz"],
    max_height=config["trim"]["max_height"],
    made_here=_demo.made_here,
)
UNITS = PLANNED.units
if PLANNED.work and not workflow.remote_exec:
    print(f"microg4m: {_units.describe(UNITS, PLANNED.work)}", file=sys.stderr)


def per_unit_paths():
    """Every path the workflow declares per unit (outputs, logs, benchmarks of the rules
    with a {unit} wildcard): what the units rule removes for units of another plan."""
    paths = set()
    for r in workflow.rules:
        declared = [*r.output, *r.log, *([r.benchmark] if r.benchmark else [])]
        # (Snakemake writes the wildcard constraint into the pattern: {unit,[A-Za-z0-9_-]+})
        plain = [strip_wildcard_constraints(str(f)) for f in declared]
        paths.update(f for f in plain if "{unit}" in f)
    return sorted(paths)


def detect_threads():
    """Threads of one detect job (Snakemake caps them at --cores; --set-threads detect=N
    overrides): on a GPU 4, the decoding workers that feed it; on a CPU the cores shared
    out over the detect jobs that can run at once (one per unit, at most 8 threads). On
    the 2-core AMD EPYC, two 1-thread jobs side by side beat one 2-thread job after the
    other: 412 s against 445 s for the whole run, 253 s against 296 s at bf16, because a
    job's pre- and post-processing runs on one thread (docs: Benchmarks)."""
    if DETECT_ON_GPU:
        return 4
    try:
        cores = workflow.cores
    except WorkflowError:  # a dry run without --cores
        cores = os.cpu_count() or 1
    return max(1, min(8, cores // max(1, min(len(UNITS), cores))))


# the detect settings the detector rule's model depends on (microg4m/stages/detector.py)
DETECTOR_SETTINGS = ("weights", "imgsz", "runtime", "precision", "device", "batch")


def calibration_manifests(wildcards):
    """The clips an int8 detector is calibrated on: those of the first units, up to
    CALIBRATION_SOURCES sources (no input at any other precision)."""
    if config["detect"]["precision"] != "int8":
        return []
    units, n = [], 0
    for unit, sids in UNITS.items():
        if n >= CALIBRATION_SOURCES:
            break
        units.append(unit)
        n += len(sids)
    return [R(f"clips/{unit}") for unit in units]


CALIBRATION_SOURCES = 4


wildcard_constraints:
    unit="[A-Za-z0-9_-]+",
    name="|".join(_demo.RECIPES),


def R(path):
    """A path inside the results folder."""
    return f"{RESULTS}/{path}"


# check_free_space as the download, trim and frames jobs take it (their resource free_space_check)
FREE_SPACE_CHECK = int(bool(config["check_free_space"]))


# A fault of the machine (no space ...) that a status table of an earlier version recorded
# as a failed source or clip is not final: its job's output is removed here, before the DAG
# is built, so that the job and everything after it run again whatever --rerun-triggers
# says (microg4m/formats/recorded_faults.py). Only the Snakemake that plans the run does
# it, and a dry run only says so.
REPAIRABLE_TARGETS = [
    *expand(R("download/{unit}.tsv"), unit=UNITS),
    *expand(R("clips/{unit}"), unit=UNITS),
    *(expand(R("frames/{unit}.tsv"), unit=UNITS) if config["export"]["frames"] else []),
]
if workflow.is_main_process:
    _recorded_faults.repair(
        RESULTS,
        UNITS,
        dry_run=workflow.output_settings.dryrun,
        say=lambda line: print(line, file=sys.stderr),
    )


def unit_sources(wildcards):
    """The sources of a unit, as the download stage takes them."""
    rows = SOURCES.loc[UNITS[wildcards.unit], ["source_id", "url", "clip_type"]]
    return rows.to_dict("records")


def cookies_input(wildcards):
    """download.cookies when the file is there (versions checks it: adding or removing it,
    or a new export, re-runs that check)."""
    cookies = config["download"]["cookies"]
    return [cookies] if cookies and os.path.isfile(cookies) else []


def local_source_input(wildcards):
    """Declare local source files as input when they exist or a rule makes them (demo)."""
    files = []
    for sid in UNITS[wildcards.unit]:
        _, local = normalize_url(SOURCES.loc[sid, "url"])
        if local is None:
            continue
        if _demo.made_here(local) or local.is_file():
            files.append(str(local))
    return files


SCREENED = read_screening(config["filter"]["screening"])


def screened_clips(wildcards):
    """The unit's clips excluded by hand. A param, not an input file: an exclusion
    re-runs the filter of that unit only."""
    sources = set(UNITS[wildcards.unit])
    return sorted(c for c in SCREENED if c.rsplit("_", 1)[0] in sources)


def quality_thresholds():
    """The filter.* thresholds on the quality scores that are set (microg4m/formats/quality_rules.py)."""
    return {
        k: config["filter"][k]
        for k in _quality_rules.THRESHOLDS
        if config["filter"][k] is not None
    }


def filter_settings():
    """filter.run's settings: the filter section but the screening file, and of the
    quality thresholds only those set (so that the default's params are what they were
    before they existed)."""
    out = {
        k: v
        for k, v in config["filter"].items()
        if k != "screening" and k not in _quality_rules.THRESHOLDS
    }
    return {**out, **quality_thresholds()}


def filter_quality(wildcards):
    """The unit's quality scores, when a filter threshold on them is set (none: the
    filter does not wait for the quality stage)."""
    return [R(f"quality/{wildcards.unit}.tsv")] if quality_thresholds() else []


def detect_quality(wildcards):
    """The unit's quality scores, when detect skips the clips a quality threshold rejects
    (detect.skip_rejected and a filter.* threshold on them set)."""
    return filter_quality(wildcards) if config["detect"]["skip_rejected"] else []


def detect_scenes(wildcards):
    """The unit's cuts, when detect skips the clips they reject (detect.skip_rejected)."""
    return (
        [R(f"scenes/{wildcards.unit}.tsv")] if config["detect"]["skip_rejected"] else []
    )


def transnetv2_on():
    """scenes.detector runs TransNetV2 (transnetv2 or both)."""
    return config["scenes"]["detector"] in ("transnetv2", "both")


def scenes_cache(wildcards):
    """TransNetV2's predictions, kept across re-runs (microg4m/stages/scenes.py); none for
    the PySceneDetect detectors, so that their DAG is what it was."""
    return [ancient(R("cache/scenes"))] if transnetv2_on() else []


def scenes_settings():
    """The scenes job's settings: config's scenes section, and with TransNetV2 the device it
    runs on (detect.device: the GPU detect runs on, or the CPU)."""
    if not transnetv2_on():
        return config["scenes"]
    return {**config["scenes"], "device": config["detect"]["device"]}


# TransNetV2 on the GPU detect runs on takes the `gpu` resource too
SCENES_ON_GPU = transnetv2_on() and DETECT_ON_GPU


def scenes_threads():
    """Threads of one scenes job: 1 for PySceneDetect; for TransNetV2 on a GPU 2 (decoding
    beside it); on the CPU the cores shared out over the units, as for detect on a CPU (at
    most 8)."""
    if not transnetv2_on():
        return 1
    if SCENES_ON_GPU:
        return 2
    try:
        cores = workflow.cores
    except WorkflowError:  # a dry run without --cores
        cores = os.cpu_count() or 1
    return max(1, min(8, cores // max(1, min(len(UNITS), cores))))


def detect_settings():
    """detect.run's settings: config's detect section, with exact_margin and exact_all
    given as ``exact`` with the thresholds of filter and track that a low-precision box
    must not move across (microg4m/engines/exact.py: settings), below FP32 only, so that
    track and filter edits never touch detect at FP32 (the default on a CPU)."""
    out = {
        k: v
        for k, v in config["detect"].items()
        if k not in ("exact_margin", "exact_all")
    }
    exact = _exact.settings(config)
    if exact:
        out["exact"] = exact
    return out


def rejection_params(wildcards):
    """The filter settings that let detect skip frames; None with detect.skip_rejected
    off, so that filter edits never touch detect."""
    if not config["detect"]["skip_rejected"]:
        return None
    f = config["filter"]
    return dict(
        person_conf=f["person_conf"],
        min_person_share=f["min_person_share"],
        max_cuts=f["max_cuts"],
        screened=screened_clips(wildcards),
        # the quality thresholds that are set (none by default: the params as they were)
        **quality_thresholds(),
    )


# The preview mp4s of track.previews: the track rule's folder output, only when enabled
PREVIEW_OUTPUT = (
    {"previews": directory(R("previews/{unit}"))} if config["track"]["previews"] else {}
)


def actions_input(wildcards):
    """The human action labels, when there are any (editing them re-runs the export)."""
    path = Path(config["export"]["actions"])
    return [str(path)] if path.is_file() else []


# ---------------------------------------------------------------- near-duplicates (rules/duplicates.smk)
# The export reads the pairs (and the matches with reference sets) only when enabled.
if config["duplicates"]["enabled"]:
    DUPLICATE_PAIRS = [R("duplicates/pairs.tsv")]
    DUPLICATE_CONTAMINATION = (
        [R("duplicates/contamination.tsv")] if config["duplicates"]["reference"] else []
    )
    DUPLICATE_TARGETS = [R("duplicates/sheets")]
else:
    DUPLICATE_PAIRS = DUPLICATE_CONTAMINATION = DUPLICATE_TARGETS = []


# ---------------------------------------------------------------- captions and VQA (rules/vqa.smk)
from microg4m.vqa.rules import EXPORT_STAT_FILES as VQA_STAT_FILES


def vqa_reviews_input(wildcards):
    """The reviewed captions and QA pairs, when there are any (an edit re-runs vqa_export)."""
    path = Path(config["vqa"]["reviews"])
    return [str(path)] if path.is_file() else []


# What `all` asks for: drafts only when enabled; the VQA export once there are reviews
# (or drafts to review), so that a run without either has no VQA job at all.
VQA_TARGETS = []
if config["vqa"]["draft"]["enabled"]:
    VQA_TARGETS += expand(R("vqa_drafts/{unit}.json"), unit=UNITS)
if config["vqa"]["draft"]["enabled"] or Path(config["vqa"]["reviews"]).is_file():
    VQA_TARGETS.append(R("vqa/vqa_and_captioning.json"))


# ---------------------------------------------------------------- the benchmark (rules/evaluate.smk)
# The VLM baseline only when enabled: its answers for every unit, and their figures.
EVALUATE_TARGETS = []
if config["evaluate"]["vlm"]["enabled"]:
    EVALUATE_TARGETS += expand(R("har_vlm/{unit}.json"), unit=UNITS)
    EVALUATE_TARGETS.append(R("evaluate/har_vlm.json"))


# CVAT corrections, indexed by clip before any job runs: a file goes to the unit of its
# clip's source; files that cannot be used are reported (stderr, export/input_report.tsv).
_UNIT_OF = {sid: unit for unit, sids in UNITS.items() for sid in sids}
_CORRECTIONS, CORRECTION_PROBLEMS = _corrections.index(
    config["corrections"], set(_UNIT_OF)
)
_CORRECTIONS_BY_UNIT = {}
for _clip, _path in _CORRECTIONS.items():
    _CORRECTIONS_BY_UNIT.setdefault(_UNIT_OF[_clip.rsplit("_", 1)[0]], []).append(_path)


def correction_files(wildcards):
    """The correction files of a unit's clips (adding or removing one re-runs that unit)."""
    return sorted(_CORRECTIONS_BY_UNIT.get(wildcards.unit, []))


# ---------------------------------------------------------------- the release (rules/release.smk)
# It reads the VQA export when the workflow makes one, the human files of the release when
# they exist (editing them re-runs the release only), and the previous release's splits.
RELEASE = config["release"]
VQA_EXPORT = (
    [R("vqa/vqa_and_captioning.json")]
    if R("vqa/vqa_and_captioning.json") in VQA_TARGETS
    else []
)
RELEASE_TARGETS = [R("release")] if RELEASE["enabled"] else []


def release_file(key):
    """An input function: the file of setting release.KEY when it exists."""
    return lambda wildcards: [RELEASE[key]] if Path(RELEASE[key]).is_file() else []


def team_summary(wildcards):
    """Team mode's agreement figures, when its report was written."""
    path = Path(config["team"]["report_dir"]) / "summary.json"
    return [str(path)] if path.is_file() else []


def previous_release(wildcards):
    """The splits of the release published last (release.previous)."""
    if RELEASE["previous"] is None:
        return []
    path = Path(RELEASE["previous"]) / "splits.tsv"
    if not path.is_file():
        raise WorkflowError(
            f"release.previous {RELEASE['previous']}: no splits.tsv there; name the folder of a "
            "release microg4m wrote (a copy kept when it was published, or downloaded from the Hub)"
        )
    return [str(path)]
