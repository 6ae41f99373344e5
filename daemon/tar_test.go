package daemon

import (
	"archive/tar"
	"path"
	"strings"
	"testing"

	"github.com/moatbox/moat/workspace"
)

// FuzzCheckTarEntry: an entry the check accepts names a clean path
// beneath the workspace root, no protected path, and a link in it stays
// in the workspace, whatever the header says.
func FuzzCheckTarEntry(f *testing.F) {
	for _, seed := range []struct {
		name, link string
		typ        byte
		mode       int64
	}{
		{"a/b", "", tar.TypeReg, 0o644}, {"./", "", tar.TypeDir, 0o755}, {"../x", "", tar.TypeReg, 0o644},
		{"l", "../../etc", tar.TypeSymlink, 0o777}, {"d/l", "../f", tar.TypeSymlink, 0o777},
		{".git/hooks/x", "", tar.TypeReg, 0o755}, {"s", "", tar.TypeReg, 0o4755}, {"/abs", "", tar.TypeDir, 0o755},
		{"a//./b/", "", tar.TypeDir, 0o100755}, {"dev", "", tar.TypeChar, 0o600},
		{".//x", "", tar.TypeReg, 0o644}, {".///", "", tar.TypeDir, 0o755}, {"././/a/./", "", tar.TypeDir, 0o755},
	} {
		f.Add(seed.name, seed.link, seed.typ, seed.mode, "sub")
		f.Add(seed.name, seed.link, seed.typ, seed.mode, ".")
	}
	s := &Session{protect: workspace.HostConfig()}
	f.Fuzz(func(t *testing.T, name, link string, typ byte, mode int64, dir string) {
		dir, err := cleanRel(dir)
		if err != nil {
			return
		}
		e, err := s.checkTarEntry(dir, &tar.Header{Name: name, Linkname: link, Typeflag: typ, Mode: mode})
		if err != nil || e == nil {
			return
		}
		if e.rel != path.Clean(e.rel) || strings.HasPrefix(e.rel, "/") || e.rel == ".." || strings.HasPrefix(e.rel, "../") || e.rel == "." {
			t.Fatalf("%q in %q accepted as %q", name, dir, e.rel)
		}
		if s.protected(e.rel) {
			t.Fatalf("%q accepted as protected %q", name, e.rel)
		}
		if e.mode&^0o777 != 0 || (e.typ != tar.TypeReg && e.typ != tar.TypeDir && e.typ != tar.TypeSymlink) {
			t.Fatalf("%q accepted with mode %o type %q", name, e.mode, e.typ)
		}
		if e.typ == tar.TypeSymlink {
			if tgt := path.Join(path.Dir(e.rel), e.target); strings.HasPrefix(e.target, "/") || tgt == ".." || strings.HasPrefix(tgt, "../") {
				t.Fatalf("link %q -> %q accepted", e.rel, e.target)
			}
		}
	})
}
