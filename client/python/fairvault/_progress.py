"""Progress bars, where someone watches: on a terminal or in a notebook, never in a log.

tqdm writes its bar again and again with carriage returns; outside a terminal (a CI log, a
file, a pipe) that prints every state of the bar, so by default a bar is shown only when
stderr is a terminal or the code runs in a Jupyter kernel. ``progress=True`` forces a bar,
``False`` turns it off.
"""
from __future__ import annotations

import sys
from typing import Any, Optional


def watched() -> bool:
    """Whether a person can see a bar: stderr is a terminal, or this is a Jupyter kernel."""
    if "ipykernel" in sys.modules:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def bar(total: int, desc: str, unit: str, progress: Optional[bool],
        min_total: int = 0) -> Any:
    """A tqdm bar, or None: ``progress`` True shows one, False none, None one when
    :func:`watched` and ``total`` is at least ``min_total``."""
    if progress is False or total <= 0:
        return None
    if progress is None and (total < min_total or not watched()):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # python3-tqdm missing: no bar
        return None
    return tqdm(total=total, unit=unit, desc=desc)
