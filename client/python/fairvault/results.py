"""What spending calls return: the proto response with its charge, whether it was a replay,
and pandas views of its tables.

Attribute access falls through to the response (``result.rows_used``), so a result reads like
the proto it wraps; ``result.response`` is the proto itself.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd
from google.protobuf import json_format

from fairvault._proto import pb

__all__ = ["Release", "CountsRelease", "ClassifierAudit", "RegressorAudit", "Decisions",
           "Preview", "messages_frame", "REPLAY_METADATA_KEY"]

#: Trailing metadata entry the server sets on a replayed release: the original ledger seq.
REPLAY_METADATA_KEY = "fairvault-replayed-ledger-seq"


def replayed_seq(trailing_metadata: Optional[Sequence]) -> Optional[int]:
    """The original ledger seq from the replay trailer, or None for a fresh release."""
    for key, value in trailing_metadata or ():
        if key == REPLAY_METADATA_KEY:
            try:
                return int(value.decode() if isinstance(value, bytes) else value)
            except ValueError:
                return None
    return None


def messages_frame(messages: Sequence[Any], columns: Optional[List[str]] = None) -> pd.DataFrame:
    """One row per proto message, one column per field in field order (enums by name,
    defaults included, 64-bit integers as int64); ``columns`` names them when empty."""
    if not messages:
        return pd.DataFrame(columns=columns)
    rows = [json_format.MessageToDict(m, preserving_proto_field_name=True,
                                      including_default_value_fields=True) for m in messages]
    fields = messages[0].DESCRIPTOR.fields
    frame = pd.DataFrame(rows, columns=[f.name for f in fields])
    for f in fields:
        # MessageToDict writes 64-bit integers as strings (JSON); read them back as integers.
        # An optional field unset on some rows (LedgerEntry.pure_epsilon_micro of a grant)
        # is missing there: pandas' nullable Int64 keeps those rows <NA>.
        if f.label != f.LABEL_REPEATED and f.cpp_type in (f.CPPTYPE_INT64, f.CPPTYPE_UINT64):
            column = pd.to_numeric(frame[f.name])
            frame[f.name] = column.astype("Int64" if column.isna().any() else "int64")
    return frame


class Release:
    """A spending call's result.

    Attributes:
        response: the proto response (byte-identical to the stored release on a replay).
        charge: ``response.charge`` — cost, budget after (as of the original call on a replay)
            and ledger seq.
        idempotency_key: the key the request was sent with (kept across retries).
        replayed: True when the vault returned a stored release and charged nothing now.
        replayed_ledger_seq: the ledger seq of the original release (None unless replayed).
    """

    def __init__(self, response: Any, idempotency_key: str = "",
                 trailing_metadata: Optional[Sequence] = None) -> None:
        self.response = response
        self.idempotency_key = idempotency_key
        self.replayed_ledger_seq = replayed_seq(trailing_metadata)

    @property
    def replayed(self) -> bool:
        return self.replayed_ledger_seq is not None

    @property
    def charge(self) -> Any:
        return self.response.charge

    @property
    def epsilon_remaining(self) -> float:
        """Epsilon left on the grant after the charge (as of the original call on a replay)."""
        return self.response.charge.budget_after.epsilon_remaining

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "response":
            raise AttributeError(name)
        return getattr(self.response, name)

    def __repr__(self) -> str:
        cost = self.charge.cost
        text = (f"<{type(self).__name__} epsilon={cost.epsilon:g} delta={cost.delta:g} "
                f"ledger_seq={self.charge.ledger_seq} "
                f"remaining={self.charge.budget_after.epsilon_remaining:g}")
        if self.replayed:
            text += f" replayed (stored release from ledger seq {self.replayed_ledger_seq}, " \
                    "not charged again; budget shown is as of then)"
        return text + ">"


class CountsRelease(Release):
    """A NoisyCounts release; ``cells`` is its table as a DataFrame.

    ``cells`` has one column per requested table column (named after it, values as the server
    wrote them: strings), then ``group``, ``noisy_count``, ``ci_low`` and ``ci_high`` (the
    ``confidence`` interval for the true count from the noise alone), in the server's order.
    """

    @property
    def cells(self) -> pd.DataFrame:
        r = self.response
        data: Dict[str, list] = {c: [cell.values[i] for cell in r.cells]
                                 for i, c in enumerate(r.columns)}
        data["group"] = [cell.group for cell in r.cells]
        data["noisy_count"] = np.array([cell.noisy_count for cell in r.cells], dtype=np.int64)
        data["ci_low"] = np.array([cell.ci_low for cell in r.cells], dtype=np.int64)
        data["ci_high"] = np.array([cell.ci_high for cell in r.cells], dtype=np.int64)
        return pd.DataFrame(data)


def _interval(prefix: str, interval: Any) -> Dict[str, float]:
    return {prefix: interval.estimate, f"{prefix}_lo": interval.lo, f"{prefix}_hi": interval.hi}


class ClassifierAudit(Release):
    """An AuditClassifier release.

    ``groups``: one row per group with ``selection_rate``, ``tpr``, ``fpr``, ``error`` (each
    with ``_lo``/``_hi`` interval ends), the noisy counts ``n_pred{0,1}_label{0,1}``,
    ``noisy_rows`` and ``small_group``; ``violations``: demographic parity and equalized odds
    with their intervals (index ``demographic_parity``, ``equalized_odds``).
    """

    @property
    def groups(self) -> pd.DataFrame:
        rows = []
        for g in self.response.report.groups:
            row: Dict[str, Any] = {"group": g.group}
            for name in ("selection_rate", "tpr", "fpr", "error"):
                row.update(_interval(name, getattr(g, name)))
            row.update({"n_pred0_label0": g.noisy_pred0_label0,
                        "n_pred0_label1": g.noisy_pred0_label1,
                        "n_pred1_label0": g.noisy_pred1_label0,
                        "n_pred1_label1": g.noisy_pred1_label1,
                        "noisy_rows": g.noisy_rows, "small_group": g.small_group})
            rows.append(row)
        return pd.DataFrame(rows).set_index("group") if rows else pd.DataFrame()

    @property
    def violations(self) -> pd.DataFrame:
        r = self.response.report
        return pd.DataFrame(
            [{"estimate": i.estimate, "lo": i.lo, "hi": i.hi}
             for i in (r.demographic_parity_violation, r.equalized_odds_violation)],
            index=["demographic_parity", "equalized_odds"])


class RegressorAudit(Release):
    """An AuditRegressor release.

    ``groups``: one row per group with ``mean``, ``mean_lo``, ``mean_hi``, ``noisy_rows``,
    ``small_group``, ``histogram`` (the repaired pmf, a list), ``noisy_counts`` (the released
    counts per bin) and ``noisy_sum`` (the released sum of ``score - lo`` over the group, whose
    quotient by ``noisy_rows`` is the mean's estimate); ``max_ks``: the interval of the largest
    KS distance between groups.
    """

    @property
    def groups(self) -> pd.DataFrame:
        rows = []
        step = self.response.report.score_sum_granularity
        for g in self.response.report.groups:
            row: Dict[str, Any] = {"group": g.group}
            row.update(_interval("mean", g.mean))
            row.update({"noisy_rows": g.noisy_rows, "small_group": g.small_group,
                        "histogram": list(g.histogram), "noisy_counts": list(g.noisy_counts),
                        "noisy_sum": g.noisy_score_sum * step})
            rows.append(row)
        return pd.DataFrame(rows).set_index("group") if rows else pd.DataFrame()

    @property
    def max_ks(self) -> Dict[str, float]:
        i = self.response.report.max_ks
        return {"estimate": i.estimate, "lo": i.lo, "hi": i.hi}


class Decisions(Release):
    """Decide's outputs over all chunks: ``outputs`` (numpy, one per input row, or a Series on
    the caller's index when the keys came as a Series), ``responses`` (one per call)."""

    def __init__(self, responses: List[Any], outputs: Any,
                 trailing_metadata: Optional[Sequence] = None) -> None:
        super().__init__(responses[0], "", trailing_metadata)
        self.responses = responses
        self.outputs = outputs

    @property
    def licence_charged(self) -> bool:
        """True when one of these calls charged the artifact's decision licence."""
        return any(r.licence_charged for r in self.responses)

    @property
    def rows_already_decided(self) -> int:
        return sum(r.rows_already_decided for r in self.responses)


class Preview:
    """What a spending request would cost (PreviewRelease); charges nothing.

    Attribute access falls through to the ``PreviewReleaseResponse``; ``accuracy`` is its
    per-part noise table as a DataFrame.
    """

    def __init__(self, response: Any, request: Any) -> None:
        self.response = response
        self.request = request

    @property
    def accuracy(self) -> pd.DataFrame:
        return messages_frame(list(self.response.accuracy),
                              [f.name for f in pb.NoiseAccuracy.DESCRIPTOR.fields])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "response":
            raise AttributeError(name)
        return getattr(self.response, name)

    def __repr__(self) -> str:
        r = self.response
        text = (f"<Preview epsilon={r.cost.epsilon:g} delta={r.cost.delta:g} "
                f"mechanism={r.cost.mechanism} admitted={r.admitted} "
                f"remaining_after={r.budget_after.epsilon_remaining:g}")
        if not r.admitted:
            text += f" refusal={r.refusal_code}: {r.refusal}"
        if r.replay_of_ledger_seq:
            text += f" replay_of_ledger_seq={r.replay_of_ledger_seq}"
        return text + ">"
