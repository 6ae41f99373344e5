package sandbox

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
)

// TestBoundedTmpfsWrites: a writable bind of a directory on a tmpfs no
// larger than the disk limit is bounded by it; on a larger tmpfs or
// another filesystem it is not, and the disk limit's check lists it.
func TestBoundedTmpfsWrites(t *testing.T) {
	const shm = "/dev/shm"
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Blocks == 0 {
		t.Skipf("/dev/shm is not a size-limited tmpfs here (%v); the check needs one", err)
	}
	size := int64(st.Blocks) * st.Bsize
	spec := func(src string, limit int64) *backend.Spec {
		return &backend.Spec{
			Mounts: []backend.Mount{{Kind: backend.MountBind, Source: src, Target: "/ws"}},
			Limits: backend.Limits{DiskBytes: limit},
		}
	}
	for _, tc := range []struct {
		src       string
		limit     int64
		unbounded bool
	}{
		{shm, size, false},     // the tmpfs fits in the limit
		{shm, size - 1, true},  // larger than the limit
		{t.TempDir(), 1, true}, // another filesystem, or a larger tmpfs
		{shm, 0, true},         // no limit
	} {
		if w := unboundedWrites(spec(tc.src, tc.limit)); (len(w) > 0) != tc.unbounded {
			t.Errorf("%s with a limit of %d (tmpfs of %d): unbounded %v, want %v", tc.src, tc.limit, size, w, tc.unbounded)
		}
	}
}
