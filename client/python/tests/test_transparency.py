"""The transparency log from Python: receipts and consistency proofs made by the C++ vault,
verified by this package's own RFC 9162 and signed-note code (an independent implementation)
with only the verifier key; and what an edit, a wrong key or a fork looks like."""
from __future__ import annotations

import base64
import pathlib
import subprocess

import pytest

from fairvault import transparency
from fairvault.errors import InvalidInput
from fairvault.transparency import NotVerified


@pytest.fixture(scope="module")
def verifier_key(vault_server) -> str:
    """The test vault's verifier key, as its operator would publish it (`log-key --key`)."""
    key_file = pathlib.Path(str(vault_server.tmp / "vault.db") + ".log-key")
    return subprocess.run([vault_server.server_binary, "log-key", "--key", str(key_file)],
                          check=True, capture_output=True, text=True, timeout=30).stdout.strip()


def test_a_receipt_verifies_and_an_edited_one_does_not(company, table, verifier_key) -> None:
    first = company.noisy_counts(table, 0.5, columns=["region"], idempotency_key="py-receipt-1")
    company.noisy_counts(table, 0.5, columns=["region"], idempotency_key="py-receipt-2")
    receipt = company.get_receipt("py-receipt-1")
    checkpoint = transparency.verify_receipt(receipt, verifier_key,
                                             idempotency_key="py-receipt-1", account=company.name)
    assert receipt.entry.seq == first.charge.ledger_seq
    # A valid receipt of another row is no receipt for this release.
    with pytest.raises(NotVerified, match="not the one asked for"):
        transparency.verify_receipt(receipt, verifier_key, idempotency_key="py-receipt-2",
                                    account=company.name)
    # Keys are per company: the row must be the caller's account's, which only the caller can
    # say (a vault could answer with another company's row under the same key).
    with pytest.raises(NotVerified, match="not the one asked for"):
        transparency.verify_receipt(receipt, verifier_key, idempotency_key="py-receipt-1",
                                    account="someone-else")
    with pytest.raises(InvalidInput, match="account"):
        transparency.verify_receipt(receipt, verifier_key, idempotency_key="py-receipt-1")
    assert checkpoint.size >= receipt.entry.seq
    assert checkpoint.origin == verifier_key.split("+")[0]

    edited = type(receipt)()
    edited.CopyFrom(receipt)
    edited.entry.epsilon = 0.25
    with pytest.raises(NotVerified, match="hashed encoding"):
        transparency.verify_receipt(edited, verifier_key)
    moved = type(receipt)()
    moved.CopyFrom(receipt)
    moved.inclusion_proof[0] = bytes(32) if moved.inclusion_proof else moved.inclusion_proof
    if receipt.inclusion_proof:
        with pytest.raises(NotVerified):
            transparency.verify_receipt(moved, verifier_key)
    other = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
    with pytest.raises(NotVerified, match="no signature by"):
        transparency.verify_receipt(receipt, other)


def test_consistency_between_two_checkpoints(vault_server, company, table, verifier_key) -> None:
    auditor = vault_server.new_auditor()
    kept = auditor.get_checkpoint(auditor=True).checkpoint
    company.noisy_counts(table, 0.5, columns=["region"], idempotency_key="py-after-kept")
    proof = auditor.get_consistency_proof(kept.size)
    newer = transparency.verify_consistency(kept.note, proof.to.note, proof.proof, verifier_key)
    assert newer.size > kept.size
    # The same proof does not join the kept checkpoint to an altered root.
    with pytest.raises(NotVerified):
        transparency.verify_consistency(kept.note, proof.to.note, list(proof.proof)[1:] or
                                        [bytes(32)], verifier_key)


