"""The package layout: no stage imports another stage, no import cycle, and what the
workflow's common.smk imports stays light (no cv2, pyarrow or torch; no environment change)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "microg4m"
# evaluate: the benchmark (scores of predictions on an export: HAR, captions, VQA, the VLM baseline);
# it reads what the pipeline wrote and is neither a stage nor a reader of one file kind.
# release: the dataset release (Hugging Face layout, Croissant, shards) built from an export.
ROLES = ("stages", "formats", "engines", "report", "vqa", "annotate", "common", "evaluate", "release")


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every microg4m module ``path`` imports (at any depth: function-level imports too)."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("microg4m") and name != mod:
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) for p in PACKAGE.rglob("*.py")}


def test_the_package_is_organised_by_role():
    top = sorted(p.name for p in PACKAGE.iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "cli.py", "config.py"]
    assert all((PACKAGE / role / "__init__.py").is_file() for role in ROLES)
    assert (PACKAGE / "schemas" / "config.schema.yaml").is_file()


def test_no_stage_imports_another_stage():
    bad = [(m, d) for m, deps in graph().items() if m.startswith("microg4m.stages.")
           for d in deps if d.startswith("microg4m.stages.")]
    assert bad == []


def test_the_stages_are_the_rules():
    rules = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        rules |= {line.split()[1].rstrip(":") for line in smk.read_text().splitlines() if line.startswith("rule ")}
    stages = {p.stem for p in (PACKAGE / "stages").glob("*.py")} - {"__init__"}
    # demo_media's stage is demo; vqa_draft and vqa_export are vqa.draft and vqa.export;
    # corrections (applied in track_files' job) and verify (CLI only) are stages without a rule of their own;
    # har_vlm and har_vlm_eval are the benchmark's VLM baseline (microg4m.evaluate.vlm_har), not a stage
    rules = {"demo" if r == "demo_media" else r for r in rules} - {"vqa_draft", "vqa_export", "har_vlm", "har_vlm_eval"}
    assert stages - rules == {"corrections", "verify"}
    assert rules - stages == set()


def test_no_import_cycle():
    g = graph()
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(g.get(node, ())):
            if dep not in g:
                continue
            # a package's __init__ importing its own children is no cycle
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(g):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_what_common_smk_imports_loads_no_cv2_pyarrow_or_torch_and_sets_no_variable():
    text = (REPO / "workflow" / "rules" / "common.smk").read_text()
    imports = [line for line in text.splitlines() if line.startswith(("from microg4m", "import microg4m"))]
    assert imports
    code = "\n".join([
        "import json, os, sys",
        "import pandas, snakemake.utils",  # Snakemake's own process has these (and pandas loads pyarrow)",
        "before, env = set(sys.modules), dict(os.environ)",
        *imports,
        "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('cv2', 'pyarrow', 'torch'))",
        "print(json.dumps({'new': new, 'env': dict(os.environ) == env}))",
    ])
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == {"new": [], "env": True}
