package seccomp

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// cArgv lays argv out as execve takes it: NUL-terminated strings and a
// NULL-terminated array of pointers to them, in this process's memory.
func cArgv(argv []string) (uint64, func()) {
	strs := make([][]byte, len(argv))
	ptrs := make([]uintptr, len(argv)+1)
	for i, a := range argv {
		strs[i] = append([]byte(a), 0)
		ptrs[i] = uintptr(unsafe.Pointer(&strs[i][0]))
	}
	return uint64(uintptr(unsafe.Pointer(&ptrs[0]))), func() { runtime.KeepAlive(strs); runtime.KeepAlive(ptrs) }
}

// TestReadExecWhole: an argv as long as execve accepts is read whole (a
// rule about its last word sees it); one past the kernel's bounds is
// marked Truncated, so the checker knows it saw a prefix.
func TestReadExecWhole(t *testing.T) {
	long := []string{"git"}
	for range 200000 {
		long = append(long, "-c", "a.b=c")
	}
	long = append(long, "push", strings.Repeat("w", 100<<10))
	at, keep := cArgv(long)
	c, err := readExec(os.Getpid(), 0, at)
	keep()
	if err != nil {
		t.Fatal(err)
	}
	if c.Truncated || len(c.Argv) != len(long) || c.Argv[len(c.Argv)-2] != "push" || c.Argv[len(c.Argv)-1] != long[len(long)-1] {
		t.Fatalf("read %d words (truncated %v), want all %d", len(c.Argv), c.Truncated, len(long))
	}

	// A word longer than MAX_ARG_STRLEN: the kernel refuses it; the
	// supervisor says it saw a prefix.
	at, keep = cArgv([]string{"x", strings.Repeat("w", 200<<10), "push"})
	c, err = readExec(os.Getpid(), 0, at)
	keep()
	if err != nil || !c.Truncated {
		t.Errorf("a 200 KiB word: truncated %v, %v; want truncated", c.Truncated, err)
	}
	// More than 6 MiB in all.
	big := []string{"git"}
	for range 60 {
		big = append(big, strings.Repeat("w", 120<<10))
	}
	at, keep = cArgv(append(big, "push"))
	c, err = readExec(os.Getpid(), 0, at)
	keep()
	if err != nil || !c.Truncated || len(c.Argv) >= len(big) {
		t.Errorf("7 MiB of argv: %d words, truncated %v, %v; want a truncated prefix", len(c.Argv), c.Truncated, err)
	}
}

// TestReadPreload: the words of an environment that load code into a
// program (PreloadVars, with a value: separators alone are one, since the
// loader reads LD_LIBRARY_PATH's empty entry as the working directory)
// are read whole, whatever comes before them; others, and those with an
// empty value, are not (the control: an environment of neither gives
// none).
func TestReadPreload(t *testing.T) {
	env := []string{"PATH=/usr/bin", "LD_LIBRARY_PATH=/x", "LD_PRELOAD=", "LD_PRELOAD=/tmp/" + strings.Repeat("p", 5000) + ".so",
		"LD_AUDITX=1", "LD_AUDIT=/a.so", "L", "", "LD_LIBRARY_PATH=:", "LD_LIBRARY_PATHX=/y", "GCONV_PATH=/g", "LD_BIND_NOW=1"}
	at, keep := cArgv(env)
	got, err := readPreload(os.Getpid(), at)
	keep()
	want := []string{"LD_LIBRARY_PATH=/x", env[3], "LD_AUDIT=/a.so", "LD_LIBRARY_PATH=:", "GCONV_PATH=/g"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("preload words: %q %v, want %q", got, err, want)
	}
	at, keep = cArgv([]string{"PATH=/usr/bin", "HOME=/h"})
	got, err = readPreload(os.Getpid(), at)
	keep()
	if err != nil || len(got) != 0 {
		t.Errorf("control: %q %v", got, err)
	}
	if got, err := readPreload(os.Getpid(), 0); err != nil || got != nil {
		t.Errorf("no environment: %q %v", got, err)
	}
}
