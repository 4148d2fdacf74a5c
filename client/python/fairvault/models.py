"""Applying fairvault artifacts locally with numpy, with no vault call: fair models (the company's
rows only, no protected attribute), and — through ``applier_for`` — the attribute-aware
post-processors of ``fairvault.postprocess`` for a caller who holds each row's group.

The arithmetic follows the C++ reference implementation, client/apply/model_apply.cc (``fairvault
predict``), and docs/api.md, "Model artifact format (FairModel)", step for step: sums in index
order in IEEE double, the same clipping, the same comparisons (a score of exactly 0 decides 0),
and ``exp`` from the C library as std::exp, so scores, logits, probabilities and decisions are
bit-identical to the CLI's (on the same platform's libm). A mixture's decisions are drawn with
MT19937-64 exactly as ``fairvault predict --seed S`` draws them.
"""

from __future__ import annotations

import math
import os
import secrets
from collections import Counter
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from fairvault._mt19937_64 import MT19937_64
from fairvault.postprocess import EqualizedOddsApplier, ScoreGrid, StatisticalParityApplier
from fairvault.errors import InvalidInput, MissingColumn, WrongType
from fairvault._arrays import floats

__all__ = [
    "load_artifact", "applier_for", "FairModelApplier", "EqualizedOddsApplier",
    "StatisticalParityApplier", "ScoreGrid", "MT19937_64", "TrivialModelWarning",
    "describe_decisions", "trivial_model_warning", "TRIVIAL_SHARE",
]


# ---- trivial models -----------------------------------------------------------------------
# As client/apply/model_quality.cc (`fairvault predict --label-column`), in the same words.

#: A model decides one class for (nearly) everyone when that class has at least this share of
#: the rows' decisions.
TRIVIAL_SHARE = 0.99


class TrivialModelWarning(UserWarning):
    """A returned model decides one class for (nearly) everyone, or errs more often than the
    constant classifier on the rows it was checked on."""


def _mode(counts: Counter) -> tuple:
    """The most frequent value (the smallest on ties) and its count."""
    return min(counts.items(), key=lambda item: (-item[1], item[0]))


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%"


def _tally(decisions: Any, labels: Any) -> Dict[str, Any]:
    """Counts of the decisions, and with labels the errors and the constant classifier's."""
    d = np.asarray(decisions).astype(np.int64).ravel()
    t: Dict[str, Any] = {"d": d, "n": int(d.shape[0]), "counts": Counter(d.tolist())}
    if labels is not None:
        y = np.asarray(labels).ravel()
        if y.shape[0] != t["n"]:
            raise InvalidInput(f"labels has {y.shape[0]} rows but decisions has {t['n']}")
        if not np.all(np.equal(np.mod(y, 1), 0)):
            raise InvalidInput("labels must be integer class labels (0/1 for a binary model)")
        y = y.astype(np.int64)
        constant_class, constant_right = _mode(Counter(y.tolist())) if t["n"] else (0, 0)
        t.update(errors=int(np.sum(d != y)), constant_class=int(constant_class),
                 constant_errors=t["n"] - constant_right)
    return t


def describe_decisions(decisions: Any, labels: Any = None) -> Dict[str, Any]:
    """What a model's ``decisions`` on your own rows say about it, computed locally: ``rows``,
    the ``positive_rate`` (share of decisions 1) and each class's ``shares``; with ``labels``
    also ``error`` and ``constant_error``, the error of the constant classifier deciding the
    most frequent label (``constant_class``)."""
    t = _tally(decisions, labels)
    n = t["n"]
    out: Dict[str, Any] = {
        "rows": n,
        "positive_rate": t["counts"].get(1, 0) / n if n else float("nan"),
        "shares": {int(k): v / n for k, v in sorted(t["counts"].items())},
    }
    if "errors" in t:
        out.update(error=t["errors"] / n if n else float("nan"),
                   constant_class=t["constant_class"],
                   constant_error=t["constant_errors"] / n if n else float("nan"))
    return out


