#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/). Run once when a
target or its input format changes; the fuzzers' own finds are merged by deploy/fuzz.sh --merge."""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# CSV: quoting, a BOM, CRLF, blank lines, UTF-8, a header cell left empty, the UCI Adult form.
put("fuzz_csv", "plain", "key,score,label\nk1,0.5,1\nk2,0.25,0\n")
put("fuzz_csv", "quoted", 'key,name\n"k,1","a ""quoted"" name"\n"k2","two\nlines"\n')
put("fuzz_csv", "bom_crlf", "\ufeffkey,x\r\nk1, 1 \r\n\r\nk2,2\r\n")
put("fuzz_csv", "utf8", "clé,région\nk1,Île-de-France\nk2,東京\n")
put("fuzz_csv", "pandas_index", ",key,y\n0,k1,1\n1,k2,0\n")
put("fuzz_csv", "adult", "|1x3 Cross validator\n25, Private, 226802, 11th, 7, Never-married, "
    "Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.\n")
put("fuzz_csv", "ragged", "a,b\n1\n")

# Flags: the arguments joined by NUL bytes.
for name, args in {
    "basic": ["--epsilon", "1", "--columns", "a,b", "--columns", "c", "--dry-run"],
    "equals": ["--epsilon=0.5", "--limit=10", "--out=x.csv", "job_1"],
    "positional": ["job_7", "out.json", "--epsilon", "1e-3"],
    "help": ["--help"],
    "bad": ["--epsilon", "--limit", "x", "--dry-run=maybe"],
}.items():
    put("fuzz_flags", name, "\0".join(args))

# Reports: FuzzedDataProvider bytes; any bytes are a valid input, these vary the choice byte
# (taken from the end) and the first strings.
for i in range(5):
    put("fuzz_report_html", f"choice{i}", bytes(range(32, 127)) * 3 + bytes([i]))


# Stored tables: one byte of row count, then storage::StoredTable's wire format.
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def spec(name, numeric):
    return field(1, field(1, name.encode()) + (b"\x10\x01" if numeric else b"\x10\x02"))


def table(keys, numbers, categories, label="t"):
    out = spec("score", True) + spec("region", False)
    for k in keys:
        out += field(2, k.encode())
    out += field(3, field(1, b"".join(struct.pack("<d", x) for x in numbers)))
    out += field(3, b"".join(field(2, c.encode()) for c in categories))
    out += field(4, label.encode())
    return bytes([len(keys)]) + out


put("fuzz_company_table", "small", table(["k1", "k2", "k3"], [0.5, -1, 1e300],
                                         ["north", "south", "north"]))
put("fuzz_company_table", "empty_columns", bytes([2]) + field(2, b"a") + field(2, b"b"))
put("fuzz_company_table", "one_row", table(["only"], [0.0], [""]))


# Artifacts: a first byte (even: a fair model; odd: an equalized-odds post-processor), then the
# file as `artifact get --out` or `postprocess eo --out` writes it.
def artifact(kind, text):
    put("fuzz_artifact", kind, b"\0" + text.encode() if not kind.startswith("eo")
        else b"\1" + text.encode())


FEATURES = '"features": {"feature_columns": ["age", "hours"], "clip_l1": 2, "intercept": true}'
artifact("mixture", '{"id": "art_1", "fair_model": {' + FEATURES + ', "components": ['
         '{"weights": [0.5, -1, 0.25]}, {"weights": [-0.5, 1, 0]}]}}')
artifact("weighted_mixture", '{"artifact": {"fair_model": {' + FEATURES + ', "components": ['
         '{"weights": [1, 1, -1]}, {"weights": [0, 0, 1]}], "component_weights": [0.25, 0.75]}}}')
artifact("hypothesis", '{"hypothesis_column": "h3", "hypothesis_index": 3}')
artifact("network", '{"fair_model": {' + FEATURES + ', "network": {"layers": ['
         '{"inputs": 3, "outputs": 2, "weights": [1, -1, 0.5, 2, 0, -0.5], "bias": [0, 1]},'
         '{"inputs": 2, "outputs": 1, "weights": [1, -1]}]}}}')
artifact("network_classes", '{"fair_model": {' + FEATURES + ', "network": {"layers": ['
         '{"inputs": 3, "outputs": 3, "weights": [1, 0, 0, 0, 1, 0, 0, 0, 1]}],'
         '"classes": [0, 2, 7]}}}')
