"""The one config reader: the JSON schemas (shipped inside the package), their defaults,
and validation.

:func:`validate` checks a config against :data:`CONFIG_SCHEMA` and fills in the schema's
defaults, as Snakemake's ``validate`` would; the Snakefile calls it on the run's config,
the CLI on each stage's settings (:func:`validate_section`: the schema's defaults with the
command line's options), and annotate and team mode on the config file they read
(:func:`load`). The sources table is checked against :func:`schema` ``("sources")``.
Importing this module loads neither cv2, pyarrow nor torch.
"""

from __future__ import annotations

import copy
import functools
import os
from pathlib import Path

import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"
CONFIG_SCHEMA = SCHEMAS / "config.schema.yaml"
SOURCES_SCHEMA = SCHEMAS / "sources.schema.yaml"
DEFAULT_CONFIG = "config/config.yaml"
# libyaml's loader where PyYAML was built with it: the schema parses in 0.06 s instead of
# 0.6 s, at every Snakemake start (a dry run, each cluster job) and every command
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=None)
def _load_schema(name: str) -> dict:
    with open(SCHEMAS / f"{name}.schema.yaml", encoding="utf-8") as fh:
        return yaml.load(fh, Loader=LOADER)


def schema(name: str = "config") -> dict:
    """The JSON schema ``name`` (``config`` or ``sources``), a fresh copy."""
    return copy.deepcopy(_load_schema(name))


def defaults() -> dict:
    """Stage settings from the config schema's defaults (= config/config.yaml's values)."""

    def fill(node):
        if node.get("type") == "object" and "properties" in node:
            return {k: fill(v) for k, v in node["properties"].items()}
        return node.get("default")

    return fill(_load_schema("config"))


@functools.lru_cache(maxsize=None)
def _filling_validator():
    """A Draft 2020-12 validator of the config schema that also fills in its defaults
    (jsonschema's FAQ recipe, as Snakemake's ``validate``; each default a fresh copy)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def properties(validator, props, instance, node):
        if isinstance(instance, dict):
            for key, sub in props.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from check_properties(validator, props, instance, node)

    return jsonschema.validators.extend(base, {"properties": properties})(_load_schema("config"))


def _where(error) -> str:
    return ".".join(str(p) for p in error.absolute_path)


def validate(cfg: dict, source: str = "config") -> dict:
    """Check ``cfg`` against the config schema and fill in the schema's defaults, in
    place; ValueError names ``source``, the setting, its value and the reason."""
    errors = sorted(_filling_validator().iter_errors(cfg), key=lambda e: (len(e.absolute_path), _where(e)))
    if errors:
        e = errors[0]
        setting = _where(e)
        if not setting:
            value = ""
        elif isinstance(e.instance, dict):  # a section: its name (the message names the key)
            value = f"{setting}: "
        else:
            value = f"{setting} = {e.instance!r}: "
        raise ValueError(f"{source}: {value}{e.message}")
    return cfg


def _put(cfg: dict, dotted: str, value) -> None:
    """Set ``cfg``'s ``a.b.c`` to ``value``, making the sections on the way."""
    *sections, key = dotted.split(".")
    for part in sections:
        cfg = cfg.setdefault(part, {})
    cfg[key] = value


def validate_section(dotted: str, values: dict, source: str = "command line") -> dict:
    """Settings of one section (``detect``, ``duplicates.signature``), checked as they
    would be inside a whole config; the section with the schema's defaults filled in."""
    cfg: dict = {}
    _put(cfg, dotted, values)
    validate(cfg, source)
    return values


def load(path: str | os.PathLike | None = None, overrides: dict | None = None) -> dict:
    """A run's config as the workflow sees it: the file (default :data:`DEFAULT_CONFIG`
    when it exists, else only the defaults), then ``overrides`` (``{"team.database": ...}``;
    None values are left out), validated, with the schema's defaults filled in."""
    if path is None and Path(DEFAULT_CONFIG).is_file():
        path = DEFAULT_CONFIG
    cfg = read(path) if path is not None else {}
    given = {dotted: value for dotted, value in (overrides or {}).items() if value is not None}
    for dotted, value in given.items():
        _put(cfg, dotted, value)
    source = f"--configfile {path}" if path is not None else "config"
    return validate(cfg, f"{source} with the command line's options" if given else source)


def read(path: str | os.PathLike) -> dict:
    """A config file as a mapping (not validated); ValueError names the file and the reason."""
    try:
        cfg = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=LOADER) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--configfile {path}: cannot read ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"--configfile {path}: not a mapping")
    return cfg


def get(cfg: dict, dotted: str):
    """``cfg``'s value at ``a.b.c`` (None where a key is missing)."""
    node = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node
