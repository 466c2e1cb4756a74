"""The one config reader: the JSON schemas (shipped inside the package), their defaults,
and validation.

The Snakefile validates the run's config against :data:`CONFIG_SCHEMA` (Snakemake's
``validate``, which fills in the defaults); the CLI takes its stage settings from
:func:`defaults`; the sources table is checked against :func:`schema` ``("sources")``;
team mode reads its paths from a config file with :func:`read` and :func:`get`.
Importing this module loads neither cv2, pyarrow nor torch.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"
CONFIG_SCHEMA = SCHEMAS / "config.schema.yaml"
SOURCES_SCHEMA = SCHEMAS / "sources.schema.yaml"
DEFAULT_CONFIG = "config/config.yaml"


@functools.lru_cache(maxsize=None)
def _load_schema(name: str) -> dict:
    with open(SCHEMAS / f"{name}.schema.yaml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def schema(name: str = "config") -> dict:
    """The JSON schema ``name`` (``config`` or ``sources``), a fresh copy."""
    import copy

    return copy.deepcopy(_load_schema(name))


def defaults() -> dict:
    """Stage settings from the config schema's defaults (= config/config.yaml's values)."""

    def fill(node):
        if node.get("type") == "object" and "properties" in node:
            return {k: fill(v) for k, v in node["properties"].items()}
        return node.get("default")

    return fill(_load_schema("config"))


def read(path: str | os.PathLike) -> dict:
    """A config file as a mapping (not validated); ValueError names the file and the reason."""
    try:
        cfg = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--configfile {path}: cannot read ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"--configfile {path}: not a mapping")
    return cfg


def get(cfg: dict, dotted: str, fallback: dict | None = None):
    """``cfg``'s value at ``a.b.c``; else ``fallback``'s (e.g. :func:`defaults`); else None."""
    for source in (cfg, fallback or {}):
        node = source
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None