# Networks of the shapes the stochastic learners train (no bias on the first layer, at most two
# hidden layers), which the fuzzer also evaluates with the server's own Network.
artifact("server_mlp", '{"fair_model": {' + FEATURES + ', "network": {"layers": ['
         '{"inputs": 3, "outputs": 2, "weights": [1, -1, 0.5, 2, 0, -0.5]},'
         '{"inputs": 2, "outputs": 2, "weights": [1, 0.5, -1, 2], "bias": [0.1, -0.2]},'
         '{"inputs": 2, "outputs": 1, "weights": [1, -1], "bias": [0.25]}]}}}')
artifact("server_softmax", '{"fair_model": {' + FEATURES + ', "network": {"layers": ['
         '{"inputs": 3, "outputs": 2, "weights": [1, -1, 0.5, 2, 0, -0.5]},'
         '{"inputs": 2, "outputs": 3, "weights": [1, 0, 0, 1, -1, 1], "bias": [0, 0.5, -0.5]}],'
         '"classes": [0, 1, 2]}}}')
artifact("not_a_model", '{"equalized_odds": {"groups": [{"group": "F"}]}}')
put("fuzz_artifact", "binary_mixture", b"\0" + field(13, field(2, field(1, b"x") + b"\x18\x01")
                                                     + field(3, field(1, struct.pack("<2d", 1, -1)))))
artifact("eo", '{"equalized_odds": {"attributes": ["sex"], "groups": ['
         '{"group": "F", "p_flip_to_1_given_0": 0.1, "p_keep_1_given_1": 1},'
         '{"group": "M", "p_flip_to_1_given_0": 0, "p_keep_1_given_1": 0.8}]}}')
artifact("eo_bare", '{"groups": [{"group": "a|b", "p_flip_to_1_given_0": 1, '
         '"p_keep_1_given_1": 0}]}')
artifact("eo_scores", '{"artifact": {"equalized_odds_scores": {"lo": 0, "hi": 1, "bins": 2, '
         '"groups": [{"group": "F", "p_positive": [0.2, 0.9]}, '
         '{"group": "M", "p_positive": [0, 1]}]}}}')


# Streams: a first byte (bit 0: import, else upload; bit 1: the caller is gone before storing),
# then messages of two length bytes (little endian) and their protobuf bytes.
def vint(number, value):
    return varint(number << 3) + varint(value)


def stream(flags, *messages):
    out = bytes([flags])
    for m in messages:
        out += struct.pack("<H", len(m)) + m
    return out


def end(chunks, rows):
    return field(3, vint(1, chunks) + vint(2, rows))


def import_header(batch):
    return field(1, field(1, b"d") + field(2, batch.encode()) + field(3, b"sex"))


def subject_rows(keys, sexes):
    return field(2, b"".join(field(1, k.encode()) for k in keys)
                 + b"".join(field(2, s.encode()) for s in sexes))


put("fuzz_streams", "import", stream(1, import_header("b1"), subject_rows(["n8", "n9"], ["F", "M"]),
                                     subject_rows(["t1"], ["M"]), end(2, 3)))
put("fuzz_streams", "import_replay", stream(1, import_header("seed"), subject_rows(
    [f"s{i}" for i in range(16)], ["M" if i % 3 == 0 else "F" for i in range(16)]), end(1, 16)))
put("fuzz_streams", "import_gone", stream(3, import_header("b2"), subject_rows(["u"], ["F"]),
                                          end(1, 1)))
put("fuzz_streams", "import_bad_end", stream(1, import_header("b3"), subject_rows(["v"], ["F"]),
                                             end(1, 2)))


def table_header(label):
    spec_bytes = (field(2, field(1, b"score") + vint(2, 1)) + field(2, field(1, b"tier") + vint(2, 2)))
    return field(1, field(1, b"d") + spec_bytes + field(4, label.encode()))


def table_chunk(keys, scores, tiers):
    numbers = field(1, b"".join(struct.pack("<d", x) for x in scores))
    return field(2, b"".join(field(1, k.encode()) for k in keys) + field(2, numbers)
                 + field(2, b"".join(field(2, t.encode()) for t in tiers)))


put("fuzz_streams", "upload", stream(0, table_header("t"), table_chunk(["s0", "s1"], [0.5, 1], ["a", "b"]),
                                     table_chunk(["x9"], [-2], ["a"]), end(2, 3)))
