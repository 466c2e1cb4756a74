"""Helpers every part uses: atomic writes, media (ffmpeg, decoding), progress, footage, Snakemake glue."""
