package seccomp

import "testing"

// TestFloorNames: the calls the floor refuses under any custom profile
// (a denial's hint must not send the user to --seccomp FILE for them);
// the control: one only the default profile refuses.
func TestFloorNames(t *testing.T) {
	for _, n := range []string{"unshare", "ptrace", "io_uring_setup", "keyctl", "add_key", "request_key"} {
		if !FloorNames(n) {
			t.Errorf("FloorNames(%s) = false", n)
		}
	}
	if FloorNames("mount") || FloorNames("bpf") {
		t.Error("control: the floor names mount or bpf")
	}
}
