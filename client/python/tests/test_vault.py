"""Vault against the real server: uploads round-trip into exact counts, DataFrames out,
audits, decisions, jobs, auditor views, health."""
from __future__ import annotations

import re
import sys
import time

import numpy as np
import pandas as pd
import pytest

import fairvault
from conftest import POPULATION_SIZE, true_counts


def test_import_is_replayed_by_default_batch_id(vault_server) -> None:
    again = vault_server.regulator.import_attributes(vault_server.population, "pop",
                                                     ["sex", "race"], "key")
    assert again.replayed and again.subject_count == POPULATION_SIZE


def test_upload_round_trip_counts_exact_at_large_epsilon(vault_server, company, table) -> None:
    df = vault_server.population
    assert (table.row_count, table.rows_in_vault) == (POPULATION_SIZE, POPULATION_SIZE)
    assert isinstance(table, str) and table.startswith("tbl_")
    # Discrete Laplace with t = 2/epsilon = 0.005: P(some cell's noise != 0) < 8 e^-200.
    result = company.noisy_counts(table, epsilon=400, columns=["region", "label"],
                                  attributes=["sex"])
    cells = result.cells
    assert list(cells.columns) == ["region", "label", "group", "noisy_count", "ci_low", "ci_high"]
    assert len(cells) == 2 * 2 * 2 and result.rows_used == POPULATION_SIZE
    expected = true_counts(df.assign(label=df.label.astype(str)), ["region", "label"], ["sex"])
    for row in cells.itertuples():
        assert row.noisy_count == expected(row.region, row.label, row.group)
        assert row.ci_low <= row.noisy_count <= row.ci_high
    # Cell order: columns slowest, group fastest, values sorted as strings.
    assert list(cells.group[:2]) == ["F", "M"]
    assert list(cells.region) == ["north"] * 4 + ["south"] * 4
    assert result.charge.cost.epsilon == pytest.approx(400)
    assert not result.replayed and result.idempotency_key.startswith("py-")


def test_counts_intervals_cover_at_small_epsilon(vault_server, company, table) -> None:
    result = company.noisy_counts(table, epsilon=0.5, attributes=["sex", "race"])
    cells = result.cells
    assert list(cells.group) == [f"{s}|{r}" for s in ["F", "M"] for r in ["A", "B", "C"]]
    w = result.noise_half_width
    assert w > 0
    assert (cells.ci_high - cells.noisy_count == w).all()
    assert (cells.ci_low == np.maximum(cells.noisy_count - w, 0)).all()


def test_upload_checks_values_before_sending(company, vault_server) -> None:
    df = vault_server.population.head(10).copy()
    df.loc[3, "score"] = np.nan
    with pytest.raises(ValueError, match="score.*finite"):
        company.upload_table(df, "pop", "key", numeric=["score"])
    df = vault_server.population.head(10).copy()
    df.loc[5, "key"] = df.loc[2, "key"]
    with pytest.raises(ValueError, match="row 5 repeats the subject key of row 2"):
        company.upload_table(df, "pop", "key", numeric=["label"])


def test_upload_in_many_chunks_and_default_columns(vault_server, company) -> None:
    df = vault_server.population[["key", "region", "label"]]
    table = company.upload_table(df, "pop", "key", chunk_rows=7, progress=True)
    assert table.row_count == POPULATION_SIZE
    counts = company.noisy_counts(table, epsilon=400, columns=["label"], attributes=["race"])
    expected = true_counts(df.assign(label=df.label.astype(str),
                                     race=vault_server.population.race), ["label"], ["race"])
    assert [c.noisy_count for c in counts.response.cells] == [
        expected(c.values[0], c.group) for c in counts.response.cells]


def test_audit_classifier_frames(vault_server, company, table) -> None:
    audit = company.audit_classifier(table, "prediction", "label", epsilon=50,
                                     attributes=["sex"])
    groups = audit.groups
    assert list(groups.index) == ["F", "M"]
    for metric in ("selection_rate", "tpr", "fpr", "error"):
        assert (groups[f"{metric}_lo"] <= groups[metric]).all()
        assert (groups[metric] <= groups[f"{metric}_hi"]).all()
    df = vault_server.population
    for sex in ("F", "M"):
        rows = df[df.sex == sex]
        assert groups.loc[sex, "selection_rate"] == pytest.approx(rows.prediction.mean(), abs=0.02)
    assert list(audit.violations.index) == ["demographic_parity", "equalized_odds"]


