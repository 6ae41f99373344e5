package sandbox_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/moatbox/moat/policy"
)

// TestDiskLimitBoundsInodesAndXattrs: what takes no block of a tmpfs
// (an empty file, a directory, an extended attribute) still takes the
// kernel's memory, and a tmpfs has by default as many inodes as half
// the host's RAM has pages: under a disk limit of a few MiB a command
// could make millions of empty files, or hundreds of MiB of user
// xattrs, which tmpfs counts against its inodes rather than its size.
// The limit's tmpfs has inodes in proportion to its size, so both stop
// within the limit, and the run ends with reason disk. The control: a
// few of each, well within it, succeed.
func TestDiskLimitBoundsInodesAndXattrs(t *testing.T) {
	const limit = 4 << 20
	disk := func(p *policy.Policy) {
		p.Limits.Disk = policy.Size(limit)
		p.Workspace.Mode = policy.WorkspaceReadOnly
	}
	files := func(n int) string {
		return `i=0; while [ $i -lt ` + strconv.Itoa(n) + ` ]; do : > /tmp/f$i || break; i=$((i+1)); done; echo made $i; [ $i -eq ` + strconv.Itoa(n) + ` ]`
	}
	xattrs := func(n int) string {
		return `import os, sys
open("/tmp/x", "w").close()
n = 0
try:
    for i in range(` + strconv.Itoa(n) + `):
        os.setxattr("/tmp/x", "user.a%d" % i, b"v" * 4000)
        n += 1
except OSError as e:
    print(e, file=sys.stderr)
print("set", n)
sys.exit(0 if n == ` + strconv.Itoa(n) + ` else 1)`
	}
	ws := t.TempDir()
	if r := sh(t, ws, disk, files(100)); r.err != nil || r.rep.Reason != "exit" || r.rep.ExitCode != 0 {
		t.Fatalf("control, 100 empty files: %v reason %q stdout %q stderr %q", r.err, r.rep.Reason, r.stdout, r.stderr)
	}
	r := sh(t, ws, disk, files(100000))
	if r.err != nil || r.rep.Reason != "disk" {
		t.Errorf("100000 empty files under %d bytes: %v reason %q exit %d stdout %q: want reason disk", limit, r.err, r.rep.Reason, r.rep.ExitCode, r.stdout)
	}

	r = run(t, ws, disk, "python3", "-c", xattrs(10))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if strings.Contains(r.stderr, "Operation not supported") {
		t.Skipf("no user xattrs on tmpfs on this kernel: %s", r.stderr)
	}
	if r.rep.Reason != "exit" || r.rep.ExitCode != 0 {
		t.Fatalf("control, 10 xattrs: reason %q exit %d stdout %q stderr %q", r.rep.Reason, r.rep.ExitCode, r.stdout, r.stderr)
	}
	// Twice the limit in xattrs.
	r = run(t, ws, disk, "python3", "-c", xattrs(2*limit/4000))
	if r.err != nil || r.rep.Reason != "disk" {
		t.Errorf("%d bytes of xattrs under %d: %v reason %q exit %d stdout %q stderr %q: want reason disk", 2*limit, limit, r.err, r.rep.Reason, r.rep.ExitCode, r.stdout, r.stderr)
	}
}
