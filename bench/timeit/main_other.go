//go:build !linux

// Outside Linux, timeit is the clock of bench/startup.sh; it needs Linux.

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "timeit: Linux only")
	os.Exit(1)
}
