//go:build !linux

package main

import (
	"io"
	"os"
)

// flushInput is a no-op here: the lines read before a question are
// dropped all the same (ttyApprover.ask).
func flushInput(*os.File) {}

// relaysTerminal: no backend relays a terminal here.
func relaysTerminal(io.Reader) bool { return false }

// isTerminal: every output is taken for a terminal here, and gated.
func isTerminal(io.Writer) bool { return true }
