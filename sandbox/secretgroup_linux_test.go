package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/internal/proctest"
	"github.com/moatbox/moat/policy"
)

// TestSecretCommandGroupEnds: what a secret's program starts in the
// background goes with it when it fails, and when the run that waits for
// it is interrupted, which ends the program at once rather than at its
// time bound (found: a program's children stayed on the host, and an
// interrupted run waited for the program's end). The control: a program
// that succeeds gives its value, and what it left running on its own
// (its output elsewhere, as a daemon does) stays, found as the others
// would have been.
func TestSecretCommandGroupEnds(t *testing.T) {
	dir := t.TempDir()
	failing := "moat-secret-bg-fail-" + strings.ReplaceAll(t.Name(), "/", "_")
	_, err := secretCommand(context.Background(), []string{"/bin/bash", "-c", "exec -a " + failing + " sleep 300 & exit 3"}, dir, dir, "", nil)
	if err == nil {
		t.Fatal("a program that exits 3 succeeded")
	}
	if left := proctest.Gone(func() []int { return proctest.Find(failing) }, 5*time.Second); len(left) > 0 {
		t.Errorf("the failed program's background child (pids %v) stayed", left)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	waiting := "moat-secret-bg-wait-" + strings.ReplaceAll(t.Name(), "/", "_")
	start := time.Now()
	_, err = secretCommand(ctx, []string{"/bin/bash", "-c", "exec -a " + waiting + " sleep 300"}, dir, dir, "", nil)
	if !errors.Is(err, context.Canceled) || time.Since(start) > secretCommandTimeout/2 {
		t.Errorf("interrupted: %v after %v, want context.Canceled at once", err, time.Since(start))
	}
	if left := proctest.Gone(func() []int { return proctest.Find(waiting) }, 5*time.Second); len(left) > 0 {
		t.Errorf("the interrupted program (pids %v) stayed", left)
	}

	kept := "moat-secret-bg-kept-" + strings.ReplaceAll(t.Name(), "/", "_")
	out, err := secretCommand(context.Background(), []string{"/bin/bash", "-c", "exec -a " + kept + " sleep 300 </dev/null >/dev/null 2>&1 & echo value"}, dir, dir, "", nil)
	if err != nil || out != "value\n" {
		t.Errorf("control: %q, %v", out, err)
	}
	pids := proctest.Appear(func() []int { return proctest.Find(kept) }, 5*time.Second)
	if len(pids) == 0 {
		t.Error("control: the successful program's own background process is not found")
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestSecretCommandOutputBounded: a program that prints more than a
// secret may be fails, and its stderr is kept to its bound, however the
// copy reads them (found by a tester: an embedded buffer's ReadFrom took
// a 300 MB value whole, and a 300 MB stderr line into the error); a
// program that exits with a background process holding its output says
// so; a value of several lines is withheld line by line from the error.
// The controls: a value at the bound is taken, and a short stderr line is
// quoted.
func TestSecretCommandOutputBounded(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	_, err := secretCommand(ctx, []string{"/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' A"}, dir, dir, "", nil)
	if err == nil || !strings.Contains(err.Error(), "printed more than") {
		t.Errorf("a 1 MB value: %v", err)
	}
	out, err := secretCommand(ctx, []string{"/bin/sh", "-c", "head -c " + strconv.Itoa(maxSecret) + " /dev/zero | tr '\\0' A"}, dir, dir, "", nil)
	if err != nil || len(out) != maxSecret {
		t.Errorf("control, a value at the bound: %d bytes, %v", len(out), err)
	}
	_, err = secretCommand(ctx, []string{"/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' B >&2; exit 1"}, dir, dir, "", nil)
	if err == nil || len(err.Error()) > 8<<10 {
		t.Errorf("a 1 MB stderr: an error of %d bytes", len(fmt.Sprint(err)))
	}
	_, err = secretCommand(ctx, []string{"/bin/sh", "-c", "echo short reason >&2; exit 1"}, dir, dir, "", nil)
	if err == nil || !strings.Contains(err.Error(), "short reason") {
		t.Errorf("control, a short stderr line: %v", err)
	}
	_, err = secretCommand(ctx, []string{"/bin/sh", "-c", "printf 'SECRET-l1\\nSECRET-l2\\n'; echo bad SECRET-l1 SECRET-l2 >&2; exit 1"}, dir, dir, "", nil)
	if err == nil || strings.Contains(err.Error(), "SECRET-l") || !strings.Contains(err.Error(), "bad [value withheld]") {
		t.Errorf("a value of two lines: %v", err)
	}
	_, err = secretCommand(ctx, []string{"/bin/sh", "-c", "sleep 30 & echo v"}, dir, dir, "", nil)
	if err == nil || !strings.Contains(err.Error(), "holding its output open") {
		t.Errorf("a background process holding the output: %v", err)
	}
}

// TestSecretPrintedThenFailedIsRevoked: a value the program printed
// before it failed or timed out may be a live token: it goes to the
// revoke program as a minted one does (found by a tester: it stayed
// valid, unrevoked). The control: a program that printed nothing
// revokes nothing.
func TestSecretPrintedThenFailedIsRevoked(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "revoked")
	os.WriteFile(filepath.Join(dir, "revoke.sh"), []byte("cat >> "+log+"\n"), 0o755)
	for mint, want := range map[string]string{
		"echo minted-1; exit 1": "minted-1\n",
		"exit 1":                "",
	} {
		os.Remove(log)
		os.WriteFile(filepath.Join(dir, "mint.sh"), []byte(mint+"\n"), 0o755)
		p := policy.Default()
		p.Source = filepath.Join(dir, "p.toml")
		p.Workspace.Path = t.TempDir()
		p.Network.Mode = policy.NetworkAllow
		p.Network.Allow = []string{"api.test"}
		p.Secrets = []policy.Secret{{Name: "TOKEN", Source: "command:/bin/sh mint.sh", Hosts: []string{"api.test"}, Revoke: "/bin/sh revoke.sh"}}
		if _, err := loadSecrets(context.Background(), p, dir, nil); err == nil {
			t.Fatalf("%q: the run was not refused", mint)
		}
		got, _ := os.ReadFile(log)
		if string(got) != want {
			t.Errorf("%q: revoked %q, want %q", mint, got, want)
		}
	}
}

// TestWithheldQuotedValue: a value an error quotes escaped (JSON, Go,
// percent-encoded) is withheld as the value itself is (found by a tester:
// a failed revoke's error showed a value with quotes in it JSON-escaped).
// The control: the rest of the line stays.
func TestWithheldQuotedValue(t *testing.T) {
	v := `S3cr3t/Val+ue=="x"`
	for _, line := range []string{
		`json={"t":"S3cr3t/Val+ue==\"x\""}`,
		`quoted "S3cr3t/Val+ue==\"x\""`,
		`url=S3cr3t%2FVal%2Bue%3D%3D%22x%22`,
	} {
		got := withheld("revoke failed: "+line, v)
		if strings.Contains(got, "S3cr3t") || !strings.Contains(got, "revoke failed:") || !strings.Contains(got, "[value withheld]") {
			t.Errorf("withheld(%q) = %q", line, got)
		}
	}
}
