"""The conda env of the rules (--sdm conda) installs what the demo needs, with pyproject.toml's pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

from microg4m.common.footage import PACKAGE_FOOTAGE

REPO = Path(__file__).resolve().parent.parent
ENV = REPO / "workflow" / "envs" / "microg4m.yaml"
POST_DEPLOY = REPO / "workflow" / "envs" / "microg4m.post-deploy.sh"
DIST = {"skvideo": "scikit-video"}  # import name -> distribution
NOT_IN_RULES = {"snakemake", "flask", "waitress", "rapidfuzz", "zxcvbn"}  # Snakemake itself; the annotation pages


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def env_pins() -> dict[str, str]:
    env = yaml.safe_load(ENV.read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    post = re.findall(r"pip install --no-deps (.+)", POST_DEPLOY.read_text())
    return _pins(pip) | _pins(" ".join(post).split())


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_env_pins_are_pyprojects():
    proj = project()
    declared = _pins(proj["dependencies"])
    for extra in proj["optional-dependencies"].values():
        declared |= _pins(extra)
    env = env_pins()
    readme = _pins(re.findall(r"musicalgestures==[0-9.]+", (REPO / "README.md").read_text()))
    assert readme and env["musicalgestures"] == readme["musicalgestures"]
    env.pop("musicalgestures")  # installed apart, without its dependencies (README and post-deploy script)
    assert {k: v for k, v in env.items() if declared.get(k) != v} == {}


def test_the_env_has_every_package_the_demo_and_the_rules_need():
    env = env_pins()
    runtime = set(_pins(project()["dependencies"])) - NOT_IN_RULES
    assert runtime - set(env) == set()
    demo = (REPO / "microg4m" / "stages" / "demo.py").read_text()
    used = set(re.findall(r'footage\("(\w+)"\)', demo))
    assert used and used <= set(PACKAGE_FOOTAGE)
    packages = {DIST.get(PACKAGE_FOOTAGE[name][0], PACKAGE_FOOTAGE[name][0]) for name in used}
    assert packages - set(env) == set()
    rules = " ".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
    assert set(re.findall(r'conda:\s*"([^"]+)"', rules)) == {"../envs/microg4m.yaml"}
    assert re.search(r"^\s*- -e \.\./\.\./$", ENV.read_text(), re.M)  # the package, from the env's folder
