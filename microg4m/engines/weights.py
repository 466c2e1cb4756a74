"""Resolve the ``detect.weights`` setting to something ultralytics can load.

Three forms are accepted:

* ``pkg:<package>/<file>``: a file shipped inside an installed Python package (offline);
* a path to an existing file;
* a bare Ultralytics release name such as ``yolo11n.pt`` that is not a local file:
  returned unchanged, ultralytics downloads it on first use (needs internet).
"""

from __future__ import annotations

import os
from pathlib import Path

from microg4m.common.footage import FootageMissing, package_file

SETTING = "detect.weights"


def _fail(spec: str, why: str) -> ValueError:
    return ValueError(f"{SETTING} = {spec!r}: {why}")


def _check_file(spec: str, path: Path) -> str:
    if path.is_dir():
        raise _fail(spec, f"{path} is a folder, not a weights file")
    if not path.is_file():
        raise _fail(spec, f"{path}: no such file")
    if not os.access(path, os.R_OK):
        raise _fail(spec, f"{path}: not readable (permission denied)")
    if path.stat().st_size == 0:
        raise _fail(spec, f"{path}: empty file (0 bytes)")
    return str(path)


def _is_release_name(name: str) -> bool:
    from ultralytics.utils.downloads import GITHUB_ASSETS_NAMES

    return name in GITHUB_ASSETS_NAMES


def resolve_weights(spec: str) -> str:
    """The path (or downloadable release name) for a ``detect.weights`` value.

    Raises ValueError naming the setting and the value when the file is missing or unreadable.
    """
    if not isinstance(spec, (str, os.PathLike)) or not str(spec).strip():
        raise _fail(str(spec), "empty or not a string; expected a path, a model name or pkg:<package>/<file>")
    spec = str(spec).strip()
    if spec.startswith("pkg:"):
        package, _, rel = spec[len("pkg:"):].partition("/")
        if not package or not rel:
            raise _fail(spec, "expected pkg:<package>/<file inside the package>")
        try:
            path = package_file(package, rel)
        except FootageMissing as exc:
            raise _fail(spec, str(exc)) from None
        return _check_file(spec, path)
    path = Path(spec).expanduser()
    if path.exists():
        return _check_file(spec, path)
    if os.sep not in spec and "/" not in spec and _is_release_name(spec):
        return spec  # ultralytics downloads official release weights by name
    raise _fail(spec, f"{path}: no such file, and not an Ultralytics release name such as yolo11n.pt")
