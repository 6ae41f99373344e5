//go:build !linux

package main

import (
	"fmt"
	"io"

	"github.com/moatbox/moat/client"
)

// execTTY is moat exec -t, which needs Linux's terminal calls here.
func execTTY(c *client.Client, id string, req *client.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "moat exec: -t is supported on Linux only")
	return exitMoatError
}
