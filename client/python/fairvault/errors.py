"""Typed exceptions for the vault's gRPC status codes (docs/api.md, "Status codes").

Everything the client raises is a :class:`FairvaultError`, so one ``except FairvaultError``
catches a refusal by the vault and a mistake caught locally alike:

- a failed call raises the subclass for its gRPC status code (``BudgetExhausted``,
  ``InvalidArgument``, ``Unavailable``, ...), carrying the code, the server's message and any
  status details; ``except fairvault.BudgetExhausted`` then reads like the situation it handles;
- a mistake the client catches before any call (a wrong column, a bad value, an unknown
  parameter) raises :class:`InvalidInput` — an ``InvalidArgument`` (``.field`` names the
  argument) that is also a ``ValueError``; a missing column raises :class:`MissingColumn`
  (also a ``KeyError``), a wrong type :class:`WrongType` (also a ``TypeError``), predicting
  before fitting :class:`NotFittedError` (also ``ValueError`` and ``AttributeError``, as
  scikit-learn's). Code written against the built-in exceptions keeps working.

``hint`` says what to do where the status alone does not (as the CLI prints it): for
``Unavailable`` whether the vault is running and where the client looked for it.
"""
from __future__ import annotations

import re
from typing import Any, Optional, Sequence

import grpc

__all__ = [
    "FairvaultError",
    "InvalidArgument",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "Unauthenticated",
    "BudgetExhausted",
    "FailedPrecondition",
    "Aborted",
    "Unavailable",
    "DeadlineExceeded",
    "WaitTimeout",
    "Cancelled",
    "DataLoss",
    "Internal",
    "JobFailed",
    "InvalidInput",
    "MissingColumn",
    "WrongType",
    "NotFittedError",
    "NoSubjectsWarning",
    "from_rpc_error",
]


