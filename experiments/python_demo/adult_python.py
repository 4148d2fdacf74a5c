#!/usr/bin/python3
"""The Adult demo (deploy/demo.sh) in Python, as a notebook-style script (cells marked `# %%`).

A company trains a logistic regression on its own Adult columns (no sex, no race), audits it
privately per sex (``private_metric_frame``), fits a DP equalized-odds post-processor
(``PrivateEqualizedOdds``), lets the vault decide for its customers (``Decide``: the company never
learns anyone's sex), re-audits the decided predictions, and trains a fair model it runs itself
(``FairModel``, the DP-oracle learner). The regulator, who holds sex, measures the held-out test
set before and after: those numbers are exact (not private) and marked "regulator's view".

Run against a running vault where the regulator has loaded Adult as the demo does:

    PYTHONPATH=build/client/python experiments/python_demo/adult_python.py --server 127.0.0.1:50051 \\
        --key-file var/demo/acme.key --hmac-secret-file var/demo/pseudonym.secret

(the company needs a fresh grant: ``fairvault grant --company acme --dataset adult --epsilon 7``),
or with its own server on a temporary SQLite file, as the tests do:

    PYTHONPATH=build/client/python experiments/python_demo/adult_python.py --self-contained

``--quick`` (the ctest smoke run) trains the fair model with 5 rounds instead of 20.
Data: ``$FAIRVAULT_DATASETS/adult`` (default ``../shared/datasets/adult``).
"""
# %% Setup: flags, data, the vault connection
from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

import fairvault

ROOT = pathlib.Path(__file__).resolve().parents[2]
parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--server", help="HOST:PORT of a running vault (with --key-file)")
parser.add_argument("--key-file", help="the company's API key file")
parser.add_argument("--hmac-secret-file", help="the pseudonym secret the regulator's import used")
parser.add_argument("--dataset", default="adult")
parser.add_argument("--self-contained", action="store_true",
                    help="start a server on a temporary database and play the regulator too")
parser.add_argument("--server-binary", default=os.environ.get(
    "FAIRVAULT_SERVER_BINARY", str(ROOT / "build/server/fairvault-server")))
parser.add_argument("--datasets", default=os.environ.get(
    "FAIRVAULT_DATASETS", str(ROOT.parent / "shared/datasets")))
parser.add_argument("--quick", action="store_true", help="a shorter fair-model job (smoke run)")
parser.add_argument("--session", default="adult-python",
                    help="idempotency keys derive from this name and each request's content, so "
                         "a re-run against the same vault replays its releases instead of "
                         "paying again ('' for fresh keys: every run pays)")
args, _ = parser.parse_known_args()  # tolerant of a notebook kernel's own arguments
if not args.self_contained and not (args.server and args.key_file):
    parser.error("pass --server and --key-file, or --self-contained")

started = time.monotonic()
NUMERIC = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship",
               "native-country"]


def read_adult(name: str) -> pd.DataFrame:
    df = pd.read_csv(pathlib.Path(args.datasets) / "adult" / name, skipinitialspace=True)
    df["label"] = df.Y.str.rstrip(".").eq(">50K").astype(int)
    return df


train, test = read_adult("adult.data"), read_adult("adult.test")
print(f"Adult: {len(train)} training rows, {len(test)} test rows")

stack = contextlib.ExitStack()


