package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/moatbox/moat/audit"
)

// cmdAudit: moat audit verify FILE checks an audit stream's hash chain.
func cmdAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "verify" || asksHelp(args) {
		fmt.Fprintln(stderr, "usage: moat audit verify FILE")
		return 2
	}
	f, err := os.Open(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "moat: %v\n", err)
		return 1
	}
	defer f.Close()
	n, last, err := audit.Verify(f)
	var ce *audit.ChainError
	if errors.As(err, &ce) {
		fmt.Fprintf(stdout, "%s:%d: chain broken: %s (%d records before it are intact)\n", args[1], ce.Line, ce.Msg, n)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "moat: %s: %v\n", args[1], err)
		return 1
	}
	fmt.Fprintf(stdout, "%d records, chain intact; last record's SHA-256 %s (keep it elsewhere to detect records cut from the end)\n", n, last)
	return 0
}
