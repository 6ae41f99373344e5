//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "vmtest: the guest init runs on Linux only")
	os.Exit(2)
}
