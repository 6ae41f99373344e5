//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestChangesClassification(t *testing.T) {
	lower := map[string]string{
		"same.txt":        "same\n",
		"mod.txt":         "one\ntwo\n",
		"del.txt":         "gone\n",
		"run.sh":          "#!/bin/sh\n",
		"link":            "-> same.txt",
		"f2l":             "was a file\n",
		"d2f/x":           "x\n",
		"olddir/a":        "a\n",
		"olddir/sub/b":    "b\n",
		"opq/keep":        "keep\n",
		"opq/drop":        "drop\n",
		"img.bin":         "\x00\x01\x02",
		"touched.txt":     "copied up, unchanged\n",
		"adir/":           "",
		"node_modules/x/": "",
	}
	tests := []struct {
		name  string
		upper func(t *testing.T, up string)
		want  []string
	}{
		{"empty upper", func(t *testing.T, up string) {}, nil},
		{"added file, dir, symlink, binary", func(t *testing.T, up string) {
			tree(t, up, map[string]string{"new.txt": "new\n", "nd/inner.txt": "i\n", "nl": "-> same.txt", "b.bin": "\xff\xfe"})
		}, []string{"added file b.bin binary", "added dir nd", "added file nd/inner.txt", "added file new.txt", "added symlink nl"}},
		{"modified, mode, retarget, unchanged copy-up", func(t *testing.T, up string) {
			tree(t, up, map[string]string{"mod.txt": "one\n2\n", "run.sh#755": "#!/bin/sh\n", "link": "-> mod.txt",
				"touched.txt": "copied up, unchanged\n", "img.bin": "\x00\x01\x03"})
		}, []string{"modified file img.bin binary", "modified symlink link", "modified file mod.txt", "mode file run.sh"}},
		{"whiteouts", func(t *testing.T, up string) {
			whiteout(t, filepath.Join(up, "del.txt"))
			whiteout(t, filepath.Join(up, "olddir"))
			whiteout(t, filepath.Join(up, "never-existed"))
		}, []string{"deleted file del.txt", "deleted dir olddir count=2"}},
		{"opaque directory", func(t *testing.T, up string) {
			tree(t, up, map[string]string{"opq/keep": "keep\n", "opq/new": "n\n"})
			opaque(t, filepath.Join(up, "opq"))
		}, []string{"replaced dir opq", "deleted file opq/drop", "added file opq/new"}},
		{"type changes", func(t *testing.T, up string) {
			tree(t, up, map[string]string{"f2l": "-> same.txt", "d2f": "now a file\n"})
		}, []string{"type file d2f", "type symlink f2l"}},
		{"directory mode", func(t *testing.T, up string) {
			tree(t, up, map[string]string{"adir/#700": ""})
			os.Chmod(filepath.Join(up, "adir"), 0o700)
		}, []string{"mode dir adir"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := newSet(t, lower)
			tt.upper(t, c.UpperDir())
			changes, err := c.Changes()
			if err != nil {
				t.Fatal(err)
			}
			if got := summarize(changes); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("changes:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFilter(t *testing.T) {
	changes := []Change{
		{Path: "a.log", Kind: Added, Type: File},
		{Path: "node_modules", Kind: Added, Type: Dir},
		{Path: "node_modules/x", Kind: Added, Type: Dir},
		{Path: "node_modules/x/i.js", Kind: Added, Type: File},
		{Path: "node_modules/y.js", Kind: Added, Type: File},
		{Path: "src/__pycache__/m.pyc", Kind: Added, Type: File},
		{Path: "src/m.py", Kind: Modified, Type: File},
		{Path: "build", Kind: Deleted, Type: Dir, Count: 7},
		{Path: "docs/build", Kind: Added, Type: File},
	}
	got := summarize(Filter{Exclude: []string{"*.log", "/build/"}}.Select(changes))
	want := []string{"added dir node_modules count=2", "modified dir src/__pycache__ count=1", "modified file src/m.py", "added file docs/build"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default collapse:\n got %q\nwant %q", got, want)
	}
	if n := len(Filter{Collapse: []string{}}.Select(changes)); n != len(changes) {
		t.Errorf("Collapse: []string{} kept %d of %d changes", n, len(changes))
	}
}

func TestIsBinary(t *testing.T) {
	for in, want := range map[string]bool{
		"plain\n": false, "h\u00e9llo": false, "nul\x00": true, "\xff\xfe": true, "": false,
	} {
		if got := isBinary([]byte(in), false); got != want {
			t.Errorf("isBinary(%q) = %v", in, got)
		}
	}
	// A multi-byte rune cut by the end of a truncated sample is not binary.
	if isBinary([]byte(strings.Repeat("a", 10)+"\u00e9"[:1]), true) {
		t.Error("truncated rune counted as binary")
	}
}

// A workspace symlink that the command replaced with a directory is not
// followed: what it leads to (outside the workspace, where the command
// could not read) is neither compared, nor listed as deleted, nor shown
// in the diff, and Apply replaces the link with the directory. The
// workspace's real directory "plain" is the control: its old content is
// shown.
func TestChangesNeverFollowWorkspaceSymlinks(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(root, "secret")
	tree(t, outside, map[string]string{"key": "TOPSECRET outside\n", "other": "TOPSECRET other\n"})
	tree(t, filepath.Join(root, "ws"), map[string]string{"plain/key": "TOPSECRET plain\n", "abs": "-> " + outside, "rel": "-> ../secret"})
	c, err := (&Store{Dir: filepath.Join(root, "state")}).Create(filepath.Join(root, "ws"), "")
	if err != nil {
		t.Fatal(err)
	}
	up := c.UpperDir()
	tree(t, up, map[string]string{"abs/key": "mine\n", "rel/": "", "plain/key": "mine\n"})
	opaque(t, filepath.Join(up, "rel"))

	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"type dir abs", "added file abs/key", "modified file plain/key", "type dir rel"}
	if got := summarize(changes); !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n got %q\nwant %q", got, want)
	}
	diff := render(t, c, Unified)
	if !strings.Contains(diff, "-TOPSECRET plain") {
		t.Errorf("the control's old content is not in the diff:\n%s", diff)
	}
	if strings.Contains(diff, "outside") || strings.Contains(diff, "other") {
		t.Errorf("the diff shows what a workspace symlink leads to:\n%s", diff)
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"ws/abs/key": "mine\n", "ws/plain/key": "mine\n",
		"secret/key": "TOPSECRET outside\n", "secret/other": "TOPSECRET other\n",
	} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(c.Workspace()), p))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", p, b, err, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(c.Workspace(), "rel")); err != nil || !fi.IsDir() {
		t.Errorf("rel after apply: %v, %v; want a directory", fi, err)
	}
}

