#!/usr/bin/python3
"""Fair learners compared on Adult, Law and Credit: the vault's private learners against
scikit-learn's logistic regression and Fairlearn's non-private reductions and post-processing.

Per dataset and seed: one pooled, seeded 70/30 train/test split (numpy ``default_rng(seed)``);
the features are standardised numbers (train mean/std) and one-hot categories (train rows'
categories); the protected attribute is never a feature. Methods:

- ``logreg``: scikit-learn LogisticRegression(max_iter=1000), the unconstrained baseline;
- ``fairlearn_eg_eo`` / ``fairlearn_eg_dp``: Fairlearn ExponentiatedGradient(LogisticRegression,
  EqualizedOdds / DemographicParity(difference_bound=b)), the attribute given at fit;
- ``fairlearn_threshold_eo``: Fairlearn ThresholdOptimizer(equalized_odds) on the prefit
  logistic regression's probabilities; it needs the attribute at prediction time;
- the vault's learners (``VAULT_LEARNERS`` below), through a real fairvault-server started on a
  temporary SQLite file: the DP-oracle learner (``FairModel``, dp_oracle_learner) and the DP
  equalized-odds post-processor (``PrivateEqualizedOdds``) of the logistic regression, at each
  epsilon of ``--epsilons``.

Metrics on the test rows with the true attribute (the regulator's exact view): error, EO
violation, DP violation, positive rate, all of the *expected* decisions for randomized
predictors (a mixture's fraction of components deciding 1, a post-processor's P(decision = 1)).
Writes every (dataset, method, params, epsilon, seed) row to ``--out`` and the mean ± std tables
to ``--summary``. Run with Debian's Python:

    PYTHONPATH=build/client/python /usr/bin/python3 experiments/learners/compare_learners.py \\
        --fairlearn-path /tmp/fairlearn-0.9.0 --quick

See experiments/learners/README.md for the protocol and the columns.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence

sys.dont_write_bytecode = True  # no __pycache__ beside the client's sources (symlinked in build/)

import numpy as np
import pandas as pd

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
DATASETS = ("adult", "law", "law4", "credit")
DEFAULT_DATASETS = "adult,law,credit"
COMPANY = "bench"


def floats(text: str) -> List[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def ints(text: str) -> List[int]:
    out: List[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part[1:]:  # "0-4"
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def names(text: str) -> List[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Vault learners: " + ", ".join(
                                    f"{l.name} ({l.describe})" for l in VAULT_LEARNERS))
    p.add_argument("--fairlearn-path", default=os.environ.get("FAIRLEARN_PATH"),
                   help="directory holding the fairlearn package (prepended to sys.path; "
                        "default $FAIRLEARN_PATH)")
    p.add_argument("--datasets", default=DEFAULT_DATASETS,
                   help=f"comma list of {', '.join(DATASETS)} (default {DEFAULT_DATASETS}; "
                        "law4: race in 4 groups)")
    p.add_argument("--data-dir", default=os.environ.get(
        "FAIRVAULT_DATASETS", str(ROOT.parent / "shared/datasets")),
        help="the benchmark datasets (default $FAIRVAULT_DATASETS or ../shared/datasets)")
    p.add_argument("--seeds", default="0,1,2,3,4",
                   help="comma list or range, e.g. 0-4 (default 0,1,2,3,4)")
    p.add_argument("--max-rows", type=int, default=0,
                   help="use a fixed random subset of this many pooled rows per dataset "
                        "(default 0: all; --quick: 5000)")
    p.add_argument("--epsilons", default="0.5,1,2",
                   help="the vault methods' epsilons (default 0.5,1,2)")
    p.add_argument("--eg-bounds", default="0.01,0.02,0.05",
                   help="Fairlearn ExponentiatedGradient difference bounds, each for EO and DP "
                        "(default 0.01,0.02,0.05)")
    p.add_argument("--eg-eps", type=float, default=0.01,
                   help="ExponentiatedGradient eps (its extra slack; Fairlearn's default)")
    p.add_argument("--eg-max-iter", type=int, default=50,
                   help="ExponentiatedGradient max_iter (Fairlearn's default 50)")
    p.add_argument("--no-fairlearn", action="store_true",
                   help="skip the Fairlearn methods (logreg is always run: the base model)")
    p.add_argument("--no-vault", action="store_true", help="skip the vault methods (no server)")
    p.add_argument("--vault-methods", default="",
                   help="comma list of vault learners (default: every available one)")
    p.add_argument("--vault-gamma", type=float, default=0.02,
                   help="the vault learners' slack gamma (EO post-processor, DP-oracle; the "
                        "vault EG's difference bound), default 0.02")
    p.add_argument("--select-penalty", type=float, default=2.0,
                   help="vault_eg_select: the selection's penalty per unit of gap above the target")
    p.add_argument("--eg-rounds", type=int, default=0,
                   help="the vault EG's rounds T (default 0: the server's default)")
    p.add_argument("--rounds", type=int, default=20,
                   help="DP-oracle learner rounds T (default 20)")
    p.add_argument("--lambda-bound", type=float, default=1.0,
                   help="DP-oracle learner B (default 1)")
    p.add_argument("--clip-l1", type=float, default=None,
                   help="public L1 bound on a row's features for the DP-oracle learner (default: "
                        "from the schema, number of categorical blocks + 2 x numeric columns)")
    p.add_argument("--eo-decision-floor", type=float, default=0.0,
                   help="decision floor of the vault EO post-processor (0: applied only by an "
                        "attribute holder, as here; > 0 makes it usable through Decide)")
    p.add_argument("--budget-epsilon", type=float, default=1000.0,
                   help="the company's grant per dataset (default 1000: room for every fit)")
    p.add_argument("--budget-delta", type=float, default=1e-6, help="the grant's delta")
    p.add_argument("--server-binary", default=os.environ.get(
        "FAIRVAULT_SERVER_BINARY", str(ROOT / "build/server/fairvault-server")),
        help="default $FAIRVAULT_SERVER_BINARY or build/server/fairvault-server")
    p.add_argument("--jobs", type=int, default=1,
                   help="processes for the local (sklearn/Fairlearn) methods, one (dataset, "
                        "seed) each; the vault methods always run in the main process")
    p.add_argument("--out", default=str(HERE / "results/compare.csv"),
                   help="the per-row CSV (default experiments/learners/results/compare.csv)")
    p.add_argument("--summary", default=None,
                   help="markdown tables (default: --out with the suffix .md)")
    p.add_argument("--from-csv", default="",
                   help="fit nothing: read these CSVs of earlier runs (comma list, e.g. a vault "
                        "run and a --no-vault run), write them together to --out and their "
                        "tables to --summary")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: seed 0, adult, 5000 rows, EG bound 0.05 only, epsilon 1, "
                        "5 rounds")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.datasets, args.eg_bounds, args.epsilons = "0", "adult", "0.05", "1"
        args.rounds = min(args.rounds, 5)
        args.max_rows = args.max_rows or 5000
        args.eg_max_iter = min(args.eg_max_iter, 10)
    args.seeds, args.epsilons, args.eg_bounds = ints(args.seeds), floats(args.epsilons), \
        floats(args.eg_bounds)
    args.datasets = names(args.datasets)
    bad = [d for d in args.datasets if d not in DATASETS]
    if bad:
        p.error(f"unknown dataset(s) {bad}; use {', '.join(DATASETS)}")
    if args.summary is None:
        args.summary = str(pathlib.Path(args.out).with_suffix(".md"))
    known = [l.name for l in VAULT_LEARNERS]
    args.vault_methods = names(args.vault_methods) or known
    bad = [m for m in args.vault_methods if m not in known]
    if bad:
        p.error(f"unknown vault method(s) {bad}; known: {', '.join(known)}")
    return args


# ---- data -----------------------------------------------------------------------------------

@dataclasses.dataclass
class Benchmark:
    """One pooled dataset: rows 0..n-1, their label and protected group."""
    name: str               # also the vault dataset's name
    frame: pd.DataFrame     # the company's columns
    numeric: List[str]
    categorical: List[str]
    label: np.ndarray       # 0/1
    group: np.ndarray       # protected group label per row (str)
    attribute: str          # the vault attribute's name
    groups: List[str]       # its categories, in code order


def load(name: str, data_dir: str) -> Benchmark:
    base = pathlib.Path(data_dir)
    if name == "adult":
        parts = [pd.read_csv(base / "adult" / f, skipinitialspace=True)
                 for f in ("adult.data", "adult.test")]
        df = pd.concat(parts, ignore_index=True)
        label = df.Y.str.rstrip(".").eq(">50K").astype(int).to_numpy()
        return Benchmark(name, df, ["age", "education-num", "capital-gain", "capital-loss",
                                    "hours-per-week"],
                         ["workclass", "education", "marital-status", "occupation",
                          "relationship", "native-country"],
                         label, df.sex.astype(str).to_numpy(), "sex", ["Female", "Male"])
    if name in ("law", "law4"):
        df = pd.read_csv(base / "law" / "law_data.csv")
        if name == "law":
            group = np.where(df.race.eq("White"), "White", "non-White")
            groups, attribute = ["White", "non-White"], "race"
        else:
            four = {"Asian": "Asian", "Black": "Black", "Hispanic": "Hispanic",
                    "Mexican": "Hispanic", "Puertorican": "Hispanic", "White": "White"}
            df = df[df.race.isin(list(four))].reset_index(drop=True)  # drops Other, Amerindian
            group = df.race.map(four).to_numpy()
            groups, attribute = ["Asian", "Black", "Hispanic", "White"], "race"
        df["sex"] = df["sex"].astype(str)  # one-hot, not the protected attribute here
        return Benchmark(name, df, ["LSAT", "UGPA"], ["sex"], df.first_pf.astype(int).to_numpy(),
                         np.asarray(group, dtype=object).astype(str), attribute, groups)
    if name == "credit":
        df = pd.read_csv(base / "credit" / "UCI_Credit_Card.csv")
        numeric = ["LIMIT_BAL", "AGE"] + [f"BILL_AMT{i}" for i in range(1, 7)] + \
            [f"PAY_AMT{i}" for i in range(1, 7)]
        categorical = ["EDUCATION", "MARRIAGE", "PAY_0"] + [f"PAY_{i}" for i in range(2, 7)]
        used = numeric + categorical + ["SEX", "default.payment.next.month"]
        df = df.dropna(subset=used).reset_index(drop=True)
        for c in categorical:
            df[c] = df[c].astype(int).astype(str)
        group = df.SEX.astype(int).map({1: "Male", 2: "Female"}).to_numpy()
        return Benchmark(name, df, numeric, categorical,
                         df["default.payment.next.month"].astype(int).to_numpy(),
                         np.asarray(group, dtype=object).astype(str), "sex", ["Female", "Male"])
    raise ValueError(name)


def subsample(bench: Benchmark, rows: int) -> Benchmark:
    """A fixed random subset of the pooled rows (default_rng(12345)), the same for every seed."""
    if rows <= 0 or rows >= len(bench.frame):
        return bench
    keep = np.sort(np.random.default_rng(12345).choice(len(bench.frame), rows, replace=False))
    return dataclasses.replace(bench, frame=bench.frame.iloc[keep].reset_index(drop=True),
                               label=bench.label[keep], group=bench.group[keep])


def split(n: int, seed: int) -> tuple:
    """The seeded 70/30 split: a permutation from numpy's default_rng(seed)."""
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(round(0.7 * n))
    return np.sort(perm[:cut]), np.sort(perm[cut:])


