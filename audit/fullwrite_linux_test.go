package audit

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestWriteFailureKeepsChain: a record the file has no room for (here the
// file-size limit; a full disk alike) is not left cut short at the end:
// the stream verifies, the error stays (every later Write and Close
// return it), and the next Writer continues the chain. The control: the
// same record is written once there is room.
func TestWriteFailureKeepsChain(t *testing.T) {
	p := writeChain(t, 3)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	rec := Decision{Type: TypeDecision, Command: []string{"echo", strings.Repeat("x", 500)}, Verdict: "allow"}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(fi.Size()) + 100
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	werr := w.Write(rec)
	syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
	if !errors.Is(werr, syscall.EFBIG) {
		t.Fatalf("Write past the file-size limit = %v, want EFBIG", werr)
	}
	if err := w.Write(rec); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("the next Write = %v, want the first error", err)
	}
	if err := w.Close(); !errors.Is(err, syscall.EFBIG) {
		t.Errorf("Close = %v, want the first error", err)
	}
	if n, _, err := verifyFile(t, p); err != nil || n != 3 {
		t.Fatalf("after the failed write: Verify = %d, %v; want 3 records, chain intact", n, err)
	}
	w, err = Open(p)
	if err != nil {
		t.Fatalf("open after the failed write: %v", err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _, err := verifyFile(t, p); err != nil || n != 4 {
		t.Errorf("Verify = %d, %v; want 4 records", n, err)
	}
}