def trivial_model_warning(decisions: Any, labels: Any = None) -> Optional[str]:
    """The warning ``fairvault predict`` prints, or None: the model decides one class for at
    least ``TRIVIAL_SHARE`` of the rows, or (with ``labels``) errs more often than the constant
    classifier."""
    t = _tally(decisions, labels)
    n = t["n"]
    if n == 0:
        return None
    mode, count = _mode(t["counts"])
    if count >= TRIVIAL_SHARE * n:
        return (f"the model decides {mode} for {_percent(count, n)} of these rows: it is "
                "(nearly) a constant classifier. Its fairness comes from deciding alike for "
                "everyone; try a smaller fairness weight or a larger epsilon")
    if "errors" in t and t["errors"] > t["constant_errors"]:
        return (f"the model errs on {_percent(t['errors'], n)} of these rows, more than the "
                f"constant classifier deciding {t['constant_class']} "
                f"({_percent(t['constant_errors'], n)}): it is worse than deciding alike for "
                "everyone")
    return None


def _pb():
    from fairvault._proto import pb  # the generated stubs, imported on first use
    return pb


# ---- loading ------------------------------------------------------------------------------

def load_artifact(source: Any):
    """An ``Artifact`` message from: an ``Artifact``; a response holding one (``GetArtifact``,
    ``Fit*``, ``BestResponse``); a bare body (``FairModel``, ``EqualizedOddsPostProcessor``,
    ...), wrapped in an Artifact; a path to what ``fairvault artifact get --out`` (or a fit's
    ``--out``) wrote, JSON or binary; or that JSON as text or bytes."""
    pb = _pb()
    if isinstance(source, pb.Artifact):
        return source
    if hasattr(source, "DESCRIPTOR") and hasattr(source, "artifact"):
        return source.artifact
    bodies = {pb.FairModel: "fair_model", pb.EqualizedOddsPostProcessor: "equalized_odds",
              pb.EqualizedOddsScoresPostProcessor: "equalized_odds_scores",
              pb.StatisticalParityPostProcessor: "statistical_parity"}
    for cls, field in bodies.items():
        if isinstance(source, cls):
            artifact = pb.Artifact()
            getattr(artifact, field).CopyFrom(source)
            return artifact
    if isinstance(source, (str, os.PathLike)) and not str(source).lstrip().startswith("{"):
        with open(source, "rb") as f:
            return _parse_artifact_bytes(f.read(), str(source))
    if isinstance(source, str):
        source = source.encode()
    if isinstance(source, (bytes, bytearray)):
        return _parse_artifact_bytes(bytes(source), "<bytes>")
    raise WrongType(f"cannot read an artifact from {type(source).__name__}")


def _parse_artifact_bytes(data: bytes, name: str):
    from google.protobuf import json_format
    pb = _pb()
    if data.lstrip().startswith(b"{"):
        text = data.decode("utf-8")
        # An Artifact, a response wrapping one, or a bare body, as the CLI accepts them.
        for cls in (pb.Artifact, pb.FitEqualizedOddsResponse, pb.FitStatisticalParityResponse,
                    pb.FitEqualizedOddsScoresResponse, pb.BestResponseResponse,
                    pb.FairModel, pb.EqualizedOddsPostProcessor):
            message = cls()
            try:
                json_format.Parse(text, message)
            except json_format.ParseError:
                continue
            artifact = load_artifact(message)
            if artifact.WhichOneof("body") is not None:
                return artifact
        raise InvalidInput(f"{name}: not a fairvault artifact in JSON (expected what "
                         "`fairvault artifact get --out` writes)")
    artifact = pb.Artifact()
    try:
        artifact.ParseFromString(data)
    except Exception as e:  # protobuf's DecodeError
        raise InvalidInput(f"{name}: neither JSON nor a binary fairvault.v1.Artifact") from e
    return artifact


def applier_for(source: Any):
    """The applier for an artifact of any kind (see ``load_artifact`` for what ``source`` may
    be): a ``FairModelApplier``, ``EqualizedOddsApplier`` or ``StatisticalParityApplier``."""
    artifact = load_artifact(source)
    body = artifact.WhichOneof("body")
    if body == "fair_model":
        return FairModelApplier(artifact.fair_model)
    if body in ("equalized_odds", "equalized_odds_scores"):
        return EqualizedOddsApplier(getattr(artifact, body))
    if body == "statistical_parity":
        return StatisticalParityApplier(artifact.statistical_parity)
    raise InvalidInput(f"artifact '{artifact.id}' has no body")


# ---- inputs -------------------------------------------------------------------------------