class FairvaultError(Exception):
    """A call the vault (or the transport) refused.

    Attributes:
        code: the :class:`grpc.StatusCode`.
        message: the server's status message (what was wrong and what to do).
        details: the status details, if any (``grpc.RpcError.debug_error_string`` is not
            included: it may carry addresses).
        retryable: whether repeating the same call (with the same idempotency key) may
            succeed. The client retries these itself a few times before raising.
        hint: what to do, when the status alone does not say (or ""); shown by ``str``.
        idempotency_key: the key a spending call was sent with (None for other calls). After
            a failure that may have come after the charge (UNAVAILABLE, DEADLINE_EXCEEDED,
            CANCELLED, UNKNOWN, INTERNAL, ABORTED, DATA_LOSS), calling again with it returns
            the charged call's outcome without a second charge.
    """

    retryable = False
    hint = ""
    idempotency_key: Optional[str] = None

    def __init__(self, code: grpc.StatusCode, message: str, details: Any = None) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.details = details

    def _text(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __str__(self) -> str:
        # The text, never a repr (KeyError's __str__ would quote it), and the hint after it.
        text = self._text()
        return f"{text}\n({self.hint})" if self.hint else text


class InvalidArgument(FairvaultError):
    """A malformed or out-of-range field (INVALID_ARGUMENT).

    Attributes:
        field: the request field the server named at the start of its message
            (``"epsilon must be finite and > 0 (got -1)"`` → ``"epsilon"``,
            ``"columns: at most 4 columns may be crossed"`` → ``"columns"``), or None when
            the message does not start with one of the request's fields.
    """

    def __init__(self, code: grpc.StatusCode, message: str, details: Any = None,
                 field: Optional[str] = None) -> None:
        super().__init__(code, message, details)
        self.field = field


class NotFound(FairvaultError):
    """Unknown dataset, account, table handle, artifact or job (NOT_FOUND)."""


class AlreadyExists(FairvaultError):
    """The account or dataset name is taken (ALREADY_EXISTS)."""


class PermissionDenied(FairvaultError):
    """Wrong role for the method, another company's object, or no grant (PERMISSION_DENIED)."""


class Unauthenticated(FairvaultError):
    """Missing, malformed or wrong API key (UNAUTHENTICATED)."""

    hint = "check the API key: key=, key_file= or $FAIRVAULT_API_KEY"


class BudgetExhausted(FairvaultError):
    """The declared cost does not fit the grant or the dataset cap (RESOURCE_EXHAUSTED).

    Attributes:
        requested: the epsilon the request stated, when the message says it.
        remaining: epsilon left on the grant. Parsed from the message; when the message does
            not say, the client asks ``GetBudget`` for it (None if that fails too). None for the
            cap, whose remainder (every company's spend together) the vault does not show.
        granted: the grant's total epsilon, when known.
        dataset: the dataset the budget is on, when known.
        scope: ``"grant"`` (the company's own grant) or ``"cap"`` (the dataset-wide cap over
            all companies), when known.
        budget: the ``fairvault.v1.Budget`` fetched with GetBudget, when the client fetched it.
    """

    hint = ("refused: nothing was charged; Vault.get_budget() shows what is left, and "
            "preview=True prices a request before sending it")

    def __init__(self, code: grpc.StatusCode, message: str, details: Any = None) -> None:
        super().__init__(code, message, details)
        self.requested: Optional[float] = None
        self.remaining: Optional[float] = None
        self.granted: Optional[float] = None
        self.dataset: Optional[str] = None
        self.scope: Optional[str] = None
        self.budget: Any = None
        self._parse(message)

    # request costs epsilon=<e> (delta=<d>) but the grant on dataset '<ds>' has epsilon <left>
    # left of <granted>; ... / request costs epsilon=<e> but the dataset-wide cap on '<ds>' (all
    # companies together) does not admit it; ...
    _PATTERN = re.compile(
        r"request costs epsilon=(?P<requested>[-+0-9.eE]+).*? but the "
        r"grant on dataset '(?P<dataset>[^']*)' has epsilon "
        r"(?P<remaining>[-+0-9.eE]+) left of (?P<granted>[-+0-9.eE]+)")
    _CAP_PATTERN = re.compile(
        r"request costs epsilon=(?P<requested>[-+0-9.eE]+) but the dataset-wide cap on "
        r"'(?P<dataset>[^']*)'")

    def _parse(self, message: str) -> None:
        cap = self._CAP_PATTERN.search(message)
        if cap is not None:
            try:
                self.requested = float(cap["requested"])
            except ValueError:
                return
            self.dataset = cap["dataset"]
            self.scope = "cap"
            return
        match = self._PATTERN.search(message)
        if match is None:
            return
        try:
            self.requested = float(match["requested"])
            self.remaining = float(match["remaining"])
            self.granted = float(match["granted"])
        except ValueError:
            return
        self.dataset = match["dataset"]
        self.scope = "grant"

    def _text(self) -> str:
        text = super()._text()
        if self.budget is not None and self.remaining is not None:
            text += f" (epsilon remaining on '{self.dataset}': {self.remaining:g})"
        return text


class FailedPrecondition(FairvaultError):
    """Wrong state: a reused idempotency key or batch id, an expired table, ... (FAILED_PRECONDITION)."""


class Aborted(FairvaultError):
    """The operation was aborted, e.g. by a concurrent transaction (ABORTED); retryable."""

    retryable = True


class Unavailable(FairvaultError):
    """Server unreachable or the connection dropped (UNAVAILABLE); retryable. ``server`` is the
    address the client called (when known), and ``hint`` says where to look."""

    retryable = True

    def __init__(self, code: grpc.StatusCode, message: str, details: Any = None,
                 server: Optional[str] = None) -> None:
        super().__init__(code, message, details)
        self.server = server
        where = f" at {server}" if server else ""
        self.hint = (f"is the vault running{where}? pass server= or set $FAIRVAULT_SERVER; "
                     "a TLS vault needs tls_ca=")


class DeadlineExceeded(FairvaultError):
    """The call's deadline passed (DEADLINE_EXCEEDED)."""


class WaitTimeout(DeadlineExceeded, TimeoutError):
    """Waiting for a job took longer than the caller's ``timeout`` (the job itself goes on).
    Also a ``TimeoutError``."""

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.DEADLINE_EXCEEDED, message)


class Cancelled(FairvaultError):
    """The call was cancelled (CANCELLED); a cancelled stream stored nothing."""


class DataLoss(FairvaultError):
    """A stored record does not parse, or a row count mismatch (DATA_LOSS)."""


class Internal(FairvaultError):
    """A server error: SQLite, a solver failure (INTERNAL)."""


class JobFailed(FairvaultError):
    """A training job ended FAILED or CANCELLED (its charge stays). ``job`` is the Job."""

    def __init__(self, job: Any) -> None:
        state = job.DESCRIPTOR.fields_by_name["state"].enum_type.values_by_number[job.state].name
        super().__init__(grpc.StatusCode.ABORTED if state.endswith("CANCELLED")
                         else grpc.StatusCode.UNKNOWN,
                         f"job {job.id} ended {state}: {job.error}")
        self.job = job


class InvalidInput(InvalidArgument, ValueError):
    """A mistake caught by the client before any call (so nothing was sent or charged): a bad
    value, an argument out of range, arguments that do not fit together. ``field`` names the
    argument when one is to blame. Also a ``ValueError``."""

    def __init__(self, message: str, field: Optional[str] = None) -> None:
        super().__init__(grpc.StatusCode.INVALID_ARGUMENT, message, None, field=field)


class MissingColumn(InvalidInput, KeyError):
    """A column (or key) the call needs is not in the input; the message lists what is there.
    Also a ``KeyError``."""


