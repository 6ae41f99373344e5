//go:build !linux

package main

import (
	"io"
	"os"
)

// flushInput is a no-op here: the lines moat has read before a question
// are dropped (ttyApprover.ask), but input still in the terminal's
// buffer when the question is written, a partial line included, can
// answer it. Only Linux flushes it.
func flushInput(*os.File) {}

// relaysTerminal: no backend relays a terminal here.
func relaysTerminal(io.Reader) bool { return false }

// isTerminal: every output is taken for a terminal here, and gated.
func isTerminal(io.Writer) bool { return true }