def _matrix(X: Any, columns: Sequence[str]) -> np.ndarray:
    """X's values of `columns` as an (n, len(columns)) float64 array: by name from a DataFrame
    or a mapping, by position from an array (its columns in `columns` order)."""
    if hasattr(X, "columns") or isinstance(X, dict):
        missing = [c for c in columns if c not in X]
        if missing:
            have = list(X.columns) if hasattr(X, "columns") else list(X)
            raise MissingColumn(f"the model needs column(s) {missing}; the input has {have}")
        values = np.column_stack([floats(X[c], f"column '{c}'") for c in columns])
    else:
        values = floats(X, "X")
        if values.ndim == 1 and len(columns) == 1:
            values = values[:, None]
        if values.ndim != 2 or values.shape[1] != len(columns):
            raise InvalidInput(f"expected an (n, {len(columns)}) array for columns {list(columns)}, "
                             f"got shape {values.shape}")
    bad = ~np.isfinite(values)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InvalidInput(f"row {row}: column '{columns[col]}' is not a finite number "
                           f"({values[row, col]}): NaN and inf are refused")
    return values

_libm_exp = np.frompyfunc(math.exp, 1, 1)


def _exp(x: np.ndarray) -> np.ndarray:
    """exp through the C library's exp (Python's math.exp), as std::exp computes it: numpy's
    vectorised exp may differ in the last bit, and then probabilities would not be the CLI's
    to the bit."""
    return _libm_exp(x).astype(np.float64) if x.size else x.astype(np.float64)

# ---- fair models --------------------------------------------------------------------------

