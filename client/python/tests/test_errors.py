"""Typed exceptions, idempotent retries and replays against the real server."""
from __future__ import annotations

import grpc
import pytest

import fairvault
from fairvault import errors


def test_overspend_raises_budget_exhausted_with_what_is_left(vault_server, table) -> None:
    company = vault_server.new_company(epsilon=1.0)
    handle = company.upload_table(vault_server.population, "pop", "key", numeric=["label"])
    company.noisy_counts(handle, epsilon=0.4, attributes=["sex"])
    with pytest.raises(fairvault.BudgetExhausted) as refused:
        company.noisy_counts(handle, epsilon=0.7, attributes=["sex"])
    e = refused.value
    assert e.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert e.remaining == pytest.approx(0.6) and e.granted == pytest.approx(1.0)
    assert e.requested == pytest.approx(0.7)
    assert (e.dataset, e.scope) == ("pop", "grant")
    assert e.budget.epsilon_remaining == pytest.approx(0.6)
    # Nothing was charged by the refusal.
    assert company.get_budget("pop").epsilon_spent[0] == pytest.approx(0.4)


def test_cap_refusal_says_cap(vault_server) -> None:
    regulator = vault_server.regulator
    regulator.create_dataset("capped", {"sex": ["F", "M"]})
    regulator.import_attributes(vault_server.population, "capped", ["sex"], "key")
    regulator.set_dataset_cap("capped", epsilon=0.5)
    company = vault_server.new_company(epsilon=10, dataset="capped")
    handle = company.upload_table(vault_server.population, "capped", "key", numeric=["label"])
    with pytest.raises(fairvault.BudgetExhausted) as refused:
        company.noisy_counts(handle, epsilon=0.6)
    # The cap's remainder is every company's spend together: not shown to a company.
    e = refused.value
    assert (e.scope, e.dataset, e.requested) == ("cap", "capped", pytest.approx(0.6))
    assert e.remaining is None and e.granted is None and e.budget is None
    assert "0.5" not in str(e)


def test_invalid_argument_names_the_field(company, table) -> None:
    with pytest.raises(fairvault.InvalidArgument) as bad:
        company.noisy_counts(table, epsilon=-1)
    assert bad.value.field == "epsilon"
    with pytest.raises(fairvault.InvalidArgument) as bad:
        company.noisy_counts(table, epsilon=1, columns=["region", "label", "score", "region",
                                                         "label"])
    assert bad.value.field == "columns"
    with pytest.raises(fairvault.InvalidArgument) as bad:
        company.noisy_counts(table, epsilon=1, idempotency_key="vault:mine")
    assert bad.value.field == "idempotency_key"


def test_field_parsing() -> None:
    assert errors.field_of("columns: at most 4", []) == "columns"
    assert errors.field_of("header.dataset: unknown", []) == "header.dataset"
    assert errors.field_of("epsilon must be finite and > 0 (got -1)", ["epsilon"]) == "epsilon"
    assert errors.field_of("no table row has a subject key in the vault", ["table_handle"]) is None
    assert errors.field_of("epsilon must be finite", []) is None


def test_a_message_over_grpcs_limit_is_no_budget_refusal(vault_server, company, table) -> None:
    """gRPC's size limit on one message is RESOURCE_EXHAUSTED, like an overspend. A stream's
    message over it stored and charged nothing: InvalidArgument, send fewer rows per message.
    An answer over it came after the vault ran the call: UNKNOWN, perhaps charged, with the key
    to repeat it under (the repeat is a replay: charged once)."""
    import pandas as pd
    other = vault_server.new_company()
    small = vault_server.vault(vault_server.keys[other.name], max_message_bytes=4096)
    frame = pd.DataFrame({"key": ["a", "b"], "note": ["x" * 10_000, "y"]})
    with pytest.raises(fairvault.InvalidArgument, match="fewer rows per message") as too_large:
        small.upload_table(frame, "pop", "key", categorical=["note"])
    assert "nothing was stored or charged" in str(too_large.value)
    assert not isinstance(too_large.value, errors.BudgetExhausted)

    narrow = vault_server.vault(vault_server.keys[company.name], max_message_bytes=400)
    with pytest.raises(fairvault.FairvaultError, match="may have charged") as answer:
        narrow.noisy_counts(table, 0.5, columns=["region"], attributes=["sex", "race"],
                            idempotency_key="too-large-answer")
    assert answer.value.code == grpc.StatusCode.UNKNOWN
    assert not isinstance(answer.value, errors.BudgetExhausted)
    spent = company.get_budget("pop").epsilon_spent[0]
    assert spent == pytest.approx(0.5)  # it was charged: the message says so
    again = company.noisy_counts(table, 0.5, columns=["region"], attributes=["sex", "race"],
                                 idempotency_key="too-large-answer")
    assert again.replayed and company.get_budget("pop").epsilon_spent[0] == spent


