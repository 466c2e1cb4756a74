"""Inference engines: runtimes and hardware, model weights and export, the tracker, yt-dlp."""
