"""Fairlearn-style estimators over the vault: fit is one charged release (or one training job);
predict runs locally on the artifact (``fairvault.models``) where that needs no protected
attribute or the caller holds the groups, and through the vault's ``Decide`` otherwise.

- ``PrivateEqualizedOdds``: Fairlearn's ``ThresholdOptimizer(constraints="equalized_odds")``
  for a binary classifier's predictions, private (Jagielski et al. 2019, Alg. 1).
- ``PrivateEqualizedOddsScores``: the same from a classifier's scores (noisy ROC curves).
- ``PrivateStatisticalParityRegressor``: a regressor's scores made statistically independent of
  the group (Xian et al. 2024).

The managed learners (Fairlearn's ``ExponentiatedGradient`` role: a model trained in the vault
and applied locally without the attribute) are in :mod:`fairvault.learners`.

After ``fit``: ``release_`` (the fit's result), ``charge_`` (what it cost: its ``Charge``),
``artifact_`` (the ``Artifact`` proto), ``artifact_id_``, ``applier_`` (its local applier) and
``table_`` (the uploaded table's handle). ``fit(..., preview=True)`` uploads the table (free) and
returns the ``Preview`` of the fit instead of spending: the price, the budget after and the
expected noise (``Vault.preview_release``).

``predict(y_pred, groups=...)`` applies the artifact locally for a caller who holds each row's
group (drawing with numpy's generator seeded by the estimator's ``random_state``);
``predict(y_pred, keys=...)`` lets the vault decide for subjects whose group the caller does
not know (``Decide``; needs ``decision_floor`` > 0). ``predict_proba`` has scikit-learn's shape
(n, 2).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from fairvault._arrays import floats
from fairvault.errors import InvalidInput, MissingColumn, NotFittedError
from fairvault.models import applier_for
from fairvault.results import Preview
from fairvault.secret import as_secret

__all__ = ["PrivateEqualizedOdds", "PrivateEqualizedOddsScores",
           "PrivateStatisticalParityRegressor", "NotFittedError"]


# Parameters that hold a secret: kept as a fairvault.Secret (wrapped on the way in, by the
# constructor and by set_params), so that repr and get_params() never show the value.
_SECRET_PARAMS = ("hmac_secret",)


class _Estimator:
    """get_params / set_params from the constructor's signature, as sklearn's BaseEstimator.

    ``hmac_secret`` is stored as a :class:`fairvault.Secret`: a ``Secret`` given to the
    constructor or to ``set_params`` is kept as the same object (so ``get_params`` returns what
    the constructor got, as sklearn's ``clone`` expects); bytes or str are wrapped once.
    """

    @classmethod
    def _param_names(cls) -> List[str]:
        return [name for name in inspect.signature(cls.__init__).parameters if name != "self"]

    def _set_params(self, values: Dict[str, Any]) -> None:
        """The constructor's whole body: each parameter stored under its own name, unchanged
        (scikit-learn's rule), but a secret, which is kept as a ``Secret``."""
        for name in self._param_names():
            value = values[name]
            setattr(self, name, as_secret(value) if name in _SECRET_PARAMS else value)

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "_Estimator":
        known = self._param_names()
        for name, value in params.items():
            if name not in known:
                raise InvalidInput(f"{type(self).__name__} has no parameter '{name}' (its "
                                   f"parameters: {', '.join(known)})", field=name)
            setattr(self, name, as_secret(value) if name in _SECRET_PARAMS else value)
        return self

    def __repr__(self) -> str:
        shown = {k: v for k, v in self.get_params().items() if k != "vault"}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    def _check_fitted(self) -> None:
        if getattr(self, "artifact_", None) is None:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit first")

    def _store(self, release: Any, artifact: Any, table: Any) -> None:
        self.release_ = release
        self.charge_ = release.charge if release is not None else None
        self.artifact_ = artifact
        self.artifact_id_ = artifact.id
        self.table_ = table
        self.applier_ = applier_for(artifact)


def _keys(X_keys: Any, key_column: Optional[str]) -> Tuple[pd.DataFrame, Optional[str], list]:
    """(a frame holding the keys, the key_column to upload it with, the raw keys as a list)."""
    if isinstance(X_keys, pd.DataFrame):
        if key_column == "@row":
            return pd.DataFrame(index=range(len(X_keys))), "@row", \
                [f"row-{i}" for i in range(len(X_keys))]
        if key_column is None:
            keys = list(X_keys.index)
        else:
            if key_column not in X_keys.columns:
                raise MissingColumn(f"key column '{key_column}' is not in the DataFrame (columns: "
                               f"{list(X_keys.columns)}); set key_column= on the estimator")
            keys = X_keys[key_column].tolist()
    else:
        keys = list(X_keys)
    return pd.DataFrame({"key": keys}), "key", keys


def _column(values: Any, n: int, name: str) -> np.ndarray:
    v = floats(values, name).reshape(-1)
    if v.shape[0] != n:
        raise InvalidInput(f"{name} has {v.shape[0]} values for {n} subject keys")
    return v


def _upload(vault: Any, dataset: str, X_keys: Any, key_column: Optional[str],
            columns: Dict[str, Any], hmac_secret: Any,
            hmac_secret_file: Any = None) -> Tuple[Any, list]:
    """Uploads the keys with `columns` (name → values) as numeric columns through the vault's
    one upload path (which reads ``hmac_secret_file`` now); returns (handle, raw keys)."""
    frame, upload_key, keys = _keys(X_keys, key_column)
    frame = frame.copy()
    for name, values in columns.items():
        frame[name] = _column(values, len(keys), name)
    handle = vault.upload_table(frame, dataset, key_column=upload_key, numeric=list(columns),
                                hmac_secret=hmac_secret, hmac_secret_file=hmac_secret_file)
    return handle, keys


def _accuracy(decisions: np.ndarray, y: Any) -> float:
    labels = np.asarray(y).reshape(-1)
    if labels.shape[0] != decisions.shape[0]:
        raise InvalidInput(f"y has {labels.shape[0]} labels for {decisions.shape[0]} rows",
                           field="y")
    return float(np.mean(decisions == labels))


def _is_preview(result: Any) -> bool:
    return isinstance(result, Preview)


class _PostProcessor(_Estimator):
    """What the three post-processors share: the decide path and its licence."""

    vault: Any
    decision_floor: Optional[float]
    hmac_secret: Any
    hmac_secret_file: Any
    key_column: Optional[str]

    random_state: Any

    def _predict(self, values: Any, groups: Any, keys: Any, name: str) -> np.ndarray:
        """Locally with ``groups``, by the vault with ``keys``: exactly one of them."""
        self._check_fitted()
        if (groups is None) == (keys is None):
            raise InvalidInput(
                f"{type(self).__name__}.predict needs groups= (each row's group: applied "
                "locally) or keys= (the subjects' keys: the vault decides), exactly one",
                field="groups")
        if groups is not None:
            return self.applier_.predict(values, groups, self.random_state)
        column = _column(values, len(_keys(keys, self.key_column)[2]), name)
        return self._decide(keys, column)

    def _decide(self, X_keys: Any, values: np.ndarray) -> np.ndarray:
        body = getattr(self.artifact_, self.artifact_.WhichOneof("body"))
        bound = body.decision_log_ratio_bound
        if not self.decision_floor or not math.isfinite(bound):
            raise InvalidInput(
                f"{type(self).__name__}.predict without groups asks the vault to decide, which "
                "needs an artifact fitted with decision_floor > 0 (it bounds what one decision "
                f"reveals about a subject's group; this one has decision_floor="
                f"{self.decision_floor} and log-ratio bound {bound}). Refit with e.g. "
                "decision_floor=0.05, or pass groups= to apply it locally")
        _, _, keys = _keys(X_keys, self.key_column)
        decisions = self.vault.decide(self.artifact_id_, keys, values,
                                      hmac_secret=self.hmac_secret,
                                      hmac_secret_file=self.hmac_secret_file)
        self.last_decisions_ = decisions
        return np.asarray(decisions.outputs, dtype=np.float64)

    @property
    def decision_log_ratio_bound_(self) -> float:
        """L: what one vault decision reveals about a subject's group; the licence's ε."""
        self._check_fitted()
        return getattr(self.artifact_, self.artifact_.WhichOneof("body")).decision_log_ratio_bound


class PrivateEqualizedOdds(_PostProcessor):
    """A DP equalized-odds post-processor for a binary classifier (``FitEqualizedOdds``).

    Args:
        vault: a company's :class:`fairvault.Vault`.
        dataset: the vault dataset the subjects belong to.
        epsilon: the fit's cost; gamma: allowed |ΔFPR| and |ΔTPR| between groups.
        decision_floor: > 0 (e.g. 0.05) to let the vault decide for subjects whose group the
            caller does not know (``predict`` without ``groups``); its first use charges the
            decision licence ε = L once.
        attributes: the protected attributes forming the groups (default: all).
        key_column: where ``X_keys`` holds the keys when it is a DataFrame (a column, ``"@row"``
            or None for the index); a Series or list is taken as the keys themselves.
        hmac_secret: pseudonymise keys as the regulator's import did, with this secret (bytes,
            str or a :class:`fairvault.Secret`; kept as a ``Secret``, which ``repr`` and
            ``get_params`` show as ``Secret('***')``).
        hmac_secret_file: or with the secret in this file, read as the CLI's
            ``--hmac-secret-file`` reads it when ``fit`` (and ``predict`` through the vault)
            need it; the parameter stays the path. Not together with ``hmac_secret``.
        beta, min_group_count, all_pairs, unmatched, idempotency_key: as in
            ``Vault.fit_equalized_odds``.
        random_state: seeds the coins of ``predict(..., groups=...)`` (numpy's generator:
            None draws fresh ones, an int repeats them).
    """

    def __init__(self, vault: Any, dataset: str, epsilon: float, gamma: float,
                 decision_floor: Optional[float] = None, attributes: Sequence[str] = (),
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, beta: float = 0.0,
                 min_group_count: Optional[float] = None, all_pairs: bool = False,
                 unmatched: str = "reject", idempotency_key: Optional[str] = None,
                 random_state: Any = None):
        self._set_params(locals())

    def fit(self, X_keys: Any, y: Any, y_pred: Any, preview: bool = False):
        """Uploads (key, label, prediction) and fits the post-processor: one charged release.
        Returns self, or the fit's ``Preview`` with ``preview=True`` (nothing charged)."""
        table, _ = _upload(self.vault, self.dataset, X_keys, self.key_column,
                           {"label": y, "prediction": y_pred}, self.hmac_secret,
                           self.hmac_secret_file)
        result = self.vault.fit_equalized_odds(
            table, "prediction", "label", self.epsilon, self.gamma, self.attributes,
            beta=self.beta, decision_floor=self.decision_floor or 0.0,
            min_group_count=self.min_group_count, all_pairs=self.all_pairs,
            unmatched=self.unmatched, idempotency_key=self.idempotency_key, preview=preview)
        if _is_preview(result):
            return result
        self._store(result, result.artifact, table)
        return self

    def predict_proba(self, y_pred: Any, groups: Any) -> np.ndarray:
        """(n, 2): P(decision = 0) and P(decision = 1) per row, for a caller who holds the
        groups (scikit-learn's shape; column 1 is what ``apply-eo`` prints)."""
        self._check_fitted()
        p = self.applier_.probabilities(y_pred, groups)
        return np.column_stack([1.0 - p, p])

    def predict(self, y_pred: Any, *, groups: Any = None, keys: Any = None) -> np.ndarray:
        """The post-processed 0/1 decisions of the classifier's ``y_pred``. With ``groups``
        (labels as the artifact names them, or a DataFrame of attribute columns): locally,
        numpy's coins seeded by ``random_state``. With ``keys`` instead (the subjects' keys:
        a DataFrame read by ``key_column``, a Series or a list): the vault decides
        (``Decide``; needs ``decision_floor`` > 0); its first call with this artifact charges
        the licence, and each subject keeps one stored decision."""
        return self._predict(y_pred, groups, keys, "y_pred").astype(np.int64)

    def score(self, y_pred: Any, y: Any, *, groups: Any = None, keys: Any = None) -> float:
        """The accuracy of ``predict`` against the labels ``y``."""
        return _accuracy(self.predict(y_pred, groups=groups, keys=keys), y)


class PrivateEqualizedOddsScores(_PostProcessor):
    """DP equalized odds from a classifier's scores (``FitEqualizedOddsScores``): per group a
    randomized threshold fitted on noisy ROC curves over the public grid [lo, hi], ``bins``
    bins. Arguments as for :class:`PrivateEqualizedOdds`, plus the grid, ``all_pairs`` and
    ``non_monotone``."""

    def __init__(self, vault: Any, dataset: str, epsilon: float, gamma: float, lo: float = 0.0,
                 hi: float = 1.0, bins: int = 20, decision_floor: Optional[float] = None,
                 attributes: Sequence[str] = (), key_column: Optional[str] = None,
                 hmac_secret: Any = None, hmac_secret_file: Any = None, all_pairs: bool = False,
                 non_monotone: bool = False, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, random_state: Any = None):
        self._set_params(locals())

    def fit(self, X_keys: Any, y: Any, scores: Any, preview: bool = False):
        """Uploads (key, label, score) and fits: one charged release (or its Preview)."""
        table, _ = _upload(self.vault, self.dataset, X_keys, self.key_column,
                           {"label": y, "score": scores}, self.hmac_secret,
                           self.hmac_secret_file)
        result = self.vault.fit_equalized_odds_scores(
            table, "score", "label", self.lo, self.hi, self.bins, self.epsilon, self.gamma,
            self.attributes, all_pairs=self.all_pairs, non_monotone=self.non_monotone,
            decision_floor=self.decision_floor or 0.0, unmatched=self.unmatched,
            idempotency_key=self.idempotency_key, preview=preview)
        if _is_preview(result):
            return result
        self._store(result, result.artifact, table)
        return self

    def predict_proba(self, scores: Any, groups: Any) -> np.ndarray:
        """(n, 2): P(decision = 0) and P(decision = 1) per row, for a caller who holds the
        groups."""
        self._check_fitted()
        p = self.applier_.probabilities(scores, groups)
        return np.column_stack([1.0 - p, p])

    def predict(self, scores: Any, *, groups: Any = None, keys: Any = None) -> np.ndarray:
        """0/1 decisions, locally with ``groups`` or by the vault with ``keys`` (as
        :meth:`PrivateEqualizedOdds.predict`)."""
        return self._predict(scores, groups, keys, "scores").astype(np.int64)

    def score(self, scores: Any, y: Any, *, groups: Any = None, keys: Any = None) -> float:
        """The accuracy of ``predict`` against the labels ``y``."""
        return _accuracy(self.predict(scores, groups=groups, keys=keys), y)


class PrivateStatisticalParityRegressor(_PostProcessor):
    """A DP statistical-parity post-processor for a regressor's scores
    (``FitStatisticalParity``, Xian et al. 2024): each group's scores are transported onto a
    common distribution over the bin centres of the public grid [lo, hi] (``bins`` bins), up
    to the KS tolerance ``alpha``. Other arguments as for :class:`PrivateEqualizedOdds`;
    ``solver``: ``auto``, ``linear_program`` or ``quantile``."""

    def __init__(self, vault: Any, dataset: str, epsilon: float, lo: float, hi: float,
                 bins: int, alpha: float = 0.0, decision_floor: Optional[float] = None,
                 attributes: Sequence[str] = (), key_column: Optional[str] = None,
                 hmac_secret: Any = None, hmac_secret_file: Any = None, solver: str = "auto",
                 unmatched: str = "reject", idempotency_key: Optional[str] = None,
                 random_state: Any = None):
        self._set_params(locals())

    def fit(self, X_keys: Any, scores: Any, preview: bool = False):
        """Uploads (key, score) and fits: one charged release (or its Preview)."""
        table, _ = _upload(self.vault, self.dataset, X_keys, self.key_column,
                           {"score": scores}, self.hmac_secret, self.hmac_secret_file)
        result = self.vault.fit_statistical_parity(
            table, "score", self.lo, self.hi, self.bins, self.epsilon, self.attributes,
            alpha=self.alpha, solver=self.solver, decision_floor=self.decision_floor or 0.0,
            unmatched=self.unmatched, idempotency_key=self.idempotency_key, preview=preview)
        if _is_preview(result):
            return result
        self._store(result, result.artifact, table)
        return self

    def output_distribution(self, scores: Any, groups: Any) -> np.ndarray:
        """(n, bins): each row's distribution over the bin centres (``applier_.grid``)."""
        self._check_fitted()
        return self.applier_.output_distribution(scores, groups)

    def predict(self, scores: Any, *, groups: Any = None, keys: Any = None) -> np.ndarray:
        """The fair scores (bin centres): drawn locally with ``groups`` (``random_state``), by
        the vault with ``keys`` (``Decide``; needs ``decision_floor`` > 0; licence charged
        once)."""
        return self._predict(scores, groups, keys, "scores")
