"""The company's uploads and spending calls of :class:`fairvault.Vault`: tables in, releases
out, each spending call with ``epsilon``, ``idempotency_key`` and ``preview``."""
from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Union

import grpc
import numpy as np
import pandas as pd
from google.protobuf.descriptor import FieldDescriptor

from fairvault import errors
from fairvault._arrays import floats
from fairvault._base import (PathLike, TableHandle, VaultBase, _FAIR_MODEL_ENUMS, _list, _secret,
                             _unmatched, is_number)
from fairvault._proto import enum_value, pb
from fairvault._tables import (DEFAULT_CHUNK_ROWS, subject_keys, table_columns, table_digest,
                              table_stream)
from fairvault.results import (ClassifierAudit, CountsRelease, Decisions, Preview,
                               RegressorAudit, Release)
from fairvault.secret import SecretLike

__all__ = ["ReleaseMethods", "DECIDE_CHUNK_ROWS", "DECIDE_TABLE_CHUNK_ROWS"]

#: Rows per Decide call (the CLI's kDecideChunkRows).
DECIDE_CHUNK_ROWS = 200_000
#: Table rows per Decide call by table handle: the server's limit (kDecideTableChunkRows).
DECIDE_TABLE_CHUNK_ROWS = 4_000_000


_NUMERIC_FIELD_TYPES = frozenset({
    FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_SFIXED64})


def _check_options(message: Any, options: dict) -> None:
    """Request fields passed by name (``**options``), checked as the methods' own numeric
    arguments are: an unknown name, or a bool or a string where a number goes (protobuf would
    send ``True`` as 1), is refused naming the field, before anything is sent."""
    fields = message.DESCRIPTOR.fields_by_name
    for name, value in list(options.items()):
        field = fields.get(name)
        if field is None:
            raise errors.InvalidInput(f"{name}: not a field of {message.DESCRIPTOR.name} "
                                      f"(docs/api.md lists them)", field=name)
        if field.type not in _NUMERIC_FIELD_TYPES or value is None:  # None: unset
            continue
        values = [value]
        if field.label == FieldDescriptor.LABEL_REPEATED and not isinstance(value, (str, bytes)):
            values = options[name] = list(value)  # once: a generator is read here only
        for v in values:
            if not is_number(v):
                raise errors.WrongType(f"{name} must hold numbers (got {v!r}, a "
                                       f"{type(v).__name__})", field=name)


