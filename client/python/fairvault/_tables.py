"""DataFrames → the chunked client streams of UploadTable and ImportAttributes.

Everything is checked before the first message is sent (as the CLI checks a whole CSV
first): keys, numbers, missing values. A stream is all or nothing on the server, so a
stream that fails midway can simply be sent again from the start.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from fairvault._proto import pb
from fairvault.pseudonymise import pseudonymise, pseudonymise_all
from fairvault._progress import bar
from fairvault.errors import InvalidInput, MissingColumn

__all__ = ["subject_keys", "table_columns", "table_stream", "import_stream", "default_batch_id",
           "DEFAULT_CHUNK_ROWS", "PROGRESS_MIN_ROWS"]

#: Rows per chunk (the CLI's --chunk-rows default).
DEFAULT_CHUNK_ROWS = 20000
#: Tables at least this long get a progress bar when progress is left to the default.
PROGRESS_MIN_ROWS = 100_000

# A subject key: 1..128 characters in '!'..'~'. All keys are checked at once, newline-joined,
# for a character outside that range, then one by one only to name the bad one.
_KEY = re.compile(r"[!-~]{1,128}")
_BAD_KEY_CHAR = re.compile(r"[^!-~\n]")


def _key_strings(values: Any, source: str) -> List[str]:
    series = pd.Series(values)
    if series.isna().any():
        row = int(np.flatnonzero(series.isna().to_numpy())[0])
        raise InvalidInput(f"{source}: row {row} has no subject key")
    if pd.api.types.is_float_dtype(series.dtype):
        raise InvalidInput(f"{source}: subject keys are floats; convert them to the strings both "
                         "sides use (e.g. df[col].astype('Int64').astype(str)), since 1.0 and 1 "
                         "would pseudonymise differently")
    return [v if isinstance(v, str) else str(v) for v in series.tolist()]


def subject_keys(df: pd.DataFrame, key_column: Optional[str], secret: Optional[bytes],
                 allow_repeats: bool = False) -> List[str]:
    """The subject keys the CLI would send for these rows.

    ``key_column``: a column name, ``"@row"`` (``row-<0-based row index>``, the CLI's @row) or
    None (the DataFrame's index). With ``secret``, each key is its HMAC pseudonym; without,
    keys must be 1..128 printable ASCII characters without spaces.
    """
    if key_column == "@row":
        raw = [f"row-{i}" for i in range(len(df))]
        source = "@row"
    elif key_column is None:
        raw = _key_strings(df.index, "the index")
        source = "the index"
    else:
        if key_column not in df.columns:
            raise MissingColumn(f"key column '{key_column}' is not a column of the DataFrame "
                             f"(columns: {list(df.columns)}); or use key_column='@row'")
        raw = _key_strings(df[key_column], f"key column '{key_column}'")
        source = f"key column '{key_column}'"
    for i, key in enumerate(raw):
        if not key:
            raise InvalidInput(f"{source}: row {i} has an empty subject key")
    if secret:
        keys = pseudonymise_all(secret, raw)
    else:
        keys = raw
        joined = "\n".join(keys)
        if keys and (_BAD_KEY_CHAR.search(joined) is not None or max(map(len, keys)) > 128
                     or joined.count("\n") != len(keys) - 1):
            i = next(i for i, key in enumerate(keys) if _KEY.fullmatch(key) is None)
            raise InvalidInput(
                f"{source}: row {i}: subject key '{keys[i][:64]}' is not 1..128 printable ASCII "
                "characters without spaces (pseudonymise with hmac_secret=...)")
    if not allow_repeats and len(set(keys)) != len(keys):
        seen = {}
        for i, key in enumerate(keys):
            if key in seen:
                raise InvalidInput(f"{source}: row {i} repeats the subject key of row {seen[key]}")
            seen[key] = i
    return keys


def table_columns(df: pd.DataFrame, key_column: Optional[str], numeric: Optional[Sequence[str]],
                  categorical: Optional[Sequence[str]]) -> Tuple[List[Any], List[Any]]:
    """The header's ColumnSpecs and each column's checked values (numpy floats or strings).

    With neither ``numeric`` nor ``categorical``, every column but the key column is sent:
    numeric and boolean dtypes as numeric, the rest as categorical.
    """
    if numeric is None and categorical is None:
        others = [c for c in df.columns if c != key_column]
        numeric = [c for c in others if pd.api.types.is_numeric_dtype(df[c].dtype)]
        categorical = [c for c in others if c not in numeric]
    numeric, categorical = list(numeric or []), list(categorical or [])
    specs, values = [], []
    for name in numeric + categorical:
        if name not in df.columns:
            raise MissingColumn(f"column '{name}' is not a column of the DataFrame "
                             f"(columns: {list(df.columns)})")
    for name in numeric:
        try:
            column = df[name].to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as error:
            raise InvalidInput(f"column '{name}' must be numeric: {error}") from None
        bad = ~np.isfinite(column)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise InvalidInput(f"column '{name}' must hold finite numbers (row {row} is "
                             f"{df[name].iloc[row]!r})")
        specs.append(pb.ColumnSpec(name=str(name), type=pb.COLUMN_TYPE_NUMERIC))
        values.append(column)
    for name in categorical:
        series = df[name]
        if series.isna().any():
            row = int(np.flatnonzero(series.isna().to_numpy())[0])
            raise InvalidInput(f"categorical column '{name}' has a missing value at row {row}; "
                             "fill it (e.g. .fillna('')) first")
        strings = [v if isinstance(v, str) else str(v) for v in series.tolist()]
        for row, v in enumerate(strings):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as error:  # a lone surrogate: no UTF-8 for protobuf
                raise InvalidInput(f"categorical column '{name}' at row {row} is not valid "
                                   f"text ({error.reason} at character {error.start}); decode "
                                   f"the file with the right encoding first") from None
        specs.append(pb.ColumnSpec(name=str(name), type=pb.COLUMN_TYPE_CATEGORICAL))
        values.append(strings)
    return specs, values


def table_digest(header: Any, keys: List[str], specs: List[Any], values: List[Any]) -> str:
    """SHA-256 of an upload's content: the header (dataset, columns, lifetime, label), the
    subject keys as sent and every value, in order. Two uploads of the same rows have the same
    digest whatever handles the vault gives them."""
    # JSON lists: an unambiguous encoding of strings (whatever characters they hold).
    h = hashlib.sha256(header.SerializeToString(deterministic=True))
    h.update(json.dumps(keys).encode())
    for spec, column in zip(specs, values):
        if spec.type == pb.COLUMN_TYPE_NUMERIC:
            h.update(b"n" + len(column).to_bytes(8, "little"))
            h.update(np.ascontiguousarray(column, dtype="<f8").tobytes())
        else:
            h.update(b"c" + json.dumps(column).encode())
    return h.hexdigest()


def _bar(total: int, progress: Optional[bool], desc: str):
    return bar(total, desc, "rows", progress, min_total=PROGRESS_MIN_ROWS)


def table_stream(header: Any, keys: List[str], specs: List[Any], values: List[Any],
                 chunk_rows: int, progress: Optional[bool]) -> Iterator[Any]:
    """UploadTableRequests: the header, chunks of at most ``chunk_rows`` rows, StreamEnd."""
    if chunk_rows <= 0:
        raise InvalidInput("chunk_rows must be > 0")
    yield pb.UploadTableRequest(header=header)
    bar = _bar(len(keys), progress, "upload")
    chunks = 0
    try:
        for begin in range(0, len(keys), chunk_rows):
            end = min(len(keys), begin + chunk_rows)
            chunk = pb.TableChunk(subject_keys=keys[begin:end])
            for spec, column in zip(specs, values):
                if spec.type == pb.COLUMN_TYPE_NUMERIC:
                    chunk.columns.add(numeric=column[begin:end].tolist())
                else:
                    chunk.columns.add(categorical=column[begin:end])
            chunks += 1
            yield pb.UploadTableRequest(chunk=chunk)
            if bar is not None:
                bar.update(end - begin)
        yield pb.UploadTableRequest(end=pb.StreamEnd(chunks=chunks, rows=len(keys)))
    finally:
        if bar is not None:
            bar.close()


def import_stream(header: Any, keys: List[str], categories: List[List[str]], chunk_rows: int,
                  progress: Optional[bool]) -> Iterator[Any]:
    """ImportAttributesRequests: header, SubjectRows chunks (categories row-major), StreamEnd."""
    if chunk_rows <= 0:
        raise InvalidInput("chunk_rows must be > 0")
    yield pb.ImportAttributesRequest(header=header)
    bar = _bar(len(keys), progress, "import")
    chunks = 0
    try:
        for begin in range(0, len(keys), chunk_rows):
            end = min(len(keys), begin + chunk_rows)
            flat = [column[i] for i in range(begin, end) for column in categories]
            chunks += 1
            yield pb.ImportAttributesRequest(
                rows=pb.SubjectRows(subject_keys=keys[begin:end], categories=flat))
            if bar is not None:
                bar.update(end - begin)
        yield pb.ImportAttributesRequest(end=pb.StreamEnd(chunks=chunks, rows=len(keys)))
    finally:
        if bar is not None:
            bar.close()


def default_batch_id(keys: List[str], attributes: Sequence[str], categories: List[List[str]],
                     secret: Optional[bytes]) -> str:
    """A batch id from the import's content, so that re-running the same import is a no-op
    and different content is a new batch. The secret enters only through an HMAC of a
    constant (as in the CLI), so the id reveals nothing about it.

    Hashed column by column, each with its count and byte length. (Should two different
    imports ever share an id, the server compares their content and refuses the second with
    FAILED_PRECONDITION; nothing is merged.)
    """
    h = hashlib.sha256()
    h.update("\0".join(["fairvault-python-import", ",".join(attributes),
                        pseudonymise(secret, "fairvault-batch-id") if secret else ""]).encode())
    for column in [keys] + categories:
        data = "\0".join(column).encode("utf-8")
        h.update(f"\0{len(column)}:{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def check_categories(df: pd.DataFrame, columns: Sequence[str]) -> List[List[str]]:
    """Each attribute column as strings; missing values refused."""
    out = []
    for name in columns:
        if name not in df.columns:
            raise MissingColumn(f"attribute column '{name}' is not a column of the DataFrame "
                             f"(columns: {list(df.columns)})")
        series = df[name]
        if series.isna().any():
            row = int(np.flatnonzero(series.isna().to_numpy())[0])
            raise InvalidInput(f"attribute column '{name}' has a missing value at row {row}")
        out.append([v if isinstance(v, str) else str(v) for v in series.tolist()])
    return out


