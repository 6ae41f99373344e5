package sandbox_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// TestQuarantineKeepsSparse: a direct-mode workspace (on a tmpfs, the
// daemon bounds a tenant's) whose command plants a protected path
// holding a sparse file of a huge size and no data. The quarantine, in
// the state directory on another file system, is a copy: it must cost
// the blocks the file holds, not its size, or a command would write
// past its disk limit onto the host's disk. The control: the file's
// data comes along.
func TestQuarantineKeepsSparse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount the state directory's tmpfs")
	}
	// The state directory is the tmpfs, on a file system of its own: a
	// workspace on tmpfs cannot be id-mapped before Linux 6.3, which a
	// root run needs.
	ws := t.TempDir()
	state := t.TempDir()
	if err := syscall.Mount("moat-test", state, "tmpfs", 0, "size=64m,mode=0755"); err != nil {
		t.Skip("cannot mount a tmpfs:", err)
	}
	t.Cleanup(func() { syscall.Unmount(state, syscall.MNT_DETACH) })
	var a, b syscall.Statfs_t
	if syscall.Statfs(ws, &a) != nil || syscall.Statfs(state, &b) != nil || a.Fsid == b.Fsid {
		t.Skip("the state directory is on the workspace's file system: the quarantine is a rename")
	}
	t.Setenv("MOAT_STATE_DIR", state)
	const size = 256 << 20
	r := sh(t, ws, nil, `mkdir .vscode && echo data > .vscode/big && truncate -s 268435456 .vscode/big && echo PLANTED`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "PLANTED") {
		t.Fatalf("the command could not plant: %s%s", r.stdout, r.stderr)
	}
	if !slices.Contains(r.rep.ProtectedCreated, ".vscode") {
		t.Fatalf("protected_created %q, want .vscode", r.rep.ProtectedCreated)
	}
	found := false
	filepath.WalkDir(filepath.Join(state, "quarantine"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "big" {
			return nil
		}
		found = true
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != size || st.Blocks*512 > 8<<20 {
			t.Errorf("quarantined copy: size %d, %d bytes allocated, want %d and a few blocks", st.Size, st.Blocks*512, size)
		}
		if b := make([]byte, 5); func() bool { f, _ := os.Open(p); defer f.Close(); n, _ := f.Read(b); return n != 5 }() || string(b) != "data\n" {
			t.Errorf("quarantined copy begins %q, want the file's data", b)
		}
		return nil
	})
	if !found {
		t.Fatalf("no quarantined copy of .vscode/big under %s", state)
	}
}

// TestDiskLimitMergeKeepsSparse: an overlay workspace under a disk limit
// writes to the limit's tmpfs, and init merges the run's changes into the
// change set on the host's disk after the run. A sparse file of a huge
// size and one line of data must cost the change set that line's
// blocks, not its size: the limit holds on the host too. The control:
// the data comes along.
func TestDiskLimitMergeKeepsSparse(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	const size = 256 << 20
	r := sh(t, ws, func(p *policy.Policy) {
		p.Limits.Disk = policy.Size(16 << 20)
		p.Workspace.Mode = policy.WorkspaceOverlay
	}, `echo data > big && truncate -s 268435456 big && echo WROTE`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("the command could not write: %s%s", r.stdout, r.stderr)
	}
	cs := onlyChangeSet(t)
	p := filepath.Join(cs.UpperDir(), "big")
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 8<<20 {
		t.Errorf("the change set's big: size %d, %d bytes allocated, want %d and a few blocks", st.Size, st.Blocks*512, size)
	}
	b := make([]byte, 5)
	if f, err := os.Open(p); err == nil {
		f.Read(b)
		f.Close()
	}
	if string(b) != "data\n" {
		t.Errorf("the change set's big begins %q, want its data", b)
	}
}

