"""The plumbing under :class:`fairvault.Vault`: the connection, how reads, actions and
spending calls are made, and small argument helpers shared by its methods."""
from __future__ import annotations

import copy
import decimal
import functools
import hashlib
import inspect
import numbers
import os
import warnings
import secrets
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import grpc

from fairvault import errors
from fairvault._proto import enum_value, pb
from fairvault.connection import Connection
from fairvault.pseudonymise import read_secret_file, secret_bytes
from fairvault.results import messages_frame
from fairvault.secret import Secret, SecretLike

__all__ = ["VaultBase", "TableHandle", "new_idempotency_key", "ChargedAgainWarning"]

#: A file name: ``hmac_secret_file=``, ``key_file=``.
PathLike = Union[str, "os.PathLike[str]"]


# Failures after which a spending call may have been charged (the connection dropped, the
# deadline passed during a solve after the charge, the store failed after it): its key gets
# the outcome back. A refusal is never charged.
_MAY_HAVE_BEEN_CHARGED = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED,
    grpc.StatusCode.DATA_LOSS})


def new_idempotency_key() -> str:
    """A fresh random idempotency key: ``py-`` and 32 hex characters (128 bits)."""
    return "py-" + secrets.token_hex(16)


class TableHandle(str):
    """A table handle (``tbl_...``) that also carries its upload's response.

    It is a ``str``, so it can be passed wherever a handle is expected.
    """

    response: Any
    dataset: str

    def __new__(cls, response: Any, dataset: str,
                content_digest: Optional[str] = None) -> "TableHandle":
        handle = super().__new__(cls, response.table_handle)
        handle.response = response
        handle.dataset = dataset
        handle.content_digest = content_digest
        return handle

    def __reduce__(self) -> Any:
        return (TableHandle, (self.response, self.dataset, self.content_digest))

    @property
    def row_count(self) -> int:
        return self.response.row_count

    @property
    def rows_in_vault(self) -> int:
        return self.response.rows_in_vault

    @property
    def expires_unix(self) -> int:
        return self.response.expires_unix


def _secret(hmac_secret: Optional[SecretLike],
            hmac_secret_file: Optional[PathLike]) -> Optional[bytes]:
    """The HMAC secret's bytes from ``hmac_secret=`` or ``hmac_secret_file=`` (read now), or
    None. The messages name the argument, never the value."""
    if hmac_secret is not None and hmac_secret_file is not None:
        raise errors.InvalidInput("give hmac_secret= or hmac_secret_file=, not both")
    if hmac_secret_file is not None:
        return read_secret_file(hmac_secret_file)
    if hmac_secret is None:
        return None
    if not isinstance(hmac_secret, (Secret, bytes, bytearray, str)):
        raise errors.WrongType(f"hmac_secret must be bytes, str or a fairvault.Secret (got "
                        f"{type(hmac_secret).__name__}); or pass hmac_secret_file=PATH")
    return secret_bytes(hmac_secret)


def _unmatched(value: Union[str, int]) -> int:
    return enum_value(pb.UnmatchedKeys, value, "UNMATCHED_KEYS_")


def _list(values: Union[None, str, Sequence[str]]) -> List[str]:
    if values is None:
        return []
    return [values] if isinstance(values, str) else [str(v) for v in values]


# Request fields that hold a table handle (replaced by the table's content in a digest).
_TABLE_FIELDS = ("table_handle", "validation_table_handle")


class ChargedAgainWarning(UserWarning):
    """A spending call without an idempotency key repeats a request this client already
    charged: it is charged again (a fresh key is a new release)."""


# Fields of FitFairModelRequest given by name to fit_fair_model(**options) that are enums.
_FAIR_MODEL_ENUMS = {"model": (pb.ModelFamily, "MODEL_FAMILY_"),
                     "fairness": (pb.FairnessNotion, "FAIRNESS_NOTION_"),
                     "mixture": (pb.FinalMixture, "FINAL_MIXTURE_")}


#: What a number sent in a request may be: a real (numpy's too) or a Decimal; an integer.
REAL = (numbers.Real, decimal.Decimal)
INTEGRAL = numbers.Integral
# Parameters annotated as numbers: what each must be an instance of.
_NUMBER_PARAMETERS = {"float": REAL, "Optional[float]": REAL,
                      "int": INTEGRAL, "Optional[int]": INTEGRAL}


def is_number(value: Any, kind: Any = REAL) -> bool:
    """Whether ``value`` may be sent as a number of ``kind``: never a bool, which protobuf
    would send as 1 or 0."""
    return not isinstance(value, bool) and isinstance(value, kind)


