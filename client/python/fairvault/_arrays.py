"""Turning a caller's values into float64 arrays with errors that name them."""
from __future__ import annotations

from typing import Any

import numpy as np

from fairvault.errors import InvalidInput, WrongType


def floats(values: Any, name: str) -> np.ndarray:
    """``values`` as a float64 array; :class:`~fairvault.errors.InvalidInput` naming ``name``
    (and the first value that is not a number) instead of numpy's bare ``ValueError``."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        flat = np.asarray(values, dtype=object).reshape(-1)
        for row, v in enumerate(flat):
            try:
                float(v)
            except (TypeError, ValueError) as error:
                kind = WrongType if isinstance(error, TypeError) else InvalidInput
                raise kind(f"{name} must hold numbers: row {row} is {v!r} ({error})",
                           field=name) from None
        raise InvalidInput(f"{name} must hold numbers", field=name) from None
