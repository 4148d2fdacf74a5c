"""The vault's managed fair learners as scikit-learn classifiers: ``fit`` uploads the company's
features and labels and runs one ``FitFairModel`` job (one charge, at submission), ``predict``
and ``predict_proba`` apply the returned model locally, without the protected attribute.

One class per algorithm, each with its own parameters (``help()`` and ``get_params`` show them
all; ``None`` leaves a parameter to the vault's documented default, docs/api.md):

- :class:`PrivateExponentiatedGradient`: Agarwal et al.'s reductions (Fairlearn's
  ``ExponentiatedGradient``), least-squares best responses from one release.
- :class:`DPOracleLearner` and :class:`PrivateFairNR`: Jagielski et al. (2019), the fair game
  with private best responses.
- :class:`ExponentialMechanismClassifier`: picks one of the company's candidate classifiers.
- :class:`DPFermi` (Lowy et al.) and :class:`PFLD` (Ding et al.): logistic regression or an MLP
  trained with noisy gradients.
- :class:`FairModel`: any of them by ``algorithm=`` name, with ``learner_params`` (a dict of
  ``FitFairModelRequest`` fields) for the rest.

Every learner takes ``vault``, ``dataset`` and ``epsilon`` (the job's whole cost: nothing is
spent by default), and keyword-only:

- ``label``: the label column of ``X`` when ``fit`` gets no ``y`` (and the table's label
  column's name); ``features``: the feature columns (default: every numeric column of ``X``
  but the key and the label; for an array, its columns, named ``feature_names`` or
  ``x0, x1, ...``); ``attributes``: the protected attributes forming the groups (default: all).
- ``key_column``: where ``X`` holds the subject keys (a column, ``"@row"`` for row numbers,
  or None for the index), unless ``fit`` gets ``keys=``; ``hmac_secret`` /
  ``hmac_secret_file``: pseudonymise them as the regulator's import did.
- ``unmatched``, ``idempotency_key``: as in ``Vault.fit_fair_model``; ``timeout``: seconds to
  wait for the job; ``progress``: a bar (None: on a terminal or in a notebook only).
- ``random_state``: the seed of a mixture's draws in ``predict`` (an int reproduces
  ``fairvault predict --seed``; None draws one, kept in ``applier_.last_seed_``).

**Transformed features.** ``fit`` and ``predict`` take what a fitted scikit-learn transformer
returns: a DataFrame (``set_output(transform="pandas")``, names kept), or an array whose
columns are named by ``feature_names`` (e.g. ``ColumnTransformer.get_feature_names_out()``) or
``x0, x1, ...``. In a ``Pipeline``, the transform is the company's own and stays in the
pipeline: the artifact holds the transformed columns' names (its preprocessing is the vault's
L1 clip and intercept only), so ``fairvault predict`` outside Python needs the transformed
columns. The subject keys go to ``fit`` as ``keys=`` (``pipe.fit(X, y, model__keys=ids)``),
since a transformer drops them.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from fairvault._arrays import floats
from fairvault.errors import InvalidInput, MissingColumn, WrongType
from fairvault.estimators import _accuracy, _Estimator, _is_preview, _upload
from fairvault.models import describe_decisions, trivial_model_warning, TrivialModelWarning

__all__ = ["FairModel", "PrivateExponentiatedGradient", "DPOracleLearner", "PrivateFairNR",
           "ExponentialMechanismClassifier", "DPFermi", "PFLD"]

#: The longest column name the vault accepts.
MAX_COLUMN_NAME = 64


def _no_intercept(fit_intercept: bool) -> bool:
    return not fit_intercept


def _ints(values: Sequence[int]) -> List[int]:
    return [int(v) for v in values]


class _FairLearner(_Estimator):
    """What every managed learner shares: the upload, the job, the local predictions."""

    #: The FitFairModelRequest algorithm.
    algorithm_name = ""
    #: Parameter → (FitFairModelRequest field, conversion or None); a parameter left None is
    #: not sent (the vault's default).
    _FIELDS: Dict[str, Tuple[str, Any]] = {}
    #: Whether the learner reads feature columns (the exponential mechanism reads candidates).
    _uses_features = True

    _estimator_type = "classifier"

    def _algorithm(self) -> str:
        return self.algorithm_name

    def _options(self) -> Dict[str, Any]:
        options = {}
        for param, (field, convert) in self._FIELDS.items():
            value = getattr(self, param)
            if value is None:
                continue
            options[field] = convert(value) if convert is not None else value
        return options

    def _more_tags(self) -> Dict[str, Any]:
        # For sklearn.utils.estimator_checks: fit needs subjects in the vault, so the checks
        # that fit on generated data cannot pass (tests/test_sklearn.py runs the others).
        return {"requires_y": True, "binary_only": True, "non_deterministic": True,
                "poor_score": True}

    # ----- inputs ---------------------------------------------------------------------------

    def _frame(self, X: Any, feature_names: Optional[Sequence[str]]) -> pd.DataFrame:
        """X as a DataFrame with named columns (an array's named by ``feature_names``, else by
        ``features``, else ``x0, x1, ...``)."""
        if hasattr(X, "toarray") and hasattr(X, "nnz"):
            raise WrongType("sparse input is not supported: the vault takes dense numeric "
                            "columns (X.toarray() first)", field="X")
        if isinstance(X, pd.DataFrame):
            # Column names as the vault's: strings (a frame with integer labels gets "0", ...).
            frame = X if all(isinstance(c, str) for c in X.columns) else X.rename(columns=str)
        else:
            values = np.asarray(X)
            if values.dtype.kind == "c":
                raise InvalidInput("Complex data not supported: the features must be real",
                                   field="X")
            values = floats(values, "X")
            frame = None
        if frame is not None:
            if len(frame) == 0:
                raise InvalidInput("X has 0 rows: fit needs at least one", field="X")
            return frame
        if values.ndim != 2:
            raise InvalidInput(f"X must be 2-dimensional (rows x features); got shape "
                               f"{values.shape}", field="X")
        names = list(feature_names) if feature_names is not None else (
            list(self.features) if self.features is not None and self._uses_features
            else [f"x{j}" for j in range(values.shape[1])])
        if len(names) != values.shape[1]:
            raise InvalidInput(f"X has {values.shape[1]} columns but {len(names)} feature names "
                               f"were given ({names[:5]}...)", field="feature_names")
        for axis, what in ((0, "sample"), (1, "feature")):
            if values.shape[axis] == 0:
                raise InvalidInput(f"X has 0 {what}(s) (shape={values.shape}) while a minimum "
                                   "of 1 is required.", field="X")
        bad = ~np.isfinite(values)
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise InvalidInput(f"X holds NaN or inf (row {row}, column {col}: "
                               f"{values[row, col]}): the features must be finite", field="X")
        return pd.DataFrame(values, columns=[str(n) for n in names])

    def _feature_columns(self, df: pd.DataFrame) -> List[str]:
        if not self._uses_features:
            return []
        if self.features is not None:
            columns = list(self.features)
        else:
            skip = {self.label, self.key_column}
            columns = [c for c in df.columns
                       if c not in skip and pd.api.types.is_numeric_dtype(df[c])]
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise MissingColumn(f"features {missing} are not columns of X (columns: "
                                f"{list(df.columns)[:20]})", field="features")
        if not columns:
            raise InvalidInput("no numeric feature column in X: pass features= or numeric "
                               "columns", field="features")
        long = [c for c in columns if not 1 <= len(str(c).encode()) <= MAX_COLUMN_NAME]
        if long:
            raise InvalidInput(f"feature names are 1-{MAX_COLUMN_NAME} bytes in the vault; "
                               f"rename {long[0]!r} (e.g. with verbose_feature_names_out=False)",
                               field="features")
        return [str(c) for c in columns]

    def _hypotheses(self) -> List[str]:
        return []

    def _encode(self, labels: np.ndarray, validation: bool = False) -> np.ndarray:
        """The labels as class indices 0..k-1 (the vault's label column), their classes in
        ``classes_`` order, as scikit-learn's classifiers encode them. The first fit fixes
        the classes; refused here, before anything is sent, when they are not classes."""
        if labels.dtype.kind == "f" and not np.all(np.isfinite(labels)):
            raise InvalidInput("y holds NaN or infinite labels", field="y")
        if labels.dtype.kind == "f" and not np.all(np.mod(labels, 1) == 0):
            raise InvalidInput("Unknown label type: y holds continuous values; a classifier "
                               "needs class labels (e.g. 0/1)", field="y")
        if labels.dtype.kind not in "biufUSO":
            raise WrongType(f"y has dtype {labels.dtype}; give class labels", field="y")
        if labels.dtype.kind == "O":
            labels = labels.astype(str)
        if validation:
            known = np.isin(labels, self._classes)
            if not known.all():
                raise InvalidInput(f"validation_data's y holds {labels[~known][0]!r}, not a "
                                   f"class of y ({list(self._classes)})", field="validation_data")
            return np.searchsorted(self._classes, labels).astype(np.float64)
        classes = np.unique(labels)
        encoded = np.searchsorted(classes, labels)
        if len(classes) < 2:
            raise InvalidInput(f"y has one class ({classes[0]!r}) only: a classifier needs "
                               "rows of at least two classes", field="y")
        if len(classes) > 2 and not self._multiclass():
            raise InvalidInput(f"y has {len(classes)} classes; {type(self).__name__} is a "
                               "binary classifier (2 classes; softmax_regression or an mlp "
                               "of DPFermi take more)", field="y")
        self._classes = classes
        return encoded.astype(np.float64)

    def _multiclass(self) -> bool:
        return str(getattr(self, "model", None) or "").lower() in (
            "softmax_regression", "mlp", "model_family_softmax_regression", "model_family_mlp")

    def _keys_frame(self, df: pd.DataFrame, keys: Any) -> Tuple[Any, Optional[str]]:
        """What _upload reads the keys from, and how."""
        if keys is None:
            if self.key_column not in (None, "@row") and self.key_column not in df.columns:
                raise MissingColumn(
                    f"key column '{self.key_column}' is not a column of X (columns: "
                    f"{list(df.columns)[:20]}); pass keys= to fit, or set key_column=",
                    field="key_column")
            return df, self.key_column
        keys = list(keys)
        if len(keys) != len(df):
            raise InvalidInput(f"keys has {len(keys)} entries for {len(df)} rows of X",
                               field="keys")
        return keys, None

    def _upload_rows(self, X: Any, y: Any, keys: Any, feature_names: Optional[Sequence[str]],
                     validation: bool = False) -> Tuple[Any, pd.DataFrame, List[str], Any]:
        """Uploads X's keys, features and encoded labels; (handle, X as a frame, the feature
        columns, the encoded labels). Validation rows are encoded with the training rows'
        classes."""
        df = self._frame(X, feature_names)
        features = self._feature_columns(df)
        columns: Dict[str, Any] = {c: df[c] for c in features}
        for h in self._hypotheses():
            if h not in df.columns:
                raise MissingColumn(f"hypothesis column '{h}' is not a column of X",
                                    field="hypothesis_columns")
            columns.setdefault(h, df[h])
        if y is None:
            if self.label not in df.columns:
                raise MissingColumn(
                    f"{type(self).__name__} requires y to be passed, but the target y is None "
                    f"and X has no label column '{self.label}'", field="y")
            y = df[self.label]
        labels = np.asarray(y)
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]  # a column vector, as scikit-learn's classifiers take it
        if labels.ndim != 1 or labels.shape[0] != len(df):
            raise InvalidInput(f"y must hold one label per row of X (got shape {labels.shape} "
                               f"for {len(df)} rows)", field="y")
        columns[self.label] = self._encode(labels, validation)
        source, key_column = self._keys_frame(df, keys)
        table, _ = _upload(self.vault, self.dataset, source, key_column, columns,
                           self.hmac_secret, self.hmac_secret_file)
        return table, df, features, columns[self.label]

    # ----- fit ------------------------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, *, keys: Any = None,
            feature_names: Optional[Sequence[str]] = None, validation_data: Any = None,
            preview: bool = False):
        """Uploads the subject keys, the feature (or candidate) columns and the labels (``y``,
        else ``X[label]``), submits the job (charged now), waits for it and fetches the model.

        Args:
            X: a DataFrame, or a 2-D array (a transformer's output) with ``feature_names``.
            y: the 0/1 labels (default: ``X[label]``).
            keys: the raw subject keys, one per row (default: from ``key_column``).
            validation_data: ``(X_val, y_val)`` or ``(X_val, y_val, keys_val)``: rows for the
                managed selection (exponentiated gradient only).
            preview: price the job instead (the table is uploaded, free; nothing is charged).

        Returns self, or the job's ``Preview``. Then, locally, ``training_summary_`` and a
        ``TrivialModelWarning`` when the model decides one class for 99 % of these rows or
        more, or errs more often than the constant classifier on them.
        """
        if self.epsilon is None or not np.isfinite(self.epsilon) or self.epsilon <= 0:
            raise InvalidInput(f"epsilon must be finite and > 0: the job's whole cost, charged "
                               f"at submission (got {self.epsilon})", field="epsilon")
        table, df, features, labels = self._upload_rows(X, y, keys, feature_names)
        options = self._options()
        if validation_data is not None:
            options["validation_table_handle"] = self._upload_validation(validation_data,
                                                                         feature_names)
        result = self.vault.fit_fair_model(
            table, self._algorithm(), self.label, self.epsilon, features,
            self.attributes, unmatched=self.unmatched, idempotency_key=self.idempotency_key,
            preview=preview, **options)
        if _is_preview(result):
            return result
        self.job_ = self.vault.wait_job(result.job.id, timeout=self.timeout,
                                        progress=self.progress)
        self._store(result, self.vault.get_artifact(self.job_.artifact_id), table)
        self.n_features_in_ = len(self.applier_.input_columns)
        self.feature_names_in_ = np.asarray(self.applier_.input_columns, dtype=object)
        self._summarise(df, labels)
        return self

    def _upload_validation(self, validation_data: Any,
                           feature_names: Optional[Sequence[str]]) -> str:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise InvalidInput("validation_data must be (X_val, y_val) or (X_val, y_val, "
                               "keys_val)", field="validation_data")
        X_val, y_val = validation_data[0], validation_data[1]
        keys_val = validation_data[2] if len(validation_data) == 3 else None
        table, _, _, _ = self._upload_rows(X_val, y_val, keys_val, feature_names,
                                           validation=True)
        return str(table)

    def _summarise(self, df: pd.DataFrame, labels: np.ndarray) -> None:
        # Checked on the rows just given, locally: a trivial model is named at once. The model
        # is paid for: a check that cannot run (labels that are not classes) is skipped.
        try:
            decisions = self.applier_.predict(df, random_state=0)
            self.training_summary_ = describe_decisions(decisions, labels)
            warning = trivial_model_warning(decisions, labels)
        except (ValueError, TypeError):
            self.training_summary_, warning = None, None
        if warning is not None:
            warnings.warn(f"{type(self).__name__}: {warning} (on the {len(df)} rows given to "
                          "fit)", TrivialModelWarning, stacklevel=3)

    # ----- predict --------------------------------------------------------------------------

    @property
    def classes_(self) -> np.ndarray:
        """The labels ``y`` held, in the order of ``predict_proba``'s columns (the vault's
        model decides their indices 0..k-1)."""
        self._check_fitted()
        return self._classes

    def _decode(self, decisions: np.ndarray) -> np.ndarray:
        return self._classes[np.asarray(decisions, dtype=np.int64)]

    def _X(self, X: Any) -> Any:
        """X for the applier: a DataFrame by name, an array by position in the model's order."""
        if isinstance(X, pd.DataFrame):
            return X if all(isinstance(c, str) for c in X.columns) else X.rename(columns=str)
        if isinstance(X, dict):
            return X
        values = floats(X, "X")
        if values.ndim == 1:
            raise InvalidInput(f"X must be 2-dimensional (rows x features); got a 1-D array "
                               f"of {values.shape[0]}. Reshape your data: X.reshape(-1, 1) "
                               "for one feature, X.reshape(1, -1) for one row", field="X")
        if values.ndim == 2 and values.shape[1] != self.n_features_in_:
            raise InvalidInput(f"X has {values.shape[1]} features, but this model was fitted "
                               f"with {self.n_features_in_} ({list(self.feature_names_in_)})",
                               field="X")
        return values

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, len(classes_)) probabilities in ``classes_`` order, as scikit-learn's
        classifiers: for a binary model column 1 is ``fairvault predict``'s ``p_positive``
        (the share of a mixture's components deciding 1) and column 0 its complement."""
        self._check_fitted()
        p = self.applier_.predict_proba(self._X(X))
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p

    def predict(self, X: Any) -> np.ndarray:
        """Decisions; a mixture draws a component per row with MT19937-64 seeded by
        ``random_state`` (as ``fairvault predict --seed``; the seed used is
        ``applier_.last_seed_``)."""
        self._check_fitted()
        return self._decode(self.applier_.predict(self._X(X), random_state=self.random_state))

    def score(self, X: Any, y: Any) -> float:
        """The accuracy of ``predict(X)`` against ``y`` (scikit-learn's ``ClassifierMixin``)."""
        return _accuracy(self.predict(X), y)


# The parameters every learner shares, documented once (each class lists its own).
_COMMON_DOC = """
    Shared args (see :mod:`fairvault.learners`): vault, dataset, epsilon, label, features,
    attributes, key_column, hmac_secret, hmac_secret_file, unmatched, idempotency_key, timeout,
    progress, random_state.
"""

_GAME_FIELDS = {
    "gamma": ("gamma", float), "rounds": ("rounds", int), "lambda_bound": ("lambda_bound", float),
    "learning_rate": ("learning_rate", float), "masses_share": ("masses_share", float),
    "mass_floor": ("mass_floor", float), "clip_l1": ("clip_l1", float),
    "fit_intercept": ("no_intercept", _no_intercept),
}


class DPOracleLearner(_FairLearner):
    """Jagielski et al. (2019), Alg. 3: the fair game between a learner playing private best
    responses (linear, least squares) and an auditor's exponentiated-gradient weights; the
    model is the uniform mixture of the T best responses.

    Args:
        gamma: the equalized-odds slack γ >= 0.
        rounds: T (1..100000; default 100). lambda_bound: B (default 1).
        learning_rate: the auditor's step η (default 1). masses_share: the share of epsilon
            spent on the group masses q̂ (default 0.1). mass_floor: q̂'s floor.
        clip_l1: each row's features are scaled to L1 norm <= clip_l1 when it is > 0. Left
            None (the default), it is not sent and the vault's 0 applies: no clipping, so the
            noise scales with the data's own largest row L1 norm; pass a public bound to keep
            the noise independent of the data.
        fit_intercept: append the constant 1 (default True).
    """

    algorithm_name = "dp_oracle_learner"
    _FIELDS = _GAME_FIELDS

    def __init__(self, vault: Any, dataset: str, epsilon: float, *, label: str = "label",
                 features: Optional[Sequence[str]] = None, attributes: Sequence[str] = (),
                 gamma: float = 0.0, rounds: Optional[int] = None,
                 lambda_bound: Optional[float] = None, learning_rate: Optional[float] = None,
                 masses_share: Optional[float] = None, mass_floor: Optional[float] = None,
                 clip_l1: Optional[float] = None, fit_intercept: bool = True,
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                 progress: Optional[bool] = None, random_state: Optional[int] = None):
        self._set_params(locals())


class PrivateFairNR(DPOracleLearner):
    """Private FairNR (Cummings et al.'s Follow-the-Perturbed-Leader, as Jagielski et al. 2019
    use it): the fair game with each round's costs perturbed by fresh Laplace noise before a
    non-private least-squares best response; the same parameters as
    :class:`DPOracleLearner`."""

    algorithm_name = "private_fair_nr"


class PrivateExponentiatedGradient(_FairLearner):
    """Agarwal et al. (2018) exponentiated gradient (Fairlearn's ``ExponentiatedGradient``),
    private: least-squares best responses computed from one release of the per-cell feature
    sums, per-round releases of the responses' positives, and a final mixture.

    Args:
        constraints: ``"equalized_odds"`` (default) or ``"demographic_parity"``.
        difference_bound: the constraints' bound in [0, 1] (Fairlearn's; default 0.01).
        rounds: T (default 100). lambda_bound: B (default 100). learning_rate: η (default
            2/B). masses_share, sums_share: the shares of epsilon on the group-label counts
            (default 0.05) and on the feature sums (default 0.45).
        mass_floor, clip_l1, fit_intercept: as for :class:`DPOracleLearner`.
        mixture: ``"candidates"`` (default), ``"linear_program"``, ``"average"`` or
            ``"selected"`` (the managed selection: give ``fit`` ``validation_data``).
        selection_target, selection_penalty, selection_share, selection_candidates: the
            managed selection's τ, P (default 2), share of epsilon (default 0.3) and J
            (default 8).
    """

    algorithm_name = "exponentiated_gradient"
    _FIELDS = {
        "constraints": ("fairness", None), "difference_bound": ("gamma", float),
        "rounds": ("rounds", int), "lambda_bound": ("lambda_bound", float),
        "learning_rate": ("learning_rate", float), "masses_share": ("masses_share", float),
        "sums_share": ("sums_share", float), "mass_floor": ("mass_floor", float),
        "clip_l1": ("clip_l1", float), "fit_intercept": ("no_intercept", _no_intercept),
        "mixture": ("mixture", None), "selection_target": ("selection_target", float),
        "selection_penalty": ("selection_penalty", float),
        "selection_share": ("selection_share", float),
        "selection_candidates": ("selection_candidates", int),
    }

    def __init__(self, vault: Any, dataset: str, epsilon: float, *, label: str = "label",
                 features: Optional[Sequence[str]] = None, attributes: Sequence[str] = (),
                 constraints: str = "equalized_odds", difference_bound: Optional[float] = None,
                 rounds: Optional[int] = None, lambda_bound: Optional[float] = None,
                 learning_rate: Optional[float] = None, masses_share: Optional[float] = None,
                 sums_share: Optional[float] = None, mass_floor: Optional[float] = None,
                 clip_l1: Optional[float] = None, fit_intercept: bool = True,
                 mixture: Optional[str] = None, selection_target: Optional[float] = None,
                 selection_penalty: Optional[float] = None,
                 selection_share: Optional[float] = None,
                 selection_candidates: Optional[int] = None,
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                 progress: Optional[bool] = None, random_state: Optional[int] = None):
        self._set_params(locals())


class ExponentialMechanismClassifier(_FairLearner):
    """Jagielski et al. (2019), Alg. 1 (the exponential mechanism): picks one of the company's
    candidate classifiers — 0/1 prediction columns of ``X`` — by a private trade-off of error
    and equalized-odds violation. The model is the chosen column: ``predict`` reads it.

    Args:
        hypothesis_columns: the candidates' columns (2..5000).
        gamma: the equalized-odds slack. em_delta: the δ of the released shift (default
            exp(−√n)).
    """

    algorithm_name = "exponential_mechanism"
    _uses_features = False
    _FIELDS = {"gamma": ("gamma", float), "em_delta": ("em_delta", float)}

    def __init__(self, vault: Any, dataset: str, epsilon: float, *,
                 hypothesis_columns: Sequence[str] = (), label: str = "label",
                 features: Optional[Sequence[str]] = None, attributes: Sequence[str] = (),
                 gamma: float = 0.0, em_delta: Optional[float] = None,
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                 progress: Optional[bool] = None, random_state: Optional[int] = None):
        self._set_params(locals())

    def _hypotheses(self) -> List[str]:
        if len(self.hypothesis_columns) < 2:
            raise InvalidInput("hypothesis_columns must name at least 2 candidate columns",
                               field="hypothesis_columns")
        return [str(h) for h in self.hypothesis_columns]

    def _options(self) -> Dict[str, Any]:
        return dict(super()._options(), hypothesis_columns=self._hypotheses())


_GRADIENT_FIELDS = {
    "model": ("model", None), "hidden_units": ("hidden_units", _ints),
    "fairness": ("fairness", None), "epochs": ("epochs", int),
    "batch_size": ("batch_size", int), "lr_theta": ("lr_theta", float),
    "clip_theta": ("clip_theta", float), "marginals_share": ("marginals_share", float),
    "clip_l1": ("clip_l1", float), "fit_intercept": ("no_intercept", _no_intercept),
}


class DPFermi(_FairLearner):
    """DP-FERMI (Lowy et al. 2023): logistic regression or an MLP trained with noisy
    stochastic gradients of the loss plus ``fairness_lambda`` x an ERMI penalty on the
    prediction's dependence on the group. Needs a grant with delta > 0 (Gaussian noise).

    Args:
        model: ``"logistic_regression"`` (default), ``"softmax_regression"`` or ``"mlp"``;
            hidden_units: the MLP's layer widths (1 or 2 entries; default [32]).
        fairness: ``"demographic_parity"`` (default) or ``"equalized_odds"``.
        fairness_lambda: the penalty's weight (>= 0).
        epochs (default 300), batch_size (default: every row), lr_theta (default 1), lr_w
            (default 0.1), w_radius (default 5), clip_theta and clip_w (the clipping norms of
            the group-dependent gradient parts; default 1), marginals_share (the share of
            epsilon on the group marginals; default 0.1), clip_l1, fit_intercept.
    """

    algorithm_name = "dp_fermi"
    _FIELDS = dict(_GRADIENT_FIELDS, fairness_lambda=("fairness_lambda", float),
                   lr_w=("lr_w", float), w_radius=("w_radius", float),
                   clip_w=("clip_w", float))

    def __init__(self, vault: Any, dataset: str, epsilon: float, *, label: str = "label",
                 features: Optional[Sequence[str]] = None, attributes: Sequence[str] = (),
                 model: Optional[str] = None, hidden_units: Optional[Sequence[int]] = None,
                 fairness: Optional[str] = None, fairness_lambda: Optional[float] = None,
                 epochs: Optional[int] = None, batch_size: Optional[int] = None,
                 lr_theta: Optional[float] = None, lr_w: Optional[float] = None,
                 w_radius: Optional[float] = None, clip_theta: Optional[float] = None,
                 clip_w: Optional[float] = None, marginals_share: Optional[float] = None,
                 clip_l1: Optional[float] = None, fit_intercept: bool = True,
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                 progress: Optional[bool] = None, random_state: Optional[int] = None):
        self._set_params(locals())


class PFLD(_FairLearner):
    """PF-LD (Ding et al.): private primal-dual Langevin training of logistic regression or an
    MLP under a fairness constraint; the model averages the second half's epoch iterates.

    Args:
        model, hidden_units: as for :class:`DPFermi`.
        fairness: ``"demographic_parity"`` (default), ``"equalized_odds"`` or
            ``"accuracy_parity"``.
        target: the violation τ in [0, 1] the dual step aims at (λ ← max(0, λ + s(|v| − τ)));
            0 (default): the paper's λ ← λ + s|v|.
        dual_lr: the dual step s (default 0.1). clip_theta: the primal clip C_p (default 5).
        epochs, batch_size, lr_theta, marginals_share, clip_l1, fit_intercept: as for
            :class:`DPFermi`.
    """

    algorithm_name = "pf_ld"
    _FIELDS = dict(_GRADIENT_FIELDS, target=("gamma", float), dual_lr=("dual_lr", float))

    def __init__(self, vault: Any, dataset: str, epsilon: float, *, label: str = "label",
                 features: Optional[Sequence[str]] = None, attributes: Sequence[str] = (),
                 model: Optional[str] = None, hidden_units: Optional[Sequence[int]] = None,
                 fairness: Optional[str] = None, target: Optional[float] = None,
                 dual_lr: Optional[float] = None, epochs: Optional[int] = None,
                 batch_size: Optional[int] = None, lr_theta: Optional[float] = None,
                 clip_theta: Optional[float] = None, marginals_share: Optional[float] = None,
                 clip_l1: Optional[float] = None, fit_intercept: bool = True,
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                 progress: Optional[bool] = None, random_state: Optional[int] = None):
        self._set_params(locals())


class FairModel(_FairLearner):
    """Any managed learner by name: ``algorithm`` is ``exponentiated_gradient``,
    ``dp_oracle_learner``, ``private_fair_nr``, ``exponential_mechanism``, ``dp_fermi`` or
    ``pf_ld``, and ``learner_params`` a dict of further ``FitFairModelRequest`` fields
    (``{"rounds": 20, "clip_l1": 1}``; docs/api.md lists them). The per-algorithm classes name
    each parameter instead; this one suits sweeps over algorithms.

    Args:
        gamma: the request's ``gamma`` (the equalized-odds slack, exponentiated gradient's
            bound, PF-LD's target).
    """

    def __init__(self, vault: Any, dataset: str, epsilon: float, *,
                 algorithm: str = "dp_oracle_learner", learner_params: Optional[dict] = None,
                 label: str = "label", features: Optional[Sequence[str]] = None,
                 attributes: Sequence[str] = (), gamma: float = 0.0,
                 key_column: Optional[str] = None, hmac_secret: Any = None,
                 hmac_secret_file: Any = None, unmatched: str = "reject",
                 idempotency_key: Optional[str] = None, timeout: Optional[float] = None,
                 progress: Optional[bool] = None, random_state: Optional[int] = None):
        self._set_params(locals())

    @property
    def _uses_features(self) -> bool:  # type: ignore[override]
        return self.algorithm != "exponential_mechanism"

    def _algorithm(self) -> str:
        return self.algorithm

    def _hypotheses(self) -> List[str]:
        return [str(h) for h in (self.learner_params or {}).get("hypothesis_columns", [])]

    def _options(self) -> Dict[str, Any]:
        options = dict(self.learner_params or {})
        options["gamma"] = float(self.gamma)
        return options


# Each learner's documentation ends with the shared parameters (a docstring must be a literal).
for _cls in (DPOracleLearner, PrivateFairNR, PrivateExponentiatedGradient,
             ExponentialMechanismClassifier, DPFermi, PFLD, FairModel):
    _cls.__doc__ = (_cls.__doc__ or "").rstrip() + "\n" + _COMMON_DOC
