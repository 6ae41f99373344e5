package gvisor_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/backendtest"
	"github.com/moatbox/moat/backend/gvisor"
)

// TestCheckedRunscRunsTheCheckedBytes: a runsc whose digest a trust check
// hashed (Backend.Checked) and that is swapped for another file right
// after Backend.Check passed (the window a by-path run leaves) does not
// run: the run uses a copy of the checked bytes, or, when there is no
// copy yet, is refused. runsc here is a script that notes which of the
// two ran and then runs the real runsc. The control: unswapped, the
// checked runsc runs the command, through its copy.
func TestCheckedRunscRunsTheCheckedBytes(t *testing.T) {
	real := usable(t)
	dir := t.TempDir()
	runsc := filepath.Join(dir, "runsc")
	marker := filepath.Join(dir, "ran")
	script := func(who string) []byte {
		return fmt.Appendf(nil, "#!/bin/sh\necho %s >> %s\nexec %s \"$@\"\n", who, marker, real)
	}
	sum := sha256.Sum256(script("checked"))
	digest := hex.EncodeToString(sum[:])
	put := func(who string) {
		t.Helper()
		// A new file renamed over runsc: the swap a writer of its
		// directory makes.
		tmp := runsc + ".new"
		if err := os.WriteFile(tmp, script(who), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, runsc); err != nil {
			t.Fatal(err)
		}
	}
	ran := func() string {
		b, _ := os.ReadFile(marker)
		return string(b)
	}
	swapAfterCheck := func(string) error { put("swapped"); return nil }
	run := func(check func(string) error) error {
		t.Helper()
		be := &gvisor.Backend{Runsc: runsc, Check: check, Checked: func(r string) (string, bool) {
			if r != runsc {
				t.Errorf("Checked(%q), want %q", r, runsc)
			}
			return digest, true
		}}
		ws := t.TempDir()
		os.Chown(ws, 1000, 1000)
		st, err := be.Run(context.Background(), backendtest.BaseSpec(ws, "/bin/true"), backend.Stdio{})
		if err == nil && st.ExitCode != 0 {
			err = fmt.Errorf("exit %d", st.ExitCode)
		}
		return err
	}
	t.Setenv("MOAT_STATE_DIR", t.TempDir())

	// No copy yet, and runsc swapped right after its check: refused.
	put("checked")
	if err := run(swapAfterCheck); !errors.Is(err, gvisor.ErrRunscChanged) {
		t.Errorf("runsc swapped after its check, no copy yet: %v, want ErrRunscChanged", err)
	}
	if strings.Contains(ran(), "swapped") {
		t.Errorf("the runsc swapped in after the check ran: %q", ran())
	}

	// The control: unchanged, the checked runsc runs the command.
	put("checked")
	start := time.Now()
	if err := run(nil); err != nil || ran() != "checked\n" {
		t.Fatalf("control: %v, ran %q", err, ran())
	}
	t.Logf("first run (copy made): %v", time.Since(start))

	// The copy made: runsc swapped right after its check runs the
	// checked bytes.
	put("checked")
	start = time.Now()
	if err := run(swapAfterCheck); err != nil {
		t.Errorf("runsc swapped after its check, with a copy: %v", err)
	}
	t.Logf("later run: %v", time.Since(start))
	if got := ran(); got != "checked\nchecked\n" {
		t.Errorf("runsc swapped after its check: ran %q, want the checked runsc twice", got)
	}
}
