"""pytest fixtures: a real fairvault-server on a temporary SQLite database, loaded with a
synthetic population, and Vault connections for its regulator, companies and auditor.

The server and CLI binaries come from $FAIRVAULT_SERVER_BINARY and $FAIRVAULT_CLI_BINARY
(ctest sets both; see client/python/CMakeLists.txt), else from build/ in the repository.
As tests/server_process.cc does: `fairvault-server bootstrap`, then `serve --listen
127.0.0.1:0` and the port from its "fairvault-server listening on port N" line.
"""
from __future__ import annotations

import itertools
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List

import numpy as np
import pandas as pd
import pytest

import fairvault

ROOT = pathlib.Path(__file__).resolve().parents[3]
POPULATION_SIZE = 2000
SEXES = ["F", "M"]
RACES = ["A", "B", "C"]


def _binary(env: str, relative: str) -> str:
    path = os.environ.get(env) or str(ROOT / "build" / relative)
    if not os.access(path, os.X_OK):
        pytest.exit(f"{path} is not an executable: build it or set {env}", returncode=2)
    return path


def make_population(n: int, seed: int) -> pd.DataFrame:
    """Deterministic synthetic subjects: key, sex, race, region, label, prediction, score."""
    rng = np.random.default_rng(seed)
    sex = rng.integers(0, 2, n)
    race = rng.choice(3, n, p=[0.6, 0.3, 0.1])
    label = (rng.random(n) < 0.3 + 0.2 * sex).astype(int)
    prediction = np.where(rng.random(n) < 0.8, label, 1 - label)
    score = np.clip(0.25 + 0.5 * label + rng.normal(0, 0.2, n), 0, 1)
    return pd.DataFrame({
        "key": [f"s{i:05d}" for i in range(n)],
        "sex": [SEXES[s] for s in sex],
        "race": [RACES[r] for r in race],
        "region": np.where(rng.random(n) < 0.5, "north", "south"),
        "label": label,
        "prediction": prediction,
        "score": score,
    })


@dataclass
class VaultServer:
    """A running server and what the fixture loaded into it."""

    server_binary: str
    cli_binary: str
    target: str
    regulator_key: str
    tmp: pathlib.Path
    population: pd.DataFrame
    # A witness the server lists (quorum 0: its cosignatures are kept, receipts do not wait).
    witness_key_file: pathlib.Path = pathlib.Path()
    witness_verifier: str = ""
    dataset: str = "pop"
    _names: Iterator[int] = field(default_factory=lambda: itertools.count())
    keys: Dict[str, str] = field(default_factory=dict)
    # Every Vault made here, closed before the server stops: the server's graceful shutdown
    # waits seconds for open client connections.
    opened: List[fairvault.Vault] = field(default_factory=list)

    def vault(self, key: str = "", **options) -> fairvault.Vault:
        vault = fairvault.Vault(options.pop("target", self.target), key=key or None, **options)
        self.opened.append(vault)
        return vault

    def close_all(self) -> None:
        for vault in self.opened:
            vault.close()

    @property
    def regulator(self) -> fairvault.Vault:
        return self.vault(self.regulator_key)

    def new_company(self, epsilon: float = 1000.0, delta: float = 0.0,
                    dataset: str = "", **options) -> fairvault.Vault:
        """A fresh company account with its own grant (tests do not share budgets)."""
        name = f"co{next(self._names)}"
        key = self.regulator.create_account(name, "company").api_key
        self.regulator.grant_budget(name, dataset or self.dataset, epsilon, delta)
        self.keys[name] = key
        vault = self.vault(key, **options)
        vault.name = name  # for the tests' messages
        return vault

    def new_auditor(self) -> fairvault.Vault:
        name = f"aud{next(self._names)}"
        return self.vault(self.regulator.create_account(name, "auditor").api_key)

    def cli(self, *args: str, key: str = "", check: bool = True) -> subprocess.CompletedProcess:
        """Runs the CLI against this server."""
        env = dict(os.environ, FAIRVAULT_SERVER=self.target)
        env.pop("FAIRVAULT_API_KEY", None)
        if key:
            env["FAIRVAULT_API_KEY"] = key
        result = subprocess.run([self.cli_binary, *args], env=env, capture_output=True,
                                text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"fairvault {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result


def _read_port(process: subprocess.Popen) -> int:
    prefix = "fairvault-server listening on port "
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"fairvault-server exited ({process.poll()}) before listening")
        if line.startswith(prefix):
            return int(line[len(prefix):].strip())
    raise RuntimeError("fairvault-server printed no port line within 60 s")


