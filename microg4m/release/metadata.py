"""The authors' part of a release (``release.metadata``, ``annotations/release.yaml``; its
schema is ``microg4m/schemas/release_metadata.schema.yaml``): name, description, creators,
citation, the datasheet's answers and texts for Croissant's Responsible-AI fields. A
missing file means none: the card and Croissant then mark every such field as to be
filled by the authors."""

from __future__ import annotations

import os
from pathlib import Path

import jsonschema
import yaml

from microg4m import config

# The mark of everything only the dataset's authors can fill in (card and Croissant).
AUTHORS = "[TO BE FILLED BY THE AUTHORS]"


def read_metadata(path: str | os.PathLike | None, rai_fields) -> dict:
    """The authors' metadata (``{}`` for None or a missing file), checked against the schema
    and ``rai_fields`` (the RAI keys the release knows); ValueError naming the key and why."""
    if path is None or not Path(path).is_file():
        return {}
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"release.metadata {path}: not readable YAML ({exc})") from None
    errors = sorted(jsonschema.Draft202012Validator(config.schema("release_metadata")).iter_errors(doc),
                    key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        e = errors[0]
        where = ".".join(map(str, e.absolute_path)) or "(top)"
        raise ValueError(f"release.metadata {path}: {where}: {e.message}")
    unknown = sorted(set(doc.get("rai", {})) - set(rai_fields))
    if unknown:
        raise ValueError(f"release.metadata {path}: rai: unknown field(s) {', '.join(unknown)} "
                         f"(known: {', '.join(rai_fields)})")
    return doc