def test_audit_regressor_frames(company, table) -> None:
    audit = company.audit_regressor(table, "score", lo=0, hi=1, bins=10, epsilon=50,
                                    attributes=["sex"])
    assert list(audit.groups.index) == ["F", "M"]
    assert all(len(h) == 10 for h in audit.groups.histogram)
    assert audit.max_ks["lo"] <= audit.max_ks["estimate"] <= audit.max_ks["hi"]
    # The mean's estimate is the released sum over the released size (lo = 0), in [lo, hi].
    for g in audit.groups.itertuples():
        assert g.noisy_rows > 0
        assert g.mean == pytest.approx(min(max(g.noisy_sum / g.noisy_rows, 0.0), 1.0))


def test_a_call_cut_off_after_its_charge_names_its_key(vault_server, company, table) -> None:
    # The deadline passes during the statistical-parity LP, which the vault solves after the
    # charge (6 groups x 258 bins, the most its size limit allows them: over a second here).
    hurried = vault_server.vault(vault_server.keys[company.name], deadline=0.3)
    fit = dict(table=table, score_column="score", lo=0, hi=1, bins=258, epsilon=0.5,
               attributes=["sex", "race"], alpha=0.1, solver="linear_program")
    try:
        hurried.fit_statistical_parity(**fit)
        pytest.skip("the LP finished within the 0.3 s deadline here")
    except fairvault.errors.DeadlineExceeded as cut:
        failure = cut
    key = failure.idempotency_key
    assert key and key.startswith("py-")
    assert f"call again with idempotency_key='{key}'" in str(failure)
    # The vault charges a unary call whatever its deadline once the request is in: wait for
    # the charge (a loaded machine may still be receiving it).
    for _ in range(100):
        if company.get_budget().epsilon_spent.sum() > 0:
            break
        time.sleep(0.1)
    else:
        pytest.skip("the deadline passed before the call was sent")
    assert company.get_budget().epsilon_spent.sum() == pytest.approx(0.5)
    # The key gets the charged release, finished, without a second charge.
    again = company.fit_statistical_parity(**fit, idempotency_key=key)
    assert again.replayed and again.artifact.id
    assert company.get_budget().epsilon_spent.sum() == pytest.approx(0.5)
    # A key the caller gave is theirs: the error carries it without a hint.
    with pytest.raises(fairvault.errors.DeadlineExceeded) as given:
        hurried.fit_statistical_parity(**fit, idempotency_key="py-given-1")
    assert given.value.idempotency_key == "py-given-1"
    assert "call again with idempotency_key" not in str(given.value)
    # A refusal names no key to repeat it with (it charged nothing).
    with pytest.raises(fairvault.errors.BudgetExhausted) as refused:
        company.fit_statistical_parity(**dict(fit, epsilon=5000))
    assert "call again with idempotency_key" not in str(refused.value)
    # The client that was cut off remembers the key: the same request sent again without one
    # is warned about (it may be charged twice).
    with pytest.warns(fairvault.ChargedAgainWarning, match=f"idempotency_key='{key}'"):
        with pytest.raises(fairvault.errors.DeadlineExceeded):
            hurried.fit_statistical_parity(**fit)


