// An independent verifier of the vault's transparency log, built from Debian's packages
// (golang-go and golang-golang-x-mod-dev): Go's golang.org/x/mod/sumdb/note opens the signed
// checkpoint with the vault's verifier key, and golang.org/x/mod/sumdb/tlog checks the
// inclusion and consistency proofs against it. Nothing here is fairvault's code.
//
//	tlog_verify receipt KEY NOTE_FILE LEAF_INDEX ROW_HASH_HEX [PROOF_HASH_BASE64 ...]
//	tlog_verify consistency KEY OLD_NOTE_FILE NEW_NOTE_FILE [PROOF_HASH_BASE64 ...]
//
// Prints "ok: ..." and exits 0, or prints what failed and exits 1.
package main

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func fail(format string, args ...interface{}) {
	fmt.Printf(format+"\n", args...)
	os.Exit(1)
}

// open checks the note's signature by key and returns the checkpoint's size and root.
func open(key, path string) (int64, tlog.Hash) {
	verifier, err := note.NewVerifier(key)
	if err != nil {
		fail("bad verifier key: %v", err)
	}
	msg, err := os.ReadFile(path)
	if err != nil {
		fail("cannot read %s: %v", path, err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		fail("note %s does not verify: %v", path, err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) < 4 || lines[0] != verifier.Name() {
		fail("note %s is not a checkpoint of log %s", path, verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 {
		fail("note %s: bad tree size %q", path, lines[1])
	}
	raw, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		fail("note %s: bad root hash", path)
	}
	var root tlog.Hash
	copy(root[:], raw)
	return size, root
}

func hashes(args []string) []tlog.Hash {
	out := make([]tlog.Hash, len(args))
	for i, a := range args {
		raw, err := base64.StdEncoding.DecodeString(a)
		if err != nil || len(raw) != tlog.HashSize {
			fail("proof hash %d is not base64 of 32 bytes", i)
		}
		copy(out[i][:], raw)
	}
	return out
}

func main() {
	if len(os.Args) < 5 {
		fail("usage: tlog_verify receipt|consistency KEY ...")
	}
	switch os.Args[1] {
	case "receipt":
		if len(os.Args) < 6 {
			fail("usage: tlog_verify receipt KEY NOTE_FILE LEAF_INDEX ROW_HASH_HEX [PROOF ...]")
		}
		size, root := open(os.Args[2], os.Args[3])
		index, err := strconv.ParseInt(os.Args[4], 10, 64)
		if err != nil {
			fail("bad leaf index %q", os.Args[4])
		}
		row, err := hex.DecodeString(os.Args[5])
		if err != nil || len(row) != 32 {
			fail("the row hash is not 64 hex digits")
		}
		// The leaf's entry is the row's 32-byte hash: RecordHash is SHA-256(0x00 || entry).
		leaf := tlog.RecordHash(row)
		if err := tlog.CheckRecord(hashes(os.Args[6:]), size, root, index, leaf); err != nil {
			fail("inclusion of leaf %d in the tree of %d: %v", index, size, err)
		}
		fmt.Printf("ok: leaf %d is in the signed tree of %d leaves\n", index, size)
	case "consistency":
		oldSize, oldRoot := open(os.Args[2], os.Args[3])
		newSize, newRoot := open(os.Args[2], os.Args[4])
		if err := tlog.CheckTree(hashes(os.Args[5:]), newSize, newRoot, oldSize, oldRoot); err != nil {
			fail("the tree of %d does not extend the tree of %d: %v", newSize, oldSize, err)
		}
		fmt.Printf("ok: the signed tree of %d leaves extends the one of %d\n", newSize, oldSize)
	default:
		fail("unknown command %q", os.Args[1])
	}
}
