package native

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/fsid"
)

// The trees a user named are opened with its rights, all on one thread:
// what it cannot reach is skipped when optional and refused as missing
// otherwise; what it can reach is opened.
func TestOpenTreesAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const uid, gid = 42431, 42432
	base := t.TempDir()
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(base), 0o755)
	open := filepath.Join(base, "open")
	closed := filepath.Join(base, "closed")
	for _, d := range []string{open, filepath.Join(closed, "in")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(open, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	calls := 0
	doAs = func(u, g int, groups []int, fn func()) error { calls++; return fsid.Do(u, g, groups, fn) }
	defer func() { doAs = fsid.Do }()
	bind := func(src string, optional bool) backend.Mount {
		return backend.Mount{Kind: backend.MountBind, Source: src, Target: src, ReadOnly: true, Optional: optional, OpenUID: uid, OpenGID: gid}
	}
	spec := &backend.Spec{Mounts: []backend.Mount{
		bind(open, false),
		bind(filepath.Join(closed, "in"), true),                                   // EACCES
		bind(filepath.Join(file, "below"), true),                                  // ENOTDIR
		bind(filepath.Join(base, "missing"), true),                                // ENOENT
		{Kind: backend.MountBind, Source: closed, Target: closed, ReadOnly: true}, // root's own
	}}
	trees, _, err := openTrees(spec)
	if err != nil {
		t.Fatalf("optional unreachable mounts: %v", err)
	}
	for _, f := range trees {
		f.Close()
	}
	// The optional mounts skipped are left out of the Spec, so that
	// nothing looks for them again; the trees follow the mounts left.
	if len(trees) != 2 || trees["0"] == nil || trees["1"] == nil || len(spec.Mounts) != 2 || spec.Mounts[1].Source != closed {
		t.Errorf("trees %v, mounts %+v, want 0 (reachable) and 1 (root's)", trees, spec.Mounts)
	}
	if calls != 1 {
		t.Errorf("%d threads of the user's identity for one identity's mounts, want 1", calls)
	}
	// Not optional: refused as missing, naming the path given.
	for _, src := range []string{filepath.Join(closed, "in"), filepath.Join(file, "below"), filepath.Join(base, "missing")} {
		spec := &backend.Spec{Mounts: []backend.Mount{bind(open, false), bind(src, false)}}
		trees, _, err := openTrees(spec)
		var ie *backend.InitError
		if !errors.As(err, &ie) || ie.Errno != int(unix.ENOENT) {
			t.Errorf("%s: %v, want a missing path", src, err)
		}
		if trees != nil {
			t.Errorf("%s: trees returned with an error", src)
		}
	}
}
