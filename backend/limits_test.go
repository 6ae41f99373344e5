package backend

import (
	"syscall"
	"testing"
	"time"
)

// TestCPUHit: SIGXCPU is the limit's from half the limit used (the summed
// rusage falls short of the kernel's exact time), SIGKILL only near the
// whole of it (any kill is a SIGKILL); a signal the command raised early,
// or one without a limit, is not. FileSizeHit needs a limit.
func TestCPUHit(t *testing.T) {
	l := Limits{CPUTime: 10 * time.Second}
	for _, c := range []struct {
		sig  syscall.Signal
		cpu  time.Duration
		want bool
	}{
		{syscall.SIGXCPU, 9980 * time.Millisecond, true},
		{syscall.SIGXCPU, 5 * time.Second, true},
		{syscall.SIGXCPU, time.Millisecond, false},
		{syscall.SIGKILL, 11 * time.Second, true},
		{syscall.SIGKILL, 6 * time.Second, false},
		{syscall.SIGTERM, 11 * time.Second, false},
	} {
		if got := l.CPUHit(c.sig, c.cpu); got != c.want {
			t.Errorf("CPUHit(%v, %v) = %v, want %v", c.sig, c.cpu, got, c.want)
		}
	}
	if (Limits{}).CPUHit(syscall.SIGXCPU, time.Hour) {
		t.Error("a SIGXCPU without a limit taken for one")
	}
	if (Limits{}).FileSizeHit(syscall.SIGXFSZ) || !(Limits{FileSize: 1}).FileSizeHit(syscall.SIGXFSZ) {
		t.Error("FileSizeHit")
	}
}