// TestDiffSaysWhatItExcluded: a review that excludes paths says how many
// changes it left out, and how many of them carry a notice (here a link
// out of the workspace under an excluded node_modules), since apply takes
// them all the same (found by a tester: `--exclude '*'` printed "0 files
// changed" and apply then wrote everything). Without an exclusion no such
// line is written (the positive control), and a patch, which git apply
// reads, never carries it.
func TestDiffSaysWhatItExcluded(t *testing.T) {
	_, c := newSet(t, map[string]string{"keep": "k\n"})
	tree(t, c.UpperDir(), map[string]string{"a.txt": "a\n", "node_modules/.bin/tool": "-> /etc/passwd", "src/m.go": "m\n"})
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	diff := func(f Format, exclude ...string) string {
		var b strings.Builder
		if err := c.WriteDiff(&b, changes, DiffOptions{Format: f, Filter: Filter{Exclude: exclude}}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, f := range []Format{Summary, Unified} {
		out := diff(f, "node_modules")
		if !strings.Contains(out, "moat: 3 changes left out by exclusion, not shown (1 of them to look at") || !strings.Contains(out, "an apply that names no paths applies them too") {
			t.Errorf("%s with an exclusion:\n%s", f, out)
		}
		if out := diff(f); strings.Contains(out, "left out by exclusion") {
			t.Errorf("%s without one:\n%s", f, out)
		}
	}
	if out := diff(Patch, "node_modules"); strings.Contains(out, "left out") {
		t.Errorf("the patch carries the note:\n%s", out)
	}
}