class WrongType(InvalidInput, TypeError):
    """An argument of a type the client cannot use. Also a ``TypeError``."""


class NotFittedError(InvalidInput, AttributeError):
    """An estimator used before ``fit`` (scikit-learn's name; also ``ValueError`` and
    ``AttributeError``, as scikit-learn's own)."""


class NoSubjectsWarning(UserWarning):
    """An upload none of whose rows' subject keys is in the vault: every release on it would be
    refused. Most often the keys needed the regulator's HMAC secret."""


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.RESOURCE_EXHAUSTED: BudgetExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.INTERNAL: Internal,
}

# A field path at the start of a message: "epsilon", "header.dataset", "columns[2]".
_FIELD = re.compile(r"^(?P<path>[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)(?:\[\d+\])?"
                    r"(?P<sep>:| must | is | has | may | cannot | needs )")


def field_of(message: str, field_names: Sequence[str] = ()) -> Optional[str]:
    """The request field an INVALID_ARGUMENT message starts with, or None.

    ``"<field>: ..."`` always counts; ``"<field> must ..."`` (and is/has/may/...) counts only
    when the first part of the path is one of ``field_names`` (the request's fields), so that
    "no table row has ..." does not yield "no".
    """
    match = _FIELD.match(message)
    if match is None:
        return None
    path = match["path"]
    if match["sep"] == ":" or path.split(".")[0] in field_names:
        return path
    return None


# gRPC's size limit on one message; newer gRPC names the side first ("CLIENT: Sent ...").
_TOO_LARGE = re.compile(r"^(?:(CLIENT|SERVER): )?(Sent|Received) message larger than max "
                        r"\((\d+) vs\. (\d+)\)")


def _too_large(code: grpc.StatusCode, message: str, details: Any, request: Any,
               stream: bool) -> Optional[FairvaultError]:
    """gRPC's size limit on one message is RESOURCE_EXHAUSTED like an overspend, but no budget
    refusal. This client's own request refused before sending, or any message of a stream
    (which stores nothing unless whole), was not charged; otherwise (an answer too large for a
    limit, after the vault ran the call) the outcome is unknown: UNKNOWN, which a spending
    call's retry logic treats as perhaps charged."""
    if code != grpc.StatusCode.RESOURCE_EXHAUSTED or "message larger than max" not in message:
        return None
    match = _TOO_LARGE.match(message)
    side, sent = (match[1], match[2] == "Sent") if match else (None, False)
    if side:  # this client's send, or the server's receive: the request never ran
        own_request = sent == (side == "CLIENT")
    else:     # unnamed: a send of exactly the request's size
        own_request = (sent and request is not None and hasattr(request, "ByteSize")
                       and request.ByteSize() == int(match[3]))
    own_request = own_request and not stream
    if own_request or stream:
        return InvalidArgument(code, f"{message}: one message is larger than gRPC's limit; "
                               f"send fewer rows per message (chunk_rows=); nothing was "
                               f"{'stored or ' if stream else ''}charged", details)
    return FairvaultError(grpc.StatusCode.UNKNOWN,
                          f"{message}: a message was larger than gRPC's limit (this client's "
                          f"max_message_bytes, or the vault's) after the call was sent, so the "
                          f"vault may have charged it; raise max_message_bytes and repeat with "
                          f"the same idempotency key (a replay charges nothing)", details)


def from_rpc_error(error: grpc.RpcError, request: Any = None,
                   server: Optional[str] = None, stream: bool = False) -> FairvaultError:
    """The typed exception for a failed call; ``request`` (a proto message; a stream's header
    with ``stream``) helps name a field, ``server`` (the address called) goes into
    ``Unavailable``'s hint."""
    code = error.code() if callable(getattr(error, "code", None)) else grpc.StatusCode.UNKNOWN
    message = error.details() if callable(getattr(error, "details", None)) else str(error)
    message = message or ""
    details = None
    trailing = getattr(error, "trailing_metadata", None)
    if callable(trailing):
        try:
            details = next((v for k, v in (trailing() or ()) if k == "grpc-status-details-bin"),
                           None)
        except Exception:  # a fake or half-built error object: no details
            details = None
    cls = _BY_CODE.get(code, FairvaultError)
    too_large = _too_large(code, message, details, request, stream)
    if too_large is not None:
        return too_large
    if cls is Unavailable:
        return Unavailable(code, message, details, server=server)
    if cls is InvalidArgument:
        names: list = []
        if request is not None and hasattr(request, "DESCRIPTOR"):
            names = [f.name for f in request.DESCRIPTOR.fields]
            # Streams and previews wrap the request: accept the inner message's fields too.
            for f in request.DESCRIPTOR.fields:
                if f.message_type is not None:
                    names += [g.name for g in f.message_type.fields]
        return InvalidArgument(code, message, details, field=field_of(message, names))
    return cls(code, message, details)
