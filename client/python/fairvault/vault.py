"""``fairvault.Vault``: one method per RPC of the vault's three services, pandas in and out.

Spending methods (noisy counts, post-processor fits, audits, best responses, fair-model
jobs) take ``epsilon``, an optional ``idempotency_key`` (random when not given, and kept for
every retry of that call) and ``preview``: with ``preview=True`` the same request is priced by
``PreviewRelease`` instead (nothing is charged) and a :class:`~fairvault.results.Preview` is
returned. Results expose the proto response, its ``charge``, and whether it was a replay.
"""
from __future__ import annotations

import secrets
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import grpc
import numpy as np
import pandas as pd

from fairvault import errors
from fairvault._proto import enum_value, pb
from fairvault._tables import (DEFAULT_CHUNK_ROWS, check_categories, default_batch_id,
                               import_stream, subject_keys, table_columns, table_stream)
from fairvault.connection import Connection
from fairvault.pseudonymise import read_secret_file, secret_bytes
from fairvault.results import (ClassifierAudit, CountsRelease, Decisions, Preview,
                               RegressorAudit, Release, messages_frame)

__all__ = ["Vault", "TableHandle", "new_idempotency_key"]

#: Rows per Decide call (the CLI's kDecideChunkRows).
DECIDE_CHUNK_ROWS = 200_000

Secret = Union[bytes, str, None]


def new_idempotency_key() -> str:
    """A fresh random idempotency key: ``py-`` and 32 hex characters (128 bits)."""
    return "py-" + secrets.token_hex(16)


class TableHandle(str):
    """A table handle (``tbl_...``) that also carries its upload's response.

    It is a ``str``, so it can be passed wherever a handle is expected.
    """

    response: Any
    dataset: str

    def __new__(cls, response: Any, dataset: str) -> "TableHandle":
        handle = super().__new__(cls, response.table_handle)
        handle.response = response
        handle.dataset = dataset
        return handle

    @property
    def row_count(self) -> int:
        return self.response.row_count

    @property
    def rows_in_vault(self) -> int:
        return self.response.rows_in_vault

    @property
    def expires_unix(self) -> int:
        return self.response.expires_unix


def _secret(hmac_secret: Secret, hmac_secret_file: Optional[str]) -> Optional[bytes]:
    if hmac_secret is not None and hmac_secret_file is not None:
        raise ValueError("give hmac_secret or hmac_secret_file, not both")
    if hmac_secret_file is not None:
        return read_secret_file(hmac_secret_file)
    return secret_bytes(hmac_secret) if hmac_secret is not None else None


def _unmatched(value: Union[str, int]) -> int:
    return enum_value(pb.UnmatchedKeys, value, "UNMATCHED_KEYS_")


def _list(values: Union[None, str, Sequence[str]]) -> List[str]:
    if values is None:
        return []
    return [values] if isinstance(values, str) else [str(v) for v in values]


# Fields of FitFairModelRequest given by name to fit_fair_model(**options) that are enums.
_FAIR_MODEL_ENUMS = {"model": (pb.ModelFamily, "MODEL_FAMILY_"),
                     "fairness": (pb.FairnessNotion, "FAIRNESS_NOTION_")}


