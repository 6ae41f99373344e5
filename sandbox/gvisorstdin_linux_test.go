package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestGVisorStdinFileUntouched gives a gvisor run a host file, owned by
// the command's uid and readable by it alone, as its stdin. Handed to
// runsc as it is, the file was given to root (runsc changes the owner of
// the descriptors it is given), and the command could chmod it through
// /proc/self/fd/0. It must come out as it went in; the command still
// reads its contents (the positive control).
func TestGVisorStdinFileUntouched(t *testing.T) {
	gvisorUsable(t)
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	file := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(file, []byte("the data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := workspacePolicy(t, ws)
	p.Sandbox.Isolation, p.Harness.Builtin = policy.IsolationGVisor, []string{}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Policy: p, Args: []string{"/bin/sh", "-c", "chmod 0777 /proc/self/fd/0 2>/dev/null; cat"}},
		backend.Stdio{Stdin: f, Stdout: &out, Stderr: &errb})
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("run: %v %+v\n%s", err, rep, errb.String())
	}
	if out.String() != "the data\n" {
		t.Errorf("the command read %q from its stdin, want the file's contents", out.String())
	}
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 1000 || st.Gid != 1000 || st.Mode&0o7777 != 0o600 {
		t.Errorf("the stdin file is now %d:%d mode %o, was 1000:1000 mode 600", st.Uid, st.Gid, st.Mode&0o7777)
	}
}
