"""The Fairlearn-style estimators against the real server: equalized-odds post-processing reduces
the gap a private audit measures, the decide path returns 0/1 and charges its licence once, the
statistical-parity regressor reduces the KS distance, and FairModel predicts as the CLI does."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import fairvault
from fairvault import errors
from fairvault.estimators import NotFittedError
from fairness_population import DATASET, fair_company, population, eo_gap  # noqa: F401 (fixtures)



def remaining(vault) -> float:
    return vault.get_budget(DATASET).epsilon_remaining[0]


def audit_gap(vault, df, decisions) -> dict:
    """The private audit's equalized-odds violation of `decisions` at epsilon 50."""
    frame = fairvault.private_metric_frame(vault, df, "label", np.asarray(decisions), 50.0,
                                           dataset=DATASET, key_column="key")
    return frame.equalized_odds_violation


def test_equalized_odds_reduces_the_audited_gap(population, fair_company) -> None:
    df = population
    before = audit_gap(fair_company, df, df.prediction)
    # The constructed gap is 0.25; at epsilon 50 the audit's noise is negligible and the
    # sampling error about 0.01.
    assert before["estimate"] == pytest.approx(eo_gap(df, df.prediction), abs=0.01)
    assert before["lo"] > 0.2
    eo = fairvault.PrivateEqualizedOdds(fair_company, DATASET, epsilon=20.0, gamma=0.0,
                                        attributes=["sex"], key_column="key")
    assert eo.fit(df, df.label, df.prediction) is eo
    assert eo.charge_.cost.epsilon == pytest.approx(20.0)
    assert eo.artifact_id_ == eo.artifact_.id and eo.artifact_.HasField("equalized_odds")
    eo.set_params(random_state=0)
    local = eo.predict(df.prediction, groups=df[["sex"]])
    assert set(np.unique(local)) <= {0, 1}
    after = audit_gap(fair_company, df, local)
    # From 0.25 to the sampling error of the derived coins (about 0.02).
    assert after["estimate"] < 0.05 and after["hi"] < before["lo"]
    assert eo_gap(df, local) < 0.05
    # The same probabilities the artifact states, for a caller who holds the groups.
    p = eo.predict_proba(df.prediction, df.sex)
    assert np.all((p >= 0) & (p <= 1))


