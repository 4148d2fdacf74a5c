"""Keyed pseudonyms for subject keys, byte for byte those of the CLI (client/lib/pseudonymise.cc).

The regulator and the company pseudonymise raw identifiers with the same secret so that
their pseudonyms of one person match, and raw ids never reach the vault:
``pseudonym = lower-case hex HMAC-SHA256(secret, UTF-8 bytes of the raw id)`` (64 characters).
"""
from __future__ import annotations

import hashlib
import hmac
import os
from typing import Iterable, List, Union

from fairvault.secret import Secret, SecretLike
from fairvault.errors import InvalidInput

__all__ = ["MIN_SECRET_BYTES", "pseudonymise", "pseudonymise_all", "read_secret_file",
           "secret_bytes", "sha256_hex"]

#: Shortest secret accepted, in bytes (the CLI's kMinSecretBytes).
MIN_SECRET_BYTES = 16

_SHA256_BLOCK = 64  # bytes


def _as_bytes(value: Union[SecretLike, bytes]) -> bytes:
    if isinstance(value, Secret):
        value = value.reveal()
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def pseudonymise(secret: SecretLike, raw_id: Union[str, bytes]) -> str:
    """Lower-case hex HMAC-SHA256(secret, raw_id): 64 characters.

    ``secret`` (bytes, str or a :class:`~fairvault.secret.Secret`) and ``raw_id`` are used as
    their bytes (a ``str`` as UTF-8), exactly as the CLI uses the secret file's bytes and the
    CSV field's bytes. Thread-safe.
    """
    return hmac.new(_as_bytes(secret), _as_bytes(raw_id), hashlib.sha256).hexdigest()


def pseudonymise_all(secret: SecretLike, raw_ids: Iterable[str]) -> List[str]:
    """:func:`pseudonymise` of every id, about twice as fast on large tables.

    HMAC as RFC 2104 defines it, H((K ^ opad) || H((K ^ ipad) || m)), with the two keyed
    SHA-256 states computed once and copied per id (``hmac.HMAC.copy`` does the same through
    more Python code).
    """
    key = _as_bytes(secret)
    if len(key) > _SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_SHA256_BLOCK, b"\0")
    inner = hashlib.sha256(bytes(k ^ 0x36 for k in key)).copy
    outer = hashlib.sha256(bytes(k ^ 0x5C for k in key)).copy
    out = []
    for raw in raw_ids:
        i = inner()
        i.update(raw.encode("utf-8") if isinstance(raw, str) else bytes(raw))
        o = outer()
        o.update(i.digest())
        out.append(o.hexdigest())
    return out


def sha256_hex(data: Union[str, bytes]) -> str:
    """Lower-case hex SHA-256 of ``data`` (a ``str`` as UTF-8): 64 characters."""
    return hashlib.sha256(_as_bytes(data)).hexdigest()


def read_secret_file(path: Union[str, os.PathLike]) -> bytes:
    """An HMAC secret from a file, read as the CLI's ``--hmac-secret-file`` reads it.

    The file's bytes with trailing ``\\n`` / ``\\r`` removed (nothing else is stripped).

    Raises:
        FileNotFoundError: the file cannot be read.
        ValueError: fewer than :data:`MIN_SECRET_BYTES` bytes remain.
    """
    with open(path, "rb") as f:
        secret = f.read()
    secret = secret.rstrip(b"\r\n")
    if len(secret) < MIN_SECRET_BYTES:
        raise InvalidInput(
            f"HMAC secret in '{os.fspath(path)}' is {len(secret)} bytes; use at least "
            f"{MIN_SECRET_BYTES} (e.g. `openssl rand -hex 32 > {os.fspath(path)}`)")
    return secret


def secret_bytes(secret: SecretLike) -> bytes:
    """A secret given in memory, checked like a secret file (at least MIN_SECRET_BYTES bytes)."""
    value = _as_bytes(secret)
    if len(value) < MIN_SECRET_BYTES:
        raise InvalidInput(f"the HMAC secret is {len(value)} bytes; use at least {MIN_SECRET_BYTES}")
    return value
