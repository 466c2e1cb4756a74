"""The documentation holds together: a short README, relative links that resolve (files and
headings), and the README's test command is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "config" / "README.md"]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped except '-' and '_',
    spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for _, text in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """The link targets of a markdown file, outside code blocks and code spans."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = CODE_SPAN.sub("code", text)
    return LINK.findall(text)


def relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # http:, https:, mailto:, ...


def test_slug_follows_githubs_rule():
    assert slug("Which frames a clip holds (`trim.align`)") == "which-frames-a-clip-holds-trimalign"
    assert slug("Fidelity to the authors' scripts") == "fidelity-to-the-authors-scripts"
    assert slug("Other batch systems (PBS, LSF, SGE): cluster-generic") == "other-batch-systems-pbs-lsf-sge-cluster-generic"
    assert slug("Checking a dataset later: `microg4m verify`") == "checking-a-dataset-later-microg4m-verify"


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move text into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    found = links(page)
    assert page != README or any(t.startswith("docs/") for t in found), "the README links into docs/"
    broken = []
    for target in found:
        if not relative(target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '#{anchor}' in {dest.relative_to(REPO)}")
    assert broken == [], f"{page.relative_to(REPO)}: broken links"


def test_the_readme_runs_the_tests_as_ci_does():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    line = next((ln.strip() for ln in ci.splitlines() if ln.strip().startswith("pip install -e '.[test]'")), None)
    assert line, ".ci/run has no line starting with pip install -e '.[test]'"
    readme = README.read_text(encoding="utf-8")
    parts = [p.strip() for p in line.split("&&")]
    assert len(parts) >= 2
    missing = [p for p in parts if p not in readme]
    assert missing == [], "README.md lacks these parts of .ci/run's test command"
    # and in the README they are one command, in CI's order, after the venv
    block = next((b for b in re.findall(r"```bash\n(.*?)```", readme, re.S) if parts[0] in b), "")
    steps = [s.strip() for s in block.replace("\\\n", " ").split("&&")]
    assert steps[-len(parts):] == parts, "the README's test block runs CI's steps last, in order"
    assert steps[0].endswith("-m venv .venv") and steps[1] == ". .venv/bin/activate"


# The schema's words that are JSON Schema's own: any other key in a property is a
# description cut short by YAML (an unquoted comma in a flow mapping ends the string).
SCHEMA_WORDS = {"type", "enum", "description", "default", "minimum", "maximum", "exclusiveMinimum",
                "exclusiveMaximum", "properties", "items", "additionalProperties", "required", "oneOf",
                "anyOf", "allOf", "pattern", "minItems", "maxItems", "minLength", "maxLength", "$schema",
                "title", "const", "format", "uniqueItems"}


def test_every_schema_description_is_whole():
    import yaml

    schema = yaml.safe_load((REPO / "microg4m" / "schemas" / "config.schema.yaml").read_text())
    stray = []

    def walk(node, path):
        if not isinstance(node, dict):
            return
        stray.extend(f"{path}: {k!r}" for k in set(node) - SCHEMA_WORDS)
        for key, sub in node.get("properties", {}).items():
            walk(sub, f"{path}.{key}")
        for key in ("items", "additionalProperties"):
            walk(node.get(key), f"{path}[{key}]")
        for key in ("oneOf", "anyOf", "allOf"):
            for i, sub in enumerate(node.get(key, [])):
                walk(sub, f"{path}.{key}[{i}]")

    walk(schema, "config")
    assert stray == []
