"""Sessions: notebooks that never pay twice.

A plain :class:`fairvault.Vault` gives each spending call without an ``idempotency_key`` a
fresh random key, so re-running a notebook cell charges again (it warns, with
:class:`~fairvault.ChargedAgainWarning`, when it sees the same request twice). A session
derives the key from what the request asks for instead:

    session = vault.session("adult-eo-study")
    table = session.upload_table(df, "adult", key_column="id", ...)      # reused on a re-run
    audit = session.audit_classifier(table, "prediction", "label", epsilon=0.5)
    audit.replayed        # False the first time; True on a re-run: the stored release

- The key is ``s-<name>-<digest>``: the session's name and the request's content digest
  (:meth:`Vault.request_digest`: the method, every parameter, and the uploaded table's rows,
  not its handle). The same cell re-run is the same request: a replay, charged once, which
  says so (:class:`Replayed`, and ``.replayed`` on the result). A changed parameter or row is
  a new request with a new key, charged as such.
- ``upload_table`` returns the handle of an earlier upload of the same rows while it lives, so
  that the replayed request names the same table (the vault compares requests byte for byte).
  The session keeps these handles in a state file (default
  ``~/.cache/fairvault/sessions/<name>.json``; ``state_file=None`` keeps them in memory only),
  so that a restarted kernel replays too.
- A key given explicitly is used as it is (as on a plain vault).
- Another session name is another set of keys: ``vault.session("study-2")`` pays again for the
  same requests, on purpose.

Everything else (reads, estimators, ``wait_job``) works as on the vault: a session is a
:class:`fairvault.Vault` on the same connection.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from typing import Any, Dict, Optional

from fairvault import errors
from fairvault._base import TableHandle
from fairvault._proto import pb
from fairvault.vault import Vault

__all__ = ["Session", "Replayed", "default_state_file"]

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,48}$")


class Replayed(UserWarning):
    """A session's spending call returned the stored release of an earlier identical request:
    nothing was charged now."""


def default_state_file(name: str) -> str:
    """Where a session keeps its table handles: ``$XDG_CACHE_HOME`` (or ``~/.cache``)
    ``/fairvault/sessions/<name>.json``."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "fairvault", "sessions", f"{name}.json")


class Session(Vault):
    """A :class:`fairvault.Vault` whose spending calls without an idempotency key replay on a
    re-run (see the module's documentation). Made by :meth:`Vault.session`."""

    _warn_charged_again = False

    def __init__(self, vault: Vault, name: str, state_file: Any = "default") -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise errors.InvalidInput(
                f"session name must be 1-48 characters of letters, digits, '.', '_' or '-' "
                f"(got {name!r})", field="name")
        self.__dict__.update(vault.__dict__)  # the same connection and what it learned
        self.session_name = name
        self.state_file = default_state_file(name) if state_file == "default" else state_file
        self._uploads: Dict[str, Dict[str, Any]] = self._load()

    def __repr__(self) -> str:
        return f"Session({self.session_name!r}, {self.server!r})"

    # ----- keys -----------------------------------------------------------------------------

    def _key_for(self, method: str, digest: str) -> str:
        return f"s-{self.session_name}-{digest[:64]}"

    def _spend(self, method: str, request: Any, result: type, idempotency_key: Optional[str],
               preview: bool) -> Any:
        try:
            released = super()._spend(method, request, result, idempotency_key, preview)
        except errors.FailedPrecondition as refusal:
            if idempotency_key is None and "already used with different parameters" in \
                    refusal.message:
                raise errors.FailedPrecondition(
                    refusal.code,
                    f"{refusal.message}. In session '{self.session_name}' this key stands for "
                    "the same request on the same rows, charged earlier on an upload this "
                    "session no longer holds (its handle expired, or the state file was "
                    "removed): the stored release cannot be replayed on a new upload. A new "
                    "session name charges it again", refusal.details) from None
            raise
        if getattr(released, "replayed", False):
            warnings.warn(f"{method}: replayed the stored release of ledger seq "
                          f"{released.replayed_ledger_seq} (session '{self.session_name}'): "
                          "not charged again", Replayed, stacklevel=3)
        return released

    # ----- tables ---------------------------------------------------------------------------

    def _held_upload(self, digest: str, dataset: str) -> Optional[TableHandle]:
        """The same rows uploaded again while the first upload's handle lives: that handle
        (nothing is sent), so that a re-run's requests name the same table and replay."""
        held = self._uploads.get(digest)
        if held is None or held["expires_unix"] <= time.time() + 60:
            return None
        response = pb.UploadTableResponse(table_handle=held["handle"],
                                          row_count=held["row_count"],
                                          rows_in_vault=held["rows_in_vault"],
                                          expires_unix=held["expires_unix"])
        self._table_datasets[held["handle"]] = dataset
        self._table_digests[held["handle"]] = digest
        return TableHandle(response, dataset, digest)

    def _remember_upload(self, handle: TableHandle) -> None:
        self._uploads[handle.content_digest] = {
            "handle": str(handle), "row_count": handle.row_count,
            "rows_in_vault": handle.rows_in_vault, "expires_unix": handle.expires_unix}
        self._save()

    # ----- state ----------------------------------------------------------------------------

    def _account(self) -> str:
        """Which account's handles these are, without the key: a SHA-256 prefix of it (an API
        key is 256 random bits: the prefix reveals nothing usable)."""
        key = self._conn._key
        return hashlib.sha256(key.reveal().encode()).hexdigest()[:16] if key else ""

    def _load(self) -> Dict[str, Dict[str, Any]]:
        if not self.state_file or not os.path.exists(self.state_file):
            return {}
        try:
            with open(self.state_file, encoding="utf-8") as f:
                state = json.load(f)
        except (OSError, ValueError):
            return {}  # unreadable: start afresh (a re-upload; replays may then be refused)
        if state.get("server") != self.server or state.get("account") != self._account():
            return {}  # another vault or another account: its handles are not ours
        now = time.time()
        return {d: u for d, u in state.get("uploads", {}).items() if u["expires_unix"] > now}

    def _save(self) -> None:
        if not self.state_file:
            return
        directory = os.path.dirname(os.path.abspath(self.state_file))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        # Written whole and renamed: a crash leaves the old file or the new one.
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".session-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"server": self.server, "account": self._account(),
                       "uploads": self._uploads}, f)
        os.replace(temporary, self.state_file)
