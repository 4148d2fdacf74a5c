"""The vault's transparency log checked in Python, independently of the vault's C++ (issue 25).

Every ledger row is a leaf of a Merkle tree hashed as RFC 9162 §2.1 does; the vault signs
checkpoints of it (C2SP tlog-checkpoint in a C2SP signed note, Ed25519). With only the vault's
verifier key (``"<origin>+<key hash>+<base64 key>"``, from its operator), these functions check
a receipt (``Vault.get_receipt``) and a consistency proof between two checkpoints
(``Vault.get_consistency_proof``); nothing the vault says is trusted. The hashing and proof
checks are the RFC's algorithms written here again; Ed25519 comes from ``cryptography``
(Debian's python3-cryptography). Witnesses' cosignatures (C2SP tlog-cosignature v1) are checked
by ``verify_cosignatures`` and ``verify_receipt(..., witnesses=, quorum=)``.
"""
from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from typing import List, Sequence

import grpc

from fairvault.errors import DataLoss, InvalidInput

__all__ = ["Checkpoint", "VerifierKey", "NotVerified", "open_checkpoint", "verify_receipt",
           "verify_consistency", "verify_cosignatures", "sum_receipts", "row_encoding_matches",
           "verify_ledger_rows", "verify_ledger", "open_rotation"]

_SIG_PREFIX = "\u2014 "


class NotVerified(DataLoss):
    """A receipt, checkpoint or consistency proof that does not verify (the message says what).
    A ``DataLoss``: what the vault handed out does not match what it signed."""

    def __init__(self, message: str) -> None:
        super().__init__(grpc.StatusCode.DATA_LOSS, message)


@dataclass(frozen=True)
class VerifierKey:
    """A note key (type 1: the vault's) or a witness's cosignature/v1 key (type 4)."""
    name: str
    key_hash: int
    public_key: bytes
    key_type: int = 1

    @classmethod
    def parse(cls, encoded: str) -> "VerifierKey":
        parts = encoded.strip().split("+", 2)
        if len(parts) != 3 or not re.fullmatch(r"[0-9a-f]{8}", parts[1]):
            raise InvalidInput("a verifier key is <name>+<8 hex digits>+<base64 key>",
                               field="verifier_key")
        try:
            raw = base64.b64decode(parts[2], validate=True)
        except ValueError:
            raise InvalidInput("the verifier key's key is not base64",
                               field="verifier_key") from None
        if len(raw) != 33 or raw[0] not in (1, 4):
            raise InvalidInput("the verifier key is not an Ed25519 key (0x01 or 0x04, and 32 "
                               "bytes)", field="verifier_key")
        key = cls(parts[0], int(parts[1], 16), raw[1:], raw[0])
        if _key_hash(key.name, key.public_key, key.key_type) != key.key_hash:
            raise InvalidInput("the verifier key's hash does not match its name and key",
                               field="verifier_key")
        return key


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes


