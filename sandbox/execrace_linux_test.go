package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// argvRacerName is the name this test binary runs under as argvRacer.
const argvRacerName = "argv-racer"

// argvRacer execs uname with an argv in its own memory, -s or -n, up to
// tries times while each exec is refused. With mode "flip" another
// thread rewrites the argument between -s and -n all the while: the
// exec check may read -s, which the rules allow, and the kernel then
// copy -n, which they deny. "still" execs uname -s, "denied" uname -n,
// without flipping. It returns 13 when every try was refused.
func argvRacer(args []string) int {
	if len(args) != 2 {
		return 2
	}
	if args[0] == "fdscript" {
		// The script args[1] run from a descriptor (fexecve): the kernel
		// names it /dev/fd/N in the interpreter's argv.
		fd, err := syscall.Open(args[1], syscall.O_RDONLY, 0)
		if err != nil {
			return 2
		}
		argv0, arg1, empty := []byte("script\x00"), []byte("word\x00"), []byte("\x00")
		argv := []uintptr{uintptr(unsafe.Pointer(&argv0[0])), uintptr(unsafe.Pointer(&arg1[0])), 0}
		envv := []uintptr{0}
		syscall.Syscall6(unix.SYS_EXECVEAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])), unix.AT_EMPTY_PATH, 0)
		return 13
	}
	tries, _ := strconv.Atoi(args[1])
	prog := make([]byte, 16) // 8-aligned, as Go allocates 16 bytes
	copy(prog, "/usr/bin/uname\x00")
	arg0 := []byte("uname\x00")
	arg1 := []byte("-s\x00\x00") // four bytes, flipped as one word
	switch args[0] {
	case "denied":
		arg1[1] = 'n'
	case "flippath":
		// true -n, from a path flipped to uname's: the check may read
		// the path of true, the kernel then open uname.
		copy(prog, "/usr/bin//true\x00")
		copy(arg0, "true\x00")
		arg1[1] = 'n'
	}
	argv := []uintptr{uintptr(unsafe.Pointer(&arg0[0])), uintptr(unsafe.Pointer(&arg1[0])), 0}
	envv := []uintptr{0}
	var stop atomic.Bool
	if args[0] == "flippath" {
		go func() {
			runtime.LockOSThread()
			p := (*atomic.Uint64)(unsafe.Pointer(&prog[8])) // "//true\x00" or "/uname\x00", at an aligned address
			tr, un := p.Load(), uint64(0)
			for i, b := range []byte("/uname\x00\x00") {
				un |= uint64(b) << (8 * i)
			}
			for !stop.Load() {
				p.Store(un)
				p.Store(tr)
			}
		}()
	}
	if args[0] == "flip" {
		go func() {
			runtime.LockOSThread()
			p := (*atomic.Uint32)(unsafe.Pointer(&arg1[0])) // "-s\x00" and one byte more
			s, n := p.Load(), p.Load()&^0xff00|uint32('n')<<8
			for !stop.Load() {
				p.Store(n)
				p.Store(s)
			}
		}()
	}
	for range tries {
		syscall.Syscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(&prog[0])), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	}
	stop.Store(true)
	runtime.KeepAlive(arg0)
	runtime.KeepAlive(arg1)
	return 13
}

// TestExecCheckArgvRace: a threaded program rewrites its exec's argv
// between the check's read and the kernel's copy, flipping an allowed
// uname -s into the denied uname -n, over enough runs to have won the
// race many times before the check verified the new image's argv. The
// denied command line must never run (the node name is never printed:
// a run whose image was started with another argv than the one decided
// is killed). Positive controls: the same program execs uname -s when
// nothing flips, and is refused uname -n; a script, whose argv the
// kernel rewrites for its interpreter, runs from its path and from a
// descriptor.
func TestExecCheckArgvRace(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, argvRacerName), b, 0o755); err != nil {
		t.Fatal(err)
	}
	const runs = 40
	if err := os.WriteFile(filepath.Join(ws, "s.sh"), []byte("#!/bin/sh\necho \"$0 $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rep, out, stderr := runScript(t, ws, execRules, `./argv-racer still 1; echo "still: $?"
./argv-racer denied 1; echo "denied: $?"
./s.sh word; echo "script: $?"
./argv-racer fdscript ./s.sh | sed 's/[0-9]/N/g'; echo "fdscript: $?"
for i in $(seq `+strconv.Itoa(runs)+`); do ./argv-racer flip 1000; echo "flip: $?"; ./argv-racer flippath 1000; echo "flip: $?"; done
`)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	controls := "Linux\nstill: 0\ndenied: 13\n./s.sh word\nscript: 0\n/dev/fd/N word\nfdscript: 0"
	if len(lines) < 8 || strings.Join(lines[:7], "\n") != controls {
		t.Fatalf("positive controls: output:\n%s\nwant first:\n%s\nstderr: %s", out, controls, stderr)
	}
	lines = lines[7:]
	var ran, started, killed int
	for _, l := range lines {
		switch {
		case l == "Linux":
			started++
		case l == "flip: 137":
			killed++
		case strings.HasPrefix(l, "flip: "):
		default:
			ran++ // the node name: uname -n ran
		}
	}
	t.Logf("%d runs: %d started uname -s, %d killed for a changed argv, %d ran uname -n; denials %+v", runs, started, killed, ran, rep.Denials)
	if ran > 0 {
		t.Errorf("the denied command line ran %d times in %d runs:\n%s", ran, runs, out)
	}
	if started == 0 {
		t.Errorf("no run started the allowed uname -s:\n%s", out)
	}
}

// BenchmarkCheckedExec measures what an exec inside the sandbox costs
// under the exec check (execRules), each checked exec being verified in
// its new image: a script starts /bin/true execsPerRun times; the
// result is per exec, the sandbox's start shared among them.
func BenchmarkCheckedExec(b *testing.B) {
	const execsPerRun = 500
	ws := b.TempDir()
	script := "i=0; while [ $i -lt " + strconv.Itoa(execsPerRun) + " ]; do /bin/true; i=$((i+1)); done\n"
	if err := os.WriteFile(filepath.Join(ws, "run.sh"), []byte(script), 0o644); err != nil {
		b.Fatal(err)
	}
	p, err := policy.Parse("rules.toml", []byte(execRules))
	if err != nil {
		b.Fatal(err)
	}
	p.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		b.Fatal(err)
	}
	caller := sandbox.CurrentCaller()
	caller.Cwd = ws
	b.ResetTimer()
	for range b.N {
		var out, errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Caller: &caller,
			Args: []string{"sh", "run.sh"}}, backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || rep.ExitCode != 0 {
			b.Fatalf("run: %v %+v\n%s", err, rep, errb.String())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*execsPerRun), "ns/exec")
}
