"""fairvault.models against the C++ reference: `fairvault predict` and `fairvault apply-eo` on the
same artifact and CSV. Probabilities must equal the CLI's to the bit (asserted to 1e-12, and
reported exact), decisions wherever they are deterministic; a mixture's seeded draws too."""
from __future__ import annotations

import math
import pathlib
import zlib

import numpy as np
import pandas as pd
import pytest
from google.protobuf import json_format

import fairvault
from fairvault import models
from fairvault._proto import pb
from fairness_population import DATASET, biased_population


def write_artifact(path: pathlib.Path, body_field: str, body) -> pathlib.Path:
    artifact = pb.Artifact(id="art_local", dataset="pop", company="test")
    getattr(artifact, body_field).CopyFrom(body)
    path.write_text(json_format.MessageToJson(artifact, preserving_proto_field_name=True))
    return path


def read_csv(path: pathlib.Path) -> pd.DataFrame:
    return pd.read_csv(path, float_precision="round_trip")


def features_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(0, 3, n), "b": rng.normal(0, 1, n),
                       "c": rng.integers(-2, 3, n).astype(float),
                       "h": rng.integers(0, 2, n)})
    df.loc[:9, ["a", "b", "c"]] = 0.0  # scores of exactly 0: decision 0
    df.loc[10:19, "a"] = 1e6           # far beyond clip_l1
    return df


def cli_predict(vault_server, tmp_path, artifact_args, df, seed=None, extra=()):
    csv = tmp_path / "rows.csv"
    df.to_csv(csv, index=False)  # repr of each double: read back exactly by the CLI
    out = tmp_path / "predicted.csv"
    args = ["predict", *artifact_args, "--csv", str(csv), "--key-column", "@row",
            "--out", str(out), *extra]
    if seed is not None:
        args += ["--seed", str(seed)]
    vault_server.cli(*args)
    return read_csv(out)


def mixture(rng, m=5, clip=2.0, intercept=True) -> pb.FairModel:
    model = pb.FairModel(algorithm="dp_oracle_learner")
    model.features.feature_columns.extend(["a", "b", "c"])
    model.features.clip_l1 = clip
    model.features.intercept = intercept
    for _ in range(m):
        model.components.add().weights.extend(rng.normal(size=3 + intercept).tolist())
    return model


def weighted_mixture(rng, m=6) -> pb.FairModel:
    """An exponentiated-gradient artifact: a mixture with component_weights (one weight 0)."""
    model = mixture(rng, m=m)
    model.algorithm = "exponentiated_gradient"
    w = rng.uniform(0, 1, m)
    w[2] = 0.0
    w = w / w.sum()
    model.component_weights.extend(w.tolist())
    return model


def network(rng, hidden, outputs, classes, bias=True, intercept=True) -> pb.FairModel:
    model = pb.FairModel(algorithm="dp_fermi")
    model.features.feature_columns.extend(["a", "b", "c"])
    model.features.clip_l1 = 0.0 if hidden else 5.0
    model.features.intercept = intercept
    inputs = 3 + intercept
    for width in list(hidden) + [outputs]:
        layer = model.network.layers.add(inputs=inputs, outputs=width)
        layer.weights.extend(rng.normal(0, 1, inputs * width).tolist())
        if bias and width != outputs:
            layer.bias.extend(rng.normal(0, 0.5, width).tolist())
        inputs = width
    model.network.classes.extend(classes)
    return model


# ---- the generator ----------------------------------------------------------------------

def test_mt19937_64_is_the_standard_generator() -> None:
    # C++11 [rand.predef]: the 10000th output of a default-constructed std::mt19937_64.
    assert int(models.MT19937_64(5489).raw(10000)[-1]) == 9981545732273789042
    # docs/api.md: seed 5 and m = 3 give the indices 1, 1, 2, 1.
    assert models.MT19937_64(5).draw_indices(3, 4).tolist() == [1, 1, 2, 1]


def test_draws_in_chunks_continue_one_stream() -> None:
    whole = models.MT19937_64(99).draw_indices(7, 1000)
    gen = models.MT19937_64(99)
    parts = [gen.draw_indices(7, k) for k in (1, 311, 312, 376)]
    assert np.array_equal(np.concatenate(parts), whole)