def test_the_go_reference_note_opens() -> None:
    """The C2SP spec's example note and key (data only), through this package's code."""
    note = ("This is an example message.\n\n\u2014 example.com/foo "
            "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72"
            "IneyaQM=\n")
    key = transparency.VerifierKey.parse(
        "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
    # Not a checkpoint (one line), but its signature verifies: the refusal is about the body.
    with pytest.raises(NotVerified, match="checkpoint is origin"):
        transparency.open_checkpoint(note, key)
    with pytest.raises(NotVerified, match="altered"):
        transparency.open_checkpoint(note.replace("example message", "exemplary message"), key)


def test_a_witness_cosignature_verifies_here(vault_server, company, table, verifier_key,
                                             tmp_path) -> None:
    """The C++ witness (fairvault witness cosign) cosigns; this package's own cosignature/v1
    code verifies it on the checkpoint and on a receipt, and catches an altered or missing one."""
    company.noisy_counts(table, 0.5, columns=["region"], idempotency_key="py-witnessed")
    auditor_key = vault_server.regulator.create_account("py-witness", "auditor").api_key
    key_file = tmp_path / "vault.pub"
    key_file.write_text(verifier_key + "\n")
    cosigned = vault_server.cli("witness", "cosign", "--witness-key",
                                str(vault_server.witness_key_file), "--state",
                                str(tmp_path / "witness.state"), "--log-key", str(key_file),
                                "--init", key=auditor_key)
    assert "witness cosignature(s)" in cosigned.stdout
    size = transparency.open_checkpoint((tmp_path / "witness.state").read_text(),
                                        verifier_key).size
    note = vault_server.new_auditor().get_checkpoint(size, auditor=True).checkpoint.note
    witness = vault_server.witness_verifier
    assert transparency.verify_cosignatures(note, [witness]) == ["pytest.example/witness"]
    # The receipt of a row the cosigned checkpoint holds, checked with the witness. (This vault's
    # quorum is 0, so the receipt cites the smallest checkpoint holding the row: the cosigned
    # one, unless the server's checkpointer signed another in between, which has no
    # cosignature.)
    receipt = company.get_receipt("py-witnessed")
    if receipt.checkpoint.size == size:
        transparency.verify_receipt(receipt, verifier_key, idempotency_key="py-witnessed",
                                    account=company.name, witnesses=[witness])
    else:
        with pytest.raises(NotVerified, match="fewer than the quorum"):
            transparency.verify_receipt(receipt, verifier_key, witnesses=[witness])
    # An altered cosignature (its timestamp) is caught; a witness that did not cosign is missing.
    lines = note.split("\n")
    at = next(i for i, line in enumerate(lines) if "pytest.example/witness" in line)
    name, blob = lines[at].rsplit(" ", 1)
    raw = bytearray(base64.b64decode(blob))
    raw[11] ^= 1  # inside the 8-byte time after the 4-byte key hash
    lines[at] = f"{name} {base64.b64encode(bytes(raw)).decode()}"
    with pytest.raises(NotVerified, match="does not verify"):
        transparency.verify_cosignatures("\n".join(lines), [witness])
    other = subprocess.run([vault_server.cli_binary, "witness", "key", "--name", "other.example",
                            "--out", str(tmp_path / "other.key")], check=True,
                           capture_output=True, text=True, timeout=60).stdout.strip()
    with pytest.raises(NotVerified, match="fewer than the quorum of 2"):
        transparency.verify_cosignatures(note, [witness, other])
    assert transparency.verify_cosignatures(note, [witness, other], quorum=1) == [
        "pytest.example/witness"]
    with pytest.raises(InvalidInput, match="note key"):
        transparency.verify_cosignatures(note, [verifier_key])
    with pytest.raises(InvalidInput, match="given twice"):
        transparency.verify_cosignatures(note, [witness, witness], quorum=2)


def test_sum_receipts_checks_a_budgets_report(vault_server, verifier_key, tmp_path) -> None:
    """The receipts of a fresh company's charges sum to what `report budgets --csv` says of it;
    a report that leaves one out, or understates one, is refused."""
    company = vault_server.new_company()
    handle = company.upload_table(vault_server.population, "pop", "key",
                                  categorical=["region"])
    keys = [f"py-sum-{i}" for i in range(3)]
    for key in keys:
        company.noisy_counts(handle, 0.25, columns=["region"], idempotency_key=key)
    receipts = [company.get_receipt(key) for key in keys]
    csv_path = tmp_path / "charges.csv"
    auditor_key = vault_server.regulator.create_account("py-sum-auditor", "auditor").api_key
    vault_server.cli("report", "budgets", "--out", str(tmp_path / "b.html"), "--csv",
                     str(csv_path), "--company", company.name, key=auditor_key)
    sums = transparency.sum_receipts(receipts, verifier_key, report_csv=str(csv_path))
    assert sums.loc[(company.name, "pop"), "charges"] == 3
    assert sums.loc[(company.name, "pop"), "epsilon"] == pytest.approx(0.75, abs=1e-12)
    with pytest.raises(NotVerified, match="have no receipt"):
        transparency.sum_receipts(receipts[:2], verifier_key, report_csv=str(csv_path))
    understated = csv_path.read_text().replace(",0.25,", ",0.125,", 1)
    (tmp_path / "under.csv").write_text(understated)
    with pytest.raises(NotVerified, match="epsilon 0.125"):
        transparency.sum_receipts(receipts, verifier_key, report_csv=str(tmp_path / "under.csv"))


def test_the_whole_ledger_verifies_here_and_an_edited_or_missing_row_does_not(
        vault_server, company, table, verifier_key) -> None:
    """Every row the vault lists, with its canonical encoding, checked here against its signed
    checkpoint (the Merkle root recomputed by this package, not the vault's C++); what the
    vault could show instead fails naming the row."""
    import hashlib

    for key in ("py-ledger-1", "py-ledger-2"):
        company.noisy_counts(table, 0.25, columns=["region"], idempotency_key=key)
    auditor = vault_server.vault(
        vault_server.regulator.create_account("py-ledger-auditor", "auditor").api_key)
    checkpoint = transparency.verify_ledger(auditor, verifier_key)
    entries = auditor.list_ledger(auditor=True, with_canonical=True, limit=10000,
                                  as_frame=False)
    assert 3 <= checkpoint.size <= len(entries)
    assert all(e.canonical for e in entries)
    assert not auditor.list_ledger(auditor=True, limit=1, as_frame=False)[0].canonical
    note = auditor.get_checkpoint(auditor=True).checkpoint.note
    size = transparency.open_checkpoint(note, verifier_key).size
    rows = list(entries[:size])
    assert transparency.verify_ledger_rows(rows, verifier_key, note).size == size

    edited = [type(e)() for e in rows]
    for copy, e in zip(edited, rows):
        copy.CopyFrom(e)
    edited[1].epsilon += 1
    with pytest.raises(NotVerified, match="ledger row 2: the row says"):
        transparency.verify_ledger_rows(edited, verifier_key, note)
    with pytest.raises(NotVerified, match="ledger row 2 is missing"):
        transparency.verify_ledger_rows(rows[:1] + rows[2:], verifier_key, note)
    with pytest.raises(NotVerified, match=f"signed a checkpoint of {size} rows but listed only"):
        transparency.verify_ledger_rows(rows[:-1], verifier_key, note)
    # The same rows under a checkpoint of another root (signed by a key of the test's own).
    private_key, name, key = _log_key()
    forged = _signed_checkpoint(private_key, name, size, hashlib.sha256(b"other").digest())
    with pytest.raises(NotVerified, match="not the tree of the signed checkpoint"):
        transparency.verify_ledger_rows(rows, key, forged)
    with pytest.raises(NotVerified):
        transparency.verify_ledger_rows(rows, verifier_key, forged)  # not the vault's key


def test_a_rotation_the_old_key_endorsed_gives_the_new_key(vault_server, verifier_key,
                                                             tmp_path) -> None:
    """The C++ server endorses a new log key with the vault's key; this package's own note code
    takes the new key from it with the old verifier key alone, and refuses a swapped key."""
    new_file = tmp_path / "new.log-key"
    run = lambda *args: subprocess.run([vault_server.server_binary, "log-key", *args],  # noqa
                                       check=True, capture_output=True, text=True,
                                       timeout=30).stdout
    new_key = run("--out", str(new_file), "--origin", "py.example/ledger-2").strip()
    note = run("--key", str(new_file), "--endorse-with",
               str(vault_server.tmp / "vault.db") + ".log-key")
    assert transparency.open_rotation(note, verifier_key) == \
        transparency.VerifierKey.parse(new_key)
    with pytest.raises(NotVerified, match="from another key than the one given"):
        transparency.open_rotation(note, new_key)  # the new key signed it, but is not the old
    _, _, stranger = _log_key()
    with pytest.raises(NotVerified):
        transparency.open_rotation(note.replace(new_key, stranger), verifier_key)


def _signed_checkpoint(private_key, name: str, size: "int | str", root: bytes) -> str:
    """A checkpoint note signed here (a note key of type 1), for tests without a vault."""
    from cryptography.hazmat.primitives import serialization
    public = private_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                   serialization.PublicFormat.Raw)
    text = f"{name}\n{size}\n{base64.b64encode(root).decode()}\n"
    blob = transparency._key_hash(name, public).to_bytes(4, "big") + private_key.sign(
        text.encode())
    return f"{text}\n\u2014 {name} {base64.b64encode(blob).decode()}\n"


