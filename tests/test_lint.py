"""The workflow is lint-clean and snakefmt-formatted (run in CI through pytest)."""

import subprocess
import sys

from workflow import REPO


def test_snakemake_lint_reports_nothing():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--cores", "1"], cwd=REPO,
                          capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in out, out[-3000:]
    assert "Congratulations, your workflow is in a good condition!" in out


def test_snakefmt_check_passes():
    proc = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "workflow"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