class ServerProcess:
    """`fairvault-server serve` on a database, on a free loopback port, until stop()."""

    def __init__(self, binary: str, db: pathlib.Path, *flags: str) -> None:
        self.log = open(db.with_suffix(".log"), "w")
        self.process = subprocess.Popen(
            [binary, "serve", "--db", str(db), "--listen", "127.0.0.1:0", *flags],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        try:
            self.port = _read_port(self.process)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def bootstrap(binary: str, db: pathlib.Path) -> str:
    """`fairvault-server bootstrap`: the first regulator's API key."""
    return subprocess.run([binary, "bootstrap", "--db", str(db), "--name", "regulator"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture(scope="session")
def vault_server(request: pytest.FixtureRequest) -> Iterator[VaultServer]:
    server_binary = _binary("FAIRVAULT_SERVER_BINARY", "server/fairvault-server")
    cli_binary = _binary("FAIRVAULT_CLI_BINARY", "client/fairvault")
    with tempfile.TemporaryDirectory(prefix="fairvault-pytest-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        db = tmp / "vault.db"
        regulator_key = bootstrap(server_binary, db)
        witness_key_file = tmp / "witness.key"
        witness_verifier = subprocess.run(
            [cli_binary, "witness", "key", "--name", "pytest.example/witness", "--out",
             str(witness_key_file)], check=True, capture_output=True, text=True,
            timeout=60).stdout.strip()
        (tmp / "witnesses").write_text(witness_verifier + "\n")
        process = ServerProcess(server_binary, db, "--witnesses", str(tmp / "witnesses"),
                                "--witness-quorum", "0")
        try:
            population = make_population(POPULATION_SIZE, seed=20261123)
            server = VaultServer(server_binary, cli_binary, f"127.0.0.1:{process.port}",
                                 regulator_key, tmp, population, witness_key_file=witness_key_file,
                                 witness_verifier=witness_verifier)
            regulator = server.regulator
            regulator.create_dataset("pop", {"sex": SEXES, "race": RACES})
            imported = regulator.import_attributes(population, "pop", ["sex", "race"], "key")
            assert imported.rows_imported == POPULATION_SIZE
            yield server
            server.close_all()
        finally:
            process.stop()
            if request.session.testsfailed:
                _print_log_tail(db.with_suffix(".log"))


def _print_log_tail(log: pathlib.Path, lines: int = 60) -> None:
    """The server's last log lines (its stderr), for a failed run's report."""
    tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
    print(f"\n--- the last {len(tail)} lines of the test server's log ({log.name}) ---",
          *tail, sep="\n", file=sys.stderr)


@pytest.fixture
def company(vault_server: VaultServer) -> fairvault.Vault:
    """A fresh company with a grant of epsilon 1000 on "pop"."""
    return vault_server.new_company()


@pytest.fixture
def table(vault_server: VaultServer, company: fairvault.Vault) -> fairvault.TableHandle:
    """The population's company columns uploaded by `company`."""
    df = vault_server.population
    return company.upload_table(df, "pop", "key", numeric=["label", "prediction", "score"],
                                categorical=["region"])


def true_counts(df: pd.DataFrame, columns: List[str], attributes: List[str]) -> Callable:
    counts = df.groupby(columns + attributes).size()
    return lambda *k: int(counts.get(tuple(k), 0))