def test_size_limit_texts_of_newer_grpc() -> None:
    """Newer gRPC names the side ("CLIENT: ..."): this client's send and the server's receive
    refused the request itself; the other two came after the vault ran the call."""
    from fairvault._proto import pb

    class Failed(grpc.RpcError):
        def __init__(self, text: str) -> None:
            self.text = text

        def code(self):
            return grpc.StatusCode.RESOURCE_EXHAUSTED

        def details(self):
            return self.text

        def trailing_metadata(self):
            return ()

    request = pb.NoisyCountsRequest(table_handle="t")
    for text in ("CLIENT: Sent message larger than max (9 vs. 8)",
                 "SERVER: Received message larger than max (9 vs. 8)"):
        failure = errors.from_rpc_error(Failed(text), request)
        assert isinstance(failure, fairvault.InvalidArgument), text
        assert "nothing was charged" in str(failure)
    for text in ("CLIENT: Received message larger than max (9 vs. 8)",
                 "SERVER: Sent message larger than max (9 vs. 8)",
                 "Sent message larger than max (9 vs. 8)", "message larger than max, somehow"):
        failure = errors.from_rpc_error(Failed(text), request)
        assert failure.code == grpc.StatusCode.UNKNOWN and "may have charged" in str(failure), text
        assert not isinstance(failure, errors.BudgetExhausted)
    assert isinstance(errors.from_rpc_error(Failed("request costs epsilon=2"), request),
                      errors.BudgetExhausted)


def test_roles_and_keys(vault_server, company) -> None:
    with pytest.raises(fairvault.PermissionDenied):
        company.create_dataset("mine", {"sex": ["F", "M"]})
    with pytest.raises(fairvault.PermissionDenied):
        company.list_budgets()
    with pytest.raises(fairvault.Unauthenticated):
        vault_server.vault("fv_1_" + "0" * 64).list_datasets()
    with pytest.raises(fairvault.NotFound):
        company.noisy_counts("tbl_" + "0" * 32, epsilon=1)
    with pytest.raises(fairvault.AlreadyExists):
        vault_server.regulator.create_dataset("pop", {"sex": ["F", "M"]})


def test_replay_returns_the_stored_bytes_and_charges_once(company, table) -> None:
    first = company.noisy_counts(table, epsilon=0.5, attributes=["sex"], idempotency_key="k-1")
    spent = company.get_budget("pop").epsilon_spent[0]
    again = company.noisy_counts(table, epsilon=0.5, attributes=["sex"], idempotency_key="k-1")
    assert again.response.SerializeToString() == first.response.SerializeToString()
    assert company.get_budget("pop").epsilon_spent[0] == spent
    assert not first.replayed and first.replayed_ledger_seq is None
    assert again.replayed and again.replayed_ledger_seq == first.charge.ledger_seq
    with pytest.raises(fairvault.FailedPrecondition):
        company.noisy_counts(table, epsilon=0.6, attributes=["sex"], idempotency_key="k-1")


