"""fairvault: the Python client of the fairvault privacy vault.

``fairvault.Vault(server, key)`` holds a connection with one method per RPC, pandas
DataFrames in and out; :mod:`fairvault.errors` has one exception per status;
:mod:`fairvault.pseudonymise` computes the CLI's HMAC pseudonyms; HMAC secrets and API keys
are held as :class:`fairvault.Secret`, which no ``repr`` or message shows. The scikit-learn and
Fairlearn-style estimators live in :mod:`fairvault.estimators` (post-processors),
:mod:`fairvault.learners` (the managed fair learners), :mod:`fairvault.metric_frame` and
:mod:`fairvault.models`, and their public names are reachable from here too.
"""
from __future__ import annotations

import importlib
from typing import Any

from fairvault.errors import (Aborted, AlreadyExists, BudgetExhausted, FailedPrecondition,
                              FairvaultError, InvalidArgument, InvalidInput, JobFailed,
                              MissingColumn, NoSubjectsWarning, NotFittedError, NotFound,
                              PermissionDenied, Unauthenticated, Unavailable, WaitTimeout,
                              WrongType)
from fairvault.pseudonymise import pseudonymise, pseudonymise_all, read_secret_file
from fairvault.results import (ClassifierAudit, CountsRelease, Decisions, Preview,
                               RegressorAudit, Release)
from fairvault.secret import Secret
from fairvault._base import ChargedAgainWarning
from fairvault.session import Replayed, Session
from fairvault.vault import TableHandle, Vault, new_idempotency_key

__version__ = "0.10.0"

__all__ = [
    "Vault", "TableHandle", "new_idempotency_key", "pseudonymise", "pseudonymise_all",
    "read_secret_file", "Secret",
    "Release", "CountsRelease", "ClassifierAudit", "RegressorAudit", "Decisions", "Preview",
    "FairvaultError", "InvalidArgument", "NotFound", "AlreadyExists", "PermissionDenied",
    "Unauthenticated", "BudgetExhausted", "FailedPrecondition", "Aborted", "Unavailable",
    "JobFailed", "InvalidInput", "MissingColumn", "WrongType", "NotFittedError", "WaitTimeout",
    "NoSubjectsWarning", "Session", "Replayed", "ChargedAgainWarning",
    # Lazy (below): the Fairlearn-style layer.
    "private_metric_frame", "PrivateMetricFrame", "PrivateEqualizedOdds",
    "PrivateEqualizedOddsScores", "PrivateStatisticalParityRegressor", "FairModel",
    "PrivateExponentiatedGradient", "DPOracleLearner", "PrivateFairNR",
    "ExponentialMechanismClassifier", "DPFermi", "PFLD",
    "FairModelApplier", "EqualizedOddsApplier", "StatisticalParityApplier", "applier_for",
    "load_artifact", "TrivialModelWarning", "describe_decisions", "trivial_model_warning",
]

# The estimators' modules, imported on first use of one of their names (fairvault.FairModel,
# fairvault.private_metric_frame, ...), so that `import fairvault` stays light.
_LAZY_MODULES = ("estimators", "learners", "metric_frame", "models")


def __getattr__(name: str) -> Any:
    if not name.startswith("_"):
        for module_name in _LAZY_MODULES:
            try:
                module = importlib.import_module(f"fairvault.{module_name}")
            except ModuleNotFoundError as error:
                if error.name != f"fairvault.{module_name}":
                    raise
                continue
            if name in getattr(module, "__all__", ()) or (
                    hasattr(module, name) and not name.startswith("_")
                    and getattr(getattr(module, name), "__module__", None) == module.__name__):
                return getattr(module, name)
    raise AttributeError(f"module 'fairvault' has no attribute '{name}'")
