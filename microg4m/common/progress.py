"""Progress bars for long stages, shown only when run in a terminal (not in job logs)."""

from __future__ import annotations

import sys
from typing import Iterable, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: int | None = None, unit: str = "clip") -> Iterable[T]:
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, total=total, unit=unit, leave=False)