// TestDiskLimitMergeTakesClosedFiles: a file and a directory the command
// left without permissions (chmod 000) under a disk limit's overlay come
// into the change set with their modes: init, their owner without the
// capabilities to pass over modes, could not read them, and the run
// failed with its changes lost (found by a tester). The control: the
// readable file beside them comes along.
func TestDiskLimitMergeTakesClosedFiles(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) {
		p.Limits.Disk = policy.Size(16 << 20)
		p.Workspace.Mode = policy.WorkspaceOverlay
	}, `echo open > k; echo closed > x; chmod 000 x; mkdir d; echo in > d/f; chmod 000 d; echo WROTE`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "WROTE") || r.rep.ChangeSet == nil {
		t.Fatalf("the run: %v %s%s", r.err, r.stdout, r.stderr)
	}
	store, err := workspace.DefaultStore()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := store.Open(r.rep.ChangeSet.ID)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"x": 0, "d": os.ModeDir} {
		if fi, err := os.Lstat(filepath.Join(cs.UpperDir(), name)); err != nil || fi.Mode()&(os.ModeDir|os.ModePerm) != want {
			t.Errorf("the change set's %s: %v %v, want mode %v", name, fi, err, want)
		}
	}
	os.Chmod(filepath.Join(cs.UpperDir(), "x"), 0o600)
	os.Chmod(filepath.Join(cs.UpperDir(), "d"), 0o700)
	for name, want := range map[string]string{"k": "open\n", "x": "closed\n", "d/f": "in\n"} {
		if b, err := os.ReadFile(filepath.Join(cs.UpperDir(), name)); err != nil || string(b) != want {
			t.Errorf("the change set's %s: %q %v, want %q", name, b, err, want)
		}
	}
}

// TestDiskLimitMergeIntoClosedDir: a second run of a session's change
// set writes into a directory the first left at mode 0555 (as a Go
// module cache is): the merge opens the layer's directory for its
// entries and sets its mode back after (init, without the capabilities
// to pass over modes, failed on it, and the run's changes were lost;
// found by a reviewer). The first run is the control.
func TestDiskLimitMergeIntoClosedDir(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	runIn := func(script string) *sandbox.Report {
		p := policy.Default()
		p.Workspace.Path = ws
		p.Workspace.Mode = policy.WorkspaceOverlay
		p.Limits.Disk = policy.Size(16 << 20)
		if err := p.Resolve(ws, ""); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Session: "closed",
			Args: []string{"/bin/sh", "-c", script}}, backend.Stdio{Stdout: &out, Stderr: &errb})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("%s: %v %+v %s%s", script, err, rep, out.String(), errb.String())
		}
		return rep
	}
	runIn("mkdir d && echo one > d/a && chmod 555 d")
	rep := runIn("chmod 755 d && echo two > d/b && chmod 555 d")
	store, err := workspace.DefaultStore()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := store.Open(rep.ChangeSet.ID)
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(cs.UpperDir(), "d")
	defer os.Chmod(d, 0o755) // for the test's clean-up, as an ordinary user
	if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o555 {
		t.Errorf("d: %v %v, want mode 0555", fi, err)
	}
	for name, want := range map[string]string{"a": "one\n", "b": "two\n"} {
		if b, err := os.ReadFile(filepath.Join(d, name)); err != nil || string(b) != want {
			t.Errorf("d/%s: %q %v", name, b, err)
		}
	}
}

// onlyChangeSet is the one change set of the state directory the test
// set (MOAT_STATE_DIR).
func onlyChangeSet(t *testing.T) *workspace.ChangeSet {
	t.Helper()
	store, err := workspace.DefaultStore()
	if err != nil {
		t.Fatal(err)
	}
	sets, err := store.List()
	if err != nil || len(sets) != 1 {
		t.Fatalf("change sets %v, %v", sets, err)
	}
	cs, err := store.Open(sets[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestDiskLimitMergeKeepsHardLinks: the names of one file (hard links)
// under a disk limit's overlay come into the change set as names of one
// file too: copied one by one, 3 MiB and 200 links under a 4 MiB limit
// became 600 MB on the host's disk (found by a tester). The control: each
// name is there, with the data.
func TestDiskLimitMergeKeepsHardLinks(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) {
		p.Limits.Disk = policy.Size(4 << 20)
		p.Workspace.Mode = policy.WorkspaceOverlay
	}, `head -c 3145728 /dev/zero | tr '\0' x > f0 && n=0 && while [ $n -lt 200 ] && ln f0 l$n; do n=$((n+1)); done; echo "links: $n"`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "links: 200") {
		t.Fatalf("the command could not make the links: %s%s", r.stdout, r.stderr)
	}
	cs := onlyChangeSet(t)
	var first syscall.Stat_t
	if err := syscall.Stat(filepath.Join(cs.UpperDir(), "f0"), &first); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"l0", "l99", "l199"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(cs.UpperDir(), name), &st); err != nil || st.Size != 3<<20 {
			t.Errorf("%s: %v, size %d", name, err, st.Size)
		} else if st.Ino != first.Ino {
			t.Errorf("%s is a copy, not a name of f0", name)
		}
	}
	if first.Nlink != 201 {
		t.Errorf("f0 has %d names in the change set, want 201", first.Nlink)
	}
}
