//go:build !linux

// Outside Linux, syscallbench is the workload of bench/syscalls.sh; it needs Linux.

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "syscallbench: Linux only")
	os.Exit(1)
}