def column_name(text: str) -> str:
    """A vault column name: printable, at most 64 bytes."""
    clean = "".join(ch if ch.isalnum() or ch in "_.=-+" else "_" for ch in text)
    return clean[:64]


def design(bench: Benchmark, train: np.ndarray, test: np.ndarray) -> tuple:
    """(train features, test features) as DataFrames: standardised numbers with the train rows'
    mean and std, one-hot categories of the train rows (a test category unseen in training
    rows is all zeros)."""
    tr, te = bench.frame.iloc[train], bench.frame.iloc[test]
    num_tr = tr[bench.numeric].astype(float)
    mean, std = num_tr.mean(), num_tr.std().replace(0, 1.0)
    cols_tr = {column_name(c): ((num_tr[c] - mean[c]) / std[c]).to_numpy()
               for c in bench.numeric}
    cols_te = {column_name(c): ((te[c].astype(float) - mean[c]) / std[c]).to_numpy()
               for c in bench.numeric}
    for c in bench.categorical:
        for level in sorted(tr[c].astype(str).unique()):
            name = column_name(f"{c}={level}")
            if name in cols_tr:
                raise ValueError(f"two features named {name}")
            cols_tr[name] = (tr[c].astype(str).to_numpy() == level).astype(float)
            cols_te[name] = (te[c].astype(str).to_numpy() == level).astype(float)
    return pd.DataFrame(cols_tr), pd.DataFrame(cols_te)


