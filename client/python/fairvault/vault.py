"""``fairvault.Vault``: one method per RPC of the vault's three services, pandas in and out.

Spending methods (noisy counts, post-processor fits, audits, best responses, fair-model
jobs) take ``epsilon``, an optional ``idempotency_key`` (random when not given, and kept for
every retry of that call) and ``preview``: with ``preview=True`` the same request is priced by
``PreviewRelease`` instead (nothing is charged) and a :class:`~fairvault.results.Preview` is
returned. Results expose the proto response, its ``charge``, and whether it was a replay.
The methods are spread over three files: the plumbing (``_base.py``), the company's uploads and
releases (``_releases.py``), and here the regulator's, the reads and the auditor's.
"""
from __future__ import annotations

import time
from typing import Any, Mapping, Optional, Sequence, Union

import pandas as pd

from fairvault import errors
from fairvault._progress import bar as progress_bar
from fairvault._base import PathLike, TableHandle, _list, _secret, new_idempotency_key
from fairvault._proto import enum_value, pb
from fairvault._releases import DECIDE_CHUNK_ROWS, ReleaseMethods
from fairvault._tables import (DEFAULT_CHUNK_ROWS, check_categories, default_batch_id,
                               import_stream, subject_keys)
from fairvault.secret import SecretLike

__all__ = ["Vault", "TableHandle", "new_idempotency_key", "DECIDE_CHUNK_ROWS"]


