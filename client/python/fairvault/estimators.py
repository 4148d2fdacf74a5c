"""Fairlearn-style estimators over the vault: fit is one charged release (or one training job);
predict runs locally on the artifact (``fairvault.models``) where that needs no protected
attribute or the caller holds the groups, and through the vault's ``Decide`` otherwise.

- ``PrivateEqualizedOdds``: Fairlearn's ``ThresholdOptimizer(constraints="equalized_odds")``
  for a binary classifier's predictions, private (Jagielski et al. 2019, Alg. 1).
- ``PrivateEqualizedOddsScores``: the same from a classifier's scores (noisy ROC curves).
- ``PrivateStatisticalParityRegressor``: a regressor's scores made statistically independent of
  the group (Xian et al. 2024).
- ``FairModel``: Fairlearn's ``ExponentiatedGradient`` role: a managed fair learner trained in
  the vault (``FitFairModel`` job), applied locally without the attribute.

After ``fit``: ``release_`` (the fit's result), ``charge_`` (what it cost: its ``Charge``),
``artifact_`` (the ``Artifact`` proto), ``artifact_id_``, ``applier_`` (its local applier) and
``table_`` (the uploaded table's handle). ``fit(..., preview=True)`` uploads the table (free) and
returns the ``Preview`` of the fit instead of spending: the price, the budget after and the
expected noise (``Vault.preview_release``).
"""

from __future__ import annotations

import inspect
import math
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from fairvault.models import (TrivialModelWarning, applier_for, describe_decisions,
                              trivial_model_warning)
from fairvault.results import Preview
from fairvault.secret import as_secret
from fairvault.errors import InvalidInput, MissingColumn, NotFittedError
from fairvault._arrays import floats

__all__ = ["PrivateEqualizedOdds", "PrivateEqualizedOddsScores",
           "PrivateStatisticalParityRegressor", "FairModel", "NotFittedError"]


# Parameters that hold a secret: kept as a fairvault.Secret (wrapped on the way in, by the
# constructor and by set_params), so that repr and get_params() never show the value.
_SECRET_PARAMS = ("hmac_secret",)


class _Estimator:
    """get_params / set_params from the constructor's signature, as sklearn's BaseEstimator.

    ``hmac_secret`` is stored as a :class:`fairvault.Secret`: a ``Secret`` given to the
    constructor or to ``set_params`` is kept as the same object (so ``get_params`` returns what
    the constructor got, as sklearn's ``clone`` expects); bytes or str are wrapped once.
    """

    def get_params(self, deep: bool = True) -> Dict[str, Any]:
        params = {}
        for name, p in inspect.signature(type(self).__init__).parameters.items():
            if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            params[name] = getattr(self, name)
        params.update(getattr(self, "learner_params", {}))
        return params

    def set_params(self, **params: Any) -> "_Estimator":
        known = set(inspect.signature(type(self).__init__).parameters) - {"self"}
        for name, value in params.items():
            if name in known:
                setattr(self, name, as_secret(value) if name in _SECRET_PARAMS else value)
            elif hasattr(self, "learner_params"):
                self.learner_params[name] = value
            else:
                raise InvalidInput(f"{type(self).__name__} has no parameter '{name}'")
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


def _is_preview(result: Any) -> bool:
    return isinstance(result, Preview)