def test_a_call_interrupted_after_it_was_sent_names_its_key(vault_server, company, table,
                                                            monkeypatch) -> None:
    # Ctrl-C while a spending call is out: the request reached the vault (here it was answered,
    # then the interrupt arrived before the client returned), so the call may have been charged.
    if sys.version_info < (3, 11):
        pytest.skip("exception notes need Python 3.11")
    interrupted = vault_server.vault(vault_server.keys[company.name])
    sent = interrupted._conn.call

    def call_then_interrupt(method, request, **kwargs):
        sent(method, request, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(interrupted._conn, "call", call_then_interrupt)
    spent = company.get_budget().epsilon_spent.sum()
    with pytest.raises(KeyboardInterrupt) as stopped:
        interrupted.noisy_counts(table, epsilon=0.25, attributes=["sex"])
    notes = getattr(stopped.value, "__notes__", [])
    assert len(notes) == 1, notes
    named = re.search(r"idempotency_key='(py-[^']+)'", notes[0])
    assert named is not None, notes[0]
    key = named.group(1)
    assert company.get_budget().epsilon_spent.sum() == pytest.approx(spent + 0.25)
    # The key in the note gets the charged release back without a second charge.
    again = company.noisy_counts(table, epsilon=0.25, attributes=["sex"], idempotency_key=key)
    assert again.replayed
    assert company.get_budget().epsilon_spent.sum() == pytest.approx(spent + 0.25)
    # And the interrupted client warns when the same request is sent again without a key.
    monkeypatch.setattr(interrupted._conn, "call", sent)
    with pytest.warns(fairvault.ChargedAgainWarning, match=f"idempotency_key='{key}'"):
        interrupted.noisy_counts(table, epsilon=0.25, attributes=["sex"])
    # A key the caller gave is theirs: no note.
    monkeypatch.setattr(interrupted._conn, "call", call_then_interrupt)
    with pytest.raises(KeyboardInterrupt) as given:
        interrupted.noisy_counts(table, epsilon=0.25, attributes=["sex"],
                                 idempotency_key="py-given-2")
    assert not getattr(given.value, "__notes__", [])


def test_fit_and_decide(vault_server, company, table) -> None:
    fit = company.fit_equalized_odds(table, "prediction", "label", epsilon=20, gamma=0.05,
                                     attributes=["sex"], decision_floor=0.05)
    artifact = fit.response.artifact
    assert artifact.id and fit.charge.ledger_seq > 0
    assert company.get_artifact(artifact.id).id == artifact.id
    df = vault_server.population.head(50)
    keys = df.key.set_axis(range(100, 150))
    # A prediction that is not 0/1 in a later chunk is refused before the first call, which
    # would charge the licence: nothing charged, nothing decided (no access-log row, below).
    spent = company.get_budget("pop").epsilon_spent[0]
    bad = df.prediction.to_numpy(dtype=float).copy()
    bad[45] = 7
    with pytest.raises(fairvault.InvalidInput, match="values: row 46 is 7"):
        company.decide(artifact.id, keys, bad, chunk_rows=20)
    bad[45] = np.nan
    with pytest.raises(fairvault.InvalidInput, match="values: row 46 is nan"):
        company.decide(artifact.id, keys, bad, chunk_rows=20)
    assert company.get_budget("pop").epsilon_spent[0] == spent
    # Priced first: the decision licence epsilon = L, nothing charged.
    price = company.decide(artifact.id, keys, df.prediction, preview=True)
    assert isinstance(price, fairvault.Preview) and price.admitted
    bound = artifact.equalized_odds.decision_log_ratio_bound
    assert price.cost.epsilon == pytest.approx(bound, abs=1e-6)
    assert not company.decide(artifact.id, keys, df.prediction, preview=True).replay_of_ledger_seq
    decided = company.decide(artifact.id, keys, df.prediction)
    assert decided.charge.cost.epsilon == pytest.approx(bound, abs=1e-6)
    assert isinstance(decided.outputs, pd.Series)
    assert list(decided.outputs.index) == list(range(100, 150))
    assert set(decided.outputs.unique()) <= {0.0, 1.0}
    assert decided.licence_charged
    # Asking again returns the stored decisions, charging nothing more.
    again = company.decide(artifact.id, list(df.key), df.prediction.to_numpy(), chunk_rows=20)
    assert isinstance(again.outputs, np.ndarray) and len(again.responses) == 3
    assert (again.outputs == decided.outputs.to_numpy()).all()
    assert again.rows_already_decided == 50 and not again.licence_charged
    log = vault_server.regulator.list_access_log()
    assert (log.artifact_id == artifact.id).sum() == 1 + 3


def test_fair_model_job(company, table) -> None:
    submitted = company.fit_fair_model(table, "dp_oracle_learner", "label", epsilon=5,
                                       features=["score", "prediction"], attributes=["sex"],
                                       gamma=0.05, rounds=5)
    job = company.wait_job(submitted.response.job.id, timeout=60, poll_seconds=0.2,
                           progress=False)
    assert job.state == fairvault.vault.pb.JOB_STATE_SUCCEEDED and job.artifact_id
    jobs = company.list_jobs()
    assert job.id in set(jobs.id)
    assert company.get_artifact(job.artifact_id).HasField("fair_model")


def test_ledger_budgets_and_auditor_views(vault_server, company, table) -> None:
    company.noisy_counts(table, epsilon=1.5, attributes=["sex"])
    budgets = company.get_budget("pop")
    assert len(budgets) == 1 and budgets.dataset[0] == "pop"
    assert budgets.epsilon_spent[0] == pytest.approx(1.5)
    budget, = company.get_budget("pop", as_frame=False)
    assert budget.epsilon_spent == pytest.approx(1.5)
    ledger = company.list_ledger()
    assert list(ledger.kind) == ["grant", "charge"]
    assert ledger.seq.dtype == np.int64
    # A charge's stored cost (pure: 1.5 epsilon in micro-units); a grant has none (<NA>).
    assert ledger.pure_epsilon_micro.isna().tolist() == [True, False]
    assert ledger.pure_epsilon_micro.iloc[1] == 1_500_000
    assert len(ledger.rdp_nano.iloc[1]) > 0
    auditor = vault_server.new_auditor()
    budgets = auditor.list_budgets(company=company.name)
    assert list(budgets.epsilon_spent) == [pytest.approx(1.5)]
    assert auditor.verify_ledger(auditor=True).ok
    assert len(auditor.list_ledger(company=company.name, auditor=True)) == 2


def test_health(vault_server) -> None:
    anonymous = vault_server.vault()
    assert anonymous.health() == "SERVING"
    with pytest.raises(fairvault.NotFound):
        anonymous.health("no.such.Service")


def test_environment_configures_the_connection(vault_server, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FAIRVAULT_SERVER", vault_server.target)
    monkeypatch.setenv("FAIRVAULT_API_KEY", vault_server.regulator_key)
    with fairvault.Vault() as from_env:
        assert "pop" in set(from_env.list_datasets().name)
    key_file = tmp_path / "key"
    key_file.write_text(vault_server.regulator_key + "\n")
    monkeypatch.delenv("FAIRVAULT_API_KEY")
    with fairvault.Vault(key_file=str(key_file)) as from_file:
        assert len(from_file.list_accounts()) >= 1


def test_tls_with_the_deploy_certificates(vault_server, tmp_path) -> None:
    """A server with deploy/make-certs.sh's certificate: the CA makes the channel, the wrong
    name does not."""
    from conftest import ROOT, ServerProcess, bootstrap
    import shutil
    import subprocess
    if shutil.which("openssl") is None:
        pytest.skip("openssl (deploy/make-certs.sh) is not installed")
    certs = tmp_path / "certs"
    subprocess.run([str(ROOT / "deploy" / "make-certs.sh"), str(certs), "localhost",
                    "127.0.0.1"], check=True, capture_output=True, timeout=60)
    db = tmp_path / "tls.db"
    key = bootstrap(vault_server.server_binary, db)
    server = ServerProcess(vault_server.server_binary, db, "--tls-cert",
                           str(certs / "server.pem"), "--tls-key", str(certs / "server.key"))
    ca = str(certs / "ca.pem")
    vault = fairvault.Vault(f"localhost:{server.port}", key=key, tls_ca=ca, retries=0)
    wrong = fairvault.Vault(f"127.0.0.1:{server.port}", key=key, tls_ca=ca,
                            tls_server_name="evil.example", retries=0, deadline=5)
    plaintext = fairvault.Vault(f"127.0.0.1:{server.port}", key=key, retries=0, deadline=5)
    try:
        assert vault.health() == "SERVING"
        assert len(vault.list_accounts()) == 1
        with pytest.raises(fairvault.Unavailable):
            wrong.list_accounts()
        with pytest.raises(fairvault.Unavailable):
            plaintext.list_accounts()
    finally:
        for v in (vault, wrong, plaintext):  # open channels would slow the server's shutdown
            v.close()
        server.stop()


def test_keys_from_the_index_or_row_numbers(vault_server, company) -> None:
    df = vault_server.population
    by_index = company.upload_table(df.set_index("key")[["label"]], "pop")
    assert by_index.rows_in_vault == len(df)
    with pytest.warns(fairvault.NoSubjectsWarning, match="pass the same secret as "
                      "hmac_secret_file="):  # as the CLI warns, in words
        by_row = company.upload_table(df[["label"]], "pop", "@row")  # row-0, ...: not subjects
    assert (by_row.row_count, by_row.rows_in_vault) == (len(df), 0)
    with pytest.raises(ValueError, match="floats"):
        company.upload_table(df.assign(key=1.0 * np.arange(len(df))), "pop", "key",
                             numeric=["label"])


def test_a_copied_vault_has_its_own_connection(vault_server, company, table) -> None:
    """Issue 23: sklearn's clone deep-copies an estimator's parameters, the vault among them.
    The copy opens its own channel to the same server with the same key: closing the original
    leaves the copy working, and an estimator rebuilt from copied parameters (what clone does)
    fits through it."""
    import copy
    twin = copy.deepcopy(company)
    assert twin is not company and twin._conn is not company._conn
    assert twin._conn.channel is not company._conn.channel
    assert twin.server == company.server and twin._conn.has_key
    assert "sk_" not in repr(twin.__dict__)  # the key stays a Secret
    budgets = twin.get_budget("pop")
    assert len(budgets) == 1
    # An estimator rebuilt from deep-copied parameters, as sklearn.base.clone does.
    model = fairvault.DPOracleLearner(company, "pop", 5.0, label="label",
                                      features=["score", "prediction"], attributes=["sex"],
                                      gamma=0.05, rounds=5, key_column="key", progress=False)
    params = {k: copy.deepcopy(v) for k, v in model.get_params().items()}
    cloned = type(model)(**params)
    assert cloned.get_params()["vault"] is not company
    cloned.fit(vault_server.population)
    assert cloned.applier_ is not None
    separate = copy.deepcopy(company)
    separate.close()  # closing one copy does not close the others
    assert len(company.get_budget("pop")) == 1
    assert len(twin.get_budget("pop")) == 1
