"""The attribute-aware post-processors applied with numpy where each row's group is known (the
regulator, or a company measuring on its own labelled sample): equalized odds on predictions or
on scores (client/apply/eo_apply.cc, ``fairvault apply-eo``) and statistical parity on a regressor's
scores (the draw of core/postprocess/statistical_parity.cc that ``Decide`` makes).

The decision probabilities are the C++ code's exactly (the same bin grid, bit for bit); the coins
are the caller's own randomness (numpy's generator), not the CLI's or the vault's draws, which
come from a secure generator that no seed reproduces. ``fairvault.models.applier_for`` picks the
applier for an artifact.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np
from fairvault.errors import InvalidInput
from fairvault._arrays import floats

__all__ = ["ScoreGrid", "EqualizedOddsApplier", "StatisticalParityApplier", "group_labels"]

RandomState = Union[None, int, np.random.Generator]


def group_labels(groups: Any, attributes: Sequence[str], n: int) -> np.ndarray:
    """Row group labels as the artifacts name them ("Female", or "Female|White" for joint
    groups). A DataFrame holding every attribute column is joined in the artifact's attribute
    order; any other DataFrame in its column order; a 1-D sequence is taken as the labels."""
    if hasattr(groups, "columns"):
        cols = list(attributes) if all(a in groups.columns for a in attributes) and attributes \
            else list(groups.columns)
        labels = groups[cols[0]].astype(str).to_numpy(dtype=object)
        for c in cols[1:]:
            labels = labels + "|" + groups[c].astype(str).to_numpy(dtype=object)
    else:
        labels = np.asarray(groups, dtype=object).astype(str)
    if labels.shape != (n,):
        raise InvalidInput(f"got {labels.shape[0] if labels.ndim else 0} group labels for {n} rows")
    return labels


def _rng(random_state: RandomState) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


class ScoreGrid:
    """The public bin grid on [lo, hi] with k bins (core/postprocess/statistical_parity.h):
    bin(s) = clamp(floor((s - lo)·k/(hi - lo)), 0, k - 1), a value within 8 ulps of an integer
    counting as that integer; centre(j) = lo + (j + 1/2)·((hi - lo)/k)."""

    def __init__(self, lo: float, hi: float, k: int):
        self.lo, self.hi, self.k = float(lo), float(hi), int(k)
        if not (np.isfinite(self.lo) and np.isfinite(self.hi) and self.lo < self.hi):
            raise InvalidInput(f"the grid needs finite lo < hi (got [{lo}, {hi}])")
        if self.hi - self.lo < 1e-9 * max(abs(self.lo), abs(self.hi)):
            raise InvalidInput(f"the grid [{lo}, {hi}] is too narrow for its magnitude")
        if not 1 <= self.k <= 1000:
            raise InvalidInput(f"bins must be in [1, 1000] (got {k})")

    def bin(self, scores: Any) -> np.ndarray:
        s = floats(scores, "scores")
        x = (s - self.lo) * float(self.k) / (self.hi - self.lo)
        nearest = np.rint(x)  # nearbyint: ties to even
        x = np.where(np.abs(x - nearest) <= 8 * np.finfo(np.float64).eps * np.abs(nearest),
                     nearest, x)
        with np.errstate(invalid="ignore"):
            b = np.where(~(x >= 1.0), 0.0, np.where(x >= self.k - 1, self.k - 1, x))
        return np.floor(np.nan_to_num(b)).astype(np.int64)

    def centers(self) -> np.ndarray:
        return self.lo + (np.arange(self.k) + 0.5) * ((self.hi - self.lo) / self.k)


def _finite(values: Any, what: str) -> np.ndarray:
    v = floats(values, what).reshape(-1)
    bad = ~np.isfinite(v)
    if bad.any():
        row = int(np.nonzero(bad)[0][0])
        raise InvalidInput(f"row {row}: {what} must be finite (got {v[row]})")
    return v


def _group_index(labels: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    lookup = {g: i for i, g in enumerate(groups)}
    index = np.array([lookup.get(g, -1) for g in labels], dtype=np.int64)
    if (index < 0).any():
        row = int(np.nonzero(index < 0)[0][0])
        raise InvalidInput(f"row {row}: unknown group '{labels[row]}' (the artifact's groups: "
                         f"{', '.join(groups)})")
    return index


class EqualizedOddsApplier:
    """An equalized-odds post-processor applied where each row's group is known
    (client/apply/eo_apply.cc; ``fairvault apply-eo``). The binary artifact (Jagielski et al. 2019,
    Alg. 1) decides 1 with probability P(Ỹ=1 | Ŷ=ŷ, group); the one fitted on scores with
    P(Ỹ=1 | bin(score), group). Probabilities 0 and 1 are exact (no draw)."""

    def __init__(self, processor):
        self.takes_scores = processor.DESCRIPTOR.name == "EqualizedOddsScoresPostProcessor"
        if len(processor.groups) == 0:
            raise InvalidInput("artifact has no groups")
        self.attributes = list(processor.attributes)
        self.groups = [g.group for g in processor.groups]
        if len(set(self.groups)) != len(self.groups):
            raise InvalidInput("artifact lists a group twice")
        if self.takes_scores:
            self.grid = ScoreGrid(processor.lo, processor.hi, processor.bins)
            table = []
            for g in processor.groups:
                if len(g.p_positive) != self.grid.k:
                    raise InvalidInput(f"artifact group '{g.group}' has {len(g.p_positive)} "
                                     f"probabilities for {self.grid.k} bins")
                table.append(list(g.p_positive))
        else:
            self.grid = None
            table = [[g.p_flip_to_1_given_0, g.p_keep_1_given_1] for g in processor.groups]
        self._p = np.array(table, dtype=np.float64)
        bad = ~((self._p >= 0) & (self._p <= 1))
        if bad.any():
            raise InvalidInput(f"artifact group '{self.groups[np.argwhere(bad)[0][0]]}': a "
                             "probability is outside [0, 1]")

    def probabilities(self, values: Any, groups: Any) -> np.ndarray:
        """P(decision = 1) per row: ``values`` are 0/1 predictions (binary artifact) or scores
        (an artifact fitted on scores); ``groups`` as in ``group_labels``."""
        v = _finite(values, "score" if self.takes_scores else "prediction")
        g = _group_index(group_labels(groups, self.attributes, v.shape[0]), self.groups)
        if self.takes_scores:
            return self._p[g, self.grid.bin(v)]
        bad = (v != 0) & (v != 1)
        if bad.any():
            row = int(np.nonzero(bad)[0][0])
            raise InvalidInput(f"row {row}: prediction must be 0 or 1 (got {v[row]})")
        return self._p[g, v.astype(np.int64)]

    def predict(self, values: Any, groups: Any, random_state: RandomState = None) -> np.ndarray:
        """0/1 decisions: a fresh coin per row with ``probabilities``, from numpy's generator
        (``random_state``: None, a seed, or a Generator); rows with probability 0 or 1 draw
        nothing and equal ``apply-eo``'s decisions."""
        p = self.probabilities(values, groups)
        u = _rng(random_state).random(p.shape[0])
        return np.where(p <= 0, 0, np.where(p >= 1, 1, (u < p).astype(np.int64))).astype(np.int64)


