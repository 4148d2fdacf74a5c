"""The channel under :class:`fairvault.Vault`: credentials, the API key as metadata,
deadlines, retries with backoff, and gRPC errors turned into typed exceptions."""
from __future__ import annotations

import os
import random
import time
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Union

import grpc

from fairvault import errors
from fairvault._proto import auditor_grpc, company_grpc, regulator_grpc
from fairvault.secret import Secret

__all__ = ["Connection", "DEFAULT_SERVER"]

#: The CLI's default server address.
DEFAULT_SERVER = "127.0.0.1:50051"


def _read_key_file(path: str) -> Secret:
    # As the CLI: the first line, surrounding whitespace stripped.
    with open(path, encoding="utf-8") as f:
        return Secret(f.readline().strip())


def _unpickle(server: str, kind: str, path: Optional[str], settings: dict) -> "Connection":
    key_file = path if kind == "file" else None
    if kind == "given" or (key_file is not None and not os.path.exists(key_file)):
        # No key travels in a pickle: a connection without one (calls need a key first).
        conn = Connection(server, **settings)
        conn._key = None  # not even $FAIRVAULT_API_KEY: it may name another account
        return conn
    return Connection(server, key_file=key_file, **settings)


class Connection:
    """One gRPC channel to the vault with the three service stubs.

    Args:
        server: ``HOST:PORT``; default ``$FAIRVAULT_SERVER`` or ``127.0.0.1:50051``.
        key: the API key (a ``str`` or a :class:`~fairvault.secret.Secret`); default from
            ``key_file``, else ``$FAIRVAULT_API_KEY``. Kept as a ``Secret``: no ``repr``,
            ``str`` or error message shows it.
        key_file: a file whose first line is the API key.
        tls_ca: PEM file of the CA that signed the server's certificate: TLS when given.
        tls_server_name: the name to expect in the server's certificate, if not the host's.
        deadline: seconds per call (uploads of large tables need minutes).
        retries: how many times a retryable failure (UNAVAILABLE, ABORTED) is retried.
        backoff: first retry delay in seconds, doubled each time (with jitter).
        interceptors: gRPC client interceptors (for tests and tracing).
        max_message_bytes: largest message in each direction (the server's 64 MiB).
    """

    def __init__(self, server: Optional[str] = None, key: Optional[Union[str, Secret]] = None,
                 key_file: Optional[str] = None, tls_ca: Optional[str] = None,
                 tls_server_name: Optional[str] = None, deadline: float = 600.0,
                 retries: int = 3, backoff: float = 0.2,
                 interceptors: Sequence[Any] = (), max_message_bytes: int = 64 << 20) -> None:
        self.server = server or os.environ.get("FAIRVAULT_SERVER") or DEFAULT_SERVER
        # Where the key came from, for a pickled copy (which never holds the key itself).
        self._key_source: Tuple[str, Optional[str]] = ("given", None)
        if key is None and key_file is not None:
            key = _read_key_file(key_file)
            self._key_source = ("file", os.path.abspath(key_file))
        if key is None and os.environ.get("FAIRVAULT_API_KEY"):
            key = os.environ["FAIRVAULT_API_KEY"]
            self._key_source = ("environment", None)
        if key is not None:
            key = Secret(key)
            if not isinstance(key.reveal(), str) or any(c <= " " or c > "~"
                                                        for c in key.reveal()):
                raise errors.InvalidInput("key: the API key must be printable ASCII without spaces "
                                 "(check for a stray newline in the key file)")
        if not deadline > 0:
            raise errors.InvalidInput(f"deadline must be > 0 seconds (got {deadline})")
        if retries < 0:
            raise errors.InvalidInput(f"retries must be >= 0 (got {retries})")
        self._key: Optional[Secret] = key
        # What a copy needs to open its own channel (``copy.deepcopy``, hence sklearn's clone).
        self._settings = dict(tls_ca=tls_ca, tls_server_name=tls_server_name,
                              deadline=deadline, retries=retries, backoff=backoff,
                              interceptors=tuple(interceptors),
                              max_message_bytes=max_message_bytes)
        self.deadline = float(deadline)
        self.retries = int(retries)
        self.backoff = float(backoff)
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        if tls_ca is not None:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            channel = grpc.secure_channel(self.server, credentials, options=options)
        else:
            channel = grpc.insecure_channel(self.server, options=options)
        self._raw_channel = channel
        if interceptors:
            channel = grpc.intercept_channel(channel, *interceptors)
        self.channel = channel
        self.regulator = regulator_grpc.RegulatorServiceStub(channel)
        self.company = company_grpc.CompanyServiceStub(channel)
        self.auditor = auditor_grpc.AuditorServiceStub(channel)

    @property
    def has_key(self) -> bool:
        return self._key is not None

    def metadata(self) -> Tuple[Tuple[str, str], ...]:
        return (("authorization", "Bearer " + self._key.reveal()),) if self._key else ()

    def close(self) -> None:
        self._raw_channel.close()

    def __deepcopy__(self, memo: Any) -> "Connection":
        """A new connection to the same server with the same key and settings: its own gRPC
        channel (a channel cannot be copied), so a copy can be used and closed on its own."""
        copy = Connection(self.server, key=self._key, **self._settings)
        copy._key_source = self._key_source
        return copy

    def __copy__(self) -> "Connection":
        return self.__deepcopy__({})

    def __reduce__(self) -> Any:
        """Pickling (joblib's workers, a saved model) keeps the server and settings and where
        the key came from — never the key: an unpickled connection reads it again from the same
        key file or ``$FAIRVAULT_API_KEY``; a key given as a string is not carried, and calls
        then fail with ``Unauthenticated`` until a key is given."""
        kind, path = self._key_source
        settings = dict(self._settings)
        if settings["interceptors"]:
            raise errors.WrongType("a Connection with interceptors cannot be pickled")
        return (_unpickle, (self.server, kind, path, settings))

    def _sleep(self, attempt: int) -> None:
        delay = self.backoff * (2 ** attempt)
        time.sleep(delay * (0.5 + random.random() / 2))

    def call(self, method: Callable, request: Any, *, retry: bool,
             timeout: Optional[float] = None) -> Tuple[Any, Any]:
        """Calls a unary method; returns (response, call) with the call's trailing metadata.

        With ``retry``, UNAVAILABLE and ABORTED are retried with the very same request (so a
        spending request keeps its idempotency key: a replay returns the stored release and
        charges once).
        """
        attempt = 0
        while True:
            try:
                return method.with_call(request, metadata=self.metadata(),
                                        timeout=timeout or self.deadline)
            except grpc.RpcError as error:
                failure = errors.from_rpc_error(error, request, self.server)
            if retry and failure.retryable and attempt < self.retries:
                self._sleep(attempt)
                attempt += 1
                continue
            raise failure

    def stream(self, method: Callable, requests: Callable[[], Iterable[Any]], header: Any, *,
               retry: bool, timeout: Optional[float] = None) -> Tuple[Any, Any]:
        """Calls a client-streaming method with ``requests()``; a retry resends from the start
        (streams are all or nothing: a failed one stored nothing)."""
        attempt = 0
        while True:
            try:
                return method.with_call(iter(requests()), metadata=self.metadata(),
                                        timeout=timeout or self.deadline)
            except grpc.RpcError as error:
                failure = errors.from_rpc_error(error, header, self.server, stream=True)
            if retry and failure.retryable and attempt < self.retries:
                self._sleep(attempt)
                attempt += 1
                continue
            raise failure