class Vault:
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

    def __init__(self, server: Optional[str] = None, key: Optional[str] = None,
                 key_file: Optional[str] = None, tls_ca: Optional[str] = None,
                 **options: Any) -> None:
        self._conn = Connection(server, key=key, key_file=key_file, tls_ca=tls_ca, **options)
        self._table_datasets: Dict[str, str] = {}

    @property
    def server(self) -> str:
        return self._conn.server

    def close(self) -> None:
        """Closes the channel."""
        self._conn.close()

    def __enter__(self) -> "Vault":
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

    def _spend(self, method: str, request: Any, result: type, idempotency_key: Optional[str],
               preview: bool) -> Any:
        request.idempotency_key = idempotency_key or new_idempotency_key()
        if preview:
            return self.preview_release(request)
        try:
            response, call = self._conn.call(getattr(self._conn.company, method), request,
                                             retry=True)
        except errors.BudgetExhausted as refusal:
            self._explain_budget(refusal, getattr(request, "table_handle", ""))
            raise
        return result(response, request.idempotency_key, call.trailing_metadata())

    def _explain_budget(self, refusal: errors.BudgetExhausted, table: str) -> None:
        """Fills in what is left when the refusal's message did not say, from GetBudget."""
        dataset = refusal.dataset or self._table_datasets.get(table)
        if not dataset or refusal.scope == "cap":
            return
        try:
            budgets = self.get_budget(dataset)
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
                          key_column: Optional[str] = None, *, hmac_secret: Secret = None,
                          hmac_secret_file: Optional[str] = None,
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
            raise ValueError("attributes must name at least one attribute")
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

    # ----- CompanyService: tables and releases ------------------------------------------

    def upload_table(self, df: pd.DataFrame, dataset: str, key_column: Optional[str] = None,
                     numeric: Optional[Sequence[str]] = None,
                     categorical: Optional[Sequence[str]] = None, *,
                     hmac_secret: Secret = None, hmac_secret_file: Optional[str] = None,
                     ttl_seconds: int = 0, label: str = "",
                     chunk_rows: int = DEFAULT_CHUNK_ROWS,
                     progress: Optional[bool] = None) -> TableHandle:
        """Uploads the company's own columns, keyed by subject key (the CLI's ``table upload``).

        Args:
            key_column: the column of subject keys, ``"@row"`` or None (the index).
            numeric / categorical: the columns to send; with neither, every other column
                (numeric dtypes as numeric, the rest categorical).
            hmac_secret / hmac_secret_file: pseudonymise keys as the CLI does (the same
                secret as the regulator's import).
            ttl_seconds: lifetime of the handle (0: 24 h; at most 7 days).
            progress: a tqdm bar (default: on for 100,000 rows or more).

        Every value is checked before anything is sent. Returns a :class:`TableHandle` (a
        ``str``) with ``row_count`` and ``rows_in_vault``.
        """
        secret = _secret(hmac_secret, hmac_secret_file)
        keys = subject_keys(df, key_column, secret)
        specs, values = table_columns(df, key_column, numeric, categorical)
        header = pb.TableHeader(dataset=dataset, columns=specs, ttl_seconds=ttl_seconds,
                                label=label)
        response, _ = self._conn.stream(
            self._conn.company.UploadTable,
            lambda: table_stream(header, keys, specs, values, chunk_rows, progress),
            header, retry=True)
        if response.row_count != len(keys):
            raise errors.DataLoss(grpc.StatusCode.DATA_LOSS,
                                  f"the server reports {response.row_count} rows stored but the "
                                  f"client sent {len(keys)}; do not use the result, report this")
        self._table_datasets[response.table_handle] = dataset
        return TableHandle(response, dataset)

    def noisy_counts(self, table: str, epsilon: float, columns: Sequence[str] = (),
                     attributes: Sequence[str] = (), *, noise: Union[str, int] = "laplace",
                     unmatched: Union[str, int] = "reject",
                     idempotency_key: Optional[str] = None, preview: bool = False) -> Any:
        """A noisy contingency table: protected groups × up to four of the table's columns.

        ``noise``: ``"laplace"`` (pure ε) or ``"gaussian"`` (a grant with δ > 0);
        ``unmatched``: ``"reject"`` or ``"drop"`` rows whose key is not in the vault.
        Returns a :class:`~fairvault.results.CountsRelease` (``.cells`` is a DataFrame with
        ``ci_low``/``ci_high``).
        """
        request = pb.NoisyCountsRequest(
            table_handle=table, columns=_list(columns), attributes=_list(attributes),
            noise=enum_value(pb.NoiseKind, noise, "NOISE_KIND_DISCRETE_"), epsilon=epsilon,
            unmatched=_unmatched(unmatched))
        return self._spend("NoisyCounts", request, CountsRelease, idempotency_key, preview)

    def fit_equalized_odds(self, table: str, prediction_column: str, label_column: str,
                           epsilon: float, gamma: float, attributes: Sequence[str] = (), *,
                           beta: float = 0.0, decision_floor: float = 0.0,
                           min_group_count: Optional[float] = None, all_pairs: bool = False,
                           unmatched: Union[str, int] = "reject",
                           idempotency_key: Optional[str] = None, preview: bool = False) -> Any:
        """DP equalized-odds post-processor for binary predictions (``response.artifact``);
        ``decision_floor > 0`` makes it usable with :meth:`decide`."""
        request = pb.FitEqualizedOddsRequest(
            table_handle=table, prediction_column=prediction_column, label_column=label_column,
            attributes=_list(attributes), epsilon=epsilon, gamma=gamma, beta=beta,
            unmatched=_unmatched(unmatched), all_pairs=all_pairs, decision_floor=decision_floor)
        if min_group_count is not None:
            request.min_group_count = min_group_count
        return self._spend("FitEqualizedOddsPostProcessor", request, Release, idempotency_key,
                           preview)

    def fit_statistical_parity(self, table: str, score_column: str, lo: float, hi: float,
                               bins: int, epsilon: float, attributes: Sequence[str] = (), *,
                               alpha: float = 0.0, solver: Union[str, int] = "auto",
                               decision_floor: float = 0.0,
                               unmatched: Union[str, int] = "reject",
                               idempotency_key: Optional[str] = None,
                               preview: bool = False) -> Any:
        """DP statistical-parity post-processor for a regressor's scores on [lo, hi] in
        ``bins`` bins; ``solver``: ``auto``, ``linear_program`` or ``quantile``."""
        request = pb.FitStatisticalParityRequest(
            table_handle=table, score_column=score_column, attributes=_list(attributes),
            lo=lo, hi=hi, bins=bins, alpha=alpha, epsilon=epsilon,
            solver=enum_value(pb.SpSolverKind, solver, "SP_SOLVER_"),
            unmatched=_unmatched(unmatched), decision_floor=decision_floor)
        return self._spend("FitStatisticalParityPostProcessor", request, Release,
                           idempotency_key, preview)

    def fit_equalized_odds_scores(self, table: str, score_column: str, label_column: str,
                                  lo: float, hi: float, bins: int, epsilon: float, gamma: float,
                                  attributes: Sequence[str] = (), *, all_pairs: bool = False,
                                  non_monotone: bool = False, decision_floor: float = 0.0,
                                  unmatched: Union[str, int] = "reject",
                                  idempotency_key: Optional[str] = None,
                                  preview: bool = False) -> Any:
        """DP equalized odds from a classifier's scores (noisy ROC curves, group thresholds)."""
        request = pb.FitEqualizedOddsScoresRequest(
            table_handle=table, score_column=score_column, label_column=label_column,
            attributes=_list(attributes), lo=lo, hi=hi, bins=bins, epsilon=epsilon, gamma=gamma,
            all_pairs=all_pairs, non_monotone=non_monotone, decision_floor=decision_floor,
            unmatched=_unmatched(unmatched))
        return self._spend("FitEqualizedOddsScoresPostProcessor", request, Release,
                           idempotency_key, preview)

    def audit_classifier(self, table: str, prediction_column: str, label_column: str,
                         epsilon: float, attributes: Sequence[str] = (), *,
                         confidence: float = 0.0, unmatched: Union[str, int] = "reject",
                         idempotency_key: Optional[str] = None, preview: bool = False) -> Any:
        """Private per-group rates and DP/EO violations with intervals: a
        :class:`~fairvault.results.ClassifierAudit` (``.groups``, ``.violations``)."""
        request = pb.AuditClassifierRequest(
            table_handle=table, prediction_column=prediction_column, label_column=label_column,
            attributes=_list(attributes), epsilon=epsilon, confidence=confidence,
            unmatched=_unmatched(unmatched))
        return self._spend("AuditClassifier", request, ClassifierAudit, idempotency_key,
                           preview)

    def audit_regressor(self, table: str, score_column: str, lo: float, hi: float, bins: int,
                        epsilon: float, attributes: Sequence[str] = (), *,
                        confidence: float = 0.0, unmatched: Union[str, int] = "reject",
                        idempotency_key: Optional[str] = None, preview: bool = False) -> Any:
        """Private per-group means, histograms and max KS: a
        :class:`~fairvault.results.RegressorAudit` (``.groups``, ``.max_ks``)."""
        request = pb.AuditRegressorRequest(
            table_handle=table, score_column=score_column, attributes=_list(attributes),
            lo=lo, hi=hi, bins=bins, epsilon=epsilon, confidence=confidence,
            unmatched=_unmatched(unmatched))
        return self._spend("AuditRegressor", request, RegressorAudit, idempotency_key, preview)

    def best_response(self, table: str, features: Sequence[str], label: str, masses_key: str,
                      lambdas: Sequence[float], lambda_bound: float, gamma: float,
                      epsilon: float, attributes: Sequence[str] = (), *,
                      oracle: Union[str, int] = "least_squares", clip_l1: float = 0.0,
                      no_intercept: bool = False, mass_floor: float = 0.0,
                      unmatched: Union[str, int] = "reject",
                      idempotency_key: Optional[str] = None, preview: bool = False) -> Any:
        """One private best response to the auditor's λ (a linear-classifier artifact);
        ``masses_key`` is the idempotency key of an earlier ``noisy_counts(columns=[label])``."""
        request = pb.BestResponseRequest(
            table_handle=table, feature_columns=_list(features), label_column=label,
            attributes=_list(attributes), masses_key=masses_key,
            **{"lambda": [float(v) for v in lambdas]}, lambda_bound=lambda_bound, gamma=gamma,
            oracle=enum_value(pb.BestResponseOracle, oracle, "BEST_RESPONSE_ORACLE_"),
            epsilon=epsilon, clip_l1=clip_l1, no_intercept=no_intercept,
            unmatched=_unmatched(unmatched), mass_floor=mass_floor)
        return self._spend("BestResponse", request, Release, idempotency_key, preview)

    def fit_fair_model(self, table: str, algorithm: Union[str, int], label: str, epsilon: float,
                       features: Sequence[str] = (), attributes: Sequence[str] = (), *,
                       gamma: float = 0.0, unmatched: Union[str, int] = "reject",
                       idempotency_key: Optional[str] = None, preview: bool = False,
                       **options: Any) -> Any:
        """Submits a managed fair learner (charged now); ``response.job`` is its training job
        (follow it with :meth:`wait_job`).

        ``algorithm``: ``dp_oracle_learner``, ``private_fair_nr``, ``exponential_mechanism``,
        ``dp_fermi`` or ``pf_ld``. ``options``: any other FitFairModelRequest field by name
        (``rounds=``, ``hypothesis_columns=``, ``epochs=``, ``model="mlp"``,
        ``fairness="equalized_odds"``, ``hidden_units=[32]``, ...); docs/api.md lists them.
        """
        for name, (enum_type, prefix) in _FAIR_MODEL_ENUMS.items():
            if name in options:
                options[name] = enum_value(enum_type, options[name], prefix)
        request = pb.FitFairModelRequest(
            table_handle=table,
            algorithm=enum_value(pb.FairModelAlgorithm, algorithm, "FAIR_MODEL_ALGORITHM_"),
            feature_columns=_list(features), label_column=label, attributes=_list(attributes),
            epsilon=epsilon, gamma=gamma, unmatched=_unmatched(unmatched), **options)
        return self._spend("FitFairModel", request, Release, idempotency_key, preview)

    def decide(self, artifact_id: str, keys: Any, values: Any, *, hmac_secret: Secret = None,
               hmac_secret_file: Optional[str] = None, chunk_rows: int = DECIDE_CHUNK_ROWS,
               preview: bool = False) -> Any:
        """The vault's post-processed decisions for subjects in the vault.

        ``keys``: raw subject ids (pseudonymised with the secret, if given), as a sequence or
        a Series; ``values``: one prediction (0/1) or score per key. The artifact's first
        Decide charges its decision licence ε = L once. Returns
        :class:`~fairvault.results.Decisions`: ``outputs`` is a numpy array, or a Series on
        ``keys``' index when ``keys`` is a Series. With ``preview=True``, prices the first
        chunk instead.
        """
        secret = _secret(hmac_secret, hmac_secret_file)
        key_frame = pd.DataFrame({"key": list(keys)})
        sent = subject_keys(key_frame, "key", secret, allow_repeats=True)
        vals = np.asarray(values, dtype=np.float64)
        if vals.shape != (len(sent),):
            raise ValueError(f"send one value per subject key (got {vals.size} values for "
                             f"{len(sent)} keys)")
        if not len(sent):
            raise ValueError("decide needs at least one row")
        if chunk_rows <= 0:
            raise ValueError("chunk_rows must be > 0")
        requests = [pb.DecideRequest(artifact_id=artifact_id, subject_keys=sent[b:b + chunk_rows],
                                     values=vals[b:b + chunk_rows].tolist())
                    for b in range(0, len(sent), chunk_rows)]
        if preview:
            return self.preview_release(requests[0])
        responses, trailers = [], None
        for request in requests:
            response, call = self._conn.call(self._conn.company.Decide, request, retry=True)
            responses.append(response)
            trailers = trailers or call.trailing_metadata()
        outputs = np.concatenate([np.asarray(r.outputs, dtype=np.float64) for r in responses])
        if isinstance(keys, pd.Series):
            outputs = pd.Series(outputs, index=keys.index, name="decision")
        return Decisions(responses, outputs, trailers)

    def preview_release(self, request: Any) -> Preview:
        """Prices a spending request (any of the nine request messages, idempotency key
        included) without running it: no charge, no ledger row."""
        field = next((f.name for f in pb.PreviewReleaseRequest.DESCRIPTOR.fields
                      if f.message_type is request.DESCRIPTOR), None)
        if field is None:
            raise TypeError(f"{type(request).__name__} is not a spending request")
        wrapped = pb.PreviewReleaseRequest(**{field: request})
        return Preview(self._read(self._conn.company, "PreviewRelease", wrapped), request)

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
                 progress: bool = True, auditor: bool = False,
                 raise_on_failure: bool = True) -> Any:
        """Polls a job until it ends; a tqdm bar follows its rounds when ``progress``.

        Returns the final ``Job``. Raises :class:`~fairvault.errors.JobFailed` if it failed or
        was cancelled (unless ``raise_on_failure=False``), ``TimeoutError`` after ``timeout``
        seconds.
        """
        terminal = {pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED}
        start = time.monotonic()
        bar = None
        try:
            while True:
                job = self.get_job(job_id, auditor=auditor)
                if progress and bar is None and job.total > 0:
                    from tqdm.auto import tqdm
                    bar = tqdm(total=job.total, desc=f"job {job.id}", unit="step")
                if bar is not None:
                    bar.update(max(0, job.done - bar.n))
                if job.state in terminal:
                    break
                if timeout is not None and time.monotonic() - start > timeout:
                    raise TimeoutError(f"job {job_id} still {pb.JobState.Name(job.state)} "
                                       f"after {timeout:g} s ({job.done}/{job.total})")
                time.sleep(poll_seconds)
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

    def get_budget(self, dataset: str = "") -> List[Any]:
        """The caller's ``Budget`` on ``dataset`` (a one-element list), or on every dataset."""
        return list(self._read(self._conn.company, "GetBudget",
                               pb.GetBudgetRequest(dataset=dataset)).budgets)

    def list_ledger(self, dataset: str = "", company: str = "", after_seq: int = 0,
                    limit: int = 0, auditor: bool = False, as_frame: bool = True) -> Any:
        """Ledger rows, oldest first: the caller's own (company), or all (``auditor=True``)."""
        stub = self._conn.auditor if auditor else self._conn.company
        return self._frame(self._read(stub, "ListLedger", pb.ListLedgerRequest(
            dataset=dataset, company=company, after_seq=after_seq, limit=limit)).entries,
            as_frame)

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