def test_decide_path_returns_decisions_and_charges_the_licence_once(population,
                                                                    fair_company) -> None:
    df = population
    eo = fairvault.PrivateEqualizedOdds(fair_company, DATASET, epsilon=20.0, gamma=0.0,
                                        decision_floor=0.05, attributes=["sex"],
                                        key_column="key")
    eo.fit(df, df.label, df.prediction)
    bound = eo.decision_log_ratio_bound_
    assert 0 < bound <= np.log(0.95 / 0.05) + 1e-9
    budget = remaining(fair_company)
    first = eo.predict(df.prediction, keys=df)
    assert first.dtype == np.int64 and set(np.unique(first)) == {0, 1}
    assert eo.last_decisions_.licence_charged
    charged = budget - remaining(fair_company)
    assert charged == pytest.approx(bound, abs=2e-6)  # the licence: epsilon L, micro-rounded
    # A second call: the stored decisions, nothing charged, no second licence row.
    again = eo.predict(df.prediction.head(500), keys=df.head(500))
    assert np.array_equal(again, first[:500])
    assert not eo.last_decisions_.licence_charged
    assert eo.last_decisions_.rows_already_decided == 500
    assert remaining(fair_company) == pytest.approx(budget - charged, abs=1e-9)
    ledger = fair_company.list_ledger(DATASET)
    assert (ledger.request_kind == "DecisionLicence").sum() == 1
    # The vault's decisions reduce the gap too (floored, so less than the local apply).
    assert eo_gap(df, first) < 0.08 < 0.2 < eo_gap(df, df.prediction)
    # By the table the fit uploaded (the same keys, in the same order): the stored decisions,
    # no key sent; two calls of chunk_rows rows and the rest.
    rows = len(df)
    by_table = fair_company.decide_table(eo.artifact_id_, eo.table_, "prediction",
                                         chunk_rows=rows // 2 - 1)
    assert len(by_table.responses) == 3
    assert np.array_equal(by_table.outputs.astype(np.int64), first)
    assert by_table.rows_already_decided == rows and not by_table.licence_charged
    with pytest.raises(errors.InvalidInput, match="chunk_rows"):
        fair_company.decide_table(eo.artifact_id_, eo.table_, "prediction", chunk_rows=0)
    with pytest.raises(errors.InvalidArgument, match="value_column: unknown column 'nope'"):
        fair_company.decide_table(eo.artifact_id_, eo.table_, "nope")
    assert remaining(fair_company) == pytest.approx(budget - charged, abs=1e-9)


def test_decide_without_a_floor_is_refused_before_any_call(population, fair_company) -> None:
    df = population.head(3000)
    eo = fairvault.PrivateEqualizedOdds(fair_company, DATASET, epsilon=5.0, gamma=0.02,
                                        attributes=["sex"], key_column="key")
    with pytest.raises(NotFittedError, match="fit"):
        eo.predict(df.prediction, keys=df)
    eo.fit(df, df.label, df.prediction)
    budget = remaining(fair_company)
    with pytest.raises(ValueError, match="decision_floor > 0"):
        eo.predict(df.prediction, keys=df)
    assert remaining(fair_company) == budget
    assert (fair_company.list_ledger(DATASET).request_kind == "DecisionLicence").sum() == 0


def test_params_round_trip_and_keys_in_every_shape(population, fair_company) -> None:
    eo = fairvault.PrivateEqualizedOdds(fair_company, DATASET, 5.0, 0.02, decision_floor=0.1)
    params = eo.get_params()
    assert params["epsilon"] == 5.0 and params["decision_floor"] == 0.1
    assert params["vault"] is fair_company and "artifact_" not in params
    assert eo.set_params(gamma=0.05).gamma == 0.05
    with pytest.raises(ValueError, match="no parameter 'gama'"):
        eo.set_params(gama=1)
    df = population.head(2000)
    # Keys as a Series, or the DataFrame's index (key_column=None).
    eo.fit(df.key, df.label.to_numpy(), df.prediction.tolist())
    by_series = eo.predict(df.prediction, keys=df.key)
    indexed = df.set_index("key")
    assert np.array_equal(eo.predict(indexed.prediction, keys=indexed), by_series)  # stored decisions
    with pytest.raises(ValueError, match="y_pred has 3 values for 2000"):
        eo.predict([0, 1, 0], keys=df.key)


def test_equalized_odds_on_scores(population, fair_company) -> None:
    df = population
    eo = fairvault.PrivateEqualizedOddsScores(fair_company, DATASET, epsilon=20.0, gamma=0.01,
                                              lo=0.0, hi=1.0, bins=10, decision_floor=0.05,
                                              attributes=["sex"], key_column="key")
    eo.fit(df, df.label, df.score)
    assert eo.artifact_.HasField("equalized_odds_scores")
    local = eo.set_params(random_state=2).predict(df.score, groups=df.sex)
    vault_made = eo.predict(df.score, keys=df)
    for d in (local, vault_made):
        assert set(np.unique(d)) == {0, 1}
    # A threshold on a score that is shifted by 0.15 for M is unfair; the repaired one is not.
    assert eo_gap(df, (df.score > 0.6).astype(int)) > 0.3
    assert eo_gap(df, local) < 0.06 and eo_gap(df, vault_made) < 0.1


def ks_distance(df, outputs) -> float:
    out = pd.Series(np.asarray(outputs), index=df.index)
    grid = np.unique(out)
    f = [np.searchsorted(np.sort(out[df.sex == s]), grid, side="right") / (df.sex == s).sum()
         for s in ("F", "M")]
    return float(np.max(np.abs(f[0] - f[1])))


def test_statistical_parity_regressor(population, fair_company) -> None:
    df = population
    sp = fairvault.PrivateStatisticalParityRegressor(
        fair_company, DATASET, epsilon=20.0, lo=0.0, hi=1.0, bins=10, decision_floor=0.01,
        attributes=["sex"], key_column="key")
    sp.fit(df, df.score)
    assert sp.artifact_.HasField("statistical_parity")
    assert sp.charge_.cost.epsilon == pytest.approx(20.0)
    centres = sp.applier_.grid.centers()
    local = sp.set_params(random_state=3).predict(df.score, groups=df.sex)
    vault_made = sp.predict(df.score, keys=df)
    assert ks_distance(df, df.score) > 0.3
    for out in (local, vault_made):
        assert np.isin(np.round(out, 12), np.round(centres, 12)).all()
        assert ks_distance(df, out) < 0.06
    # The private audit sees the repair too.
    table = fair_company.upload_table(df.assign(fair=local), DATASET, "key", numeric=["fair"])
    before = fair_company.audit_regressor(sp.table_, "score", 0.0, 1.0, 10, 50.0, ["sex"])
    after = fair_company.audit_regressor(table, "fair", 0.0, 1.0, 10, 50.0, ["sex"])
    assert after.max_ks["estimate"] < 0.06 < 0.3 < before.max_ks["estimate"]


def test_fair_model_fits_with_a_job_and_predicts_locally(vault_server, population,
                                                         fair_company, tmp_path) -> None:
    df = population.head(5000)
    model = fairvault.DPOracleLearner(fair_company, DATASET, 2.0, label="label",
                                      features=["x1", "x2"], attributes=["sex"], gamma=0.02,
                                      key_column="key", progress=False, rounds=5, clip_l1=4.0,
                                      lambda_bound=1.0, random_state=3)
    assert model.get_params()["rounds"] == 5
    assert model.fit(df) is model
    assert model.job_.state == fairvault._proto.pb.JOB_STATE_SUCCEEDED
    assert model.charge_.cost.epsilon == pytest.approx(2.0)
    assert model.artifact_.fair_model.features.feature_columns == ["x1", "x2"]
    proba = model.predict_proba(df)
    assert proba.shape == (5000, 2) and np.all((proba >= 0) & (proba <= 1))
    assert np.array_equal(proba[:, 0], 1 - proba[:, 1])
    assert list(model.classes_) == [0, 1] and model.n_features_in_ == 2
    assert list(model.feature_names_in_) == ["x1", "x2"]
    decisions = model.predict(df)
    assert model.score(df, df.label) == pytest.approx(np.mean(decisions == df.label))
    csv, out = tmp_path / "x.csv", tmp_path / "p.csv"
    df.to_csv(csv, index=False)
    vault_server.cli("predict", "--artifact-id", model.artifact_id_, "--csv", str(csv),
                     "--key-column", "key", "--seed", "3", "--out", str(out),
                     key=vault_server.keys[fair_company.name])
    expected = pd.read_csv(out, float_precision="round_trip")
    assert np.array_equal(proba[:, 1], expected.p_positive.to_numpy())
    assert np.array_equal(decisions, expected.decision.to_numpy())
    # By position, as a transformer's array output: the same decisions.
    assert np.array_equal(model.predict(df[["x1", "x2"]].to_numpy()), decisions)


def test_exponentiated_gradient_returns_a_weighted_mixture_the_cli_applies_alike(
        vault_server, population, fair_company, tmp_path) -> None:
    df = population.head(5000)
    model = fairvault.PrivateExponentiatedGradient(
        fair_company, DATASET, 1.0, label="label", features=["x1", "x2"], attributes=["sex"],
        difference_bound=0.02, key_column="key", progress=False, rounds=30, clip_l1=4.0,
        constraints="demographic_parity", random_state=5)
    assert model.fit(df) is model
    fair_model = model.artifact_.fair_model
    assert fair_model.algorithm == "exponentiated_gradient"
    assert len(fair_model.component_weights) == len(fair_model.components) >= 1
    assert sum(fair_model.component_weights) == pytest.approx(1.0, abs=1e-9)
    assert model.charge_.cost.epsilon == pytest.approx(1.0)
    csv, out = tmp_path / "x.csv", tmp_path / "p.csv"
    df.to_csv(csv, index=False)
    vault_server.cli("predict", "--artifact-id", model.artifact_id_, "--csv", str(csv),
                     "--key-column", "key", "--seed", "5", "--out", str(out),
                     key=vault_server.keys[fair_company.name])
    expected = pd.read_csv(out, float_precision="round_trip")
    assert np.array_equal(model.predict_proba(df)[:, 1], expected.p_positive.to_numpy())
    assert np.array_equal(model.predict(df), expected.decision.to_numpy())


def test_preview_on_fit_prices_without_charging(population, fair_company) -> None:
    df = population.head(2000)
    budget = remaining(fair_company)
    eo = fairvault.PrivateEqualizedOdds(fair_company, DATASET, 3.0, 0.02, attributes=["sex"],
                                        key_column="key")
    try:
        price = eo.fit(df, df.label, df.prediction, preview=True)
    except errors.FairvaultError as error:
        if error.code.name == "UNIMPLEMENTED":
            pytest.skip("this server has no PreviewRelease yet")
        raise
    assert isinstance(price, fairvault.Preview)
    assert price.cost.epsilon == pytest.approx(3.0) and price.admitted
    assert price.budget_after.epsilon_remaining == pytest.approx(budget - 3.0)
    assert getattr(eo, "artifact_", None) is None
    assert remaining(fair_company) == budget
    model = fairvault.FairModel(fair_company, DATASET, 1.5, algorithm="dp_oracle_learner",
                                features=["x1", "x2"], key_column="key",
                                learner_params={"rounds": 3})
    assert model.fit(df, preview=True).cost.epsilon == pytest.approx(1.5)
    assert remaining(fair_company) == budget


def test_fair_model_from_the_exponential_mechanism_predicts_its_column(population,
                                                                       fair_company) -> None:
    df = population.head(4000).assign(
        always=1, never=0, biased=population.prediction.head(4000),
        threshold=(population.x1.head(4000) + population.x2.head(4000) > 0.5).astype(int))
    candidates = ["always", "never", "biased", "threshold"]
    model = fairvault.ExponentialMechanismClassifier(
        fair_company, DATASET, 2.0, hypothesis_columns=candidates, attributes=["sex"],
        key_column="key", progress=False)
    model.fit(df)
    chosen = model.artifact_.fair_model.hypothesis_column
    assert chosen == candidates[model.artifact_.fair_model.hypothesis_index]
    assert model.applier_.input_columns == [chosen]
    assert np.array_equal(model.predict(df), df[chosen].to_numpy())
    assert np.array_equal(model.predict_proba(df)[:, 1], df[chosen].to_numpy())