class FairModelApplier:
    """A validated ``FairModel`` (mixture of linear classifiers, hypothesis column, or network),
    ready to apply to the company's rows; client/apply/model_apply.cc's ``FairModelApplier``.

    ``predict_proba`` is ``p_positive`` of ``fairvault predict`` — the fraction of a mixture's
    components deciding 1, the hypothesis column's value, a one-logit network's sigmoid — or,
    for a network with several logits, one column per class in ``classes`` order.
    ``predict`` decides: a mixture of two or more components draws one component per row with
    MT19937-64 (``random_state`` = ``fairvault predict --seed``), everything else is
    deterministic."""

    def __init__(self, model):
        has_components = len(model.components) > 0
        has_hypothesis = model.hypothesis_column != ""
        has_network = model.HasField("network")
        if has_components + has_hypothesis + has_network != 1:
            raise InvalidInput(
                "a fair model needs exactly one of components (a mixture of linear classifiers), "
                f"hypothesis_column and network (got {len(model.components)} components, "
                f"hypothesis_column '{model.hypothesis_column}' and "
                f"{'a network' if has_network else 'no network'})")
        self.model = model
        self.classes = [0, 1]
        self.is_multiclass = False
        self.last_seed_: Optional[int] = None
        self._weights = np.zeros((0, 0))
        self._layers: list = []
        if has_hypothesis:
            self.kind = "hypothesis"
            self.input_columns = [model.hypothesis_column]
            return
        features = model.features
        self.input_columns = list(features.feature_columns)
        self._intercept = bool(features.intercept)
        self._clip_l1 = float(features.clip_l1)
        what = "linear model" if has_components else "network"
        if not self.input_columns:
            raise InvalidInput(f"the model's features.feature_columns is empty: a {what} needs "
                             "its feature columns")
        if any(c == "" for c in self.input_columns):
            raise InvalidInput("features.feature_columns has an empty column name")
        if not (np.isfinite(self._clip_l1) and self._clip_l1 >= 0):
            raise InvalidInput(f"features.clip_l1 must be finite and >= 0 (got {self._clip_l1})")
        width = len(self.input_columns) + (1 if self._intercept else 0)
        if has_components:
            self.kind = "mixture"
            for c, comp in enumerate(model.components):
                if len(comp.weights) != width:
                    raise InvalidInput(f"components[{c}] has {len(comp.weights)} weights; "
                                     f"expected {width}")
            self._weights = np.array([list(c.weights) for c in model.components], dtype=np.float64)
            if not np.isfinite(self._weights).all():
                raise InvalidInput("a component weight is not finite")
            self._mixture = None  # uniform
            if len(model.component_weights):
                if len(model.component_weights) != len(model.components):
                    raise InvalidInput(
                        f"component_weights has {len(model.component_weights)} entries; expected "
                        f"none (a uniform mixture) or one per component ({len(model.components)})")
                w = np.array(list(model.component_weights), dtype=np.float64)
                bad = np.nonzero(~(np.isfinite(w) & (w >= 0)))[0]
                if bad.size:
                    raise InvalidInput(f"component_weights[{bad[0]}] must be finite and >= 0 "
                                     f"(got {w[bad[0]]})")
                cumulative = np.cumsum(w)  # running sums in index order, as the C++
                if not abs(cumulative[-1] - 1) <= 1e-9:
                    raise InvalidInput(f"component_weights must sum to 1 (got {cumulative[-1]})")
                self._mixture = (w, cumulative)
            return
        self.kind = "network"
        net = model.network
        if len(net.layers) == 0:
            raise InvalidInput("network.layers is empty: a network needs at least one layer")
        inputs = width
        for i, layer in enumerate(net.layers):
            if layer.inputs != inputs or layer.outputs < 1:
                raise InvalidInput(f"network.layers[{i}] is {layer.inputs} -> {layer.outputs}; "
                                 f"expected {inputs} inputs and >= 1 outputs")
            if len(layer.weights) != layer.inputs * layer.outputs:
                raise InvalidInput(f"network.layers[{i}] has {len(layer.weights)} weights; "
                                 f"expected {layer.inputs * layer.outputs}")
            if len(layer.bias) not in (0, layer.outputs):
                raise InvalidInput(f"network.layers[{i}].bias has {len(layer.bias)} entries; "
                                 f"expected 0 or {layer.outputs}")
            W = np.array(layer.weights, dtype=np.float64).reshape(layer.outputs, layer.inputs)
            b = np.array(layer.bias, dtype=np.float64) if len(layer.bias) else \
                np.zeros(layer.outputs)
            if not (np.isfinite(W).all() and np.isfinite(b).all()):
                raise InvalidInput(f"network.layers[{i}] has a weight or bias that is not finite")
            self._layers.append((W, b))
            inputs = layer.outputs
        outputs = net.layers[-1].outputs
        classes = list(net.classes)
        if outputs == 1:
            if classes not in ([], [0, 1]):
                raise InvalidInput(f"a one-logit network's classes must be [0, 1] (got {classes})")
        elif len(classes) != outputs or len(set(classes)) != outputs:
            raise InvalidInput(f"a network with {outputs} logits needs {outputs} distinct classes "
                             f"(got {classes})")
        else:
            self.classes = classes
            self.is_multiclass = True

    @property
    def num_components(self) -> int:
        return self._weights.shape[0]

    @property
    def layer_shapes(self) -> list:
        return [(W.shape[1], W.shape[0]) for W, _ in self._layers]

    def preprocess(self, X: Any) -> np.ndarray:
        """The vectors the classifiers or the first layer weigh: features, L1-clipped to
        clip_l1 (if > 0), then the constant 1 appended if the model has an intercept."""
        if self.kind == "hypothesis":
            raise InvalidInput("a hypothesis-column model has no features to preprocess")
        x = _matrix(X, self.input_columns)
        l1 = np.zeros(x.shape[0])
        for j in range(x.shape[1]):  # in index order, as the C++ sums
            l1 = l1 + np.abs(x[:, j])
        if self._clip_l1 > 0:
            over = l1 > self._clip_l1
            scale = np.where(over, self._clip_l1 / np.where(over, l1, 1.0), 1.0)
            x = np.where(over[:, None], x * scale[:, None], x)
        if self._intercept:
            x = np.column_stack([x, np.ones(x.shape[0])])
        return x

    def component_decisions(self, X: Any) -> np.ndarray:
        """A mixture: each component's decision per row, (n, m) of 0/1 (score > 0)."""
        if self.kind != "mixture":
            raise InvalidInput("component_decisions is for a mixture of linear classifiers")
        x = self.preprocess(X)
        score = np.zeros((x.shape[0], self.num_components))
        for j in range(x.shape[1]):  # Σ_j w_cj·x_j in index order
            score = score + x[:, j:j + 1] * self._weights[:, j][None, :]
        return (score > 0).astype(np.int64)

    def logits(self, X: Any) -> np.ndarray:
        """A network: its last layer's outputs, (n, outputs). ValueError naming the row, layer
        and output when one overflows (as ``fairvault predict`` refuses the row)."""
        if self.kind != "network":
            raise InvalidInput("logits are for a network model")
        h = self.preprocess(X)
        for index, (W, b) in enumerate(self._layers):
            s = np.zeros((h.shape[0], W.shape[0]))
            with np.errstate(over="ignore", invalid="ignore"):  # refused just below
                for i in range(W.shape[1]):  # Σ_i W[o][i]·h_i in index order, then + b[o]
                    s = s + h[:, i:i + 1] * W[:, i][None, :]
                s = s + b[None, :]
            bad = ~np.isfinite(s)
            if bad.any():
                row, out = np.argwhere(bad)[0]
                raise InvalidInput(f"row {row}: the network overflowed: layers[{index}] output "
                                 f"{out} is {s[row, out]} (the feature values are too large "
                                 "for the weights)")
            h = s if index + 1 == len(self._layers) else np.where(s > 0, s, 0.0)
        return h

    def _hypothesis_values(self, X: Any) -> np.ndarray:
        v = _matrix(X, self.input_columns)[:, 0]
        bad = (v != 0) & (v != 1)
        if bad.any():
            row = int(np.nonzero(bad)[0][0])
            raise InvalidInput(f"row {row}: hypothesis column '{self.input_columns[0]}' must be "
                             f"0 or 1 (got {v[row]})")
        return v

    def predict_proba(self, X: Any) -> np.ndarray:
        """``p_positive`` per row (n,), or for a multi-class network (n, len(classes)) with the
        softmax probability of ``classes[k]`` in column k."""
        if self.kind == "hypothesis":
            return self._hypothesis_values(X)
        if self.kind == "mixture":
            d = self.component_decisions(X)
            if self._mixture is not None:
                total = np.zeros(d.shape[0])
                for c in range(d.shape[1]):  # summed in index order, as the C++
                    total = total + np.where(d[:, c] == 1, self._mixture[0][c], 0.0)
                return np.minimum(total, 1.0)
            return d.sum(axis=1) / float(self.num_components)
        z = self.logits(X)
        if not self.is_multiclass:
            z = z[:, 0]
            e = _exp(-np.abs(z))
            return np.where(z >= 0, 1 / (1 + e), e / (1 + e))
        best = np.argmax(z, axis=1)  # the first largest logit
        e = _exp(z - z[np.arange(z.shape[0]), best][:, None])
        total = np.zeros(z.shape[0])
        for k in range(z.shape[1]):  # summed in class order, as the C++
            total = total + e[:, k]
        return e / total[:, None]

    def predict(self, X: Any,
                random_state: Union[None, int, MT19937_64] = None) -> np.ndarray:
        """Decisions per row (int64). A mixture of m >= 2 components draws, for each row in
        order, one component index with MT19937-64: ``random_state`` (an int) reproduces
        ``fairvault predict --seed random_state``; an ``MT19937_64`` continues its stream (so
        chunks predicted one after another equal one call on all rows); None draws a seed from the OS
        and keeps it in ``last_seed_``. Networks decide from their logits (1 iff z > 0, or the
        class of the first largest logit) and hypothesis models by the column: no draw."""
        if self.kind == "hypothesis":
            return self._hypothesis_values(X).astype(np.int64)
        if self.kind == "network":
            z = self.logits(X)
            if not self.is_multiclass:
                return (z[:, 0] > 0).astype(np.int64)
            return np.asarray(self.classes, dtype=np.int64)[np.argmax(z, axis=1)]
        d = self.component_decisions(X)
        if self.num_components == 1:
            return d[:, 0]
        if isinstance(random_state, MT19937_64):
            gen = random_state
        else:
            self.last_seed_ = (secrets.randbits(64) if random_state is None
                               else int(random_state))
            gen = MT19937_64(self.last_seed_)
        if self._mixture is None:
            index = gen.draw_indices(self.num_components, d.shape[0])
        else:  # model_apply.cc's DrawWeightedComponent
            u = gen.draw_indices(1 << 53, d.shape[0]).astype(np.float64) * 2.0 ** -53
            cumulative = self._mixture[1]
            index = np.minimum(np.searchsorted(cumulative[:-1], u, side="right"),
                               self.num_components - 1)
        return d[np.arange(d.shape[0]), index]
