#!/usr/bin/python3
"""Which tables a SQLite vault's commits write: reads DB-wal beside DB (a copy, or the file of a
stopped server), splits its valid frames into commits, and prints the frames per commit and,
per table or index, the pages each of the last LAST commits wrote on average (SQLite's dbstat
names each page's owner; page 1 is sqlite_schema's). Reads only: the copy is opened read-only.

To look at a running benchmark's server without stopping it for long:
  kill -STOP PID; cp DB DB-wal /tmp/copy/; kill -CONT PID; bench/wal_frames.py /tmp/copy/DB

Usage: bench/wal_frames.py DB [LAST]   (LAST defaults to 200)"""
import collections
import sqlite3
import struct
import sys


def commits(wal: bytes) -> list[list[int]]:
    """The page numbers of each commit in the log, oldest first (frames after the last commit
    frame, or after the first frame whose salt differs from the header's, are not in it)."""
    if len(wal) < 32:
        return []
    _, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", wal[:32])
    frame_bytes = 24 + page_size
    done, current = [], []
    for offset in range(32, len(wal) - frame_bytes + 1, frame_bytes):
        page, size_after, s1, s2 = struct.unpack(">4I", wal[offset:offset + 16])
        if (s1, s2) != (salt1, salt2):
            break
        current.append(page)
        if size_after != 0:  # a commit frame carries the database's size after the commit
            done.append(current)
            current = []
    return done


def main() -> int:
    if len(sys.argv) not in (2, 3) or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) == 2 else 2
    db = sys.argv[1]
    last = int(sys.argv[2]) if len(sys.argv) == 3 else 200
    with open(db + "-wal", "rb") as f:
        txs = commits(f.read())
    if not txs:
        print("the log holds no commit")
        return 1
    print(f"{len(txs)} commits in the log, {sum(map(len, txs)) / len(txs):.2f} frames each")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    owner = {page: name for name, page in con.execute("SELECT name, pageno FROM dbstat")}
    tail = txs[-last:]
    pages = collections.Counter(owner.get(p, "(free or new)") for tx in tail for p in tx)
    print(f"pages per commit, the last {len(tail)} commits:")
    for name, count in pages.most_common():
        print(f"  {name:32s} {count / len(tail):5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
