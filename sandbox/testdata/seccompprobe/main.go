// Command seccompprobe makes the system calls it is given and prints the
// errno of each, for TestDefaultProfileDeniedCalls. Its source never
// changes with the calls tried, so that it builds once: in the QEMU guest
// of scripts/vmtest.sh, where the build cache is read-only and a build
// under emulation takes minutes, vmtest.sh builds it on the host beside
// the test binaries.
//
// Each argument is one call: LABEL, the system call number and up to six
// arguments, separated by tabs. An argument is "fd" (a file the probe
// opened), "buf" (4 KiB of memory), "self" (its pid), "atcwd" (AT_FDCWD),
// "s:TEXT" (a C string), "f:SUFFIX" (the path of its file plus SUFFIX),
// "~N" (the complement of N), or numbers joined by "|".
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

var keep [][]byte

func str(s string) uintptr {
	b := append([]byte(s), 0)
	keep = append(keep, b)
	return uintptr(unsafe.Pointer(&b[0]))
}

func number(s string) uintptr {
	var v uint64
	for _, p := range strings.Split(s, "|") {
		n, err := strconv.ParseUint(p, 0, 64)
		if err != nil {
			fmt.Println("bad argument:", s)
			os.Exit(2)
		}
		v |= n
	}
	return uintptr(v)
}

func main() {
	file := os.TempDir() + "/moat-probe"
	f, err := os.Create(file)
	if err != nil {
		fmt.Println("setup:", err)
		os.Exit(2)
	}
	b := make([]byte, 4096)
	value := func(tok string) uintptr {
		switch {
		case tok == "fd":
			return f.Fd()
		case tok == "buf":
			return uintptr(unsafe.Pointer(&b[0]))
		case tok == "self":
			return uintptr(os.Getpid())
		case tok == "atcwd":
			return ^uintptr(99) // AT_FDCWD, -100
		case strings.HasPrefix(tok, "s:"):
			return str(tok[2:])
		case strings.HasPrefix(tok, "f:"):
			return str(file + tok[2:])
		case strings.HasPrefix(tok, "~"):
			return ^number(tok[1:])
		}
		return number(tok)
	}
	for _, spec := range os.Args[1:] {
		parts := strings.Split(spec, "\t")
		var x [6]uintptr
		for i, tok := range parts[2:] {
			x[i] = value(tok)
		}
		_, _, errno := syscall.Syscall6(number(parts[1]), x[0], x[1], x[2], x[3], x[4], x[5])
		fmt.Printf("%s=%d\n", parts[0], errno)
	}
	if fi, err := os.Stat(file); err == nil {
		fmt.Printf("mode=%v\n", fi.Mode())
	}
	fmt.Printf("exec=%v\n", exec.Command("/bin/true").Run())
	fmt.Println("alive=yes")
}