class _LostResponse(grpc.RpcError):
    """What a dropped connection after the server answered looks like to the client."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection reset (simulated)"

    def trailing_metadata(self):
        return ()


class _DropFirstResponse(grpc.UnaryUnaryClientInterceptor):
    """Sends each call; loses the answer of the first NoisyCounts (the server did charge)."""

    def __init__(self) -> None:
        self.keys = []

    def intercept_unary_unary(self, continuation, details, request):
        outcome = continuation(details, request)
        if details.method.endswith("/NoisyCounts"):
            self.keys.append(request.idempotency_key)
            if len(self.keys) == 1:
                outcome.result()  # the server answered (and charged)...
                raise _LostResponse()  # ...but the answer never arrived
        return outcome


def test_retry_after_unavailable_keeps_the_key_and_charges_once(vault_server) -> None:
    interceptor = _DropFirstResponse()
    company = vault_server.new_company(epsilon=10, interceptors=[interceptor], backoff=0.01)
    handle = company.upload_table(vault_server.population, "pop", "key", numeric=["label"])
    result = company.noisy_counts(handle, epsilon=0.25, attributes=["sex"])
    assert len(interceptor.keys) == 2 and interceptor.keys[0] == interceptor.keys[1]
    assert result.idempotency_key == interceptor.keys[0]
    assert company.get_budget("pop").epsilon_spent[0] == pytest.approx(0.25)
    ledger = company.list_ledger()
    assert list(ledger[ledger.kind == "charge"].idempotency_key) == [result.idempotency_key]
    assert result.replayed and result.replayed_ledger_seq == result.charge.ledger_seq


def test_unavailable_after_retries(vault_server) -> None:
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with fairvault.Vault(f"127.0.0.1:{port}", key="x", retries=2, backoff=0.01,
                         deadline=5) as vault, pytest.raises(fairvault.Unavailable) as down:
        vault.get_budget()
    assert down.value.retryable
    # The CLI's hint, with the address the client called.
    assert down.value.server == f"127.0.0.1:{port}"
    assert f"is the vault running at 127.0.0.1:{port}?" in str(down.value)
    assert "FAIRVAULT_SERVER" in down.value.hint


def test_one_exception_tree_for_local_mistakes(company, table) -> None:
    """Every mistake the client catches itself is a FairvaultError (InvalidInput and its
    kinds), and still the built-in exception older code caught; nothing is sent."""
    import pandas as pd
    frame = pd.DataFrame({"key": ["a", "b"], "label": [0, 1]})
    with pytest.raises(fairvault.FairvaultError) as missing:
        company.upload_table(frame, "pop", "id", numeric=["label"])
    assert isinstance(missing.value, errors.MissingColumn)
    assert isinstance(missing.value, KeyError) and isinstance(missing.value, fairvault.InvalidArgument)
    assert "key column 'id'" in str(missing.value) and not str(missing.value).startswith("'")
    with pytest.raises(errors.InvalidInput) as not_numeric:
        company.upload_table(frame.assign(label=["x", "y"]), "pop", "key", numeric=["label"])
    assert isinstance(not_numeric.value, ValueError)
    with pytest.raises(errors.WrongType) as wrong_type:
        company.upload_table(frame, "pop", "key", numeric=["label"], hmac_secret=12345)
    assert isinstance(wrong_type.value, TypeError)
    with pytest.raises(errors.InvalidInput, match="categorical column 'label' at row 1 is not "
                                                  "valid text"):
        company.upload_table(frame.assign(label=["x", "\udcff"]), "pop", "key",
                             categorical=["label"])
    # A bool or a string where a number goes is no epsilon (protobuf would send True as 1).
    for bad in (True, "0.1"):
        with pytest.raises(errors.WrongType, match="epsilon must be a number") as not_a_number:
            company.noisy_counts(table, epsilon=bad, columns=["region"])
        assert not_a_number.value.field == "epsilon" and isinstance(not_a_number.value, TypeError)
    # A Decimal is a number (protobuf reads it); a preview charges nothing.
    from decimal import Decimal
    assert company.noisy_counts(table, epsilon=Decimal("0.5"), columns=["region"],
                                preview=True).admitted
    # The same for request fields passed by name; an unknown name says so.
    with pytest.raises(errors.WrongType, match="rounds must hold numbers") as by_name:
        company.fit_fair_model(table, "dp_oracle_learner", "label", 1, ["score"], rounds=True)
    assert by_name.value.field == "rounds"
    with pytest.raises(errors.WrongType, match="hidden_units must hold numbers"):
        company.fit_fair_model(table, "dp_fermi", "label", 1, ["score"], hidden_units=["32"])
    # A generator is read once, and what was read is what is sent.
    from fairvault._releases import _check_options
    from fairvault._proto import pb
    options = {"hidden_units": (n for n in (64, 64)), "rounds": None}
    _check_options(pb.FitFairModelRequest, options)
    assert list(pb.FitFairModelRequest(**options).hidden_units) == [64, 64]
    with pytest.raises(errors.InvalidInput, match="roundz: not a field of FitFairModelRequest"):
        company.fit_fair_model(table, "dp_oracle_learner", "label", 1, ["score"], roundz=5)
    with pytest.raises(errors.WrongType, match="chunk_rows must be an integer"):
        company.decide("art_x", ["a"], [1], chunk_rows=2.5)
    applier = fairvault.applier_for(_one_component_model())
    with pytest.raises(fairvault.FairvaultError, match="column 'x' must hold numbers: row 1"):
        applier.predict_proba(pd.DataFrame({"x": [1.0, "two"]}))
    estimator = fairvault.PrivateEqualizedOdds(company, "pop", epsilon=1, gamma=0.1)
    with pytest.raises(fairvault.FairvaultError) as unfitted:
        estimator.predict([0, 1], keys=frame)
    assert isinstance(unfitted.value, (ValueError, AttributeError))
    assert type(unfitted.value).__name__ == "NotFittedError"
    # Nothing reached the ledger.
    assert (company.list_ledger().kind == "charge").sum() == 0


def _one_component_model():
    from fairvault._proto import pb
    model = pb.FairModel()
    model.features.feature_columns.append("x")
    model.components.add().weights.extend([1.0])
    return model


def test_preview_charges_nothing(company, table) -> None:
    preview = company.noisy_counts(table, epsilon=2, attributes=["sex", "race"], preview=True)
    assert isinstance(preview, fairvault.Preview)
    assert preview.admitted and preview.cost.epsilon == pytest.approx(2)
    assert preview.budget_after.epsilon_remaining == pytest.approx(
        preview.budget_now.epsilon_remaining - 2)
    assert preview.groups == 6 and preview.rows > 0
    assert list(preview.accuracy.columns)[:3] == ["name", "mechanism", "noise_scale"]
    assert company.get_budget("pop").epsilon_spent[0] == 0
    assert (company.list_ledger().kind == "charge").sum() == 0
    # Too expensive: not admitted, with the refusal it would get.
    refused = company.audit_classifier(table, "prediction", "label", epsilon=5000, preview=True)
    assert not refused.admitted and refused.refusal_code == "RESOURCE_EXHAUSTED"


class _FailFirstStream(grpc.StreamUnaryClientInterceptor):
    """Fails the first upload stream midway (after two messages), as a dropped connection."""

    def __init__(self) -> None:
        self.attempts = 0

    def intercept_stream_unary(self, continuation, details, request_iterator):
        self.attempts += 1
        if self.attempts == 1:
            next(request_iterator), next(request_iterator)  # header and a first chunk
            raise _LostResponse()
        return continuation(details, request_iterator)


def test_upload_is_resent_whole_after_unavailable(vault_server) -> None:
    interceptor = _FailFirstStream()
    company = vault_server.new_company(interceptors=[interceptor], backoff=0.01)
    table = company.upload_table(vault_server.population, "pop", "key", numeric=["label"],
                                 chunk_rows=100)
    assert interceptor.attempts == 2
    assert (table.row_count, table.rows_in_vault) == (len(vault_server.population),) * 2


def test_import_with_attribute_mapping_and_conflicting_batch(vault_server) -> None:
    regulator = vault_server.regulator
    regulator.create_dataset("mapped", {"sex": ["F", "M"]})
    people = vault_server.population.rename(columns={"sex": "gender"}).head(100)
    first = regulator.import_attributes(people, "mapped", {"sex": "gender"}, "key",
                                        batch_id="b1")
    assert (first.rows_imported, first.subject_count) == (100, 100)
    changed = people.assign(gender=["F"] * 100)
    with pytest.raises(fairvault.FailedPrecondition):
        regulator.import_attributes(changed, "mapped", {"sex": "gender"}, "key", batch_id="b1")
    with pytest.raises(fairvault.InvalidArgument):
        regulator.import_attributes(people.assign(gender="X"), "mapped", {"sex": "gender"},
                                    "key")


def test_progress_bars_only_where_someone_watches(monkeypatch) -> None:
    """A bar by default only on a terminal or in a notebook: a log or a pipe gets none."""
    import io
    import sys
    from fairvault import _progress
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a terminal
    assert not _progress.watched()
    assert _progress.bar(10, "job", "step", None) is None
    forced = _progress.bar(10, "job", "step", True)  # asked for: shown anyway
    assert forced is not None
    forced.close()
    assert _progress.bar(10, "job", "step", False) is None

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert _progress.watched()
    shown = _progress.bar(10, "job", "step", None)
    assert shown is not None
    shown.close()
    # Uploads: only from 100,000 rows, even on a terminal.
    assert _progress.bar(99_999, "upload", "rows", None, min_total=100_000) is None
