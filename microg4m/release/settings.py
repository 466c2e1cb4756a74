"""The settings a release records (card and Croissant) and takes: one place for the rule's
params and the command line. Light: the workflow's common.smk imports it."""

from __future__ import annotations

# release.* keys that are files the rule declares as input (or a folder), not settings of the stage
FILE_KEYS = ("enabled", "previous", "withdrawn", "licences", "metadata")


def stage_settings(release: dict) -> dict:
    """release.* without the keys that are files (they reach the stage as inputs)."""
    return {k: v for k, v in release.items() if k not in FILE_KEYS}


def pipeline(cfg: dict) -> dict:
    """What made the clips and boxes, as the card and Croissant describe it."""
    pick = lambda section, keys: {k: cfg[section][k] for k in keys}  # noqa: E731
    return {"trim": pick("trim", ("crf", "preset", "align")), "detect": pick("detect", ("weights", "imgsz", "conf")),
            "filter": pick("filter", ("person_conf", "min_person_share", "max_cuts")),
            "track": pick("track", ("tracker", "record_conf", "box_mode")),
            "duplicates_enabled": cfg["duplicates"]["enabled"]}


def encode(cfg: dict) -> dict:
    """The encoder settings of blurred clips: those of the clips themselves."""
    return {k: cfg["trim"][k] for k in ("crf", "preset")}