# ---- metrics ---------------------------------------------------------------------------------

def metrics(p: np.ndarray, y: np.ndarray, g: np.ndarray) -> Dict[str, float]:
    """Exact test metrics of expected decisions p = P(h = 1 | row) with the true groups g."""
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    rates = {"sel": [], "tpr": [], "fpr": []}
    for a in np.unique(g):
        in_a = g == a
        rates["sel"].append(p[in_a].mean())
        for key, yy in (("tpr", 1), ("fpr", 0)):
            cell = in_a & (y == yy)
            if cell.any():
                rates[key].append(p[cell].mean())
    gap = {k: float(max(v) - min(v)) if len(v) > 1 else 0.0 for k, v in rates.items()}
    return {"error": float(np.mean(y * (1 - p) + (1 - y) * p)),
            "eo_violation": max(gap["tpr"], gap["fpr"]),
            "dp_violation": gap["sel"],
            "positive_rate": float(p.mean()),
            "tpr_gap": gap["tpr"], "fpr_gap": gap["fpr"]}


# ---- one (dataset, seed): the split, the baseline and the Fairlearn methods -------------------

@dataclasses.dataclass
class Split:
    bench: Benchmark
    seed: int
    train: np.ndarray
    test: np.ndarray
    Xtr: pd.DataFrame
    Xte: pd.DataFrame

    @property
    def ytr(self) -> np.ndarray:
        return self.bench.label[self.train]

    @property
    def yte(self) -> np.ndarray:
        return self.bench.label[self.test]

    @property
    def gtr(self) -> np.ndarray:
        return self.bench.group[self.train]

    @property
    def gte(self) -> np.ndarray:
        return self.bench.group[self.test]


def make_split(bench: Benchmark, seed: int) -> Split:
    train, test = split(len(bench.frame), seed)
    Xtr, Xte = design(bench, train, test)
    return Split(bench, seed, train, test, Xtr, Xte)


def row(s: Split, method: str, params: str, epsilon: float, p: np.ndarray, seconds: float,
        attribute_at_prediction: str, randomized: bool, **extra) -> dict:
    out = {"dataset": s.bench.name, "method": method, "params": params, "epsilon": epsilon,
           "seed": s.seed}
    out.update(metrics(p, s.yte, s.gte))
    out.update({"attribute_at_prediction": attribute_at_prediction, "randomized": randomized,
                "fit_seconds": round(seconds, 3), "n_train": len(s.train), "n_test": len(s.test),
                "groups": len(np.unique(s.gte)), "epsilon_charged": float("nan"),
                "delta_charged": float("nan"), "notes": ""})
    out.update(extra)
    return out


def logistic_regression(s: Split):
    from sklearn.linear_model import LogisticRegression
    return LogisticRegression(max_iter=1000).fit(s.Xtr.to_numpy(), s.ytr)


def local_methods(bench: Benchmark, seed: int, args: argparse.Namespace) -> List[dict]:
    """logreg and the constant classifier, then (unless --no-fairlearn) ExponentiatedGradient
    over the bounds and the ThresholdOptimizer, on one split."""
    add_fairlearn_path(args.fairlearn_path)
    s = make_split(bench, seed)
    Xtr, Xte = s.Xtr.to_numpy(), s.Xte.to_numpy()
    rows = []
    t = time.monotonic()
    lr = logistic_regression(s)
    rows.append(row(s, "logreg", "C=1", math.nan, lr.predict(Xte).astype(float),
                    time.monotonic() - t, "no", False))
    majority = int(s.ytr.mean() >= 0.5)  # the reference every learner should beat on error
    rows.append(row(s, "constant", f"train majority={majority}", math.nan,
                    np.full(len(s.test), float(majority)), 0.0, "no", False))
    if args.no_fairlearn:
        return rows
    from sklearn.linear_model import LogisticRegression
    from fairlearn.postprocessing import ThresholdOptimizer
    from fairlearn.reductions import DemographicParity, EqualizedOdds, ExponentiatedGradient
    for method, constraint in (("fairlearn_eg_eo", EqualizedOdds),
                               ("fairlearn_eg_dp", DemographicParity)):
        for b in args.eg_bounds:
            t = time.monotonic()
            eg = ExponentiatedGradient(LogisticRegression(max_iter=1000),
                                       constraint(difference_bound=b), eps=args.eg_eps,
                                       max_iter=args.eg_max_iter)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # sklearn's convergence chatter on reweighted fits
                eg.fit(Xtr, s.ytr, sensitive_features=s.gtr)
            p = eg._pmf_predict(Xte)[:, 1]  # expected decisions of the mixture
            support = int(np.sum(np.asarray(eg.weights_) > 0))
            rows.append(row(s, method, f"bound={b:g}", math.nan, p, time.monotonic() - t, "no",
                            support > 1, notes=f"{support} predictors with weight > 0, "
                                               f"{eg.n_oracle_calls_} oracle calls"))
    t = time.monotonic()
    to = ThresholdOptimizer(estimator=lr, constraints="equalized_odds", prefit=True,
                            predict_method="predict_proba")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to.fit(Xtr, s.ytr, sensitive_features=s.gtr)
    p = to._pmf_predict(Xte, sensitive_features=s.gte)[:, 1]
    rows.append(row(s, "fairlearn_threshold_eo", "prefit logreg", math.nan, p,
                    time.monotonic() - t, "yes (local)", True))
    return rows


