"""``Secret``: a value the client holds but never shows — an HMAC pseudonym secret or an API
key. Its ``repr`` and ``str`` are ``Secret('***')``, so that an estimator's ``repr``, its
``get_params()``, a notebook's output, a log line or an exception message that formats it
cannot carry the value. Only :meth:`Secret.reveal` returns it.
"""
from __future__ import annotations

import hmac
from typing import Any, Optional, Union
from fairvault.errors import InvalidInput, WrongType

__all__ = ["Secret", "SecretLike", "as_secret"]

#: What the client accepts where it takes a secret: the bytes (a ``str`` as its UTF-8 bytes),
#: or a :class:`Secret` wrapping them.
SecretLike = Union["Secret", bytes, bytearray, str]

_SHOWN = "Secret('***')"


class Secret:
    """A secret value that never appears in ``repr``, ``str`` or ``format``.

    Args:
        value: ``bytes`` (``bytearray`` is copied to bytes), ``str``, or another ``Secret``
            (whose value is taken).

    Immutable; ``copy`` and ``deepcopy`` return the object itself. Two secrets are equal when
    their values are (compared in constant time). A pickle never holds the value: an estimator
    saved with ``pickle`` or ``joblib`` (or sent to a worker) keeps a withheld secret, which
    raises :class:`~fairvault.errors.InvalidInput` when it is needed, saying to give it again
    (a secret *file*'s path, ``hmac_secret_file=``, travels and is read again).
    """

    __slots__ = ("_value",)

    def __init__(self, value: SecretLike) -> None:
        if isinstance(value, Secret):
            value = value._value
        elif isinstance(value, bytearray):
            value = bytes(value)
        elif not isinstance(value, (bytes, str)):
            raise WrongType(f"a secret must be bytes or str (got {type(value).__name__}); "
                            "read one from a file with hmac_secret_file= or key_file=")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> Union[bytes, str]:
        """The value itself: pass it only to what needs it (the HMAC, the call metadata)."""
        if self._value is _WITHHELD:
            raise InvalidInput("this secret was withheld when its object was pickled (a pickle "
                               "never holds one): give it again (hmac_secret=, or "
                               "hmac_secret_file= whose path travels in a pickle)",
                               field="hmac_secret")
        return self._value

    def __repr__(self) -> str:
        return _SHOWN

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return _SHOWN

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Secret is immutable")

    def __bool__(self) -> bool:
        return self._value is _WITHHELD or bool(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        mine, theirs = self._value, other._value
        if mine is _WITHHELD or theirs is _WITHHELD:
            return mine is theirs
        if isinstance(mine, str):
            mine = mine.encode("utf-8")
        if isinstance(theirs, str):
            theirs = theirs.encode("utf-8")
        return hmac.compare_digest(mine, theirs)

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __copy__(self) -> "Secret":
        return self

    def __deepcopy__(self, memo: Any) -> "Secret":
        return self

    def __reduce__(self) -> Any:
        return (_withheld_secret, ())


#: The value of a secret that was pickled: not there.
_WITHHELD = object()


def _withheld_secret() -> Secret:
    secret = object.__new__(Secret)
    object.__setattr__(secret, "_value", _WITHHELD)
    return secret


def as_secret(value: Optional[SecretLike]) -> Optional[Secret]:
    """``None`` stays ``None``, a :class:`Secret` is returned as it is (the same object), and
    anything else is wrapped in a new ``Secret``."""
    if value is None or isinstance(value, Secret):
        return value
    return Secret(value)
