"""A private fairness audit in the shape of Fairlearn's ``MetricFrame``.

``private_metric_frame`` makes one charged ``AuditClassifier`` release and wraps its response in
a ``PrivateMetricFrame``. Every number it shows comes from that release or from arithmetic on
it (post-processing, free of privacy cost): nothing is computed from the protected attribute,
which the caller never sees.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from fairvault.errors import InvalidInput
from fairvault.results import Preview

__all__ = ["private_metric_frame", "PrivateMetricFrame", "METRICS", "DEFAULT_METRICS",
           "clopper_pearson"]

# Every metric is a function of one group's four released counts n[ŷ][y] (post-processing of
# the release: its sensitivity is the counts'). Name → (numerator cells, denominator cells) as
# "ŷy" strings: a rate Σ numerator / Σ denominator.
_RATES: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "selection_rate": (("10", "11"), ("00", "01", "10", "11")),
    "true_positive_rate": (("11",), ("01", "11")),
    "false_positive_rate": (("10",), ("00", "10")),
    "true_negative_rate": (("00",), ("00", "10")),
    "false_negative_rate": (("01",), ("01", "11")),
    "accuracy": (("00", "11"), ("00", "01", "10", "11")),
    "error_rate": (("01", "10"), ("00", "01", "10", "11")),
    "precision": (("11",), ("10", "11")),
    "negative_predictive_value": (("00",), ("00", "01")),
    "false_discovery_rate": (("10",), ("10", "11")),
    "false_omission_rate": (("01",), ("00", "01")),
    "base_rate": (("01", "11"), ("00", "01", "10", "11")),
}
#: Every metric a frame can show, each a rate of one group's released counts.
METRICS = tuple(_RATES)
#: What a frame shows unless ``metrics=`` names others.
DEFAULT_METRICS = ("selection_rate", "true_positive_rate", "false_positive_rate", "accuracy",
                   "error_rate")
# Scikit-learn's and Fairlearn's names for the same rates.
_ALIASES = {"recall": "true_positive_rate", "recall_score": "true_positive_rate",
            "accuracy_score": "accuracy", "precision_score": "precision",
            "true_positive_rate_score": "true_positive_rate", "tpr": "true_positive_rate",
            "fpr": "false_positive_rate", "tnr": "true_negative_rate",
            "fnr": "false_negative_rate", "ppv": "precision", "npv": "negative_predictive_value",
            "error": "error_rate", "mean_prediction": "selection_rate"}
# The per-group intervals the release holds: metric → (field, complement?). A complement's
# interval is 1 − the field's, ends swapped.
_RELEASED = {"selection_rate": ("selection_rate", False), "true_positive_rate": ("tpr", False),
             "false_positive_rate": ("fpr", False), "error_rate": ("error", False),
             "false_negative_rate": ("tpr", True), "true_negative_rate": ("fpr", True),
             "accuracy": ("error", True)}


def _metric_names(metrics: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """The canonical names of ``metrics`` (default DEFAULT_METRICS); InvalidInput naming the
    unknown ones and the known ones, before anything is sent."""
    if metrics is None:
        return DEFAULT_METRICS
    if isinstance(metrics, str):
        metrics = [metrics]
    names, unknown = [], []
    for m in metrics:
        name = _ALIASES.get(m, m)
        (names if name in _RATES else unknown).append(name if name in _RATES else m)
    if unknown:
        raise InvalidInput(f"metrics: unknown {unknown}; a private metric frame computes rates "
                           f"of each group's released counts: {', '.join(METRICS)} (and the "
                           f"aliases {', '.join(sorted(_ALIASES))})", field="metrics")
    return tuple(dict.fromkeys(names))


def _rate(counts: Dict[str, float], metric: str) -> float:
    num, den = _RATES[metric]
    return sum(counts[c] for c in num) / max(sum(counts[c] for c in den), 1.0)


def _betacf(a: float, b: float, x: float) -> float:
    # The continued fraction of the incomplete beta function (modified Lentz), as
    # core/fairness/count_interval.cc's.
    tiny, qab, qap, qam = 1e-300, a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                     + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> Tuple[float, float]:
    """The Clopper–Pearson interval for a binomial proportion at level ``confidence`` (the
    sampling interval the vault's per-group intervals are built on); (0, 1) with no trials."""
    if trials <= 0:
        return 0.0, 1.0
    alpha = 1 - confidence

    def lower(x: int, n: int) -> float:  # P(X >= x | p) = alpha / 2, by bisection
        if x <= 0:
            return 0.0
        lo, hi = 0.0, 1.0
        for _ in range(100):
            mid = (lo + hi) / 2
            if _betainc(x, n - x + 1, mid) < alpha / 2:
                lo = mid
            else:
                hi = mid
        return lo
    return lower(successes, trials), 1 - lower(trials - successes, trials)


def private_metric_frame(vault: Any, table_or_df: Any, y_true: Any, y_pred: Any, epsilon: float,
                         dataset: Optional[str] = None, key_column: Optional[str] = None,
                         confidence: float = 0.95, attributes: Sequence[str] = (), *,
                         metrics: Optional[Sequence[str]] = None,
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
        metrics: the rates to show, by name (default ``DEFAULT_METRICS``); any of ``METRICS``
            — every one a rate of a group's four released counts, so any choice costs the
            same one release — or their scikit-learn/Fairlearn aliases (``recall_score``,
            ``precision_score``, ``accuracy_score``, ...). Unknown names are refused before
            anything is sent.
        hmac_secret / hmac_secret_file: pseudonymise the keys as the regulator's import did,
            with this secret or the secret in this file (not both).
        preview: return the audit's ``Preview`` (its price and expected noise) instead.
    """
    names = _metric_names(metrics)
    local = None
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
        local = (np.asarray(values(y_true), dtype=float), np.asarray(values(y_pred), dtype=float))
    result = vault.audit_classifier(table, prediction, label, epsilon, attributes,
                                    confidence=confidence, unmatched=unmatched,
                                    idempotency_key=idempotency_key, preview=preview)
    if isinstance(result, Preview):
        return result
    frame = PrivateMetricFrame(result, names, local)
    frame.table_ = table
    return frame


class PrivateMetricFrame:
    """Per-group classifier metrics from one private audit release (``AuditClassifierResponse``).

    ``by_group``: one row per protected group (named as the vault names it, "Female" or
    "Female|White"), with each of the frame's ``metric_names`` (default ``selection_rate``,
    ``true_positive_rate``, ``false_positive_rate``, ``accuracy`` and ``error_rate``), each with
    ``<metric>_lo`` / ``<metric>_hi``: the vault's confidence interval at level ``confidence``
    for that group's rate — released for the selection rate, TPR, FPR and error rate, and
    exactly 1 − those for the FNR, TNR and accuracy; NaN for the metrics the release holds no
    interval for (precision, negative predictive value, false discovery and omission rates,
    base rate: their estimates are the same post-processing of the counts). It accounts for both the
    DP noise and sampling error — the union of Clopper–Pearson intervals over every true count
    pair consistent with the released counts at the public noise scale — and covers the group's
    rate on the audited rows, and its population rate, each with at least the nominal
    probability (one interval at a time: the per-group intervals are not simultaneous). Also
    the group's released noisy counts (``n_pred0_label0`` …), its noisy size and the vault's
    ``small_group`` flag. Point estimates use the released counts clamped at 0 with every
    denominator floored at 1.

    ``overall``: the same rates over all rows. When the frame was made from your DataFrame and
    the vault used every row (``rows_dropped`` 0), they are your rows' exact rates (your own
    data: nothing released) and ``overall_intervals`` holds their Clopper–Pearson intervals at
    ``confidence`` (the population rate's sampling uncertainty); otherwise they come from the
    sums of the groups' clamped noisy counts and have no interval (NaN).
    ``overall_source`` says which.

    ``difference()``: max − min over groups per metric; with ``intervals=True`` also the vault's
    simultaneous (bootstrap max-t band) intervals for what it releases: demographic parity (the
    selection-rate difference), the TPR and the FPR differences (and so the FNR's and TNR's),
    and equalized odds (the larger of the two), conservative and always containing the
    estimate. ``ratio()``:
    min/max over groups per metric (no interval is released for ratios).
    """

    def __init__(self, release: Any, metrics: Optional[Sequence[str]] = None,
                 local: Optional[Tuple[np.ndarray, np.ndarray]] = None):
        # A ClassifierAudit result (Vault.audit_classifier) or the AuditClassifierResponse;
        # local: (labels, predictions) of the caller's own rows, when it gave them.
        self.metric_names = _metric_names(metrics)
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
        for metric in self.metric_names:
            if metric in _RELEASED:
                field, complement = _RELEASED[metric]
                intervals = [getattr(g, field) for g in report.groups]
                if complement:
                    data[metric] = [1 - i.estimate for i in intervals]
                    data[metric + "_lo"] = [1 - i.hi for i in intervals]
                    data[metric + "_hi"] = [1 - i.lo for i in intervals]
                else:
                    data[metric] = [i.estimate for i in intervals]
                    data[metric + "_lo"] = [i.lo for i in intervals]
                    data[metric + "_hi"] = [i.hi for i in intervals]
                continue
            data[metric] = [_rate(_clamped(g), metric) for g in report.groups]
            data[metric + "_lo"] = np.nan
            data[metric + "_hi"] = np.nan
        for p in (0, 1):
            for y in (0, 1):
                data[f"n_pred{p}_label{y}"] = [getattr(g, f"noisy_pred{p}_label{y}")
                                               for g in report.groups]
        data["noisy_rows"] = [g.noisy_rows for g in report.groups]
        data["small_group"] = [g.small_group for g in report.groups]
        self.by_group = pd.DataFrame(data, index=index)
        self.overall_intervals = self._overall(local)
        self.overall = self.overall_intervals["estimate"].rename("overall")
        self.demographic_parity_violation = _interval(report.demographic_parity_violation)
        self.equalized_odds_violation = _interval(report.equalized_odds_violation)
        # Releases stored before the two parts were added hold neither.
        self.tpr_difference = (_interval(report.tpr_difference)
                               if report.HasField("tpr_difference") else None)
        self.fpr_difference = (_interval(report.fpr_difference)
                               if report.HasField("fpr_difference") else None)

    def _overall(self, local: Optional[Tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
        """Per metric: estimate, lo, hi over all rows (see the class's ``overall``)."""
        exact = local is not None and self.rows_dropped == 0 and len(local[0]) == self.rows
        if exact:
            y, p = local
            counts = {f"{a}{b}": float(np.sum((p == a) & (y == b))) for a in (0, 1)
                      for b in (0, 1)}
            self.overall_source = "exact: your rows (nothing released)"
        else:
            counts = {f"{a}{b}": float(np.maximum(self.by_group[f"n_pred{a}_label{b}"], 0).sum())
                      for a in (0, 1) for b in (0, 1)}
            self.overall_source = "the groups' noisy counts summed (no interval released)"
        rows = []
        for metric in self.metric_names:
            estimate = _rate(counts, metric)
            lo = hi = np.nan
            if exact:
                num, den = _RATES[metric]
                lo, hi = clopper_pearson(int(sum(counts[c] for c in num)),
                                         int(sum(counts[c] for c in den)), self.confidence)
            rows.append((estimate, lo, hi))
        return pd.DataFrame(rows, index=pd.Index(self.metric_names, name="metric"),
                            columns=["estimate", "lo", "hi"])

    @property
    def metrics(self) -> pd.DataFrame:
        """The per-group point estimates only (one column per metric), as Fairlearn shows."""
        return self.by_group[list(self.metric_names)]

    def group_min(self) -> pd.Series:
        return self.metrics.min()

    def group_max(self) -> pd.Series:
        return self.metrics.max()

    def difference(self, method: str = "between_groups", intervals: bool = False):
        """Per metric, as Fairlearn's: ``between_groups`` max − min over groups,
        ``to_overall`` the largest |group − overall| (a Series). With ``intervals=True``
        (between groups only): a DataFrame with columns ``difference``, ``lo``, ``hi``, where
        ``lo``/``hi`` are the vault's released simultaneous intervals (selection_rate:
        demographic parity; true_positive_rate and false_negative_rate: the TPR difference;
        false_positive_rate and true_negative_rate: the FPR difference) and NaN for metrics the
        release has no difference interval for; plus a row ``equalized_odds`` (the larger of
        the TPR and FPR differences) with its interval."""
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
        released = {"selection_rate": self.demographic_parity_violation,
                    "true_positive_rate": self.tpr_difference,
                    "false_negative_rate": self.tpr_difference,
                    "false_positive_rate": self.fpr_difference,
                    "true_negative_rate": self.fpr_difference}
        for metric, interval in released.items():
            if metric in out.index and interval is not None:
                out.loc[metric, ["lo", "hi"]] = [interval["lo"], interval["hi"]]
        eo = self.equalized_odds_violation
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
        metrics = list(metrics or [m for m in self.metric_names if m != "error_rate"])
        if ax is None:
            _, ax = plt.subplots(figsize=(1.6 + 1.4 * len(metrics), 3.6))
        groups = list(self.by_group.index)
        width = 0.8 / max(len(groups), 1)
        x = np.arange(len(metrics))
        for i, g in enumerate(groups):
            row = self.by_group.loc[g]
            est = np.array([row[m] for m in metrics])
            err = np.nan_to_num(np.array([[row[m] - row[m + "_lo"] for m in metrics],
                                          [row[m + "_hi"] - row[m] for m in metrics]]))
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
                f"{self.by_group[[c for m in self.metric_names for c in (m, m + '_lo', m + '_hi')]]}")


def _clamped(group: Any) -> Dict[str, float]:
    """A group's released counts as "ŷy" → count, negative ones clamped at 0 (as the vault's
    estimates)."""
    return {f"{a}{b}": float(max(getattr(group, f"noisy_pred{a}_label{b}"), 0))
            for a in (0, 1) for b in (0, 1)}


def _interval(i: Any) -> dict:
    return {"estimate": i.estimate, "lo": i.lo, "hi": i.hi}
