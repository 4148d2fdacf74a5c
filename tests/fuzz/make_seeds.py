#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/). Run once when a
target or its input format changes; the fuzzers' own finds are merged by deploy/fuzz.sh --merge."""
import os
import struct

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