class _PostProcessor(_Estimator):
    """What the three post-processors share: the decide path and its licence."""

    vault: Any
    decision_floor: Optional[float]
    hmac_secret: Any
    hmac_secret_file: Any
    key_column: Optional[str]

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
    """

    def __init__(self, vault: Any, dataset: str, epsilon: float, gamma: float,
                 decision_floor: Optional[float] = None, attributes: Sequence[str] = (),
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, beta: float = 0.0,
                 min_group_count: Optional[float] = None, all_pairs: bool = False,
                 unmatched: str = "reject", idempotency_key: Optional[str] = None):
        self.vault, self.dataset, self.epsilon, self.gamma = vault, dataset, epsilon, gamma
        self.decision_floor, self.attributes, self.key_column = decision_floor, attributes, \
            key_column
        self.hmac_secret, self.hmac_secret_file = as_secret(hmac_secret), hmac_secret_file
        self.beta, self.min_group_count = beta, min_group_count
        self.all_pairs, self.unmatched, self.idempotency_key = all_pairs, unmatched, \
            idempotency_key

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
        """P(decision = 1) per row, for a caller who holds the groups."""
        self._check_fitted()
        return self.applier_.probabilities(y_pred, groups)

    def predict(self, X_keys: Any, y_pred: Any, groups: Any = None,
                random_state: Any = None) -> np.ndarray:
        """The post-processed 0/1 decisions. With ``groups`` (labels as the artifact names
        them, or a DataFrame of attribute columns): locally, numpy's coins (``random_state``).
        Without: the vault decides (``Decide``; needs ``decision_floor`` > 0); its first call
        with this artifact charges the licence, and each subject keeps one stored decision."""
        self._check_fitted()
        if groups is not None:
            return self.applier_.predict(y_pred, groups, random_state)
        values = _column(y_pred, len(_keys(X_keys, self.key_column)[2]), "y_pred")
        return self._decide(X_keys, values).astype(np.int64)


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
                 idempotency_key: Optional[str] = None):
        self.vault, self.dataset, self.epsilon, self.gamma = vault, dataset, epsilon, gamma
        self.lo, self.hi, self.bins = lo, hi, bins
        self.decision_floor, self.attributes, self.key_column = decision_floor, attributes, \
            key_column
        self.hmac_secret, self.hmac_secret_file = as_secret(hmac_secret), hmac_secret_file
        self.all_pairs, self.non_monotone = all_pairs, non_monotone
        self.unmatched, self.idempotency_key = unmatched, idempotency_key

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
        self._check_fitted()
        return self.applier_.probabilities(scores, groups)

    def predict(self, X_keys: Any, scores: Any, groups: Any = None,
                random_state: Any = None) -> np.ndarray:
        """0/1 decisions, locally with ``groups`` or by the vault without (as
        :meth:`PrivateEqualizedOdds.predict`)."""
        self._check_fitted()
        if groups is not None:
            return self.applier_.predict(scores, groups, random_state)
        values = _column(scores, len(_keys(X_keys, self.key_column)[2]), "scores")
        return self._decide(X_keys, values).astype(np.int64)


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
                 unmatched: str = "reject", idempotency_key: Optional[str] = None):
        self.vault, self.dataset, self.epsilon = vault, dataset, epsilon
        self.lo, self.hi, self.bins, self.alpha = lo, hi, bins, alpha
        self.decision_floor, self.attributes, self.key_column = decision_floor, attributes, \
            key_column
        self.hmac_secret, self.hmac_secret_file = as_secret(hmac_secret), hmac_secret_file
        self.solver, self.unmatched = solver, unmatched
        self.idempotency_key = idempotency_key

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

    def predict(self, X_keys: Any, scores: Any, groups: Any = None,
                random_state: Any = None) -> np.ndarray:
        """The fair scores (bin centres): drawn locally with ``groups``, by the vault without
        (``Decide``; needs ``decision_floor`` > 0; licence charged once)."""
        self._check_fitted()
        if groups is not None:
            return self.applier_.predict(scores, groups, random_state)
        values = _column(scores, len(_keys(X_keys, self.key_column)[2]), "scores")
        return self._decide(X_keys, values)


class FairModel(_Estimator):
    """A fair classifier trained by the vault on the company's own features with the protected
    attribute (``FitFairModel``), then applied locally without it (``fairvault predict``).

    Args:
        vault, dataset: as for :class:`PrivateEqualizedOdds`.
        algorithm: ``exponentiated_gradient`` (the reductions learner: equalized odds or
            ``fairness="demographic_parity"``, bound ``gamma``, default 0.01), ``dp_oracle_learner``,
            ``private_fair_nr``, ``exponential_mechanism``, ``dp_fermi`` or ``pf_ld``.
        epsilon: the job's whole cost, charged once at submission.
        label: the 0/1 (or class) label column of the DataFrame given to ``fit``.
        features: numeric feature columns (default: every numeric column but the key and the
            label; the exponential mechanism takes ``hypothesis_columns=`` instead).
        attributes, gamma: the groups and the equalized-odds slack.
        key_column, hmac_secret, hmac_secret_file: as for :class:`PrivateEqualizedOdds`.
        timeout: seconds to wait for the job (None: no limit); progress: a tqdm bar.
        **learner_params: any other FitFairModelRequest field (``rounds=20``,
            ``clip_l1=1``, ``model="mlp"``, ``hidden_units=[16]``, ``epochs=``, ...).
    """

    def __init__(self, vault: Any, dataset: str, algorithm: str = "dp_oracle_learner",
                 epsilon: float = 1.0, label: str = "label",
                 features: Optional[Sequence[str]] = None, attributes: Sequence[str] = (),
                 gamma: float = 0.0, key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, timeout: Optional[float] = None,
                 progress: bool = True,
                 unmatched: str = "reject", idempotency_key: Optional[str] = None,
                 **learner_params: Any):
        self.vault, self.dataset, self.algorithm, self.epsilon = vault, dataset, algorithm, epsilon
        self.label, self.features, self.attributes, self.gamma = label, features, attributes, gamma
        self.key_column, self.timeout = key_column, timeout
        self.hmac_secret, self.hmac_secret_file = as_secret(hmac_secret), hmac_secret_file
        self.progress, self.unmatched, self.idempotency_key = progress, unmatched, idempotency_key
        self.learner_params = dict(learner_params)

    def _feature_columns(self, df: pd.DataFrame) -> List[str]:
        if self.features is not None:
            return list(self.features)
        if self.algorithm == "exponential_mechanism":
            return []
        skip = {self.label, self.key_column}
        return [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])]

    def fit(self, df: pd.DataFrame, y: Any = None, preview: bool = False):
        """Uploads the key, feature (and hypothesis) columns and the label (``y`` if given,
        else ``df[label]``), submits the job (charged now), waits for it with a progress bar
        and fetches the model. Returns self, or the job's ``Preview`` with ``preview=True``.
        Then, locally, ``training_summary_`` (``fairvault.models.describe_decisions`` of the
        model's decisions on these rows) and a ``TrivialModelWarning`` when the model decides
        one class for 99 % of them or more, or errs more often than the constant classifier."""
        features = self._feature_columns(df)
        hypotheses = list(self.learner_params.get("hypothesis_columns", []))
        columns = {c: df[c] for c in features + [h for h in hypotheses if h not in features]}
        columns[self.label] = df[self.label] if y is None else y
        table, _ = _upload(self.vault, self.dataset, df, self.key_column, columns,
                           self.hmac_secret, self.hmac_secret_file)
        result = self.vault.fit_fair_model(
            table, self.algorithm, self.label, self.epsilon, features, self.attributes,
            gamma=self.gamma, unmatched=self.unmatched, idempotency_key=self.idempotency_key,
            preview=preview, **self.learner_params)
        if _is_preview(result):
            return result
        self.job_ = self.vault.wait_job(result.job.id, timeout=self.timeout,
                                        progress=self.progress)
        self._store(result, self.vault.get_artifact(self.job_.artifact_id), table)
        # Checked on the rows just given, locally: a trivial model is named at once. The model
        # is paid for: a check that cannot run (labels that are not classes) is skipped.
        try:
            decisions = self.predict(df, seed=0)
            labels = np.asarray(columns[self.label], dtype=float)
            if not np.all(np.equal(np.mod(labels, 1), 0)):
                labels = None
            self.training_summary_ = describe_decisions(decisions, labels)
            warning = trivial_model_warning(decisions, labels)
        except (ValueError, TypeError):
            self.training_summary_, warning = None, None
        if warning is not None:
            warnings.warn(f"{type(self).__name__}: {warning} (on the {len(decisions)} rows "
                          "given to fit)", TrivialModelWarning, stacklevel=2)
        return self

    @property
    def classes_(self) -> np.ndarray:
        self._check_fitted()
        return np.asarray(self.applier_.classes)

    def predict_proba(self, X: Any) -> np.ndarray:
        """``fairvault predict``'s probabilities: (n,) p_positive for binary models (the
        fraction of a mixture's components deciding 1), (n, classes) for a softmax network."""
        self._check_fitted()
        return self.applier_.predict_proba(X)

    def predict(self, X: Any, seed: Any = None) -> np.ndarray:
        """Decisions; a mixture draws a component per row with MT19937-64 (``seed`` as
        ``fairvault predict --seed``; the seed used is ``applier_.last_seed_``)."""
        self._check_fitted()
        return self.applier_.predict(X, seed=seed)
