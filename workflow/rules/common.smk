import sys
from pathlib import Path

from snakemake.utils import validate

from microg4m.sources import load_sources, normalize_url
from microg4m import demo as _demo

validate(config, workflow.source_path("../schemas/config.schema.yaml"))

# The sources table is validated before any job runs; a bad row stops here with a
# message naming the row, the field and the reason.
SOURCES = load_sources(config["sources"])
RESULTS = config["results"]


wildcard_constraints:
    src="[A-Za-z0-9_-]+",
    name="|".join(_demo.RECIPES),


def R(path):
    """A path inside the results folder."""
    return f"{RESULTS}/{path}"


def local_source_input(wildcards):
    """Declare a local source file as input when it exists or a rule makes it (demo)."""
    _, local = normalize_url(SOURCES.loc[wildcards.src, "url"])
    if local is None:
        return []
    demo_target = local.parent.as_posix() == "resources/demo" and local.stem in _demo.RECIPES
    return [str(local)] if demo_target or local.is_file() else []
