//go:build linux

package native

import "testing"

// TestCrashHeadline: the line reported of init's crash says what
// happened, whatever the runtime printed first (a traceback's complaint,
// seen on Linux 6.1), with the signal's line. The control: output with
// no such line gives its first line.
func TestCrashHeadline(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"runtime: g 1: unexpected return pc for runtime.sigpanic called from 0x80f400\nstack: frame={sp:0x1}\npanic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]\n\ngoroutine 1 [running]:\n",
			"panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]"},
		{"SIGSEGV: segmentation violation\nPC=0x0 m=0 sigcode=1 addr=0x0\n\ngoroutine 0 gp=0x1 m=0 mp=0x2 [idle]:\n", "SIGSEGV: segmentation violation"},
		{"fatal error: unexpected signal during runtime execution\n[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]\n",
			"fatal error: unexpected signal during runtime execution [signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x0]"},
		{"something else\nand more\n", "something else"},
	} {
		if got := crashHeadline(c.in); got != c.want {
			t.Errorf("crashHeadline(%.40q) = %q, want %q", c.in, got, c.want)
		}
	}
}