def _key_hash(name: str, public_key: bytes, key_type: int = 1) -> int:
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([key_type]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def _leaf(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _ed25519_ok(public_key: bytes, signature: bytes, text: bytes) -> bool:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError as error:  # pragma: no cover - deploy/test.sh installs it
        raise InvalidInput("verifying signatures needs the cryptography package "
                           "(apt install python3-cryptography)") from error
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, text)
        return True
    except InvalidSignature:
        return False


def _split_note(note: str):
    """(text, [(name, key hash, signature bytes after the hash)]) of a signed note."""
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise NotVerified("a signed note is text, a blank line, and signature lines")
    text, lines = note[:split + 1], note[split + 2:-1].split("\n")
    signatures = []
    for line in lines:
        if not line.startswith(_SIG_PREFIX) or " " not in line[len(_SIG_PREFIX):]:
            raise NotVerified("a signature line is '\u2014 <name> <base64>'")
        name, blob = line[len(_SIG_PREFIX):].rsplit(" ", 1)
        try:
            raw = base64.b64decode(blob, validate=True)
        except ValueError:
            raise NotVerified(f"the signature of '{name}' is not base64") from None
        if len(raw) < 5:
            raise NotVerified(f"the signature of '{name}' is too short")
        signatures.append((name, int.from_bytes(raw[:4], "big"), raw[4:]))
    return text, signatures


def _signature_ok(key: VerifierKey, text: str, signature: bytes) -> bool:
    """A note signature, or for a witness key a cosignature/v1: 8 bytes of big-endian time,
    then Ed25519 over "cosignature/v1\\ntime <time>\\n" and the note's text."""
    if key.key_type == 4:
        if len(signature) != 72:
            return False
        time = int.from_bytes(signature[:8], "big")
        if time >= 2 ** 63:
            return False
        message = f"cosignature/v1\ntime {time}\n{text}".encode()
        return _ed25519_ok(key.public_key, signature[8:], message)
    return _ed25519_ok(key.public_key, signature, text.encode())


def _find_signature(note: str, key: VerifierKey):
    """(text, True) if ``key`` signed the note, (text, False) if it has no line by it."""
    text, signatures = _split_note(note)
    for name, key_hash, signature in signatures:
        if name != key.name or key_hash != key.key_hash:
            continue
        if not _signature_ok(key, text, signature):
            raise NotVerified(f"the signature of '{key.name}' does not verify: the note was "
                              f"altered")
        return text, True
    return text, False


def open_checkpoint(note: str, key: "VerifierKey | str") -> Checkpoint:
    """The checkpoint a signed note states, if ``key`` signed it; NotVerified otherwise."""
    key = VerifierKey.parse(key) if isinstance(key, str) else key
    text, signed = _find_signature(note, key)
    if not signed:
        raise NotVerified(f"the note has no signature by '{key.name}'")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or not re.fullmatch(r"0|[1-9][0-9]*", lines[1]):
        raise NotVerified("a checkpoint is origin, tree size, base64 root hash")
    try:
        root = base64.b64decode(lines[2], validate=True)
    except ValueError:
        raise NotVerified("the checkpoint's root hash is not base64") from None
    if len(root) != 32 or lines[0] != key.name:
        raise NotVerified(f"the checkpoint is of log '{lines[0]}' with a {len(root)}-byte "
                          f"root; the key is of '{key.name}'")
    return Checkpoint(lines[0], int(lines[1]), root)


def _encoded(key: VerifierKey) -> str:
    """The key as Go's note package writes it: <name>+<hex hash>+<base64(type || key)>."""
    return (f"{key.name}+{key.key_hash:08x}+"
            f"{base64.b64encode(bytes([key.key_type]) + key.public_key).decode()}")


def open_rotation(note: str, old_key: "VerifierKey | str") -> VerifierKey:
    """The vault's new log key from a rotation note (``fairvault-server log-key --key NEW
    --endorse-with OLD``): its text names ``old_key`` and the new key, and both signed it.
    NotVerified otherwise."""
    old_key = VerifierKey.parse(old_key) if isinstance(old_key, str) else old_key
    text, signed = _find_signature(note, old_key)
    if not signed:
        raise NotVerified(f"the note has no signature by '{old_key.name}'")
    lines = text.split("\n")
    if len(lines) != 4 or lines[0] != "fairvault log key rotation" or lines[3]:
        raise NotVerified("the note is not a log key rotation")
    if lines[1] != _encoded(old_key):
        raise NotVerified("the rotation is from another key than the one given")
    try:
        new_key = VerifierKey.parse(lines[2])
    except InvalidInput as error:
        raise NotVerified(f"the new key: {error.message}") from None
    if lines[2] != _encoded(new_key) or not re.fullmatch(r"[^\s+]+", new_key.name):
        raise NotVerified("the new key is not written as its encoding")
    if new_key.key_type != 1 or new_key.public_key == old_key.public_key:
        raise NotVerified("the new key is not another log (note) key")
    if not _find_signature(note, new_key)[1]:
        raise NotVerified("the new key did not sign its rotation")
    return new_key


def verify_cosignatures(note: str, witnesses: Sequence["VerifierKey | str"],
                        quorum: "int | None" = None) -> List[str]:
    """Checks that at least ``quorum`` (default: all) of the ``witnesses`` (cosignature/v1 keys)
    cosigned the checkpoint note; returns their names. NotVerified if fewer did or a
    cosignature line was altered."""
    keys = [VerifierKey.parse(w) if isinstance(w, str) else w for w in witnesses]
    for key in keys:
        if key.key_type != 4:
            raise InvalidInput(f"'{key.name}' is a note key, not a witness's cosignature/v1 key",
                               field="witnesses")
    for i, key in enumerate(keys):
        if any(k.name == key.name or k.public_key == key.public_key for k in keys[:i]):
            raise InvalidInput(f"witness '{key.name}' is given twice: each counts once",
                               field="witnesses")
    quorum = len(keys) if quorum is None else quorum
    if not keys or not 1 <= quorum <= len(keys):
        raise InvalidInput(f"quorum must be 1..{len(keys)} (the witnesses given)", field="quorum")
    cosigned, missing = [], []
    for key in keys:
        try:
            signed = _find_signature(note, key)[1]
        except NotVerified:
            raise NotVerified(f"the cosignature of witness '{key.name}' does not verify") from None
        (cosigned if signed else missing).append(key.name)
    if len(cosigned) < quorum:
        raise NotVerified(f"the checkpoint is cosigned by {len(cosigned)} of the {len(keys)} "
                          f"witnesses given, fewer than the quorum of {quorum} (missing: "
                          f"{', '.join(missing)})")
    return cosigned


def _root_from_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2."""
    if not 0 <= index < size:
        raise NotVerified(f"leaf {index} is not in a tree of {size} leaves")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise NotVerified("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = _node(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise NotVerified("the inclusion proof is shorter than the tree is deep")
    return r


def _fmt17(x: float) -> str:
    """C's %.17g."""
    return "%.17g" % x


def row_encoding_matches(entry, canonical: bytes) -> None:
    """The ledger row's canonical encoding (docs/operations.md) against the entry's fields."""
    fields = canonical.decode().split("\x1f")
    if len(fields) not in (15, 16):
        raise NotVerified(f"the canonical encoding has {len(fields)} fields")
    pure = str(entry.pure_epsilon_micro) if entry.HasField("pure_epsilon_micro") else "-"
    expected = {
        0: str(entry.seq), 1: str(entry.time_unix_micros), 2: entry.kind, 4: entry.account,
        6: entry.dataset, 7: entry.request_kind, 8: entry.idempotency_key,
        9: _fmt17(entry.epsilon), 10: _fmt17(entry.delta), 11: entry.mechanism, 12: pure,
        13: ",".join(str(v) for v in entry.rdp_nano), 14: entry.prev_hash,
    }
    for i, value in expected.items():
        if fields[i] != value:
            raise NotVerified(f"the row says {value!r} where its hashed encoding says "
                              f"{fields[i]!r} (field {i})")
    actor = fields[15] if len(fields) == 16 else ""
    if actor != (f"actor={entry.actor}" if entry.actor else ""):
        raise NotVerified("the row's actor is not the one its hash covers")


def _check_row(entry, canonical: bytes) -> None:
    """The row's encoding hashes to its hash and says what the row says; NotVerified
    ("row N: ...") otherwise."""
    if hashlib.sha256(canonical).hexdigest() != entry.hash:
        raise NotVerified(f"row {entry.seq}: its encoding does not hash to its hash")
    try:
        row_encoding_matches(entry, canonical)
    except NotVerified as error:
        raise NotVerified(f"row {entry.seq}: {error.message}") from None


def verify_receipt(receipt, key: "VerifierKey | str", idempotency_key: str = "",
                   seq: int = 0, witnesses: Sequence["VerifierKey | str"] = (),
                   quorum: "int | None" = None, account: str = "") -> Checkpoint:
    """Checks a ``Receipt``: it is for the release ``idempotency_key`` of ``account`` (your
    account's name; required with ``idempotency_key``, since another company's row can have the
    same key) or for the row ``seq`` when given; the row's encoding hashes to its hash and says
    what the row says; the row is leaf seq - 1 of the signed checkpoint's tree; with
    ``witnesses``, that ``quorum`` of them (default: all) cosigned that checkpoint. Returns the
    checkpoint; NotVerified naming what failed."""
    if idempotency_key and not account:
        raise InvalidInput("verify_receipt: idempotency_key needs account= (your account's "
                           "name): another company's row can have the same key",
                           field="account")
    entry = receipt.entry
    if (seq and entry.seq != seq) or (idempotency_key and (
            entry.idempotency_key != idempotency_key or entry.kind != "charge")) or (
            account and entry.account != account):
        raise NotVerified(f"the receipt is for ledger row {entry.seq} ({entry.kind}, account "
                          f"{entry.account!r}, key {entry.idempotency_key!r}), not the one "
                          f"asked for")
    if entry.seq < 1:
        raise NotVerified("a ledger row's seq is >= 1")
    _check_row(entry, receipt.canonical)
    if receipt.leaf_index != entry.seq - 1:
        raise NotVerified(f"row {entry.seq} must be leaf {entry.seq - 1}")
    checkpoint = open_checkpoint(receipt.checkpoint.note, key)
    root = _root_from_inclusion(_leaf(bytes.fromhex(entry.hash)), receipt.leaf_index,
                                checkpoint.size, list(receipt.inclusion_proof))
    if root != checkpoint.root:
        raise NotVerified(f"row {entry.seq} is not in the signed tree of {checkpoint.size} rows")
    if witnesses:
        verify_cosignatures(receipt.checkpoint.note, witnesses, quorum)
    return checkpoint


def _root(leaves: Sequence[bytes]) -> bytes:
    """RFC 9162 MTH over leaf hashes: the largest complete subtree on the left, the rest on the
    right (one hash per set bit of the size kept while the leaves are read)."""
    subtrees: List[bytes] = []
    for size, leaf in enumerate(leaves):
        subtrees.append(leaf)
        while size & 1:
            right = subtrees.pop()
            subtrees[-1] = _node(subtrees[-1], right)
            size >>= 1
    if not subtrees:
        return hashlib.sha256(b"").digest()
    root = subtrees[-1]
    for left in reversed(subtrees[:-1]):
        root = _node(left, root)
    return root


def verify_ledger_rows(entries, key: "VerifierKey | str", note: str) -> Checkpoint:
    """Checks ledger rows as ``Vault.list_ledger(auditor=True, with_canonical=True,
    as_frame=False)`` lists them, from row 1 on, against the signed checkpoint ``note``: each
    row's encoding hashes to its hash and says what the row says, the rows are numbered 1, 2,
    ... and each chains to the one before, and the first ``size`` of them are the tree the
    checkpoint signed (its root recomputed here). Returns the checkpoint; NotVerified naming
    the first row that fails. (``fairvault auditor verify --log-key`` also composes every
    charge against its grant and cap with the vault's accountant.)"""
    checkpoint = open_checkpoint(note, key)
    head, leaves = "0" * 64, []
    for entry in entries:
        seq = len(leaves) + 1
        if entry.seq != seq:
            raise NotVerified(f"ledger row {seq} is missing: the vault listed row {entry.seq} "
                              f"after row {seq - 1}")
        if not entry.canonical:
            raise NotVerified(f"ledger row {seq} was listed without its canonical encoding "
                              f"(list with with_canonical=True)")
        try:
            _check_row(entry, entry.canonical)
        except NotVerified as error:
            raise NotVerified(f"ledger {error.message}") from None
        if entry.prev_hash != head:
            raise NotVerified(f"ledger row {seq} does not chain to row {seq - 1}")
        head = entry.hash
        leaves.append(_leaf(bytes.fromhex(entry.hash)))
    if len(leaves) < checkpoint.size:
        raise NotVerified(f"the vault signed a checkpoint of {checkpoint.size} rows but listed "
                          f"only {len(leaves)}")
    if _root(leaves[:checkpoint.size]) != checkpoint.root:
        raise NotVerified(f"the ledger's first {checkpoint.size} rows are not the tree of the "
                          f"signed checkpoint of that size")
    return checkpoint


def verify_ledger(vault, key: "VerifierKey | str", witnesses: Sequence["VerifierKey | str"] = (),
                  quorum: "int | None" = None) -> Checkpoint:
    """Fetches the vault's latest signed checkpoint (with ``witnesses``, the latest its quorum
    cosigned, whose cosignatures are checked here) and the ledger rows it signed (an auditor's
    or the regulator's ``Vault``), and checks them with ``verify_ledger_rows``. Returns the
    checkpoint; keep its note and check the next one extends it (``verify_consistency``)."""
    note = vault.get_checkpoint(auditor=True, witnessed=bool(witnesses)).checkpoint.note
    if witnesses:
        verify_cosignatures(note, witnesses, quorum)
    size = open_checkpoint(note, key).size
    entries, after = [], 0
    while len(entries) < size:  # the signed rows; later ones are beyond this check
        page = vault.list_ledger(after_seq=after, limit=min(10000, size - len(entries)),
                                 auditor=True, with_canonical=True, as_frame=False)
        if not page:
            break
        if page[0].seq <= after:
            raise NotVerified(f"the vault listed row {page[0].seq} after row {after}")
        entries.extend(page)
        after = page[-1].seq
    return verify_ledger_rows(entries, key, note)


def verify_consistency(old_note: str, new_note: str, proof: Sequence[bytes],
                       key: "VerifierKey | str") -> Checkpoint:
    """RFC 9162 §2.1.4.2: the log of ``new_note`` extends that of ``old_note`` (both signed by
    ``key``). Returns the new checkpoint; NotVerified (a rewritten or forked log) otherwise."""
    old, new = open_checkpoint(old_note, key), open_checkpoint(new_note, key)
    proof: List[bytes] = list(proof)
    if old.size == 0:  # the empty tree is a prefix of every tree
        if proof or old.root != hashlib.sha256(b"").digest():
            raise NotVerified("a checkpoint of 0 rows has the empty root and no proof")
        return new
    if old.size > new.size:
        raise NotVerified(f"a tree of {old.size} rows cannot be a prefix of one of {new.size}")
    if old.size == new.size:
        if proof or old.root != new.root:
            raise NotVerified(f"two different roots for {old.size} rows: a split view (fork) "
                              f"of the log")
        return new
    if not proof:
        raise NotVerified("the consistency proof is empty")
    path = ([old.root] if old.size & (old.size - 1) == 0 else []) + proof
    fn, sn = old.size - 1, new.size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise NotVerified("the consistency proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr, sr = _node(c, fr), _node(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = _node(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0 or fr != old.root or sr != new.root:
        raise NotVerified(f"the log of {new.size} rows does not extend the one of {old.size} "
                          f"rows: rewritten or forked")
    return new


def sum_receipts(receipts, key: "VerifierKey | str", witnesses: Sequence["VerifierKey | str"] = (),
                 quorum: "int | None" = None, report_csv: "str | None" = None):
    """Verifies every receipt (and, with ``witnesses``, its checkpoint's cosignatures) and sums
    their charge rows per company and dataset: a DataFrame with ``charges``, ``epsilon`` and
    ``delta``. With ``report_csv`` (``fairvault report budgets --csv``), also checks that the
    report's charges are exactly the receipted rows (same company, dataset, epsilon, delta), so
    that its sums are sums of rows the vault signed; NotVerified naming what differs."""
    import csv

    import pandas as pd

    rows, hashes, roots, prev_hashes = {}, {}, {}, {}
    for receipt in receipts:
        checkpoint = verify_receipt(receipt, key, witnesses=witnesses, quorum=quorum)
        entry = receipt.entry
        # Two signed views of one row or one tree size: the vault forked its log.
        if hashes.setdefault(entry.seq, entry.hash) != entry.hash or \
                roots.setdefault(checkpoint.size, checkpoint.root) != checkpoint.root:
            raise NotVerified(f"SPLIT VIEW: two receipts signed by the same key show ledger row "
                              f"{entry.seq} or the tree of {checkpoint.size} rows differently")
        prev_hashes[entry.seq] = entry.prev_hash
        if entry.kind == "charge":
            rows[entry.seq] = entry
    # Receipts of adjacent rows, perhaps cited by checkpoints of different sizes, must be one
    # chain: each row's hash covers its predecessor's.
    for seq, prev_hash in prev_hashes.items():
        if seq - 1 in hashes and hashes[seq - 1] != prev_hash:
            raise NotVerified(f"SPLIT VIEW: ledger row {seq} follows a row {seq - 1} other than "
                              f"the one receipted here (its prev_hash differs from that row's "
                              f"hash); keep both receipts, they prove the fork")
    frame = pd.DataFrame(
        [(e.account, e.dataset, 1, e.epsilon, e.delta) for _, e in sorted(rows.items())],
        columns=["company", "dataset", "charges", "epsilon", "delta"])
    sums = frame.groupby(["company", "dataset"]).sum()
    if report_csv is None:
        return sums
    def unquoted(value: str) -> str:
        # The report writes formula-like text with an apostrophe in front.
        return value[1:] if len(value) > 1 and value[0] == "'" and value[1] in "=+-@\t\r" else value

    problems, unreceipted, seen = [], [], set()
    with open(report_csv, newline="") as f:
        for number, line in enumerate(csv.DictReader(f), start=2):
            try:
                line["company"] = unquoted(line["company"])
                line["dataset"] = unquoted(line["dataset"])
                seq = int(line["seq"])
                float(line["epsilon"]), float(line["delta"])
            except (KeyError, TypeError, ValueError) as error:
                raise InvalidInput(f"{report_csv} line {number}: not a charges row of `report "
                                   f"budgets --csv` ({error})", field="report_csv") from None
            if seq in seen:
                problems.append(f"ledger row {seq} is listed twice in the report")
                continue
            seen.add(seq)
            entry = rows.get(seq)
            if entry is None:
                unreceipted.append(seq)
            elif (entry.account, entry.dataset, entry.epsilon, entry.delta) != (
                    line["company"], line["dataset"], float(line["epsilon"]),
                    float(line["delta"])):
                problems.append(f"ledger row {seq}: the report says {line['company']}/"
                                f"{line['dataset']} epsilon {line['epsilon']} delta "
                                f"{line['delta']}, its receipt {entry.account}/{entry.dataset} "
                                f"epsilon {entry.epsilon} delta {entry.delta}")
    problems += [f"ledger row {seq} has a receipt but is missing from the report"
                 for seq in rows if seq not in seen]
    if unreceipted:
        problems.append(f"{len(unreceipted)} charge(s) of the report have no receipt here "
                        f"(seq {', '.join(map(str, unreceipted[:10]))})")
    if problems:
        raise NotVerified("the report does NOT match the receipts: " + "; ".join(problems))
    return sums