def test_weighted_mixture_draws_with_its_weights() -> None:
    model = weighted_mixture(np.random.default_rng(3), m=4)
    model.components[0].weights[:] = [0, 0, 0, 1]   # always 1
    model.components[1].weights[:] = [0, 0, 0, -1]  # always 0
    model.components[2].weights[:] = [0, 0, 0, 1]   # weight 0: never drawn
    model.components[3].weights[:] = [0, 0, 0, -1]
    applier = models.FairModelApplier(model)
    df = features_frame(20000, seed=1)
    w = list(model.component_weights)
    assert applier.predict_proba(df.head(1)).tolist() == [w[0]]
    # 20,000 draws: the share of 1s is w[0] within 5 standard deviations (< 0.018).
    share = applier.predict(df, random_state=11).mean()
    assert abs(share - w[0]) < 5 * math.sqrt(w[0] * (1 - w[0]) / len(df))
    bad = pb.FairModel()
    bad.CopyFrom(model)
    bad.component_weights[0] = 2.0
    with pytest.raises(ValueError, match="sum to 1"):
        models.FairModelApplier(bad)
    del bad.component_weights[-1]
    with pytest.raises(ValueError, match="one per component"):
        models.FairModelApplier(bad)


def test_docs_worked_example() -> None:
    model = pb.FairModel()
    model.features.feature_columns.extend(["a", "b"])
    model.features.clip_l1 = 1
    model.features.intercept = True
    for w in ([1, 0, -1], [1, -2, 0.5], [-1, 0, 0]):
        model.components.add().weights.extend(w)
    applier = models.FairModelApplier(model)
    row = pd.DataFrame({"a": [3.0], "b": [-1.0]})
    assert applier.preprocess(row).tolist() == [[0.75, -0.25, 1.0]]
    assert applier.component_decisions(row).tolist() == [[0, 1, 0]]
    assert applier.predict_proba(row).tolist() == [1 / 3]


# ---- fair models against `fairvault predict` --------------------------------------------

CRAFTED = {
    "mixture": lambda rng: mixture(rng),
    "weighted_mixture": lambda rng: weighted_mixture(rng),
    "one_component": lambda rng: mixture(rng, m=1, clip=0.0),
    "no_intercept": lambda rng: mixture(rng, m=3, intercept=False),
    "logistic": lambda rng: network(rng, [], 1, [0, 1], bias=False),
    "mlp": lambda rng: network(rng, [8, 4], 1, []),
    "softmax": lambda rng: network(rng, [], 3, [2, 0, 1]),
    "mlp_softmax": lambda rng: network(rng, [6], 4, [0, 1, 2, 3]),
}


@pytest.mark.parametrize("kind", sorted(CRAFTED))
def test_crafted_model_equals_cli_predict(vault_server, tmp_path, kind) -> None:
    rng = np.random.default_rng(zlib.crc32(kind.encode()))
    model = CRAFTED[kind](rng)
    df = features_frame(3000, seed=5)
    path = write_artifact(tmp_path / "model.json", "fair_model", model)
    expected = cli_predict(vault_server, tmp_path, ["--artifact-file", str(path)], df, seed=7)
    applier = models.FairModelApplier(model)
    proba = applier.predict_proba(df)
    if applier.is_multiclass:
        cli_proba = expected[[f"p_{c}" for c in applier.classes]].to_numpy()
    else:
        cli_proba = expected["p_positive"].to_numpy()
    assert proba.shape == cli_proba.shape
    assert np.max(np.abs(proba - cli_proba)) <= 1e-12
    assert np.array_equal(proba, cli_proba)  # in fact bit for bit (libm's exp, same order)
    assert np.array_equal(applier.predict(df, random_state=7), expected["decision"].to_numpy())
    if applier.kind == "mixture" and applier.num_components > 1:
        # Another seed draws other components: the seed is what makes them equal.
        assert not np.array_equal(applier.predict(df, random_state=8), expected["decision"].to_numpy())


def test_hypothesis_model_equals_cli_predict(vault_server, tmp_path) -> None:
    model = pb.FairModel(algorithm="exponential_mechanism", hypothesis_column="h")
    df = features_frame(500, seed=6)
    path = write_artifact(tmp_path / "model.json", "fair_model", model)
    expected = cli_predict(vault_server, tmp_path, ["--artifact-file", str(path)], df, seed=1)
    applier = models.FairModelApplier(model)
    assert np.array_equal(applier.predict_proba(df), expected["p_positive"].to_numpy())
    assert np.array_equal(applier.predict(df), expected["decision"].to_numpy())
    with pytest.raises(ValueError, match="must be 0 or 1"):
        applier.predict(df.assign(h=df.h * 2))


