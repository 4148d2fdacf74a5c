"""A second synthetic population for the estimator tests, loaded once per server: a classifier
that is unfair by construction (its error rates depend on sex), features a fair learner can
use, and regressor scores shifted by group. The regulator imports sex into dataset "fair"."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

DATASET = "fair"
SIZE = 20000


def make_biased_population(n: int = SIZE, seed: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    male = rng.random(n) < 0.6
    x1 = rng.normal(size=n) + 0.5 * male
    x2 = rng.normal(size=n)
    label = (x1 + x2 + rng.normal(size=n) > 0.5).astype(int)
    # False-negative rate 0.35 for F and 0.10 for M; false-positive rate 0.05 and 0.20:
    # the equalized-odds gap is max(0.25, 0.15) = 0.25 in the population.
    u = rng.random(n)
    fnr = np.where(male, 0.10, 0.35)
    fpr = np.where(male, 0.20, 0.05)
    prediction = np.where(label == 1, (u >= fnr).astype(int), (u < fpr).astype(int))
    score = np.clip(0.3 + 0.3 * label + 0.15 * male + rng.normal(0, 0.1, n), 0, 1)
    return pd.DataFrame({
        "key": [f"b{i:06d}" for i in range(n)],
        "sex": np.where(male, "M", "F"),
        "x1": x1, "x2": x2, "label": label, "prediction": prediction, "score": score,
    })


def biased_population(vault_server) -> pd.DataFrame:
    """The population, imported into the server's dataset "fair" on first use."""
    cached = getattr(vault_server, "_biased_population", None)
    if cached is not None:
        return cached
    df = make_biased_population()
    regulator = vault_server.regulator
    regulator.create_dataset(DATASET, {"sex": ["F", "M"]})
    assert regulator.import_attributes(df, DATASET, ["sex"], "key").rows_imported == len(df)
    vault_server._biased_population = df
    return df


def eo_gap(df: pd.DataFrame, decisions) -> float:
    """The true equalized-odds gap of `decisions` on df (the test holds the groups)."""
    d = pd.Series(np.asarray(decisions), index=df.index)
    rates = [[d[(df.sex == s) & (df.label == y)].mean() for s in ("F", "M")] for y in (0, 1)]
    return max(abs(r[0] - r[1]) for r in rates)


# Fixtures shared by the estimator and metric-frame tests (imported there by name).
@pytest.fixture
def population(vault_server) -> pd.DataFrame:
    return biased_population(vault_server)


@pytest.fixture
def fair_company(vault_server):
    """A company with a grant of epsilon 1000 on "fair"."""
    return vault_server.new_company(dataset=DATASET)