def add_fairlearn_path(path: Optional[str]) -> None:
    if path and path not in sys.path:
        sys.path.insert(0, path)


# ---- the vault: one server, the regulator's set-up, and the learners ---------------------------

class VaultSession:
    """fairvault-server bootstrapped and served on a temporary SQLite file (as
    experiments/python_demo/adult_python.py --self-contained does); this script plays the
    regulator (datasets, attributes, the company, its grants) and the company."""

    def __init__(self, args: argparse.Namespace, stack: contextlib.ExitStack):
        import fairvault
        self.fairvault, self.args = fairvault, args
        binary = args.server_binary
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"{binary} is missing or not executable: build the tree "
                             "(deploy/build.sh) or pass --server-binary")
        self.tmp = pathlib.Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="compare-learners-")))
        db = self.tmp / "vault.db"
        key = subprocess.run([binary, "bootstrap", "--db", str(db), "--name", "regulator"],
                             check=True, capture_output=True, text=True).stdout.strip()
        log = stack.enter_context(open(self.tmp / "server.log", "w"))
        server = subprocess.Popen([binary, "serve", "--db", str(db), "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=log, text=True)
        stack.callback(server.wait, 20)
        stack.callback(server.terminate)
        line = server.stdout.readline()
        if "listening on port" not in line:
            raise RuntimeError(f"fairvault-server did not start: {line!r}; see "
                               f"{self.tmp}/server.log")
        target = f"127.0.0.1:{line.split()[-1]}"
        self.regulator = fairvault.Vault(target, key=key)
        stack.callback(self.regulator.close)  # before the server stops: it waits for clients
        company_key = self.regulator.create_account(COMPANY, "company").api_key
        self.company = fairvault.Vault(target, key=company_key)
        stack.callback(self.company.close)
        self.loaded: set = set()

    def load(self, bench: Benchmark) -> None:
        """Regulator: the dataset with its one attribute, every pooled row's group imported
        (train and test subjects of every seed), and the company's grant."""
        if bench.name in self.loaded:
            return
        self.regulator.create_dataset(bench.name, {bench.attribute: bench.groups})
        subjects = pd.DataFrame({"key": keys(len(bench.frame)), bench.attribute: bench.group})
        self.regulator.import_attributes(subjects, bench.name, [bench.attribute], "key",
                                         progress=False)
        self.regulator.grant_budget(COMPANY, bench.name, self.args.budget_epsilon,
                                    self.args.budget_delta)
        self.loaded.add(bench.name)


def keys(n: int, rows: Optional[np.ndarray] = None) -> List[str]:
    """Subject keys of pooled rows: 'r<row>'."""
    return [f"r{i}" for i in (range(n) if rows is None else rows)]


@dataclasses.dataclass
class VaultContext:
    """What a vault learner gets for one (dataset, seed): the company's connection and its
    train table (key, features, label, the logistic regression's 0/1 prediction), the test
    rows' features and base predictions, and the options."""
    vault: object                  # the company's fairvault.Vault
    dataset: str
    attribute: str
    train: pd.DataFrame            # key, features..., label, prediction
    features: List[str]
    test_features: pd.DataFrame
    test_prediction: np.ndarray    # the logistic regression's 0/1 decisions on the test rows
    test_groups: np.ndarray        # the regulator's view: only for attribute-holding appliers
    clip_l1: float
    args: argparse.Namespace


@dataclasses.dataclass
class Fitted:
    """A fitted vault predictor: the expected decisions on the test rows, what it cost."""
    expected_decisions: Callable[[], np.ndarray]
    cost: object            # the release's Cost (epsilon, delta)
    randomized: bool
    notes: str = ""


def fair_model_fitted(model, X_test: pd.DataFrame) -> Fitted:
    """A FairModel's expected decisions on X_test: a mixture's predict_proba is the (weighted)
    fraction of its components deciding 1, the mean of its seeded per-row draw; a network or a
    hypothesis column decides deterministically (a network's predict_proba is a sigmoid, not
    a decision)."""
    applier = model.applier_
    mixture = applier.kind == "mixture" and applier.num_components > 1
    notes = f"{applier.kind}, {applier.num_components} components"
    summary = getattr(model, "training_summary_", None) or {}
    if "error" in summary:
        notes += f"; train error {summary['error']:.4f} (one seed-0 draw)"

    def expected() -> np.ndarray:
        if mixture:
            return applier.predict_proba(X_test)
        return applier.predict(X_test, random_state=0).astype(float)
    return Fitted(expected, model.charge_.cost, mixture, notes)


def _fair_model(ctx: VaultContext, algorithm: str, epsilon: float, **learner_params) -> Fitted:
    """Fits a FairModel (uploads the train table's key, features and label, then one
    FitFairModel job, charged at submission) and returns its predictor on the test rows."""
    fv = sys.modules["fairvault"]
    gamma = learner_params.pop("gamma", ctx.args.vault_gamma)  # 0: not sent (PF-LD has none)
    model = fv.FairModel(ctx.vault, ctx.dataset, epsilon, algorithm=algorithm,
                         learner_params=learner_params, label="label", features=ctx.features,
                         attributes=[ctx.attribute], gamma=gamma, key_column="key",
                         progress=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fv.TrivialModelWarning)
        model.fit(ctx.train)
    fitted = fair_model_fitted(model, ctx.test_features)
    fitted.notes += f"; job {model.job_.id}"
    for w in caught:
        if issubclass(w.category, fv.TrivialModelWarning):
            fitted.notes += "; TrivialModelWarning: " + str(w.message)[:160]
            break
    return fitted


def fit_dp_oracle(ctx: VaultContext, epsilon: float) -> Fitted:
    """The DP-oracle learner (Jagielski et al. 2019, Alg. 3): a uniform mixture of T private
    least-squares best responses, applied locally without the attribute."""
    return _fair_model(ctx, "dp_oracle_learner", epsilon, rounds=ctx.args.rounds,
                       lambda_bound=ctx.args.lambda_bound, clip_l1=ctx.clip_l1)


def fit_eo_postprocess(ctx: VaultContext, epsilon: float) -> Fitted:
    """The DP equalized-odds post-processor (Jagielski et al. 2019, Alg. 1) of the logistic
    regression's 0/1 predictions; applied here by the regulator, who holds the test rows'
    groups (P(decision = 1 | prediction, group) from the artifact). A company would go through
    Decide, which needs --eo-decision-floor > 0 and charges a licence."""
    fv = sys.modules["fairvault"]
    eo = fv.PrivateEqualizedOdds(ctx.vault, ctx.dataset, epsilon=epsilon,
                                 gamma=ctx.args.vault_gamma,
                                 decision_floor=ctx.args.eo_decision_floor or None,
                                 attributes=[ctx.attribute], key_column="key")
    eo.fit(ctx.train, ctx.train["label"], ctx.train["prediction"])
    probs = {g.group: (round(g.p_flip_to_1_given_0, 4), round(g.p_keep_1_given_1, 4))
             for g in eo.artifact_.equalized_odds.groups}
    return Fitted(lambda: eo.predict_proba(ctx.test_prediction, ctx.test_groups)[:, 1],
                  eo.charge_.cost, True, f"P(1|pred 0), P(1|pred 1) per group: {probs}")


# ======== NEW VAULT LEARNER: exponentiated_gradient ============================================
# FairModel algorithm "exponentiated_gradient" (Agarwal et al. 2018 in the vault; issue 22). Its
# two entries in VAULT_LEARNERS run by themselves once the generated stubs know
# FAIR_MODEL_ALGORITHM_EXPONENTIATED_GRADIENT (a rebuild after the proto change); until then they
# are skipped and the summary says so. Request fields go here, by name (any FitFairModelRequest
# field): gamma is Fairlearn's difference_bound; fairness picks the constraint. Left at the
# server's defaults (0): rounds (200), lambda_bound (100), learning_rate (2/B), masses_share,
# sums_share, mixture (the final linear program). Its artifact may be a weighted mixture
# (FairModel.component_weights): the expected decisions below are then predict_proba's weighted
# fraction of components deciding 1.
EXPONENTIATED_GRADIENT = "exponentiated_gradient"


def _eg_params(ctx: VaultContext) -> dict:
    return {"rounds": ctx.args.eg_rounds} if ctx.args.eg_rounds else {}


def fit_eg_eo(ctx: VaultContext, epsilon: float) -> Fitted:
    return _fair_model(ctx, EXPONENTIATED_GRADIENT, epsilon, fairness="equalized_odds",
                       clip_l1=ctx.clip_l1, **_eg_params(ctx))


def fit_eg_dp(ctx: VaultContext, epsilon: float) -> Fitted:
    return _fair_model(ctx, EXPONENTIATED_GRADIENT, epsilon, fairness="demographic_parity",
                       clip_l1=ctx.clip_l1, **_eg_params(ctx))


def fit_eg_select(ctx: VaultContext, epsilon: float, target: float,
                  in_sample: bool = False) -> Fitted:
    """The managed selection (issue 22 §3): the train rows split 70/30 (their order is already
    random) into a training and a validation table; EG-EO trained on the first, and one of 20
    candidates along λ̄ chosen privately on the second by error + penalty x max(0, gap - target).
    Applied locally; deterministic (one linear classifier). ``in_sample``: no split, the
    selection reads the training table itself (more rows per cell, no held-out estimate)."""
    from fairvault import models
    vault = ctx.vault
    cut = len(ctx.train) if in_sample else int(0.7 * len(ctx.train))
    columns = ["key"] + ctx.features + ["label"]
    numeric = ctx.features + ["label"]
    train = vault.upload_table(ctx.train.iloc[:cut][columns], ctx.dataset, "key", numeric=numeric)
    valid = train if in_sample else vault.upload_table(ctx.train.iloc[cut:][columns], ctx.dataset,
                                                       "key", numeric=numeric)
    release = vault.fit_fair_model(
        train, EXPONENTIATED_GRADIENT, "label", epsilon, ctx.features, [ctx.attribute],
        gamma=ctx.args.vault_gamma, clip_l1=ctx.clip_l1, fairness="equalized_odds",
        validation_table_handle=valid, selection_target=target,
        selection_penalty=ctx.args.select_penalty, **_eg_params(ctx))
    done = vault.wait_job(release.response.job.id, timeout=900, progress=False)
    artifact = vault.get_artifact(done.artifact_id)
    applier = models.applier_for(artifact)
    sel = artifact.fair_model.selection
    notes = (f"chosen {sel.chosen} of {len(sel.scales)} (x{sel.scales[sel.chosen]:.3g} lambda), "
             f"validation error {sel.validation_errors[sel.chosen]:.4f}, noisy gap "
             f"{sel.noisy_gap:.4f}, M {sel.floor:g}")
    return Fitted(lambda: applier.predict(ctx.test_features, random_state=0).astype(float),
                  release.charge.cost, False, notes)


def fit_pfld(ctx: VaultContext, epsilon: float, fairness: str, target: float = 0.0) -> Fitted:
    """PF-LD (logistic regression) at the server's defaults (issue 22 §4: full batch, 300
    epochs, η_θ 1, C_p 5, the averaged second-half iterate); `target`: its target violation
    (gamma; 0 is the paper's equality form)."""
    return _fair_model(ctx, "pf_ld", epsilon, fairness=fairness, clip_l1=ctx.clip_l1,
                       gamma=target)


def _select_learners() -> List["VaultLearner"]:
    out = []
    for target in (0.02, 0.05):
        out.append(VaultLearner(
            f"vault_eg_select_{target:g}",
            lambda ctx, eps, target=target: fit_eg_select(ctx, eps, target),
            f"FairModel exponentiated_gradient EO + the managed selection, target {target:g}",
            available=lambda: algorithm_available(EXPONENTIATED_GRADIENT)))
    for fairness in ("equalized_odds", "demographic_parity"):
        out.append(VaultLearner(
            f"vault_pfld_{'eo' if fairness == 'equalized_odds' else 'dp'}",
            lambda ctx, eps, fairness=fairness: fit_pfld(ctx, eps, fairness),
            f"FairModel pf_ld, {fairness}, server defaults"))
    for target in (0.01, 0.03):
        out.append(VaultLearner(
            f"vault_pfld_eo_target_{target:g}",
            lambda ctx, eps, target=target: fit_pfld(ctx, eps, "equalized_odds", target),
            f"FairModel pf_ld, equalized odds, target violation {target:g}"))
    out.append(VaultLearner(
        "vault_eg_select_in_sample_0.05",
        lambda ctx, eps: fit_eg_select(ctx, eps, 0.05, in_sample=True),
        "FairModel exponentiated_gradient EO + the managed selection on the training rows",
        available=lambda: algorithm_available(EXPONENTIATED_GRADIENT)))
    return out
# ===============================================================================================


def algorithm_available(algorithm: str) -> Optional[str]:
    """None if the generated stubs know the FairModel algorithm, else why it is skipped."""
    try:
        from fairvault._proto import pb
    except ImportError as e:
        return str(e)
    name = "FAIR_MODEL_ALGORITHM_" + algorithm.upper()
    if name not in pb.FairModelAlgorithm.keys():
        return f"the client's stubs have no {name} (server support not built yet)"
    return None


@dataclasses.dataclass
class VaultLearner:
    name: str                                        # the method column
    fit: Callable[[VaultContext, float], Fitted]     # (context, epsilon) -> fitted predictor
    describe: str
    attribute_at_prediction: str = "no"
    available: Callable[[], Optional[str]] = lambda: None
    succeeded: bool = False          # set by the run: one fit worked
    disabled: str = ""               # set by the run: its first fit failed (why); not retried


# The vault methods, in the order they run: add a learner here (one line).
VAULT_LEARNERS: List[VaultLearner] = [
    VaultLearner("vault_dp_oracle", fit_dp_oracle, "FairModel dp_oracle_learner"),
    VaultLearner("vault_eo_postprocess", fit_eo_postprocess,
                 "PrivateEqualizedOdds of the logreg", "yes (via Decide)"),
    # The new learner (see NEW VAULT LEARNER above): skipped until the stubs know it.
    VaultLearner("vault_eg_eo", fit_eg_eo, "FairModel exponentiated_gradient, equalized odds",
                 available=lambda: algorithm_available(EXPONENTIATED_GRADIENT)),
    VaultLearner("vault_eg_dp", fit_eg_dp,
                 "FairModel exponentiated_gradient, demographic parity",
                 available=lambda: algorithm_available(EXPONENTIATED_GRADIENT)),
]


VAULT_LEARNERS.extend(_select_learners())


def vault_params(learner: VaultLearner, ctx: VaultContext) -> str:
    a = ctx.args
    if learner.name.startswith("vault_pfld_"):
        target = learner.name.rsplit("_", 1)[1] if "target" in learner.name else "0"
        return f"clip_l1={ctx.clip_l1:g},target={target},server defaults"
    if learner.name.startswith("vault_eg_select_"):
        split = "in-sample" if "in_sample" in learner.name else "70/30 validation"
        return (f"bound={a.vault_gamma:g},clip_l1={ctx.clip_l1:g},penalty={a.select_penalty:g},"
                f"{split}")
    if learner.fit is fit_eo_postprocess:
        return f"gamma={a.vault_gamma:g},floor={a.eo_decision_floor:g}"
    if learner.fit in (fit_eg_eo, fit_eg_dp):
        rounds = f"T={a.eg_rounds}," if a.eg_rounds else ""
        return f"bound={a.vault_gamma:g},clip_l1={ctx.clip_l1:g},{rounds}server defaults"
    return (f"gamma={a.vault_gamma:g},T={a.rounds},B={a.lambda_bound:g},"
            f"clip_l1={ctx.clip_l1:g}")


def vault_methods(session: VaultSession, bench: Benchmark, seed: int,
                  args: argparse.Namespace, learners: List[VaultLearner]) -> List[dict]:
    s = make_split(bench, seed)
    lr = logistic_regression(s)
    train = s.Xtr.copy()
    train.insert(0, "key", keys(0, s.train))
    train["label"] = s.ytr.astype(float)
    train["prediction"] = lr.predict(s.Xtr.to_numpy()).astype(float)
    clip = args.clip_l1 if args.clip_l1 is not None else \
        float(len(bench.categorical) + 2 * len(bench.numeric))
    ctx = VaultContext(session.company, bench.name, bench.attribute, train, list(s.Xtr.columns),
                       s.Xte, lr.predict(s.Xte.to_numpy()).astype(float), s.gte, clip, args)
    rows = []
    for learner in learners:
        for eps in args.epsilons:
            if learner.disabled:
                break
            t = time.monotonic()
            try:
                fitted = learner.fit(ctx, eps)
                p = fitted.expected_decisions()
            except Exception as e:  # one failed fit is a row, not the end of the run
                print(f"  {bench.name} seed {seed} {learner.name} eps {eps:g}: FAILED {e!r}",
                      file=sys.stderr)
                if not learner.succeeded:  # it never worked: e.g. a server without it
                    learner.disabled = f"{type(e).__name__}: {e}"[:300]
                r = row(s, learner.name, vault_params(learner, ctx), eps,
                        np.full(len(s.test), np.nan), time.monotonic() - t,
                        learner.attribute_at_prediction, False)
                r.update({k: math.nan for k in ("error", "eo_violation", "dp_violation",
                                                "positive_rate", "tpr_gap", "fpr_gap")})
                r["notes"] = f"FAILED: {type(e).__name__}: {e}"[:300]
                rows.append(r)
                continue
            learner.succeeded = True
            rows.append(row(s, learner.name, vault_params(learner, ctx), eps, p,
                            time.monotonic() - t, learner.attribute_at_prediction,
                            fitted.randomized, epsilon_charged=fitted.cost.epsilon,
                            delta_charged=fitted.cost.delta,
                            notes=fitted.notes))
            print_row(rows[-1])
    return rows


# ---- output ----------------------------------------------------------------------------------

METRICS = ("error", "eo_violation", "dp_violation", "positive_rate")


def print_row(r: dict) -> None:
    eps = "" if pd.isna(r["epsilon"]) else f" eps={r['epsilon']:g}"
    print(f"  {r['dataset']:6s} seed {r['seed']} {r['method']:28s} {r['params']:<24s}{eps:9s} "
          f"err {r['error']:.4f} EO {r['eo_violation']:.4f} DP {r['dp_violation']:.4f} "
          f"pos {r['positive_rate']:.4f} ({r['fit_seconds']:.1f} s)", file=sys.stderr, flush=True)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    keys_ = ["dataset", "method", "params", "epsilon"]
    d = df.copy()
    d["epsilon"] = d["epsilon"].fillna(-1.0)  # groupby drops NaN keys
    g = d.groupby(keys_, sort=False)
    out = g[list(METRICS) + ["fit_seconds"]].agg(["mean", "std"])
    out.columns = [f"{a}_{b}" for a, b in out.columns]
    out["seeds"] = g.size()
    out["failed"] = g["error"].apply(lambda s: int(s.isna().sum()))
    out["attribute_at_prediction"] = g["attribute_at_prediction"].first()
    out = out.reset_index()
    out["epsilon"] = out["epsilon"].where(out["epsilon"] >= 0)
    rank = {"logreg": 0, "constant": 1}  # then Fairlearn, then the vault, each as they came
    out["_rank"] = [rank.get(m, 2 if m.startswith("fairlearn") else 3) for m in out.method]
    return out.sort_values("_rank", kind="stable").drop(columns="_rank").reset_index(drop=True)


def pm(mean: float, std: float) -> str:
    if pd.isna(mean):
        return "n/a"
    return f"{mean:.4f} ± {0.0 if pd.isna(std) else std:.4f}"


def matched(df: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """For each vault method and epsilon (and, as a non-private reference, the
    ThresholdOptimizer): the Fairlearn EG config whose mean EO violation is closest at or
    above its own, and the error difference (method − EG; mean ± std of the per-seed paired
    differences, same splits)."""
    out = []
    eg = summary[summary.method.str.startswith("fairlearn_eg")]
    refs = summary[summary.method.str.startswith("vault_") |
                   (summary.method == "fairlearn_threshold_eo")]
    for _, r in refs.iterrows():
        cands = eg[(eg.dataset == r.dataset)]
        if cands.empty or pd.isna(r.eo_violation_mean):
            continue
        above = cands[cands.eo_violation_mean >= r.eo_violation_mean]
        if not above.empty:
            m = above.loc[(above.eo_violation_mean - r.eo_violation_mean).idxmin()]
            how = "at or above"
        else:
            m = cands.loc[(r.eo_violation_mean - cands.eo_violation_mean).idxmin()]
            how = "none at or above: closest below"
        mine = df[(df.dataset == r.dataset) & (df.method == r.method) & (df.params == r.params)]
        mine = mine[mine.epsilon.isna()] if pd.isna(r.epsilon) else \
            mine[np.isclose(mine.epsilon, r.epsilon)]
        theirs = df[(df.dataset == r.dataset) & (df.method == m.method) & (df.params == m.params)]
        paired = mine.set_index("seed").error - theirs.set_index("seed").error
        paired = paired.dropna()
        out.append({"dataset": r.dataset, "method": r.method, "params": r.params,
                    "epsilon": r.epsilon, "eo_violation": r.eo_violation_mean,
                    "error": r.error_mean, "eg_config": f"{m.method} {m.params}",
                    "eg_eo_violation": m.eo_violation_mean, "eg_error": m.error_mean,
                    "match": how, "error_diff_mean": paired.mean() if len(paired) else math.nan,
                    "error_diff_std": paired.std() if len(paired) > 1 else math.nan,
                    "paired_seeds": len(paired)})
    return pd.DataFrame(out)


def markdown(df: pd.DataFrame, args: argparse.Namespace, wall: float, notes: List[str]) -> str:
    summary = summarize(df)
    datasets = list(dict.fromkeys(df.dataset))
    seeds = sorted(set(int(v) for v in df.seed))
    lines = [f"# compare_learners: {', '.join(datasets)}; seeds {','.join(map(str, seeds))}", "",
             ("" if math.isnan(wall) else f"Wall time {wall:.0f} s. ") +
             "Metrics on the test rows (30 %) with the true attribute; randomized predictors by "
             "their expected decisions. mean ± std over seeds.", ""]
    lines += [f"- {n}" for n in notes]
    if notes:
        lines.append("")
    for dataset in datasets:
        part = summary[summary.dataset == dataset]
        if part.empty:
            continue
        lines += [f"## {dataset}", "",
                  "| method | params | ε | error | EO violation | DP violation | positive rate "
                  "| attribute at prediction | fit s | seeds |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in part.iterrows():
            eps = "—" if pd.isna(r.epsilon) else f"{r.epsilon:g}"
            seeds = f"{r.seeds}" + (f" ({r.failed} failed)" if r.failed else "")
            lines.append(
                f"| {r.method} | {r.params} | {eps} | {pm(r.error_mean, r.error_std)} | "
                f"{pm(r.eo_violation_mean, r.eo_violation_std)} | "
                f"{pm(r.dp_violation_mean, r.dp_violation_std)} | "
                f"{pm(r.positive_rate_mean, r.positive_rate_std)} | {r.attribute_at_prediction} "
                f"| {r.fit_seconds_mean:.1f} | {seeds} |")
        lines.append("")
    m = matched(df, summary)
    lines += ["## Matched violation", "",
              "For each vault method and ε (and the non-private ThresholdOptimizer for "
              "reference): the Fairlearn ExponentiatedGradient config whose mean EO violation "
              "is closest at or above its own; error diff = method − EG, mean ± std of the "
              "per-seed paired differences.", ""]
    if m.empty:
        has_eg = summary.method.str.startswith("fairlearn_eg").any()
        lines.append("(nothing to match: no vault or ThresholdOptimizer rows)" if has_eg else
                     "(nothing to match against: no Fairlearn ExponentiatedGradient rows; run "
                     "without --no-fairlearn, or join a --no-vault run's CSV with --from-csv)")
    else:
        lines += ["| dataset | method | params | ε | EO viol. | error | EG config | EG EO viol. "
                  "| EG error | error diff | match |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in m.iterrows():
            eps = "—" if pd.isna(r.epsilon) else f"{r.epsilon:g}"
            lines.append(f"| {r.dataset} | {r.method} | {r.params} | {eps} | "
                         f"{r.eo_violation:.4f} | {r.error:.4f} | {r.eg_config} | "
                         f"{r.eg_eo_violation:.4f} | {r.eg_error:.4f} | "
                         f"{pm(r.error_diff_mean, r.error_diff_std)} | {r.match} |")
    lines.append("")
    return "\n".join(lines)


def write(rows: List[dict], args: argparse.Namespace, wall: float, notes: List[str]) -> str:
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    df.to_csv(out, index=False, float_format="%.6g")
    text = markdown(df, args, wall, notes)
    pathlib.Path(args.summary).write_text(text)
    return text


# ---- main ------------------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    if args.from_csv:
        parts = [pd.read_csv(f, keep_default_na=True) for f in names(args.from_csv)]
        df = pd.concat(parts, ignore_index=True)
        df["params"] = df["params"].astype(str)
        key = ["dataset", "method", "params", "epsilon", "seed"]
        filled = df.fillna({"epsilon": -1})
        same = filled.duplicated(key + list(METRICS) + ["n_train"])  # e.g. logreg in both runs
        df, filled = df[~same].reset_index(drop=True), filled[~same].reset_index(drop=True)
        twice = df[filled.duplicated(key, keep=False)]
        if not twice.empty:
            print("error: the CSVs disagree (the same dataset, method, params, epsilon and seed "
                  f"with other metrics), e.g.\n{twice[key].head(4).to_string(index=False)}",
                  file=sys.stderr)
            return 2
        df["notes"] = df["notes"].fillna("")
        notes = [f"tables of {', '.join(names(args.from_csv))} (--from-csv); fit times are "
                 "those runs'"]
        print(write(df, args, float("nan"), notes))
        return 0
    add_fairlearn_path(args.fairlearn_path)
    if not args.no_fairlearn:
        try:
            import fairlearn
        except ImportError:
            print("error: fairlearn is not importable: pass --fairlearn-path DIR (the directory "
                  "holding the fairlearn package) or set FAIRLEARN_PATH", file=sys.stderr)
            return 2
        print(f"fairlearn {fairlearn.__version__} from {pathlib.Path(fairlearn.__file__).parent}",
              file=sys.stderr)
    notes: List[str] = []
    learners: List[VaultLearner] = []
    if not args.no_vault:
        try:
            import fairvault  # noqa: F401
        except ImportError as e:
            print(f"error: the fairvault client is not importable ({e}); run with "
                  "PYTHONPATH=build/client/python, or --no-vault", file=sys.stderr)
            return 2
        for learner in VAULT_LEARNERS:
            if learner.name not in args.vault_methods:
                continue
            why = learner.available()
            if why:
                notes.append(f"{learner.name} skipped: {why}")
                print(f"note: {notes[-1]}", file=sys.stderr)
            else:
                learners.append(learner)
    else:
        notes.append("vault methods not run (--no-vault)")
    notes.append(f"Fairlearn EG: eps={args.eg_eps:g}, max_iter={args.eg_max_iter}, bounds "
                 f"{','.join(f'{b:g}' for b in args.eg_bounds)}" if not args.no_fairlearn
                 else "Fairlearn methods not run (--no-fairlearn)")
    if learners:
        notes.append(f"vault: grant ε={args.budget_epsilon:g}, δ={args.budget_delta:g}; "
                     f"epsilons {','.join(f'{e:g}' for e in args.epsilons)}")

    benches = {name: subsample(load(name, args.data_dir), args.max_rows)
               for name in args.datasets}
    for b in benches.values():
        counts = pd.Series(b.group).value_counts().to_dict()
        print(f"{b.name}: {len(b.frame)} rows, positive rate {b.label.mean():.3f}, "
              f"{b.attribute} groups {counts}", file=sys.stderr)

    rows: List[dict] = []
    tasks = [(b, seed) for b in benches.values() for seed in args.seeds]
    with contextlib.ExitStack() as stack:
        if args.jobs > 1:
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=args.jobs))
            futures = [pool.submit(local_methods, b, seed, args) for b, seed in tasks]
        session = VaultSession(args, stack) if learners else None
        for i, (b, seed) in enumerate(tasks):
            local = futures[i].result() if args.jobs > 1 else local_methods(b, seed, args)
            for r in local:
                print_row(r)
            rows.extend(local)
            if session is not None:
                session.load(b)
                rows.extend(vault_methods(session, b, seed, args, learners))
            write(rows, args, time.monotonic() - started, notes)  # partial results kept
        for learner in learners:
            if learner.disabled:
                notes.append(f"{learner.name} stopped after its first fit failed: "
                             f"{learner.disabled}")
        if session is not None:
            budget = session.company.get_budget("", as_frame=False)
            for bud in budget:
                notes.append(f"vault budget on {bud.dataset}: spent ε {bud.epsilon_spent:g} of "
                             f"{bud.epsilon_granted:g} over {bud.releases} releases")
    wall = time.monotonic() - started
    text = write(rows, args, wall, notes)
    print(text)
    print(f"wrote {args.out} and {args.summary} in {wall:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