def test_score_of_exactly_zero_decides_zero() -> None:
    model = pb.FairModel()
    model.features.feature_columns.append("a")
    model.components.add().weights.append(1.0)
    applier = models.FairModelApplier(model)
    assert applier.predict(pd.DataFrame({"a": [0.0, -0.0, 1e-300]})).tolist() == [0, 0, 1]


def test_invalid_models_are_refused() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        models.FairModelApplier(pb.FairModel())
    model = mixture(np.random.default_rng(0))
    model.components[1].weights.append(1.0)
    with pytest.raises(ValueError, match=r"components\[1\] has 5 weights; expected 4"):
        models.FairModelApplier(model)
    model = network(np.random.default_rng(0), [4], 3, [0, 1, 1])
    with pytest.raises(ValueError, match="distinct classes"):
        models.FairModelApplier(model)
    applier = models.FairModelApplier(mixture(np.random.default_rng(0)))
    with pytest.raises(KeyError, match="needs column"):
        applier.predict_proba(pd.DataFrame({"a": [1.0]}))
    with pytest.raises(ValueError, match="row 1: column 'b' is not a finite number"):
        applier.predict_proba(pd.DataFrame({"a": [1.0, 1.0], "b": [0, np.inf], "c": [0, 0]}))


def test_network_overflow_names_the_row() -> None:
    model = network(np.random.default_rng(1), [], 1, [0, 1], bias=False)
    model.network.layers[0].weights[:] = [1e308, 1e308, 0, 0]
    applier = models.FairModelApplier(model)
    with pytest.raises(ValueError, match=r"row 1: the network overflowed: layers\[0\]"):
        applier.predict_proba(pd.DataFrame({"a": [0.0, 10.0], "b": [0.0, 10.0],
                                            "c": [0.0, 0.0]}))


@pytest.mark.parametrize("algorithm,options,delta", [
    ("dp_oracle_learner", {"rounds": 5, "clip_l1": 4.0, "lambda_bound": 1.0}, 0.0),
    ("dp_fermi", {"model": "mlp", "hidden_units": [8], "epochs": 3, "clip_l1": 4.0}, 1e-6),
    ("dp_fermi", {"model": "softmax_regression", "epochs": 3}, 1e-6),
])
def test_trained_model_equals_cli_predict(vault_server, tmp_path, algorithm, options,
                                          delta) -> None:
    df = biased_population(vault_server).head(3000).copy()
    if options.get("model") == "softmax_regression":
        df["label"] = (df.x1 > 0).astype(int) + (df.x2 > 0.5).astype(int)  # classes 0, 1, 2
    company = vault_server.new_company(dataset=DATASET, delta=delta)
    table = company.upload_table(df, DATASET, "key", numeric=["x1", "x2", "label"])
    job = company.fit_fair_model(table, algorithm, "label", 2.0, ["x1", "x2"], ["sex"],
                                 **options).job
    done = company.wait_job(job.id, timeout=120, progress=False)
    applier = models.applier_for(company.get_artifact(done.artifact_id))
    # The CLI fetches the same artifact from the vault itself.
    key = vault_server.keys[company.name]
    csv = tmp_path / "rows.csv"
    df.to_csv(csv, index=False)
    out = tmp_path / "predicted.csv"
    vault_server.cli("predict", "--artifact-id", done.artifact_id, "--csv", str(csv),
                     "--key-column", "key", "--seed", "11", "--out", str(out), key=key)
    expected = read_csv(out)
    columns = [f"p_{c}" for c in applier.classes] if applier.is_multiclass else ["p_positive"]
    cli_proba = expected[columns].to_numpy().reshape(applier.predict_proba(df).shape)
    assert np.max(np.abs(applier.predict_proba(df) - cli_proba)) <= 1e-12
    assert np.array_equal(applier.predict(df, random_state=11), expected["decision"].to_numpy())


# ---- post-processors against `fairvault apply-eo` ----------------------------------------

def frequency_ok(decisions: np.ndarray, p: float) -> bool:
    """Within 5 standard errors of p (false failure probability < 1e-6 per check)."""
    return abs(decisions.mean() - p) <= 5 * math.sqrt(p * (1 - p) / len(decisions))


