"""The dataset release (rule release, stages/release.py): a Hugging Face dataset repository
with a dataset card, Parquet tables, the clips or their ids and URLs, Croissant with its
Responsible-AI fields, WebDataset shards, withdrawals and versions (docs/release.md)."""