put("fuzz_streams", "upload_gone", stream(2, table_header("t"), table_chunk(["s2"], [1], ["c"]),
                                          end(1, 1)))
put("fuzz_streams", "upload_repeat_key", stream(0, table_header("t"),
                                                table_chunk(["s0", "s0"], [1, 2], ["a", "a"]), end(1, 2)))
put("fuzz_streams", "upload_no_end", stream(0, table_header("t"), table_chunk(["s3"], [1], ["a"])))


# Spending requests: a first byte naming the RPC (fuzz_spending.cc's Targets() order), then the
# request's protobuf bytes; "T" is the fuzz vault's table, "A" its equalized-odds artifact. Made
# with the Python client's generated messages (deploy/build.sh writes them to build/).
sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "client", "python"))
from fairvault.v1 import models_pb2, postprocessors_pb2, preview_pb2, releases_pb2  # noqa: E402

SPENDING = [
    ("noisy_counts", releases_pb2.NoisyCountsRequest(
        idempotency_key="k1", table_handle="T", columns=["label"], attributes=["sex"], epsilon=1)),
    ("fit_eo", postprocessors_pb2.FitEqualizedOddsRequest(
        idempotency_key="k2", table_handle="T", prediction_column="pred", label_column="label",
        attributes=["sex"], epsilon=1, decision_floor=0.1)),
    ("fit_sp", postprocessors_pb2.FitStatisticalParityRequest(
        idempotency_key="k3", table_handle="T", score_column="score", attributes=["sex"], lo=0,
        hi=1, bins=4, alpha=0.1, epsilon=1)),
    ("fit_eo_scores", postprocessors_pb2.FitEqualizedOddsScoresRequest(
        idempotency_key="k4", table_handle="T", score_column="score", label_column="label",
        attributes=["sex"], lo=0, hi=1, bins=4, epsilon=1)),
    ("audit_classifier", releases_pb2.AuditClassifierRequest(
        idempotency_key="k5", table_handle="T", prediction_column="pred", label_column="label",
        attributes=["sex"], epsilon=1)),
    ("audit_regressor", releases_pb2.AuditRegressorRequest(
        idempotency_key="k6", table_handle="T", score_column="score", attributes=["sex"], lo=0,
        hi=1, bins=4, epsilon=1)),
    ("decide", postprocessors_pb2.DecideRequest(artifact_id="A", subject_keys=["s0", "s3"],
                                                values=[1, 0])),
    ("best_response", models_pb2.BestResponseRequest(
        idempotency_key="k8", table_handle="T", feature_columns=["score"], label_column="label",
        attributes=["sex"], masses_key="k1", lambda_bound=1, epsilon=1, oracle=1,
        **{"lambda": [0.5, 0, 0, 0.1]})),
    ("cell_sums", models_pb2.CellSumsRequest(
        idempotency_key="k9", table_handle="T", feature_columns=["score"], label_column="label",
        attributes=["sex"], epsilon=1)),
    ("fit_fair_model", models_pb2.FitFairModelRequest(
        idempotency_key="k10", table_handle="T", algorithm=1, feature_columns=["score"],
        label_column="label", attributes=["sex"], epsilon=1, rounds=3)),
]
for i, (name, request) in enumerate(SPENDING):
    put("fuzz_spending", name, bytes([i]) + request.SerializeToString())
# Decide by the table's handle (the same RPC as "decide": its index).
DECIDE = [name for name, _ in SPENDING].index("decide")
put("fuzz_spending", "decide_table", bytes([DECIDE]) + postprocessors_pb2.DecideRequest(
    artifact_id="A", table_handle="T", value_column="pred", first_row=1,
    row_count=2).SerializeToString())
# A regressor audit on a range far from 0: the bootstrap's variance once overflowed to NaN there.
AUDIT_REGRESSOR = [name for name, _ in SPENDING].index("audit_regressor")
far = releases_pb2.AuditRegressorRequest(
    idempotency_key="k11", table_handle="T", score_column="score", attributes=["sex"], lo=1e200,
    hi=2e200, bins=4, epsilon=1)
put("fuzz_spending", "audit_regressor_far", bytes([AUDIT_REGRESSOR]) + far.SerializeToString())
preview = preview_pb2.PreviewReleaseRequest(noisy_counts=SPENDING[0][1])
put("fuzz_spending", "preview", bytes([len(SPENDING)]) + preview.SerializeToString())
