"""Captions and VQA: the rules a text must follow, ranking, the VLM client, drafting and export."""