def _log_key():
    """A signing key of the test's own: (private key, log name, verifier key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    private_key = Ed25519PrivateKey.generate()
    public = private_key.public_key().public_bytes(serialization.Encoding.Raw,
                                                   serialization.PublicFormat.Raw)
    name = "test.example/log"
    encoded = base64.b64encode(b"\x01" + public).decode()
    return private_key, name, f"{name}+{transparency._key_hash(name, public):08x}+{encoded}"


def test_consistency_from_the_empty_tree_and_malformed_input() -> None:
    """The empty tree is a prefix of every tree (no proof); a proof from it, a size that is not
    a decimal number, or a key that is not base64 is refused with the package's own errors."""
    import hashlib

    private_key, name, key = _log_key()
    empty = _signed_checkpoint(private_key, name, 0, hashlib.sha256(b"").digest())
    later = _signed_checkpoint(private_key, name, 5, bytes(32))
    assert transparency.verify_consistency(empty, later, [], key).size == 5
    with pytest.raises(NotVerified, match="no proof"):
        transparency.verify_consistency(empty, later, [bytes(32)], key)
    with pytest.raises(NotVerified, match="tree size"):
        transparency.open_checkpoint(_signed_checkpoint(private_key, name, "\u00b2", bytes(32)),
                                     key)
    with pytest.raises(InvalidInput, match="not base64"):
        transparency.VerifierKey.parse(key[:-4] + "!!!!")


