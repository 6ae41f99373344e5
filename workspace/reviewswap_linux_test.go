package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReviewNeverFollowsASwappedLink: a command still running in a
// change set swaps a file it wrote for a link (and a FIFO) between the
// review's walk and its read, over and over; the diff never shows what
// the link leads to, and never hangs. Before, it read, as root, whatever
// the link named (/etc/shadow, in the diff an agent asked for; found by a
// tester). The control: the link's target is readable by the test.
func TestReviewNeverFollowsASwappedLink(t *testing.T) {
	const secret = "TOPSECRET-review-swap"
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(outside); err != nil || !strings.Contains(string(b), secret) {
		t.Fatalf("control: %q %v", b, err)
	}
	_, c := newSet(t, map[string]string{"keep": "k\n"})
	up := c.UpperDir()
	tree(t, up, map[string]string{"leak": "plain\n"})
	if err := os.Symlink(outside, filepath.Join(up, "leak.lnk")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(up, "leak.fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		a, b, f := filepath.Join(up, "leak"), filepath.Join(up, "leak.lnk"), filepath.Join(up, "leak.fifo")
		for i := 0; !stop.Load(); i++ {
			other := b
			if i%3 == 2 {
				other = f
			}
			unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, other, unix.RENAME_EXCHANGE)
		}
	}()
	deadline := time.Now().Add(3 * time.Second)
	tries, errs := 0, 0
	for time.Now().Before(deadline) {
		tries++
		var out bytes.Buffer
		finished := make(chan error, 1)
		go func() {
			changes, err := c.Changes()
			if err == nil {
				err = c.WriteDiff(&out, changes, DiffOptions{Format: Unified})
			}
			finished <- err
		}()
		var err error
		select {
		case err = <-finished:
		case <-time.After(10 * time.Second):
			stop.Store(true)
			t.Fatal("the review hangs")
		}
		if err != nil {
			errs++
			continue
		}
		if strings.Contains(out.String(), secret) {
			stop.Store(true)
			<-done
			t.Fatalf("try %d: the diff shows what the swapped link leads to:\n%s", tries, out.String())
		}
	}
	stop.Store(true)
	<-done
	t.Logf("%d reviews, %d refused as changed", tries, errs)
}
