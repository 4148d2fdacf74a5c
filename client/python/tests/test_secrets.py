"""No HMAC secret and no API key in any repr, str, get_params() or error message (issue 19 §1),
and hmac_secret_file= wherever hmac_secret= is accepted: the same pseudonyms as the secret's
bytes, checked against the real server."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import fairvault
from conftest import SEXES, make_population

# Distinctive values: any text that shows one of them has leaked it.
SECRET_TEXT = "hmac-DISTINCTIVE-secret-91c7e5a0"
SECRET = SECRET_TEXT.encode()
API_KEY = "fv_4242_" + "5ec7e7ab1e0a" * 5 + "dead"
DATASET = "secretfile"


def assert_hidden(text: str) -> None:
    assert SECRET_TEXT not in text, f"the HMAC secret leaked into: {text[:300]}"
    assert API_KEY not in text and "5ec7e7ab1e0a" not in text, \
        f"the API key leaked into: {text[:300]}"


def estimators(vault, **secret):
    """One of each estimator, constructed with the given secret argument."""
    return [
        fairvault.PrivateEqualizedOdds(vault, DATASET, 1.0, 0.0, key_column="key", **secret),
        fairvault.PrivateEqualizedOddsScores(vault, DATASET, 1.0, 0.0, key_column="key",
                                             **secret),
        fairvault.PrivateStatisticalParityRegressor(vault, DATASET, 1.0, 0.0, 1.0, 10,
                                                    key_column="key", **secret),
        fairvault.FairModel(vault, DATASET, 1.0, key_column="key",
                            learner_params={"rounds": 3}, **secret),
    ]


def offline_vault() -> fairvault.Vault:
    # gRPC connects lazily: nothing here reaches a server.
    return fairvault.Vault("127.0.0.1:9", key=API_KEY)


def test_secret_never_shows_its_value() -> None:
    s = fairvault.Secret(SECRET)
    for text in (repr(s), str(s), f"{s}", f"{s!r:>40}", "%s %r" % (s, s), repr([s]),
                 repr({"hmac_secret": s})):
        assert_hidden(text)
        assert "Secret('***')" in text
    assert s.reveal() == SECRET
    assert fairvault.Secret(s).reveal() == SECRET  # a Secret of a Secret: the same value
    assert s == fairvault.Secret(bytearray(SECRET)) and s != fairvault.Secret(b"other" * 4)
    assert copy.deepcopy(s) is s
    # A pickle never holds the value: the unpickled secret is withheld, and says so when used.
    blob = pickle.dumps(s)
    assert SECRET not in blob
    withheld = pickle.loads(blob)
    assert withheld != s and "***" in repr(withheld)
    with pytest.raises(fairvault.InvalidInput, match="withheld when its object was pickled"):
        withheld.reveal()
    with pytest.raises(AttributeError):
        s._value = b"x"
    with pytest.raises(TypeError, match="bytes or str"):
        fairvault.Secret(12345)


def test_estimators_hide_the_secret_in_repr_and_get_params() -> None:
    vault = offline_vault()
    for est in estimators(vault, hmac_secret=SECRET):
        params = est.get_params()
        for text in (repr(est), str(est), repr(params), str(params)):
            assert_hidden(text)
        assert isinstance(params["hmac_secret"], fairvault.Secret)
        assert params["hmac_secret"].reveal() == SECRET
        assert params["hmac_secret_file"] is None
        # What sklearn's clone does: the constructor given get_params() keeps every object.
        again = type(est)(**params)
        for name, value in again.get_params().items():
            assert value is params[name], name
        # set_params wraps raw bytes too.
        est.set_params(hmac_secret=SECRET + b"-2")
        assert_hidden(repr(est))
        assert est.get_params()["hmac_secret"].reveal() == SECRET + b"-2"


def test_estimators_keep_a_given_secret_object_and_a_secret_file_path(tmp_path) -> None:
    vault = offline_vault()
    secret = fairvault.Secret(SECRET)
    for est in estimators(vault, hmac_secret=secret):
        assert est.get_params()["hmac_secret"] is secret
    missing = tmp_path / "not-yet-written"
    for est in estimators(vault, hmac_secret_file=str(missing)):
        # The file is not read at construction: the parameter is the path.
        assert est.get_params()["hmac_secret_file"] == str(missing)
        assert est.get_params()["hmac_secret"] is None
        assert str(missing) in repr(est)


def test_vault_hides_its_api_key(tmp_path) -> None:
    vault = offline_vault()
    for text in (repr(vault), str(vault), repr(vars(vault)), repr(vars(vault._conn))):
        assert_hidden(text)
    key_file = tmp_path / "company.key"
    key_file.write_text(API_KEY + "\n")
    from_file = fairvault.Vault("127.0.0.1:9", key_file=str(key_file))
    for text in (repr(from_file), repr(vars(from_file)), repr(vars(from_file._conn))):
        assert_hidden(text)
    assert from_file._conn.metadata() == (("authorization", f"Bearer {API_KEY}"),)
    # A key with a stray space: the message names the problem, not the key.
    with pytest.raises(ValueError, match="printable ASCII") as bad:
        fairvault.Vault("127.0.0.1:9", key=API_KEY + " x")
    assert_hidden(str(bad.value))


def test_a_pickled_estimator_holds_no_secret_and_asks_for_it_again(tmp_path) -> None:
    vault = offline_vault()
    by_bytes = fairvault.PrivateEqualizedOdds(vault, DATASET, 1.0, 0.0, key_column="key",
                                              hmac_secret=SECRET)
    blob = pickle.dumps(by_bytes)
    assert SECRET not in blob and API_KEY.encode() not in blob
    again = pickle.loads(blob)
    df = make_population(20, seed=3)
    with pytest.raises(fairvault.InvalidInput, match="give it again"):
        again.fit(df, df.label, df.prediction)  # refused before anything is sent
    # A secret file's path travels: the unpickled estimator reads the file again.
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(SECRET)
    by_file = fairvault.PrivateEqualizedOdds(vault, DATASET, 1.0, 0.0, key_column="key",
                                             hmac_secret_file=str(secret_file))
    assert pickle.loads(pickle.dumps(by_file)).hmac_secret_file == str(secret_file)
    vault.close()


def test_errors_name_the_problem_not_the_secret(vault_server, tmp_path) -> None:
    df = make_population(50, seed=5)
    # The server refuses the distinctive key; its message does not repeat it.
    with pytest.raises(fairvault.Unauthenticated) as refused:
        vault_server.vault(API_KEY).list_datasets()
    assert_hidden(str(refused.value) + repr(refused.value))
    company = vault_server.new_company()
    # A bad key column, both secret arguments, a short secret, a missing secret file.
    eo = fairvault.PrivateEqualizedOdds(company, "pop", 1.0, 0.0, key_column="no_such_column",
                                        hmac_secret=SECRET)
    with pytest.raises(KeyError) as bad_column:
        eo.fit(df, df.label, df.prediction)
    assert "no_such_column" in str(bad_column.value)
    assert_hidden(str(bad_column.value))
    both = fairvault.PrivateEqualizedOdds(company, "pop", 1.0, 0.0, key_column="key",
                                          hmac_secret=SECRET,
                                          hmac_secret_file=str(tmp_path / "s"))
    with pytest.raises(ValueError, match="not both") as not_both:
        both.fit(df, df.label, df.prediction)
    assert_hidden(str(not_both.value))
    short = b"DISTINCT"
    with pytest.raises(ValueError, match="8 bytes") as too_short:
        fairvault.PrivateEqualizedOdds(company, "pop", 1.0, 0.0, key_column="key",
                                       hmac_secret=short).fit(df, df.label, df.prediction)
    assert "DISTINCT" not in str(too_short.value)
    with pytest.raises(FileNotFoundError):
        fairvault.PrivateEqualizedOdds(company, "pop", 1.0, 0.0, key_column="key",
                                       hmac_secret_file=str(tmp_path / "absent")).fit(
                                           df, df.label, df.prediction)
    # Pseudonyms under a secret the import did not use match nobody: the server's refusal
    # names the rows, not the secret.
    with pytest.raises(fairvault.InvalidArgument) as unmatched, \
            pytest.warns(fairvault.NoSubjectsWarning) as warned:
        fairvault.PrivateEqualizedOdds(company, "pop", 1.0, 0.0, key_column="key",
                                       hmac_secret=SECRET).fit(df, df.label, df.prediction)
    assert_hidden(str(warned[0].message))
    assert_hidden(str(unmatched.value) + repr(unmatched.value))


def test_hmac_secret_file_gives_the_pseudonyms_of_the_same_bytes(vault_server,
                                                                 tmp_path) -> None:
    df = make_population(600, seed=19)
    vault_server.regulator.create_dataset(DATASET, {"sex": SEXES})
    imported = vault_server.regulator.import_attributes(df, DATASET, ["sex"], "key",
                                                        hmac_secret=SECRET)
    assert imported.rows_imported == len(df)
    secret_file = tmp_path / "pseudonym.secret"
    secret_file.write_bytes(SECRET + b"\n")  # read as the CLI does: trailing newline dropped
    company = vault_server.new_company(dataset=DATASET)
    # Every subject is found through the file (unmatched keys would be refused), and the
    # vault decides for all of them through it too.
    by_file = fairvault.PrivateEqualizedOdds(company, DATASET, 10.0, 0.0, decision_floor=0.05,
                                             key_column="key",
                                             hmac_secret_file=str(secret_file))
    by_file.fit(df, df.label, df.prediction)
    assert by_file.table_.rows_in_vault == len(df)
    decided = by_file.predict(df.prediction, keys=df)
    assert decided.shape == (len(df),) and set(np.unique(decided)) <= {0, 1}
    assert by_file.last_decisions_.rows_already_decided == 0
    # The in-memory secret with the same bytes names the same subjects: the vault holds
    # their decisions already and returns them.
    by_bytes = fairvault.PrivateEqualizedOdds(company, DATASET, 10.0, 0.0, decision_floor=0.05,
                                              key_column="key", hmac_secret=SECRET)
    by_bytes.fit(df, df.label, df.prediction)
    assert by_bytes.table_.rows_in_vault == len(df)
    again = company.decide(by_file.artifact_id_, df.key, df.prediction, hmac_secret=SECRET)
    assert again.rows_already_decided == len(df)
    assert np.array_equal(np.asarray(again.outputs), decided)
    # A different secret file matches nobody.
    other = tmp_path / "other.secret"
    other.write_bytes(b"another-secret-0123456789")
    with pytest.warns(fairvault.NoSubjectsWarning):
        miss = company.upload_table(df, DATASET, "key", numeric=["label"],
                                    hmac_secret_file=str(other))
    assert miss.rows_in_vault == 0
    # The metric frame takes the file too.
    frame = fairvault.private_metric_frame(company, df, "label", "prediction", 5.0,
                                           dataset=DATASET, key_column="key",
                                           hmac_secret_file=str(secret_file))
    assert frame.rows == len(df)
    for est in (by_file, by_bytes):
        assert_hidden(repr(est) + repr(est.get_params()))
