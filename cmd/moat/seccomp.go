package main

import (
	"fmt"
	"io"
)

// cmdSeccomp is `moat seccomp check FILE`.
func cmdSeccomp(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "moat seccomp: not implemented yet")
	return 2
}
