//go:build linux

package native_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestRootsGroupsStayOutside: moat run by root in a shell whose
// supplementary groups include root's own group (0) and another: the
// command, an unprivileged host user, must not keep them. It tries to read
// files that only those groups may read, through a plain (not id-mapped)
// bind, and must be refused.
func TestRootsGroupsStayOutside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an ordinary caller's groups stay with the command (the kernel denies it dropping them); root's must not")
	}
	const grp = 4242
	old, err := syscall.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgroups([]int{0, grp}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setgroups(old) })
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	for name, gid := range map[string]int{"g0": 0, "g4242": grp} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte("secret\n"), 0o040); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, 0, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o040); err != nil {
			t.Fatal(err)
		}
	}
	probe := `grep '^Groups:' /proc/self/status
cat /opt/moat-grp/g0 2>/dev/null && echo "read g0"
cat /opt/moat-grp/g4242 2>/dev/null && echo "read g4242"
echo done`
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		ws := t.TempDir()
		s := spec(t, ws, "/bin/sh", "-c", probe)
		s.Mounts = append(s.Mounts, backend.Mount{Kind: backend.MountBind, Source: dir, Target: "/opt/moat-grp", ReadOnly: true})
		var out, errb bytes.Buffer
		st, err := b.Run(context.Background(), s, backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || st.ExitCode != 0 {
			t.Fatalf("%+v: exit %v, %v: %s", *b, st, err, errb.String())
		}
		if got, want := strings.Join(strings.Fields(out.String()), " "), "Groups: done"; got != want {
			t.Errorf("%+v: %q, want %q (no supplementary group, no file read)", *b, got, want)
		}
	}
}