def test_sum_receipts_finds_adjacent_rows_from_two_forks() -> None:
    """Receipts of rows N and N + 1 cited by checkpoints of different sizes, each valid alone,
    from two histories signed by one key: row N + 1's prev_hash is not row N's hash, a split
    view, though no row or size is shown twice. Built offline with a key of the test's own."""
    import hashlib

    from fairvault._proto import pb
    private_key, name, key = _log_key()

    def row(seq: int, account: str, epsilon: float, prev_hash: str):
        entry = pb.LedgerEntry(seq=seq, time_unix_micros=seq, kind="charge", account=account,
                               dataset="pop", request_kind="NoisyCounts",
                               idempotency_key=f"k{seq}", epsilon=epsilon, delta=0,
                               mechanism="discrete_laplace", prev_hash=prev_hash)
        canonical = "\x1f".join([str(seq), str(seq), "charge", "1", account, "1", "pop",
                                 "NoisyCounts", f"k{seq}", "%.17g" % epsilon, "%.17g" % 0.0,
                                 "discrete_laplace", "-", "", prev_hash]).encode()
        entry.hash = hashlib.sha256(canonical).hexdigest()
        return entry, canonical

    def receipt(entry, canonical, leaves, index):
        hashes = [transparency._leaf(bytes.fromhex(e.hash)) for e in leaves]
        root = hashes[0] if len(hashes) == 1 else transparency._node(hashes[0], hashes[1])
        return pb.Receipt(entry=entry, canonical=canonical, leaf_index=index,
                          inclusion_proof=[hashes[1 - index]] if len(hashes) == 2 else [],
                          checkpoint=pb.Checkpoint(note=_signed_checkpoint(
                              private_key, name, len(hashes), root)))

    ours, ours_canonical = row(1, "acme", 0.5, "0" * 64)
    theirs, theirs_canonical = row(1, "acme", 4.0, "0" * 64)  # the fork's row 1
    next_row, next_canonical = row(2, "beta", 0.1, theirs.hash)
    first = receipt(ours, ours_canonical, [ours], 0)
    second = receipt(next_row, next_canonical, [theirs, next_row], 1)
    for alone in (first, second):
        transparency.verify_receipt(alone, key)
    assert len(transparency.sum_receipts([receipt(theirs, theirs_canonical, [theirs], 0),
                                          second], key)) == 2
    with pytest.raises(NotVerified, match="SPLIT VIEW: ledger row 2 follows a row 1"):
        transparency.sum_receipts([first, second], key)