def _checked_numbers(method: Any) -> Any:
    """``method`` refusing, before it builds a request, a bool or a non-number where its
    signature says a number: protobuf would send ``True`` as 1 (``epsilon=True`` would be
    charged ε = 1) and raise a bare ``TypeError`` for a string. WrongType names the argument."""
    signature = inspect.signature(method)
    kinds = {name: _NUMBER_PARAMETERS[p.annotation]
             for name, p in signature.parameters.items()
             if isinstance(p.annotation, str) and p.annotation in _NUMBER_PARAMETERS}
    if not kinds:
        return method

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            arguments = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return method(*args, **kwargs)  # Python's own message for a wrong call
        for name, kind in kinds.items():
            value = arguments.get(name)
            if value is not None and not is_number(value, kind):
                what = "an integer" if kind is INTEGRAL else "a number"
                raise errors.WrongType(f"{name} must be {what} (got {value!r}, a "
                                       f"{type(value).__name__})", field=name)
        return method(*args, **kwargs)
    return checked


class VaultBase:
    """The connection and the call helpers; :class:`fairvault.Vault` adds the methods."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every public method of the client checks its numeric arguments' types first.
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if not name.startswith("_") and inspect.isfunction(value):
                setattr(cls, name, _checked_numbers(value))

    #: Warn (ChargedAgainWarning) before a keyless call charges a request this client charged
    #: already. A session does not: its keys follow the content, so only another session name
    #: charges the same request again, which is what that name asks for.
    _warn_charged_again = True

    def __init__(self, server: Optional[str] = None, key: Optional[str] = None,
                 key_file: Optional[str] = None, tls_ca: Optional[str] = None,
                 **options: Any) -> None:
        self._conn = Connection(server, key=key, key_file=key_file, tls_ca=tls_ca, **options)
        # What this client learned: each uploaded table's dataset and content digest, and the
        # requests it charged (content digest → (idempotency key, ledger seq); seq None: the
        # call failed where it may have been charged).
        self._table_datasets: Dict[str, str] = {}
        self._table_digests: Dict[str, str] = {}
        self._charged: Dict[str, Tuple[str, Optional[int]]] = {}

    @property
    def server(self) -> str:
        return self._conn.server

    def __deepcopy__(self, memo: Any) -> "VaultBase":
        """A vault client on a new connection (same server, key and settings), as sklearn's
        ``clone`` makes of an estimator's ``vault`` parameter: the copy and the original can be
        used, and closed, independently. What it learned of the tables' datasets is copied."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._conn = copy.deepcopy(self._conn, memo)
        new._table_datasets = dict(self._table_datasets)
        new._table_digests = dict(self._table_digests)
        new._charged = dict(self._charged)
        return new

    def __getstate__(self) -> Dict[str, Any]:
        """Pickled: the connection (as ``Connection`` pickles: never the key) without the
        tables' datasets learned so far, so that a vault pickles the same before and after a
        call (what scikit-learn and joblib compare)."""
        state = dict(self.__dict__)
        state["_table_datasets"], state["_table_digests"], state["_charged"] = {}, {}, {}
        return state

    def close(self) -> None:
        """Closes the channel."""
        self._conn.close()

    def __enter__(self) -> "VaultBase":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Vault({self.server!r})"

    # ----- plumbing ---------------------------------------------------------------------

    def _read(self, stub: Any, method: str, request: Any) -> Any:
        response, _ = self._conn.call(getattr(stub, method), request, retry=True)
        return response

    def _act(self, stub: Any, method: str, request: Any) -> Any:
        response, _ = self._conn.call(getattr(stub, method), request, retry=False)
        return response

    def request_digest(self, method: str, request: Any) -> str:
        """What a spending request asks for, independent of its key and of which upload holds
        its table: SHA-256 of the method and the deterministic serialization of the request
        with ``idempotency_key`` cleared and every table handle this client uploaded replaced
        by its content digest. Re-running a notebook cell (a new upload of the same rows, the
        same parameters) gives the same digest; a changed parameter or row, another."""
        copy_ = type(request)()
        copy_.CopyFrom(request)
        copy_.idempotency_key = ""
        for field in _TABLE_FIELDS:
            if field in copy_.DESCRIPTOR.fields_by_name:
                handle = getattr(copy_, field)
                if handle in self._table_digests:
                    setattr(copy_, field, "content:" + self._table_digests[handle])
        body = copy_.SerializeToString(deterministic=True)
        return hashlib.sha256(method.encode() + b"\0" + body).hexdigest()

    def _held_upload(self, digest: str, dataset: str) -> Optional[TableHandle]:
        """An earlier upload of the same content to reuse instead of sending it again: none
        on a plain vault (a :class:`fairvault.Session` keeps them)."""
        return None

    def _remember_upload(self, handle: TableHandle) -> None:
        """Called after each upload (a session records it)."""

    def _key_for(self, method: str, digest: str) -> str:
        """The idempotency key of a spending call that was given none: a fresh random one
        (a :class:`fairvault.Session` derives it from the content instead)."""
        return new_idempotency_key()

    def _spend(self, method: str, request: Any, result: type, idempotency_key: Optional[str],
               preview: bool) -> Any:
        digest = self.request_digest(method, request)
        drawn = idempotency_key is None
        if drawn:
            idempotency_key = self._key_for(method, digest)
            earlier = self._charged.get(digest) if self._warn_charged_again else None
            if earlier is not None and earlier[0] != idempotency_key and not preview:
                before = (f"charged the same request before (ledger seq {earlier[1]}, "
                          f"idempotency key '{earlier[0]}'); with a fresh key it is charged "
                          "again" if earlier[1] is not None else
                          f"sent the same request before with idempotency key '{earlier[0]}' "
                          "and it failed where it may have been charged; with a fresh key it "
                          "may be charged twice")
                warnings.warn(
                    f"{method}: this client {before}. To replay it instead pass "
                    f"idempotency_key='{earlier[0]}', or work in a session "
                    "(vault.session('name')), whose keys follow the content",
                    ChargedAgainWarning, stacklevel=3)
        request.idempotency_key = idempotency_key
        if preview:
            return self.preview_release(request)
        try:
            response, call = self._conn.call(getattr(self._conn.company, method), request,
                                             retry=True)
            released = result(response, request.idempotency_key, call.trailing_metadata())
        except errors.BudgetExhausted as refusal:
            refusal.idempotency_key = request.idempotency_key
            self._explain_budget(refusal, getattr(request, "table_handle", ""))
            raise
        except errors.FairvaultError as failure:
            failure.idempotency_key = request.idempotency_key
            if drawn and failure.code in _MAY_HAVE_BEEN_CHARGED:
                said = f"{failure.hint}; " if failure.hint else ""
                failure.hint = said + self._unknown_outcome(
                    digest, request.idempotency_key, "before it failed")
            raise
        except (KeyboardInterrupt, SystemExit) as interrupted:
            # Ctrl-C while the call was out (or its answer was being read): the same (the note
            # prints under the traceback; Python 3.11 and later).
            if drawn:
                said = self._unknown_outcome(digest, request.idempotency_key,
                                             "before it was interrupted")
                note = getattr(interrupted, "add_note", None)
                if note is not None:
                    note(f"fairvault: {method} was interrupted after it may have been sent; "
                         f"{said}")
            raise
        charge = getattr(response, "charge", None)
        if charge is not None and charge.ledger_seq and \
                self._charged.get(digest, ("", None))[1] is None:
            self._charged[digest] = (request.idempotency_key, charge.ledger_seq)
        return released

    def _unknown_outcome(self, digest: str, key: str, when: str) -> str:
        """A call with a drawn key whose outcome the caller did not get: the caller never saw
        the key, and only it gets a charged outcome back. Kept for the warning should the same
        request be sent again without it; returns the sentence that names it."""
        self._charged.setdefault(digest, (key, None))
        return (f"if the vault charged this call {when}, call again with idempotency_key="
                f"'{key}' to get its outcome without a second charge")

    def _explain_budget(self, refusal: errors.BudgetExhausted, table: str) -> None:
        """Fills in what is left when the refusal's message did not say, from GetBudget."""
        dataset = refusal.dataset or self._table_datasets.get(table)
        if not dataset or refusal.scope == "cap":
            return
        try:
            budgets = self.get_budget(dataset, as_frame=False)
        except errors.FairvaultError:
            return
        if budgets:
            refusal.budget = budgets[0]
            refusal.dataset = dataset
            if refusal.remaining is None:
                refusal.remaining = budgets[0].epsilon_remaining
                refusal.granted = budgets[0].epsilon_granted
                refusal.scope = "grant"

    @staticmethod
    def _frame(messages: Sequence[Any], as_frame: bool) -> Any:
        return messages_frame(list(messages)) if as_frame else list(messages)