def apply_eo(vault_server, tmp_path, artifact_path, df, column_flag, column) -> np.ndarray:
    csv = tmp_path / "eo_rows.csv"
    df.to_csv(csv, index=False)
    out = tmp_path / "eo_out.csv"
    vault_server.cli("apply-eo", "--artifact", str(artifact_path), "--csv", str(csv),
                     column_flag, column, "--group-column", "sex", "--out", str(out))
    return read_csv(out)["fair_prediction"].to_numpy()


def test_equalized_odds_equals_apply_eo(vault_server, tmp_path) -> None:
    eo = pb.EqualizedOddsPostProcessor(attributes=["sex"])
    eo.groups.add(group="F", p_flip_to_1_given_0=0.0, p_keep_1_given_1=0.3)
    eo.groups.add(group="M", p_flip_to_1_given_0=0.7, p_keep_1_given_1=1.0)
    path = write_artifact(tmp_path / "eo.json", "equalized_odds", eo)
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"prediction": rng.integers(0, 2, 40000),
                       "sex": rng.choice(["F", "M"], 40000)})
    cli = apply_eo(vault_server, tmp_path, path, df, "--prediction-column", "prediction")
    applier = models.applier_for(path)
    p = applier.probabilities(df.prediction, df[["sex"]])
    expected_p = np.select([(df.sex == "F") & (df.prediction == 0), df.sex == "F",
                            df.prediction == 0], [0.0, 0.3, 0.7], 1.0)
    assert np.array_equal(p, expected_p)
    mine = applier.predict(df.prediction, df.sex, random_state=4)
    fixed = (p == 0) | (p == 1)
    assert np.array_equal(mine[fixed], cli[fixed]) and np.array_equal(mine[fixed], p[fixed])
    for value in (0.3, 0.7):  # the coins: the same probability on both sides
        assert frequency_ok(cli[p == value], value) and frequency_ok(mine[p == value], value)


def test_scores_post_processor_equals_apply_eo_bin_for_bin(vault_server, tmp_path) -> None:
    # p_positive alternates 0, 1 over the bins, so each decision reveals the bin's parity: the
    # grids must agree on every score, the edge cases included.
    k = 100
    eos = pb.EqualizedOddsScoresPostProcessor(attributes=["sex"], lo=0, hi=1, bins=k)
    eos.groups.add(group="F", p_positive=[float(j % 2) for j in range(k)])
    eos.groups.add(group="M", p_positive=[float((j + 1) % 2) for j in range(k)])
    path = write_artifact(tmp_path / "eos.json", "equalized_odds_scores", eos)
    rng = np.random.default_rng(8)
    edges = [0.29, np.nextafter(0.29, 0), 0.2899999, 0.57, 0.58, 0.0, 1.0, -0.5, 1.5, 0.99999,
             0.01, np.nextafter(0.01, 0), 1e-17]
    scores = np.concatenate([rng.uniform(-0.1, 1.1, 20000), edges, np.arange(k + 1) / k])
    df = pd.DataFrame({"score": scores, "sex": rng.choice(["F", "M"], len(scores))})
    cli = apply_eo(vault_server, tmp_path, path, df, "--score-column", "score")
    applier = models.applier_for(path)
    assert np.array_equal(applier.predict(df.score, df.sex), cli)
    grid = models.ScoreGrid(0, 1, k)
    assert grid.bin([0.29, np.nextafter(0.29, 0), 0.2899999, -1, 2, 1.0, np.nan]).tolist() == \
        [29, 29, 28, 0, k - 1, k - 1, 0]


def test_fitted_equalized_odds_artifact_equals_apply_eo(vault_server, tmp_path) -> None:
    df = biased_population(vault_server)
    company = vault_server.new_company(dataset=DATASET)
    table = company.upload_table(df, DATASET, "key", numeric=["label", "prediction"])
    fit = company.fit_equalized_odds(table, "prediction", "label", 5.0, 0.0, ["sex"])
    path = tmp_path / "fitted.json"
    path.write_text(json_format.MessageToJson(fit.artifact, preserving_proto_field_name=True))
    cli = apply_eo(vault_server, tmp_path, path, df, "--prediction-column", "prediction")
    applier = models.applier_for(fit.artifact)
    p = applier.probabilities(df.prediction, df.sex)
    mine = applier.predict(df.prediction, df.sex, random_state=0)
    fixed = (p == 0) | (p == 1)
    assert np.array_equal(mine[fixed], cli[fixed])
    for value in np.unique(p[~fixed]):
        assert frequency_ok(cli[p == value], value) and frequency_ok(mine[p == value], value)