class ReleaseMethods(VaultBase):
    """CompanyService: UploadTable, the spending RPCs, Decide and PreviewRelease."""

    def upload_table(self, df: pd.DataFrame, dataset: str, key_column: Optional[str] = None,
                     numeric: Optional[Sequence[str]] = None,
                     categorical: Optional[Sequence[str]] = None, *,
                     hmac_secret: Optional[SecretLike] = None,
                     hmac_secret_file: Optional[PathLike] = None,
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
            progress: a tqdm bar (default: for 100,000 rows or more, on a terminal or in a
                notebook).

        Every value is checked before anything is sent. Returns a :class:`TableHandle` (a
        ``str``) with ``row_count`` and ``rows_in_vault``; warns
        (:class:`~fairvault.errors.NoSubjectsWarning`) when no row's key is in the vault,
        saying what to check (most often: the keys need the regulator's HMAC secret).
        """
        secret = _secret(hmac_secret, hmac_secret_file)
        keys = subject_keys(df, key_column, secret)
        specs, values = table_columns(df, key_column, numeric, categorical)
        header = pb.TableHeader(dataset=dataset, columns=specs, ttl_seconds=ttl_seconds,
                                label=label)
        digest = table_digest(header, keys, specs, values)
        held = self._held_upload(digest, dataset)
        if held is not None:
            return held
        response, _ = self._conn.stream(
            self._conn.company.UploadTable,
            lambda: table_stream(header, keys, specs, values, chunk_rows, progress),
            header, retry=True)
        if response.row_count != len(keys):
            raise errors.DataLoss(grpc.StatusCode.DATA_LOSS,
                                  f"the server reports {response.row_count} rows stored but the "
                                  f"client sent {len(keys)}; do not use the result, report this")
        self._table_datasets[response.table_handle] = dataset
        self._table_digests[response.table_handle] = digest
        if response.rows_in_vault == 0 and len(keys):
            fix = ("if the regulator imported pseudonyms, pass the same secret as "
                   "hmac_secret_file= (or hmac_secret=)" if secret is None else
                   "check key_column= and that the secret is the regulator's")
            warnings.warn(f"none of the {len(keys)} rows' subject keys is in the vault's dataset "
                          f"'{dataset}', so every release on this table will be refused; {fix}",
                          errors.NoSubjectsWarning, stacklevel=2)
        handle = TableHandle(response, dataset, digest)
        self._remember_upload(handle)
        return handle

    def noisy_counts(self, table: str, epsilon: float, columns: Sequence[str] = (),
                     attributes: Sequence[str] = (), *, noise: Union[str, int] = "laplace",
                     unmatched: Union[str, int] = "reject",
                     idempotency_key: Optional[str] = None,
                     preview: bool = False) -> Union[CountsRelease, Preview]:
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
                           idempotency_key: Optional[str] = None,
                           preview: bool = False) -> Union[Release, Preview]:
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
                               preview: bool = False) -> Union[Release, Preview]:
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
                                  preview: bool = False) -> Union[Release, Preview]:
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
                         idempotency_key: Optional[str] = None,
                         preview: bool = False) -> Union[ClassifierAudit, Preview]:
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
                        idempotency_key: Optional[str] = None,
                        preview: bool = False) -> Union[RegressorAudit, Preview]:
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
                      idempotency_key: Optional[str] = None,
                      preview: bool = False) -> Union[Release, Preview]:
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

    def release_cell_sums(self, table: str, features: Sequence[str], label: str, epsilon: float,
                          attributes: Sequence[str] = (), *, counts_share: float = 0.0,
                          clip_l1: float = 0.0, no_intercept: bool = False,
                          unmatched: Union[str, int] = "reject",
                          idempotency_key: Optional[str] = None,
                          preview: bool = False) -> Union[Release, Preview]:
        """The per-(group, label) noisy counts and feature sums of a least-squares game, one
        charged release (``counts_share`` of ε for the counts, default 0.1). Every
        :meth:`best_response_from_sums` on its ``idempotency_key`` is then free."""
        request = pb.CellSumsRequest(
            table_handle=table, feature_columns=_list(features), label_column=label,
            attributes=_list(attributes), epsilon=epsilon, counts_share=counts_share,
            clip_l1=clip_l1, no_intercept=no_intercept, unmatched=_unmatched(unmatched))
        return self._spend("ReleaseCellSums", request, Release, idempotency_key, preview)

    def best_response_from_sums(self, table: str, features: Sequence[str], label: str,
                                sums_key: str, lambdas: Sequence[float], lambda_bound: float,
                                gamma: float = 0.0, attributes: Sequence[str] = (), *,
                                clip_l1: float = 0.0, no_intercept: bool = False,
                                mass_floor: float = 0.0,
                                unmatched: Union[str, int] = "reject") -> Release:
        """The least-squares best response to λ computed from the cell sums released under
        ``sums_key`` (same table, features, label, attributes and preprocessing): post-processing,
        charged nothing, not stored (keep ``.response.artifact``)."""
        request = pb.BestResponseRequest(
            table_handle=table, feature_columns=_list(features), label_column=label,
            attributes=_list(attributes), sums_key=sums_key,
            **{"lambda": [float(v) for v in lambdas]}, lambda_bound=lambda_bound, gamma=gamma,
            oracle=pb.BEST_RESPONSE_ORACLE_LEAST_SQUARES, clip_l1=clip_l1,
            no_intercept=no_intercept, unmatched=_unmatched(unmatched), mass_floor=mass_floor)
        response, call = self._conn.call(self._conn.company.BestResponse, request, retry=True)
        return Release(response, "", call.trailing_metadata())

    def fit_fair_model(self, table: str, algorithm: Union[str, int], label: str, epsilon: float,
                       features: Sequence[str] = (), attributes: Sequence[str] = (), *,
                       gamma: float = 0.0, unmatched: Union[str, int] = "reject",
                       idempotency_key: Optional[str] = None, preview: bool = False,
                       **options: Any) -> Union[Release, Preview]:
        """Submits a managed fair learner (charged now); ``response.job`` is its training job
        (follow it with :meth:`wait_job`).

        ``algorithm``: ``exponentiated_gradient``, ``dp_oracle_learner``, ``private_fair_nr``,
        ``exponential_mechanism``, ``dp_fermi`` or ``pf_ld``. ``options``: any other FitFairModelRequest field by name
        (``rounds=``, ``hypothesis_columns=``, ``epochs=``, ``model="mlp"``,
        ``fairness="equalized_odds"``, ``hidden_units=[32]``, ...); docs/api.md lists them.
        """
        for name, (enum_type, prefix) in _FAIR_MODEL_ENUMS.items():
            if name in options:
                options[name] = enum_value(enum_type, options[name], prefix)
        _check_options(pb.FitFairModelRequest, options)
        request = pb.FitFairModelRequest(
            table_handle=table,
            algorithm=enum_value(pb.FairModelAlgorithm, algorithm, "FAIR_MODEL_ALGORITHM_"),
            feature_columns=_list(features), label_column=label, attributes=_list(attributes),
            epsilon=epsilon, gamma=gamma, unmatched=_unmatched(unmatched), **options)
        return self._spend("FitFairModel", request, Release, idempotency_key, preview)

    def decide(self, artifact_id: str, keys: Any, values: Any, *,
               hmac_secret: Optional[SecretLike] = None,
               hmac_secret_file: Optional[PathLike] = None, chunk_rows: int = DECIDE_CHUNK_ROWS,
               preview: bool = False) -> Union[Decisions, Preview]:
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
        vals = floats(values, "values")
        if vals.shape != (len(sent),):
            raise errors.InvalidInput(f"send one value per subject key (got {vals.size} values for "
                             f"{len(sent)} keys)")
        if not len(sent):
            raise errors.InvalidInput("decide needs at least one row")
        if chunk_rows <= 0:
            raise errors.InvalidInput("chunk_rows must be > 0")
        # Every value is checked before the first call, which may charge the licence: a bad
        # value in a later chunk would otherwise be refused after it (rows counted from 1).
        artifact = self._read(self._conn.company, "GetArtifact",
                              pb.GetArtifactRequest(artifact_id=artifact_id)).artifact
        binary = artifact.HasField("equalized_odds")
        bad = np.flatnonzero(~np.isfinite(vals) | (((vals != 0) & (vals != 1)) if binary else False))
        if bad.size:
            raise errors.InvalidInput(
                f"values: row {bad[0] + 1} is {vals[bad[0]]}; "
                + ("an equalized-odds artifact decides predictions, 0 or 1" if binary
                   else "scores must be finite numbers") + " (nothing was sent)", field="values")
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

    def decide_table(self, artifact_id: str, table: str, value_column: str, *,
                     chunk_rows: int = DECIDE_TABLE_CHUNK_ROWS,
                     preview: bool = False) -> Union[Decisions, Preview]:
        """The vault's decisions for every row of a table uploaded against the artifact's
        dataset (``table``: its handle), the inputs read from its numeric ``value_column``: no
        key is sent again (the vault joined them at upload), so asking again is fast.
        ``outputs`` is a numpy array in the table's row order; otherwise as :meth:`decide`."""
        if not 0 < chunk_rows <= DECIDE_TABLE_CHUNK_ROWS:
            raise errors.InvalidInput(f"chunk_rows must be in 1..{DECIDE_TABLE_CHUNK_ROWS} "
                                      f"(got {chunk_rows})")

        def request(first: int) -> Any:
            return pb.DecideRequest(artifact_id=artifact_id, table_handle=table,
                                    value_column=value_column, first_row=first,
                                    row_count=chunk_rows)
        if preview:
            return self.preview_release(request(0))
        responses, trailers, first, rows = [], None, 0, None
        while rows is None or first < rows:
            response, call = self._conn.call(self._conn.company.Decide, request(first),
                                             retry=True)
            responses.append(response)
            trailers = trailers or call.trailing_metadata()
            rows = response.table_rows
            first += len(response.outputs)
        outputs = np.concatenate([np.asarray(r.outputs, dtype=np.float64) for r in responses])
        return Decisions(responses, outputs, trailers)

    def preview_release(self, request: Any) -> Preview:
        """Prices a spending request (any of the ten request messages of
        ``PreviewReleaseRequest``, idempotency key included; ``DecideRequest`` has none)
        without running it: no charge, no ledger row."""
        field = next((f.name for f in pb.PreviewReleaseRequest.DESCRIPTOR.fields
                      if f.message_type is request.DESCRIPTOR), None)
        if field is None:
            raise errors.WrongType(f"{type(request).__name__} is not a spending request")
        wrapped = pb.PreviewReleaseRequest(**{field: request})
        return Preview(self._read(self._conn.company, "PreviewRelease", wrapped), request)