class StatisticalParityApplier:
    """A statistical-parity post-processor for a regressor's scores (Xian et al. 2024, Alg. 1)
    applied where each row's group is known: f(s, a) = centre of bin L, L drawn from row
    bin(s) of the group's transport g_a (decision floor already mixed in by the fit). The
    vault's ``Decide`` draws L exactly from the row's integer-scaled weights; this draws it by
    a double-precision inverse CDF, the same distribution up to about 2^-52 per bin."""

    def __init__(self, processor):
        if len(processor.groups) == 0:
            raise InvalidInput("artifact has no groups")
        self.grid = ScoreGrid(processor.lo, processor.hi, processor.bins)
        self.attributes = list(processor.attributes)
        self.groups = [g.group for g in processor.groups]
        k = self.grid.k
        for g in processor.groups:
            if len(g.transport) != k * k:
                raise InvalidInput(f"artifact group '{g.group}' has {len(g.transport)} transport "
                                 f"entries; expected {k * k}")
        self.transport = np.array([list(g.transport) for g in processor.groups],
                                  dtype=np.float64).reshape(len(self.groups), k, k)
        if not (np.isfinite(self.transport).all() and (self.transport >= 0).all()):
            raise InvalidInput("artifact transport has a negative or non-finite entry")

    def output_distribution(self, scores: Any, groups: Any) -> np.ndarray:
        """(n, k): per row, the probability of each bin centre as the output (a row without
        positive weight outputs its own bin's centre, as SampleFairScore does)."""
        s = _finite(scores, "score")
        g = _group_index(group_labels(groups, self.attributes, s.shape[0]), self.groups)
        b = self.grid.bin(s)
        rows = np.where(self.transport[g, b] > 0, self.transport[g, b], 0.0)
        total = rows.sum(axis=1)
        empty = total <= 0
        rows[empty, b[empty]] = 1.0
        total[empty] = 1.0
        return rows / total[:, None]

    def expected_output(self, scores: Any, groups: Any) -> np.ndarray:
        """E[f(s, a)] per row: a deterministic (not statistically-parity-preserving) summary."""
        return self.output_distribution(scores, groups) @ self.grid.centers()

    def predict(self, scores: Any, groups: Any, random_state: RandomState = None) -> np.ndarray:
        """The fair scores (bin centres), one draw per row from numpy's generator."""
        dist = self.output_distribution(scores, groups)
        cdf = np.cumsum(dist, axis=1)
        u = _rng(random_state).random(dist.shape[0])
        index = np.minimum((cdf <= u[:, None]).sum(axis=1), self.grid.k - 1)
        # Never a zero-probability bin: move down to the last positive bin at or below.
        while True:
            zero = dist[np.arange(dist.shape[0]), index] <= 0
            if not zero.any():
                break
            index = np.where(zero, index - 1, index)
        return self.grid.centers()[index]
