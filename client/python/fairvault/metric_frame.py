"""A private fairness audit in the shape of Fairlearn's ``MetricFrame``.

``private_metric_frame`` makes one charged ``AuditClassifier`` release and wraps its response in
a ``PrivateMetricFrame``. Every number it shows comes from that release or from arithmetic on
it (post-processing, free of privacy cost): nothing is computed from the protected attribute,
which the caller never sees.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from fairvault.results import Preview
from fairvault.errors import InvalidInput

__all__ = ["private_metric_frame", "PrivateMetricFrame", "METRICS"]

# Metric name → the ClassifierGroupReport field it comes from; accuracy is 1 − error.
METRICS = ("selection_rate", "true_positive_rate", "false_positive_rate", "accuracy", "error_rate")
_FIELDS = {"selection_rate": "selection_rate", "true_positive_rate": "tpr",
           "false_positive_rate": "fpr", "error_rate": "error"}


def private_metric_frame(vault: Any, table_or_df: Any, y_true: Any, y_pred: Any, epsilon: float,
                         dataset: Optional[str] = None, key_column: Optional[str] = None,
                         confidence: float = 0.95, attributes: Sequence[str] = (), *,
                         hmac_secret: Any = None, hmac_secret_file: Any = None,
                         unmatched: str = "reject",
                         idempotency_key: Optional[str] = None, preview: bool = False):
    """One private classifier audit (``AuditClassifier``, charged ``epsilon``) as a
    :class:`PrivateMetricFrame`.

    Args:
        vault: a company's :class:`fairvault.Vault`.
        table_or_df: a table handle already uploaded (then ``y_true`` and ``y_pred`` name its
            0/1 label and prediction columns), or a DataFrame of subjects (then ``y_true`` and
            ``y_pred`` are its column names or arrays of 0/1 values, one per row; the keys
            come from ``key_column`` — a column, ``"@row"`` or None for the index — and the
            table is uploaded to ``dataset`` first, which is free).
        epsilon: the cost of the whole report.
        confidence: the level of every interval (default 0.95).
        attributes: the protected attributes forming the groups (default: all).
        hmac_secret / hmac_secret_file: pseudonymise the keys as the regulator's import did,
            with this secret or the secret in this file (not both).
        preview: return the audit's ``Preview`` (its price and expected noise) instead.
    """
    if isinstance(table_or_df, str):
        table, label, prediction = table_or_df, str(y_true), str(y_pred)
    else:
        from fairvault.estimators import _upload
        if dataset is None:
            raise InvalidInput("private_metric_frame on a DataFrame needs dataset= (the vault "
                             "dataset its subjects belong to)")
        df = table_or_df

        def values(v: Any) -> Any:
            return df[v] if isinstance(v, str) else v

        table, _ = _upload(vault, dataset, df, key_column,
                           {"label": values(y_true), "prediction": values(y_pred)}, hmac_secret,
                           hmac_secret_file)
        label, prediction = "label", "prediction"
    result = vault.audit_classifier(table, prediction, label, epsilon, attributes,
                                    confidence=confidence, unmatched=unmatched,
                                    idempotency_key=idempotency_key, preview=preview)
    if isinstance(result, Preview):
        return result
    frame = PrivateMetricFrame(result)
    frame.table_ = table
    return frame


class PrivateMetricFrame:
    """Per-group classifier metrics from one private audit release (``AuditClassifierResponse``).

    ``by_group``: one row per protected group (named as the vault names it, "Female" or
    "Female|White"), with ``selection_rate``, ``true_positive_rate``, ``false_positive_rate``,
    ``accuracy`` and ``error_rate``, each with ``<metric>_lo`` / ``<metric>_hi``: the vault's
    confidence interval at level ``confidence`` for that group's rate. It accounts for both the
    DP noise and sampling error — the union of Clopper–Pearson intervals over every true count
    pair consistent with the released counts at the public noise scale — and covers the group's
    rate on the audited rows, and its population rate, each with at least the nominal
    probability (one interval at a time: the per-group intervals are not simultaneous). Also
    the group's released noisy counts (``n_pred0_label0`` …), its noisy size and the vault's
    ``small_group`` flag. Point estimates use the released counts clamped at 0 with every
    denominator floored at 1.

    ``overall``: the same rates over all rows, from the sums of the groups' clamped noisy counts
    (post-processing of the release; no interval is released for them, so none is shown).

    ``difference()``: max − min over groups per metric; with ``intervals=True`` also the vault's
    simultaneous (bootstrap max-t band) intervals for the two violations it releases:
    demographic parity (the selection-rate difference) and equalized odds (the larger of the
    TPR and FPR differences), conservative and always containing the estimate. ``ratio()``:
    min/max over groups per metric (no interval is released for ratios).
    """

    def __init__(self, release: Any):
        # A ClassifierAudit result (Vault.audit_classifier) or the AuditClassifierResponse.
        self.release = release
        response = getattr(release, "response", release)
        self.response = response
        report = response.report
        self.attributes = list(report.attributes)
        self.confidence = float(report.confidence)
        self.rows = int(report.m)
        self.epsilon = float(report.epsilon)
        self.small_group_threshold = float(report.small_group_threshold)
        self.charge = response.charge if response.HasField("charge") else None
        self.rows_dropped = int(response.rows_dropped)
        index = pd.Index([g.group for g in report.groups],
                         name="|".join(self.attributes) or "group")
        data: dict = {}
        for metric in METRICS:
            if metric == "accuracy":
                e = [g.error for g in report.groups]
                data["accuracy"] = [1 - i.estimate for i in e]
                data["accuracy_lo"] = [1 - i.hi for i in e]
                data["accuracy_hi"] = [1 - i.lo for i in e]
                continue
            intervals = [getattr(g, _FIELDS[metric]) for g in report.groups]
            data[metric] = [i.estimate for i in intervals]
            data[metric + "_lo"] = [i.lo for i in intervals]
            data[metric + "_hi"] = [i.hi for i in intervals]
        for p in (0, 1):
            for y in (0, 1):
                data[f"n_pred{p}_label{y}"] = [getattr(g, f"noisy_pred{p}_label{y}")
                                               for g in report.groups]
        data["noisy_rows"] = [g.noisy_rows for g in report.groups]
        data["small_group"] = [g.small_group for g in report.groups]
        self.by_group = pd.DataFrame(data, index=index)
        self.overall = self._overall()
        self.demographic_parity_violation = _interval(report.demographic_parity_violation)
        self.equalized_odds_violation = _interval(report.equalized_odds_violation)

    def _overall(self) -> pd.Series:
        c = {k: float(np.maximum(self.by_group[f"n_{k}"].to_numpy(), 0).sum())
             for k in ("pred0_label0", "pred0_label1", "pred1_label0", "pred1_label1")}
        n = sum(c.values())
        pos = c["pred1_label0"] + c["pred1_label1"]
        wrong = c["pred1_label0"] + c["pred0_label1"]
        err = wrong / max(n, 1.0)
        return pd.Series({
            "selection_rate": pos / max(n, 1.0),
            "true_positive_rate": c["pred1_label1"] / max(c["pred1_label1"] + c["pred0_label1"], 1.0),
            "false_positive_rate": c["pred1_label0"] / max(c["pred1_label0"] + c["pred0_label0"], 1.0),
            "accuracy": 1 - err,
            "error_rate": err,
        }, name="overall")

    @property
    def metrics(self) -> pd.DataFrame:
        """The per-group point estimates only (one column per metric), as Fairlearn shows."""
        return self.by_group[list(METRICS)]

    def group_min(self) -> pd.Series:
        return self.metrics.min()

    def group_max(self) -> pd.Series:
        return self.metrics.max()

    def difference(self, method: str = "between_groups", intervals: bool = False):
        """Per metric, as Fairlearn's: ``between_groups`` max − min over groups,
        ``to_overall`` the largest |group − overall| (a Series). With ``intervals=True``
        (between groups only): a DataFrame with columns ``difference``, ``lo``, ``hi``, where
        ``lo``/``hi`` are the vault's released violation intervals (selection_rate:
        demographic parity) and NaN for metrics the release has no interval for; plus a row
        ``equalized_odds`` (the larger of the TPR and FPR differences) with its interval."""
        if method == "to_overall":
            if intervals:
                raise InvalidInput("the release has intervals for between-group differences only")
            return (self.metrics - self.overall).abs().max().rename("difference")
        if method != "between_groups":
            raise InvalidInput(f"method must be 'between_groups' or 'to_overall' (got {method!r})")
        diff = (self.group_max() - self.group_min()).rename("difference")
        if not intervals:
            return diff
        out = pd.DataFrame({"difference": diff, "lo": np.nan, "hi": np.nan})
        dp, eo = self.demographic_parity_violation, self.equalized_odds_violation
        out.loc["selection_rate", ["lo", "hi"]] = [dp["lo"], dp["hi"]]
        out.loc["equalized_odds"] = [eo["estimate"], eo["lo"], eo["hi"]]
        return out

    def ratio(self, method: str = "between_groups") -> pd.Series:
        """Per metric, as Fairlearn's: ``between_groups`` min / max over groups,
        ``to_overall`` the smallest of group/overall and overall/group (NaN where a
        denominator is 0). No interval is released for ratios."""
        if method == "to_overall":
            m, o = self.metrics, self.overall
            r = np.minimum(m / o.where(o > 0), o / m.where(m > 0))
            return r.min().rename("ratio")
        if method != "between_groups":
            raise InvalidInput(f"method must be 'between_groups' or 'to_overall' (got {method!r})")
        mx = self.group_max()
        return (self.group_min() / mx.where(mx > 0)).rename("ratio")

    def plot(self, ax=None, metrics: Optional[Sequence[str]] = None):
        """Per-group estimates with their interval as error bars, one cluster per metric;
        small groups (the vault's flag) hatched. Returns the matplotlib Axes."""
        import matplotlib.pyplot as plt
        metrics = list(metrics or ("selection_rate", "true_positive_rate",
                                   "false_positive_rate", "accuracy"))
        if ax is None:
            _, ax = plt.subplots(figsize=(1.6 + 1.4 * len(metrics), 3.6))
        groups = list(self.by_group.index)
        width = 0.8 / max(len(groups), 1)
        x = np.arange(len(metrics))
        for i, g in enumerate(groups):
            row = self.by_group.loc[g]
            est = np.array([row[m] for m in metrics])
            err = np.array([[row[m] - row[m + "_lo"] for m in metrics],
                            [row[m + "_hi"] - row[m] for m in metrics]])
            ax.bar(x + (i - (len(groups) - 1) / 2) * width, est, width, yerr=err, capsize=3,
                   label=g + (" (small)" if row["small_group"] else ""),
                   hatch="//" if row["small_group"] else None)
        ax.set_xticks(x)
        ax.set_xticklabels([m.replace("_", " ") for m in metrics])
        ax.set_ylim(0, 1)
        ax.set_ylabel("rate")
        ax.set_title(f"private audit, ε = {self.epsilon:g}, {self.confidence:.0%} intervals")
        ax.legend(title=self.by_group.index.name, fontsize="small")
        return ax

    def __repr__(self) -> str:
        return (f"PrivateMetricFrame(attributes={self.attributes}, rows={self.rows}, "
                f"epsilon={self.epsilon:g}, confidence={self.confidence:g})\n"
                f"{self.by_group[[c for m in METRICS for c in (m, m + '_lo', m + '_hi')]]}")


def _interval(i: Any) -> dict:
    return {"estimate": i.estimate, "lo": i.lo, "hi": i.hi}