def start_vault() -> tuple:
    """Bootstraps and starts fairvault-server on a temporary SQLite file (the way of
    client/python/tests/conftest.py), then plays the regulator: dataset 'adult' with sex and
    race, imported under HMAC pseudonyms of the row numbers, a company 'acme' with epsilon 7
    (delta 1e-6)."""
    tmp = pathlib.Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="adult-py-")))
    db = tmp / "vault.db"
    key = subprocess.run([args.server_binary, "bootstrap", "--db", str(db), "--name",
                          "regulator"], check=True, capture_output=True, text=True).stdout.strip()
    log = stack.enter_context(open(tmp / "server.log", "w"))
    server = subprocess.Popen([args.server_binary, "serve", "--db", str(db), "--listen",
                               "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=log, text=True)
    stack.callback(server.wait, 20)
    stack.callback(server.terminate)
    line = server.stdout.readline()
    if "listening on port" not in line:
        raise RuntimeError(f"fairvault-server did not start: {line!r}; see {tmp}/server.log")
    target = f"127.0.0.1:{line.split()[-1]}"
    secret = secrets.token_bytes(32)
    regulator = fairvault.Vault(target, key=key)
    regulator.create_dataset(args.dataset, {
        "sex": ["Female", "Male"],
        "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]})
    regulator.import_attributes(train, args.dataset, ["sex", "race"], "@row", hmac_secret=secret)
    company_key = regulator.create_account("acme", "company").api_key
    regulator.grant_budget("acme", args.dataset, 7.0, 1e-6)
    return fairvault.Vault(target, key=company_key), secret


if args.self_contained:
    acme, secret = start_vault()
else:
    acme = fairvault.Vault(args.server, key_file=args.key_file)
    secret = fairvault.read_secret_file(args.hmac_secret_file) if args.hmac_secret_file else None
if args.session:
    # A vault started for this run dies with it: its upload handles need no state file.
    acme = acme.session(args.session, state_file=None if args.self_contained else "default")
print("budget:", acme.get_budget(args.dataset).epsilon_remaining[0], "epsilon left")

# %% The company's own model: logistic regression on its own columns (no sex, no race)
levels = {c: sorted(train[c].unique()) for c in CATEGORICAL}
mean, std = train[NUMERIC].mean(), train[NUMERIC].std()


def design(df: pd.DataFrame) -> np.ndarray:
    parts = [((df[NUMERIC] - mean) / std).to_numpy()]
    for c in CATEGORICAL:  # one-hot with the training file's categories (as train-logreg)
        parts.append((df[c].to_numpy()[:, None] == np.array(levels[c])[None, :]).astype(float))
    return np.column_stack(parts + [np.ones(len(df))])


X, Xt = design(train), design(test)
w = np.zeros(X.shape[1])
for _ in range(25):  # Newton's method with a small ridge
    p = 1 / (1 + np.exp(-X @ w))
    hessian = X.T @ (X * (p * (1 - p))[:, None]) + 1e-3 * np.eye(X.shape[1])
    w -= np.linalg.solve(hessian, X.T @ (p - train.label) + 1e-3 * w)
train["prediction"] = (X @ w > 0).astype(int)
test["prediction"] = (Xt @ w > 0).astype(int)
print(f"logistic regression: train accuracy {(train.prediction == train.label).mean():.4f}, "
      f"test accuracy {(test.prediction == test.label).mean():.4f}")


def regulators_view(df: pd.DataFrame, decision: str) -> pd.DataFrame:
    """Exact per-sex rates on the test set: what the regulator, who holds sex, can measure."""
    def rates(g: pd.DataFrame) -> dict:
        d = g[decision]
        return {"selection_rate": d.mean(), "tpr": d[g.label == 1].mean(),
                "fpr": d[g.label == 0].mean(), "accuracy": (d == g.label).mean()}

    view = pd.DataFrame({sex: rates(g) for sex, g in df.groupby("sex")}).T
    view.loc["gap"] = view.max() - view.min()
    view.loc["all"] = rates(df)
    return view.round(4)


# %% Private audit of the model per sex (one release, epsilon 0.5)
before = fairvault.private_metric_frame(acme, train, "label", "prediction", 0.5,
                                        dataset=args.dataset, key_column="@row",
                                        attributes=["sex"], hmac_secret=secret)
print(before.by_group[["selection_rate", "selection_rate_lo", "selection_rate_hi",
                       "true_positive_rate", "true_positive_rate_lo", "true_positive_rate_hi",
                       "false_positive_rate", "false_positive_rate_lo",
                       "false_positive_rate_hi"]].round(4).to_string())
print("private violations, before:\n", before.difference(intervals=True).round(4).to_string())
with contextlib.suppress(ImportError):
    import matplotlib
    matplotlib.use("Agg")
    ax = before.plot()
    chart = pathlib.Path(tempfile.gettempdir()) / "adult_python_audit.png"
    ax.figure.savefig(chart)
    print(f"audit chart: {chart}")

# %% A DP equalized-odds post-processor (epsilon 1, gamma 0.01, decision floor 0.1)
eo = fairvault.PrivateEqualizedOdds(acme, args.dataset, epsilon=1.0, gamma=0.01,
                                    decision_floor=0.1, attributes=["sex"], key_column="@row",
                                    hmac_secret=secret)
eo.fit(train, train.label, train.prediction)
for g in eo.artifact_.equalized_odds.groups:
    print(f"  {g.group}: P(1 | pred 0) = {g.p_flip_to_1_given_0:.4f}, "
          f"P(1 | pred 1) = {g.p_keep_1_given_1:.4f}")
print(f"charged epsilon {eo.charge_.cost.epsilon:g}; one vault decision reveals at most "
      f"L = {eo.decision_log_ratio_bound_:.4f} about a person's sex")

# %% Regulator's view: the post-processor applied where sex is known (the test set)
eo.set_params(random_state=7)
test["fair"] = eo.predict(test.prediction, groups=test[["sex"]])
print("before:\n", regulators_view(test, "prediction").to_string())
print("after the DP equalized-odds post-processor:\n", regulators_view(test, "fair").to_string())

# %% The vault decides for the company's customers (it never learns their sex)
train["decision"] = eo.predict(train.prediction, keys=train)
d = eo.last_decisions_
assert set(train.decision.unique()) <= {0, 1} and d.licence_charged
print(f"decided {len(train)} rows; licence charged: {d.licence_charged} "
      f"(epsilon {d.charge.cost.epsilon:.4f}); access-log seq {d.response.access_log_seq}")

# %% Re-audit the vault's decisions privately (epsilon 0.5)
after = fairvault.private_metric_frame(acme, train, "label", "decision", 0.5,
                                       dataset=args.dataset, key_column="@row",
                                       attributes=["sex"], hmac_secret=secret)
print("private violations, after:\n", after.difference(intervals=True).round(4).to_string())
summary = pd.DataFrame({
    "before": [before.demographic_parity_violation["estimate"],
               before.equalized_odds_violation["estimate"], before.overall["accuracy"]],
    "after": [after.demographic_parity_violation["estimate"],
              after.equalized_odds_violation["estimate"], after.overall["accuracy"]]},
    index=["demographic parity violation", "equalized odds violation", "accuracy"])
print("private audit, before and after (training subjects):\n", summary.round(4).to_string())

# %% A fair model the company runs itself: the DP-oracle learner (epsilon 1)
model = fairvault.DPOracleLearner(acme, args.dataset, 1.0, label="label", features=NUMERIC,
                                  attributes=["sex"], gamma=0.02, key_column="@row",
                                  hmac_secret=secret, rounds=5 if args.quick else 20,
                                  lambda_bound=1.0, clip_l1=1.0, random_state=7)
model.fit(train)
print(f"job {model.job_.id}: {model.applier_.num_components} components, "
      f"charged epsilon {model.charge_.cost.epsilon:g}")
test["fair_model"] = model.predict(test)
print("regulator's view of the fair model on the test set:\n",
      regulators_view(test, "fair_model").to_string())

# %% Budget and ledger
budget = acme.get_budget(args.dataset).iloc[0]
print(f"spent epsilon {budget.epsilon_spent:g} of {budget.epsilon_granted:g} "
      f"over {budget.releases} releases")
print(acme.list_ledger(args.dataset)[["seq", "request_kind", "epsilon"]].to_string(index=False))

# %% Re-running a cell in a session replays it: the first audit again, charged nothing
if args.session:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = fairvault.private_metric_frame(acme, train, "label", "prediction", 0.5,
                                               dataset=args.dataset, key_column="@row",
                                               attributes=["sex"], hmac_secret=secret)
    replayed = any(issubclass(w.category, fairvault.Replayed) for w in caught)
    after_rerun = acme.get_budget(args.dataset).iloc[0]
    assert replayed and after_rerun.releases == budget.releases, (replayed, after_rerun.releases)
    assert again.by_group.equals(before.by_group)
    print(f"re-ran the first audit in session '{args.session}': replayed, the same numbers, "
          f"{after_rerun.releases} releases as before")
print(f"done in {time.monotonic() - started:.1f} s")
stack.close()