def test_statistical_parity_draws_follow_the_vaults_decisions(vault_server) -> None:
    """The local draw has the distribution of the vault's Decide: over every (group, output
    bin), the vault's decisions for 20,000 subjects match the local output_distribution."""
    df = biased_population(vault_server)
    company = vault_server.new_company(dataset=DATASET)
    table = company.upload_table(df, DATASET, "key", numeric=["score"])
    k = 5
    fit = company.fit_statistical_parity(table, "score", 0.0, 1.0, k, 5.0, ["sex"],
                                         decision_floor=0.01)
    applier = models.applier_for(fit.artifact)
    dist = applier.output_distribution(df.score, df.sex)
    assert np.allclose(dist.sum(axis=1), 1.0)
    centres = applier.grid.centers()
    vault_out = company.decide(fit.artifact.id, df.key, df.score).outputs
    local_out = applier.predict(df.score, df.sex, random_state=1)
    for out in (vault_out, local_out):
        index = np.searchsorted(centres, out)
        assert np.allclose(centres[index], out)  # every output is a bin centre
        for sex in ("F", "M"):
            rows = (df.sex == sex).to_numpy()
            expected = dist[rows].sum(axis=0)
            observed = np.bincount(index[rows], minlength=k)
            # Each count is a sum of independent Bernoullis: within 5 standard deviations.
            sd = np.sqrt((dist[rows] * (1 - dist[rows])).sum(axis=0))
            assert np.all(np.abs(observed - expected) <= 5 * sd + 1), (sex, observed, expected)
    assert np.allclose(applier.expected_output(df.score, df.sex), dist @ centres)


# ---- issue 22 §5: trivial models, in fairvault predict's words ------------------------------

def test_trivial_model_warning_matches_the_cli_thresholds_and_words():
    assert "decides 0 for 100.0% of these rows" in models.trivial_model_warning([0] * 100)
    assert "decides 1 for 99.0% of these rows" in models.trivial_model_warning([1] * 99 + [0])
    assert models.trivial_model_warning([1] * 98 + [0] * 2) is None
    assert models.trivial_model_warning([]) is None
    labels = [0] * 70 + [1] * 30
    worse = [i % 2 for i in range(100)]  # errs on 50
    message = models.trivial_model_warning(worse, labels)
    assert ("errs on 50.0% of these rows, more than the constant classifier deciding 0 (30.0%)"
            in message)
    better = [y if i < 60 or i >= 80 else 1 - y for i, y in enumerate(labels)]  # errs on 20
    assert models.trivial_model_warning(better, labels) is None
    summary = models.describe_decisions(better, labels)
    assert summary["rows"] == 100
    assert summary["error"] == pytest.approx(0.2)
    assert summary["constant_class"] == 0
    assert summary["constant_error"] == pytest.approx(0.3)
    assert summary["positive_rate"] == pytest.approx(sum(better) / 100)
    with pytest.raises(ValueError, match="integer class labels"):
        models.describe_decisions([0, 1], [0.5, 1])


def test_trivial_model_warning_is_a_fairvault_name():
    import fairvault
    assert issubclass(fairvault.TrivialModelWarning, UserWarning)
    assert fairvault.trivial_model_warning is models.trivial_model_warning


# ---- best responses from released cell sums (issue 22 §1) -------------------------------

