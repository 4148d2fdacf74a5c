"""HMAC pseudonyms: the RFC 4231 vectors, the CLI's secret-file reading, and byte identity with
the real CLI (keys imported by one side are matched exactly by the other)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

import fairvault
from fairvault.pseudonymise import pseudonymise, pseudonymise_all, read_secret_file

SECRET = b"pytest-hmac-secret-0123456789abcdef"


def test_rfc4231_vectors() -> None:
    # RFC 4231 test cases 1 and 2 (the vectors client/lib/pseudonymise_test.cc checks).
    assert pseudonymise(b"\x0b" * 20, "Hi There") == (
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    assert pseudonymise("Jefe", "what do ya want for nothing?") == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    ids = ["a", "Zoë", "", "x" * 300]
    # The fast path against Python's hmac module, with short, block-sized and long secrets.
    for secret in (SECRET, b"k" * 64, b"long" * 40, "Jefe-secret-text-ü"):
        assert pseudonymise_all(secret, ids) == [pseudonymise(secret, i) for i in ids]
    # RFC 4231 test case 6: a 131-byte key (hashed first).
    assert pseudonymise_all(b"\xaa" * 131, [
        "Test Using Larger Than Block-Size Key - Hash Key First"]) == [
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"]


def test_secret_file_is_read_like_the_cli(tmp_path) -> None:
    path = tmp_path / "s"
    path.write_bytes(b"  0123456789abcdef \r\n\n")  # only trailing CR/LF go; spaces stay
    assert read_secret_file(path) == b"  0123456789abcdef "
    path.write_bytes(b"short\n")
    with pytest.raises(ValueError, match="use at least 16"):
        read_secret_file(path)


def _people(n: int) -> pd.DataFrame:
    # Raw ids with non-ASCII characters and spaces: the CLI hashes the CSV field's UTF-8 bytes.
    return pd.DataFrame({
        "national_id": [f"ID {i:04d}-Zoë-Çelik" if i % 3 == 0 else f"id-{i}" for i in range(n)],
        "sex": ["F" if i % 2 else "M" for i in range(n)],
        "race": ["A", "B", "C"][0:1] * n,
        "x": [float(i % 7) for i in range(n)],
    })


def test_python_upload_matches_cli_import(vault_server, tmp_path) -> None:
    """The CLI imports raw ids pseudonymised with a secret file; a Python upload of the same
    raw ids with the same secret finds every subject (one differing key would be missed)."""
    people = _people(300)
    csv = tmp_path / "people.csv"
    people.to_csv(csv, index=False)
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(SECRET + b"\n")
    regulator = vault_server.regulator
    regulator.create_dataset("hmac-cli", {"sex": ["F", "M"], "race": ["A", "B", "C"]})
    vault_server.cli("import", "--dataset", "hmac-cli", "--csv", str(csv), "--key-column",
                     "national_id", "--attributes", "sex,race", "--hmac-secret-file",
                     str(secret_file), key=vault_server.regulator_key)
    company = vault_server.new_company(dataset="hmac-cli")
    table = company.upload_table(people, "hmac-cli", "national_id", numeric=["x"],
                                 hmac_secret_file=str(secret_file))
    assert table.rows_in_vault == len(people)
    # The same call with another secret matches nobody, and without one the raw ids do not
    # match either: the server only holds pseudonyms.
    with pytest.warns(fairvault.NoSubjectsWarning, match="that the secret is the regulator's"):
        other = company.upload_table(people, "hmac-cli", "national_id", numeric=["x"],
                                     hmac_secret=b"another-secret-0123456789")
    assert other.rows_in_vault == 0


def test_cli_upload_matches_python_import(vault_server, tmp_path) -> None:
    """Python imports pseudonymised ids; the CLI's upload of the raw CSV with the same secret
    finds every subject."""
    people = _people(250)
    regulator = vault_server.regulator
    regulator.create_dataset("hmac-py", {"sex": ["F", "M"], "race": ["A", "B", "C"]})
    response = regulator.import_attributes(people, "hmac-py", ["sex", "race"], "national_id",
                                           hmac_secret=SECRET)
    assert response.rows_imported == len(people)
    csv = tmp_path / "people.csv"
    people.to_csv(csv, index=False)
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(SECRET)
    company = vault_server.new_company(dataset="hmac-py")
    result = vault_server.cli("--json", "table", "upload", "--dataset", "hmac-py", "--csv",
                              str(csv), "--key-column", "national_id", "--numeric", "x",
                              "--hmac-secret-file", str(secret_file),
                              key=vault_server.keys[company.name])
    upload = json.loads(result.stdout)
    rows_in_vault = int(upload.get("rows_in_vault", upload.get("rowsInVault", -1)))
    assert rows_in_vault == len(people)
