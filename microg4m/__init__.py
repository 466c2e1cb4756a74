"""microg4m: build AVA-format human action datasets from videos (MicroG-4M recipe)."""

__version__ = "0.1.0"

CLIP_SECONDS = 3
CLIP_FPS = 30
CLIP_FRAMES = CLIP_SECONDS * CLIP_FPS  # 90: every kept clip has exactly this many frames