def test_best_responses_from_cell_sums_are_free_and_apply_locally(vault_server, tmp_path) -> None:
    df = biased_population(vault_server).head(2000).copy()
    company = vault_server.new_company(dataset=DATASET)
    table = company.upload_table(df, DATASET, "key", numeric=["x1", "x2", "label"])
    sums = company.release_cell_sums(table, ["x1", "x2"], "label", 1.0, ["sex"], clip_l1=4.0)
    assert len(sums.response.cells) == 4
    assert list(sums.response.feature_names) == ["x1", "x2", "(intercept)"]
    spent = company.get_budget(DATASET).epsilon_spent[0]
    responses = []
    for lam in ([0, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 2]):
        free = company.best_response_from_sums(table, ["x1", "x2"], "label",
                                               sums.idempotency_key, lam, 2.0, 0.0, ["sex"],
                                               clip_l1=4.0)
        assert free.response.charge.cost.epsilon == 0
        assert free.response.charge.ledger_seq == sums.charge.ledger_seq
        assert free.response.artifact.id == ""
        responses.append(models.applier_for(free.response.artifact))
    assert company.get_budget(DATASET).epsilon_spent[0] == spent
    # λ on the TP constraints moves the decisions; the artifact applies locally like any other.
    decided = [a.predict(df) for a in responses]
    assert not np.array_equal(decided[0], decided[1])
    assert not np.array_equal(decided[1], decided[2])
    with pytest.raises(fairvault.FairvaultError, match="epsilon"):
        request = pb.BestResponseRequest(table_handle=table, feature_columns=["x1", "x2"],
                                         label_column="label", sums_key=sums.idempotency_key,
                                         epsilon=1.0, lambda_bound=1.0,
                                         **{"lambda": [0, 0, 0, 0]})
        company._conn.call(company._conn.company.BestResponse, request, retry=False)
    # The CLI: `best-response --sums-key` prints that nothing was charged and writes the model.
    out = tmp_path / "free.json"
    key = vault_server.keys[company.name]
    printed = vault_server.cli("best-response", "--table", table, "--features", "x1,x2",
                               "--label", "label", "--attributes", "sex", "--sums-key",
                               sums.idempotency_key, "--lambda", "0,0,2,0", "--lambda-bound",
                               "2", "--gamma", "0", "--oracle", "least_squares", "--clip-l1",
                               "4", "--out", str(out), key=key)
    assert "charged nothing" in printed.stdout
    assert company.get_budget(DATASET).epsilon_spent[0] == spent
    assert out.exists()
    # `cell-sums` itself through the CLI: one charge, the cells printed, replayed by its key.
    released = vault_server.cli("cell-sums", "--table", table, "--features", "x1,x2", "--label",
                                "label", "--attributes", "sex", "--epsilon", "0.5",
                                "--clip-l1", "4", "--idempotency-key", "cli-sums", key=key)
    assert "released 4 cells x 3 feature sums" in released.stdout
    assert "best-response --sums-key cli-sums" in released.stdout
    after = company.get_budget(DATASET).epsilon_spent[0]
    assert abs(after - spent - 0.5) < 1e-9
    vault_server.cli("cell-sums", "--table", table, "--features", "x1,x2", "--label", "label",
                     "--attributes", "sex", "--epsilon", "0.5", "--clip-l1", "4",
                     "--idempotency-key", "cli-sums", key=key)
    assert company.get_budget(DATASET).epsilon_spent[0] == after
    refused = vault_server.cli("best-response", "--table", table, "--features", "x1,x2",
                               "--label", "label", "--sums-key", "cli-sums", "--epsilon", "1",
                               "--lambda", "0,0,0,0", "--lambda-bound", "1", "--gamma", "0",
                               "--oracle", "least_squares", key=key, check=False)
    assert refused.returncode != 0 and "--sums-key" in refused.stderr


# ---- the managed selection (issue 22 §3) ---------------------------------------------------

def test_managed_selection_returns_one_model_chosen_on_validation_rows(vault_server) -> None:
    df = biased_population(vault_server).head(4000).copy()
    company = vault_server.new_company(dataset=DATASET)
    train = company.upload_table(df.iloc[:2500], DATASET, "key", numeric=["x1", "x2", "label"])
    valid = company.upload_table(df.iloc[2500:], DATASET, "key", numeric=["x1", "x2", "label"])
    job = company.fit_fair_model(train, "exponentiated_gradient", "label", 2.0, ["x1", "x2"],
                                 ["sex"], rounds=40, validation_table_handle=valid,
                                 selection_target=0.05, selection_candidates=10).job
    done = company.wait_job(job.id, timeout=120, progress=False)
    model = company.get_artifact(done.artifact_id).fair_model
    assert len(model.components) == 1
    selection = model.selection
    assert len(selection.scales) == 11 and selection.scales[0] == 0 and selection.scales[-1] == -1
    assert selection.chosen in selection.eligible
    constant_error = selection.validation_errors[-1]
    assert all(j == 10 or selection.validation_errors[j] < constant_error
               for j in selection.eligible)
    assert selection.validation_rows == 1500
    # The validation errors are the company's own computation: check one against ours.
    applier = models.applier_for(company.get_artifact(done.artifact_id))
    chosen_error = float(np.mean(applier.predict(df.iloc[2500:]) != df.label.iloc[2500:]))
    assert abs(chosen_error - selection.validation_errors[selection.chosen]) < 1e-12
    with pytest.raises(fairvault.FairvaultError, match="selection_"):
        company.fit_fair_model(train, "exponentiated_gradient", "label", 2.0, ["x1", "x2"],
                               ["sex"], selection_penalty=3.0)