class Vault(ReleaseMethods):
    """A connection to the vault as one account (regulator, company or auditor).

    Args:
        server: ``HOST:PORT``; default ``$FAIRVAULT_SERVER`` or ``127.0.0.1:50051``.
        key: the API key; default from ``key_file``, else ``$FAIRVAULT_API_KEY``.
        key_file: a file whose first line is the API key (better than ``key`` in scripts).
        tls_ca: PEM file of the CA of the server's certificate: TLS when given.
        tls_server_name, deadline, retries, backoff, interceptors, max_message_bytes: see
            :class:`fairvault.connection.Connection`.

    Failures raise :mod:`fairvault.errors` exceptions. UNAVAILABLE and ABORTED are retried
    (``retries`` times, exponential backoff) for reads, spending calls (same idempotency key:
    a replay is charged once), Decide and streams (resent from the start: all or nothing);
    never for calls that would act twice (creating accounts or datasets, grants, caps).
    Thread-safe as gRPC channels are; use one Vault per account.
    """


    # ----- RegulatorService -------------------------------------------------------------

    def create_dataset(self, name: str,
                       attributes: Union[Mapping[str, Sequence[str]], Sequence[Any]]) -> Any:
        """Creates a dataset; ``attributes`` maps each attribute to its category labels
        (``{"sex": ["Female", "Male"]}``), in code order. Returns the ``Dataset``."""
        if isinstance(attributes, Mapping):
            attrs = [pb.Attribute(name=k, categories=list(v)) for k, v in attributes.items()]
        else:
            attrs = list(attributes)
        return self._act(self._conn.regulator, "CreateDataset",
                         pb.CreateDatasetRequest(name=name, attributes=attrs)).dataset

    def list_datasets(self, as_frame: bool = True) -> Any:
        """Every dataset (DataFrame, or ``Dataset`` protos with ``as_frame=False``)."""
        return self._frame(self._read(self._conn.regulator, "ListDatasets",
                                      pb.ListDatasetsRequest()).datasets, as_frame)

    def delete_dataset(self, name: str, confirm: bool = False) -> None:
        """Deletes a dataset with its subjects, tables and artifacts (``confirm=True``)."""
        self._act(self._conn.regulator, "DeleteDataset",
                  pb.DeleteDatasetRequest(name=name, confirm=confirm))

    def import_attributes(self, df: pd.DataFrame, dataset: str,
                          attributes: Union[Sequence[str], Mapping[str, str]],
                          key_column: Optional[str] = None, *,
                          hmac_secret: Optional[SecretLike] = None,
                          hmac_secret_file: Optional[PathLike] = None,
                          batch_id: Optional[str] = None,
                          chunk_rows: int = DEFAULT_CHUNK_ROWS,
                          progress: Optional[bool] = None) -> Any:
        """Streams subjects' protected attributes into a dataset (the CLI's ``import``).

        Args:
            df: one row per subject.
            attributes: the dataset's attributes, each read from the column of that name, or
                a mapping attribute → column (the CLI's ``sex=gender_column``).
            key_column: the column of subject keys, ``"@row"`` or None (the index).
            hmac_secret / hmac_secret_file: pseudonymise keys as the CLI does.
            batch_id: default: a hash of the content, so re-running the same import is a
                no-op (``replayed`` in the response) and an interrupted one completes.
            progress: a tqdm bar (default: on for 100,000 rows or more).

        Returns the ``ImportAttributesResponse``.
        """
        mapping = dict(attributes) if isinstance(attributes, Mapping) else \
            {a: a for a in _list(attributes)}
        if not mapping:
            raise errors.InvalidInput("attributes must name at least one attribute")
        secret = _secret(hmac_secret, hmac_secret_file)
        keys = subject_keys(df, key_column, secret)
        categories = check_categories(df, list(mapping.values()))
        header = pb.ImportHeader(
            dataset=dataset, attributes=list(mapping),
            batch_id=batch_id or default_batch_id(keys, list(mapping), categories, secret))
        method = self._conn.regulator.ImportAttributes
        response, _ = self._conn.stream(
            method, lambda: import_stream(header, keys, categories, chunk_rows, progress),
            header, retry=True)
        return response

    def create_account(self, name: str, role: Union[str, int] = "company") -> Any:
        """Creates an account (``company``, ``auditor`` or ``regulator``); the response's
        ``api_key`` is shown once."""
        return self._act(self._conn.regulator, "CreateAccount", pb.CreateAccountRequest(
            name=name, role=enum_value(pb.Role, role, "ROLE_")))

    def list_accounts(self, as_frame: bool = True) -> Any:
        """Every account (DataFrame, or ``Account`` protos)."""
        return self._frame(self._read(self._conn.regulator, "ListAccounts",
                                      pb.ListAccountsRequest()).accounts, as_frame)

    def grant_budget(self, company: str, dataset: str, epsilon: float,
                     delta: float = 0.0) -> Any:
        """Sets a company's budget on a dataset (replaces any earlier grant); the ``Budget``."""
        return self._act(self._conn.regulator, "GrantBudget", pb.GrantBudgetRequest(
            company=company, dataset=dataset, epsilon=epsilon, delta=delta)).budget

    def set_dataset_cap(self, dataset: str, epsilon: float, delta: float = 0.0) -> Any:
        """Caps the spend of all companies together on a dataset; the cap's ``Budget``."""
        return self._act(self._conn.regulator, "SetDatasetCap", pb.SetDatasetCapRequest(
            dataset=dataset, epsilon=epsilon, delta=delta)).cap

    def verify_ledger(self, auditor: bool = False) -> Any:
        """Verifies the ledger's hash chain and spend totals (``VerifyLedgerResponse``);
        ``auditor=True`` asks the AuditorService (same answer)."""
        stub = self._conn.auditor if auditor else self._conn.regulator
        return self._read(stub, "VerifyLedger", pb.VerifyLedgerRequest())

    # ----- jobs, artifacts, budget, ledger ------------------------------------------------

    def get_job(self, job_id: str, auditor: bool = False) -> Any:
        """A training job (``Job``): state, progress, artifact id or error."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._read(stub, "GetJob", pb.GetJobRequest(job_id=job_id)).job

    def list_jobs(self, dataset: str = "", company: str = "", limit: int = 0,
                  auditor: bool = False, as_frame: bool = True) -> Any:
        """Training jobs, newest first (``company`` and ``auditor=True`` for auditors)."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._frame(self._read(stub, "ListJobs", pb.ListJobsRequest(
            dataset=dataset, company=company, limit=limit)).jobs, as_frame)

    def cancel_job(self, job_id: str) -> Any:
        """Stops a queued or running job (its charge stays); the ``Job``."""
        return self._read(self._conn.company, "CancelJob", pb.CancelJobRequest(job_id=job_id)).job

    def wait_job(self, job_id: str, timeout: Optional[float] = None, poll_seconds: float = 1.0,
                 progress: Optional[bool] = None, auditor: bool = False,
                 raise_on_failure: bool = True) -> Any:
        """Polls a job until it ends; a tqdm bar follows its rounds (``progress``: None shows it
        on a terminal or in a notebook only, True always, False never).

        Returns the final ``Job``. Raises :class:`~fairvault.errors.JobFailed` if it failed or
        was cancelled (unless ``raise_on_failure=False``), :class:`~fairvault.errors.WaitTimeout`
        (a ``TimeoutError``) after ``timeout`` seconds: the job goes on, and waiting again
        picks it up.
        """
        terminal = {pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED}
        start = time.monotonic()
        bar = None
        polls = 0
        try:
            while True:
                job = self.get_job(job_id, auditor=auditor)
                if progress is not False and bar is None and job.total > 0:
                    bar = progress_bar(job.total, f"job {job.id}", "step", progress)
                    progress = progress if bar is not None else False
                if bar is not None:
                    bar.update(max(0, job.done - bar.n))
                if job.state in terminal:
                    break
                if timeout is not None and time.monotonic() - start > timeout:
                    raise errors.WaitTimeout(
                        f"job {job_id} still {pb.JobState.Name(job.state)} after {timeout:g} s "
                        f"({job.done}/{job.total}); it goes on: wait_job('{job_id}') again")
                # Short jobs end in milliseconds: poll at 20 ms, then back off to poll_seconds.
                time.sleep(min(poll_seconds, 0.02 * 2 ** min(polls, 10)))
                polls += 1
        finally:
            if bar is not None:
                bar.close()
        if raise_on_failure and job.state != pb.JOB_STATE_SUCCEEDED:
            raise errors.JobFailed(job)
        return job

    def get_artifact(self, artifact_id: str) -> Any:
        """A stored artifact (``Artifact``: post-processor or fair model)."""
        return self._read(self._conn.company, "GetArtifact",
                          pb.GetArtifactRequest(artifact_id=artifact_id)).artifact

    def get_budget(self, dataset: str = "", as_frame: bool = True) -> Any:
        """The caller's budget on ``dataset`` (one row), or on every dataset: a DataFrame with
        one column per ``Budget`` field (granted, spent, remaining, the composed spend, ...),
        as every ``list_*``; ``as_frame=False``: the ``Budget`` protos."""
        return self._frame(self._read(self._conn.company, "GetBudget",
                                      pb.GetBudgetRequest(dataset=dataset)).budgets, as_frame)

    def list_ledger(self, dataset: str = "", company: str = "", after_seq: int = 0,
                    limit: int = 0, auditor: bool = False, as_frame: bool = True,
                    with_canonical: bool = False) -> Any:
        """Ledger rows, oldest first: the caller's own (company), or all (``auditor=True``);
        ``with_canonical``: each with its canonical encoding, which
        ``fairvault.transparency.verify_ledger_rows`` checks against a signed checkpoint."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._frame(self._read(stub, "ListLedger", pb.ListLedgerRequest(
            dataset=dataset, company=company, after_seq=after_seq, limit=limit,
            with_canonical=with_canonical)).entries, as_frame)

    # ----- the transparency log (docs/operations.md, "The transparency log") ---------------

    def get_checkpoint(self, size: int = 0, auditor: bool = False,
                       witnessed: bool = False) -> Any:
        """A signed checkpoint (``GetCheckpointResponse``: ``checkpoint`` and the vault's
        ``verifier_key``): of the whole ledger (signed now if it grew), the stored one of
        ``size`` rows, or with ``witnessed`` the latest one the vault's quorum of witnesses
        cosigned. Check it with ``fairvault.transparency.open_checkpoint`` and the key the
        operator published, and its cosignatures with ``verify_cosignatures``."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._read(stub, "GetCheckpoint",
                          pb.GetCheckpointRequest(size=size, witnessed=witnessed))

    def get_receipt(self, idempotency_key: str = "", seq: int = 0,
                    auditor: bool = False) -> Any:
        """A ``Receipt`` for one of your releases (by its idempotency key; a replay's is the
        original row's) or, as an auditor, any row by ``seq``. Check it offline with
        ``fairvault.transparency.verify_receipt(receipt, verifier_key)``."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._read(stub, "GetReceipt", pb.GetReceiptRequest(
            seq=seq, idempotency_key=idempotency_key)).receipt

    def get_consistency_proof(self, from_size: int, to_size: int = 0,
                              auditor: bool = True) -> Any:
        """``GetConsistencyProofResponse`` from the checkpoint of ``from_size`` rows to that of
        ``to_size`` (0: the whole ledger). Check ``proof`` against the checkpoints *you* kept
        with ``fairvault.transparency.verify_consistency``."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._read(stub, "GetConsistencyProof", pb.GetConsistencyProofRequest(
            from_size=from_size, to_size=to_size))

    # ----- AuditorService -----------------------------------------------------------------

    def list_budgets(self, dataset: str = "", company: str = "", as_frame: bool = True) -> Any:
        """Every company's grants, then dataset caps (auditor or regulator)."""
        return self._frame(self._read(self._conn.auditor, "ListBudgets", pb.ListBudgetsRequest(
            dataset=dataset, company=company)).budgets, as_frame)

    def list_access_log(self, company: str = "", after_seq: int = 0, limit: int = 0,
                        as_frame: bool = True) -> Any:
        """Every Decide call that returned decisions (auditor or regulator)."""
        return self._frame(self._read(self._conn.auditor, "ListAccessLog",
                                      pb.ListAccessLogRequest(company=company,
                                                              after_seq=after_seq,
                                                              limit=limit)).entries, as_frame)

    # ----- health -------------------------------------------------------------------------

    def session(self, name: str, state_file: Any = "default") -> "Vault":
        """A :class:`fairvault.session.Session` on this connection: spending calls without
        an idempotency key get one derived from the session's ``name`` and the request's
        content, so that re-running a notebook cell replays (charged once) and a changed
        parameter is a new release. ``state_file``: where it keeps its uploads' handles
        (default ``~/.cache/fairvault/sessions/<name>.json``; None: in memory)."""
        from fairvault.session import Session
        return Session(self, name, state_file)

    def health(self, service: str = "", timeout: float = 5.0) -> str:
        """The standard gRPC health check (no API key needed): ``"SERVING"`` or another
        status name; raises on an unknown service (NotFound) or an unreachable server."""
        from fairvault._health.grpc.health.v1 import health_pb2
        method = self._conn.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        request = health_pb2.HealthCheckRequest(service=service)
        response, _ = self._conn.call(method, request, retry=False, timeout=timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

