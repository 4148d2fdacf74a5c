"""Sessions: a notebook re-run replays (charged once), a changed parameter is charged, a plain
vault warns before charging the same request again."""
from __future__ import annotations

import warnings

import pytest

import fairvault


def charges(company) -> int:
    return int((company.list_ledger().kind == "charge").sum())


def test_a_rerun_replays_and_says_so(vault_server, tmp_path) -> None:
    company = vault_server.new_company()
    df = vault_server.population
    state = tmp_path / "study.json"

    def cell(session, epsilon=0.5):
        table = session.upload_table(df, "pop", "key", numeric=["label", "prediction"])
        return table, session.audit_classifier(table, "prediction", "label", epsilon=epsilon,
                                               attributes=["sex"])

    session = company.session("study", state_file=str(state))
    table, first = cell(session)
    assert not first.replayed and first.idempotency_key.startswith("s-study-")
    spent = company.get_budget("pop").epsilon_spent[0]
    assert spent == pytest.approx(0.5)
    # The same cell again: the same handle (nothing uploaded), the stored release.
    with pytest.warns(fairvault.Replayed, match="not charged again"):
        again_table, again = cell(session)
    assert again_table == table and again.replayed
    assert again.response.SerializeToString() == first.response.SerializeToString()
    assert company.get_budget("pop").epsilon_spent[0] == pytest.approx(spent)
    # A restarted kernel: a new session object reads the handles from its state file.
    restarted = company.session("study", state_file=str(state))
    with pytest.warns(fairvault.Replayed):
        _, after_restart = cell(restarted)
    assert after_restart.replayed_ledger_seq == first.charge.ledger_seq
    # A changed parameter is a new request: a new key, charged.
    _, changed = cell(restarted, epsilon=0.25)
    assert not changed.replayed and changed.idempotency_key != first.idempotency_key
    # Another session name pays again, on purpose.
    _, other = cell(company.session("study-2", state_file=None))
    assert not other.replayed
    assert company.get_budget("pop").epsilon_spent[0] == pytest.approx(0.5 + 0.25 + 0.5)
    assert charges(company) == 3
    # An explicit key is used as it is.
    explicit = session.noisy_counts(table, 0.1, idempotency_key="mine-1")
    assert explicit.idempotency_key == "mine-1" and not explicit.replayed


def test_an_estimator_in_a_session_fits_once(vault_server) -> None:
    company = vault_server.new_company()
    df = vault_server.population.head(1500)
    session = company.session("fit", state_file=None)
    model = fairvault.DPOracleLearner(session, "pop", 1.0, features=["score"],
                                      attributes=["sex"], rounds=5, key_column="key",
                                      progress=False)
    model.fit(df, df.label)
    first_job = model.job_.id
    with pytest.warns(fairvault.Replayed):
        model.fit(df, df.label)  # the cell re-run: the same job, the same model
    assert model.job_.id == first_job
    assert company.get_budget("pop").epsilon_spent[0] == pytest.approx(1.0)


def test_a_plain_vault_warns_before_charging_the_same_request_again(vault_server) -> None:
    company = vault_server.new_company()
    df = vault_server.population
    table = company.upload_table(df, "pop", "key", numeric=["label"])
    first = company.noisy_counts(table, 0.3, columns=["label"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a different request: no warning
        company.noisy_counts(table, 0.4, columns=["label"])
    again = company.upload_table(df, "pop", "key", numeric=["label"])  # a new upload
    assert again != table and again.content_digest == table.content_digest
    with pytest.warns(fairvault.ChargedAgainWarning,
                      match=f"idempotency_key='{first.idempotency_key}'"):
        company.noisy_counts(again, 0.3, columns=["label"])
    assert company.get_budget("pop").epsilon_spent[0] == pytest.approx(1.0)


def test_a_state_file_is_per_account(vault_server, tmp_path) -> None:
    """Two companies with the same session name and state file do not share handles."""
    df = vault_server.population.head(200)
    state = str(tmp_path / "shared.json")
    one, two = vault_server.new_company(), vault_server.new_company()
    a = one.session("same", state_file=state).upload_table(df, "pop", "key", numeric=["label"])
    b = two.session("same", state_file=state).upload_table(df, "pop", "key", numeric=["label"])
    assert a != b
    two.session("same", state_file=state).noisy_counts(b, 0.1)  # its own handle works
    with pytest.raises(fairvault.InvalidArgument, match="session name"):
        one.session("no spaces allowed")
