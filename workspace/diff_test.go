//go:build linux

package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// applyScript replays an edit script and checks it turns a into b.
func applyScript(a, b []string, script []edit) error {
	var out []string
	for _, e := range script {
		switch e.op {
		case opEqual:
			if a[e.a] != b[e.b] {
				return fmt.Errorf("equal a[%d]=%q b[%d]=%q", e.a, a[e.a], e.b, b[e.b])
			}
			out = append(out, a[e.a])
		case opInsert:
			out = append(out, b[e.b])
		}
	}
	if strings.Join(out, "") != strings.Join(b, "") {
		return fmt.Errorf("script yields %q, want %q", out, b)
	}
	if n := len(script) - countOp(script, opInsert); n != len(a) {
		return fmt.Errorf("script covers %d lines of a, want %d", n, len(a))
	}
	return nil
}

func countOp(s []edit, op editOp) int {
	n := 0
	for _, e := range s {
		if e.op == op {
			n++
		}
	}
	return n
}

func TestDiffLines(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	gen := func() []string {
		n := r.Intn(30)
		var l []string
		for i := 0; i < n; i++ {
			l = append(l, string(rune('a'+r.Intn(4)))+"\n")
		}
		return l
	}
	for i := 0; i < 2000; i++ {
		a, b := gen(), gen()
		if err := applyScript(a, b, diffLines(a, b)); err != nil {
			t.Fatalf("%q -> %q: %v", a, b, err)
		}
	}
	// Minimal on a classic example: ABCABBA -> CBABAC has D = 5.
	a, b := strings.Split("ABCABBA", ""), strings.Split("CBABAC", "")
	if s := diffLines(a, b); countOp(s, opInsert)+countOp(s, opDelete) != 5 {
		t.Errorf("D = %d, want 5", countOp(s, opInsert)+countOp(s, opDelete))
	}
}

func TestBase85(t *testing.T) {
	// From git's base85 alphabet: 0x00000000 is "00000", 0xffffffff "|NsC0".
	if got := base85([]byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}); got != "00000|NsC0" {
		t.Errorf("base85 = %q", got)
	}
}

func TestQuoteName(t *testing.T) {
	for in, want := range map[string]string{"a/b c": "a/b c", `a/"q"`: `"a/\"q\""`, "a/t\u00e9": `"a/t\303\251"`, "a/\tx": `"a/\tx"`,
		"e\x1b[2K\rM x": `"e\033[2K\rM x"`, "\x7f\xff": `"\177\377"`} {
		if got := QuoteName(in); got != want {
			t.Errorf("QuoteName(%q) = %s, want %s", in, got, want)
		}
	}
}

// checkPatch writes c's patch, applies it with git to a fresh repository
// holding a copy of the original workspace (orig) and compares the result
// with the merged view want (a gitView manifest).
func checkPatch(t *testing.T, c *ChangeSet, orig string, want map[string]string) []byte {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	var patch bytes.Buffer
	if err := c.WriteDiff(&patch, changes, DiffOptions{Format: Patch}); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	if out, err := exec.Command("cp", "-a", orig, repo).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	git := func(stdin []byte, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=moat", "-c", "user.email=moat@localhost",
			"-c", "safe.directory=*", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "HOME="+repo, "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = bytes.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s\npatch:\n%s", args, err, out, patch.Bytes())
		}
	}
	git(nil, "init", "-q")
	git(nil, "add", "-A")
	git(nil, "commit", "-q", "-m", "original")
	git(patch.Bytes(), "apply", "--whitespace=nowarn", "-")
	if d := diffManifests(want, manifest(t, repo, true)); d != "" {
		t.Errorf("git apply of the patch differs from the merged view:\n%s\npatch:\n%s", d, patch.Bytes())
	}
	return patch.Bytes()
}

func TestPatchAppliesWithGit(t *testing.T) {
	orig := map[string]string{
		"mod.txt": "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "noeol.txt": "a\nb", "del.txt": "x\n", "run.sh": "#!/bin/sh\n",
		"link": "-> mod.txt", "bin.dat": "\x00\x01binary", "dir/x": "x\n", "f2l": "f\n", "ren.txt": "rename me\n",
		"spa ce/q\"uote\u00e9": "odd name\n", "empty-del": "",
	}
	_, c := newSet(t, orig)
	up := c.UpperDir()
	tree(t, up, map[string]string{
		"mod.txt": "1\n2\nthree\n4\n5\n6\n7\n8\n9\nten\n", "noeol.txt": "a\nc", "run.sh#755": "#!/bin/sh\n",
		"link": "-> noeol.txt", "bin.dat": "\x00\x02binary!", "new.bin": "\x00new", "new.txt": "n\n",
		"empty": "", "f2l": "-> dir/x", "renamed.txt": "rename me\n", "spa ce/q\"uote\u00e9": "odder\n",
		"newlink": "-> dir",
	})
	whiteout(t, filepath.Join(up, "del.txt"))
	whiteout(t, filepath.Join(up, "dir"))
	whiteout(t, filepath.Join(up, "ren.txt"))
	whiteout(t, filepath.Join(up, "empty-del"))
	merged := t.TempDir()
	tree(t, merged, orig)
	for _, p := range []string{"del.txt", "dir", "ren.txt", "f2l", "empty-del"} {
		os.RemoveAll(filepath.Join(merged, p))
	}
	if out, err := exec.Command("cp", "-a", up+"/.", merged).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for _, p := range []string{"del.txt", "dir", "ren.txt", "empty-del"} {
		os.Remove(filepath.Join(merged, p))
	}
	patch := checkPatch(t, c, c.Workspace(), manifest(t, merged, true))
	for _, want := range []string{"rename from ren.txt", "GIT binary patch", "old mode 100644\nnew mode 100755",
		"new file mode 120000", "\\ No newline at end of file"} {
		if !bytes.Contains(patch, []byte(want)) {
			t.Errorf("patch lacks %q", want)
		}
	}
}

func TestWriteDiffFormats(t *testing.T) {
	_, c := newSet(t, map[string]string{"a.txt": "a\nb\n", "gone/x": "x\n", "gone/y": "y\n", "p.png": "\x89PNG\x00"})
	tree(t, c.UpperDir(), map[string]string{"a.txt": "a\nB\nc\n", "node_modules/m/i.js": "1\n", "node_modules/n.js": "2\n",
		"p.png": "\x89PNG\x00\x01"})
	whiteout(t, filepath.Join(c.UpperDir(), "gone"))
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	sum, uni, js := writeFormats(t, c, changes)
	for _, want := range []string{"M a.txt", "+2 -1", "D gone/ (2 files)", "A node_modules/ (2 changes, not expanded)",
		"M p.png", "binary, 5 -> 6 bytes", "4 files changed, 2 insertions(+), 3 deletions(-)"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	for _, want := range []string{"@@ -1,2 +1,3 @@\n a\n-b\n+B\n+c\n", "Binary files a/p.png and b/p.png differ", "# node_modules/: 2 changes not shown", "+++ /dev/null"} {
		if !strings.Contains(uni.String(), want) {
			t.Errorf("unified diff lacks %q:\n%s", want, uni.String())
		}
	}
	var out struct {
		Changes []struct {
			Path       string `json:"path"`
			Kind       string `json:"kind"`
			Insertions int    `json:"insertions"`
		} `json:"changes"`
		FilesChanged int `json:"files_changed"`
	}
	if err := json.Unmarshal(js.Bytes(), &out); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	// JSON is never folded: node_modules, its subdirectory and both files.
	if len(out.Changes) != 7 || out.Changes[0].Path != "a.txt" || out.Changes[0].Insertions != 2 || out.FilesChanged != 5 {
		t.Errorf("json: %s", js.String())
	}
}

// TestDiffLargeFilesNotRead: a file over maxReviewRead, a sparse one the
// command made at no cost, is shown by its sizes and never read whole,
// in the summary, the unified diff and JSON; a patch for git refuses it.
// The control: a small change beside it is compared and shown as ever.
func TestDiffLargeFilesNotRead(t *testing.T) {
	_, c := newSet(t, map[string]string{"a.txt": "a\n", "big.bin": "small\n"})
	tree(t, c.UpperDir(), map[string]string{"a.txt": "a\nb\n"})
	for _, name := range []string{"big.bin", "new.img"} {
		f, err := os.Create(filepath.Join(c.UpperDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("#!/bin/sh\n")
		if err := f.Truncate(1 << 30); err != nil { // sparse: no disk
			t.Fatal(err)
		}
		f.Close()
	}
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	sum, uni, js := writeFormats(t, c, changes)
	for _, want := range []string{"M big.bin", "too large to compare, 6 -> 1073741824 bytes", "A new.img", "+1"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	for _, want := range []string{"File too large to compare (over 32 MiB): 6 -> 1073741824 bytes", "not valid text but can run or be read as text", "@@ -1,1 +1,2 @@\n a\n+b\n",
		"# its first 8192 bytes", "# | #!/bin/sh\n# | \\x00\\x00"} {
		if !strings.Contains(uni.String(), want) {
			t.Errorf("unified diff lacks %q:\n%s", want, uni.String())
		}
	}
	if !strings.Contains(js.String(), `"path": "big.bin"`) {
		t.Errorf("json: %s", js.String())
	}
	var patch bytes.Buffer
	if err := c.WriteDiff(&patch, changes, DiffOptions{Format: Patch}); err == nil || !strings.Contains(err.Error(), "moat apply") {
		t.Errorf("a patch of a file too large to read: %v", err)
	}
}

// writeFormats writes changes in the summary, unified and JSON formats.
func writeFormats(t *testing.T, c *ChangeSet, changes []Change) (sum, uni, js bytes.Buffer) {
	t.Helper()
	for _, f := range []struct {
		format Format
		buf    *bytes.Buffer
	}{{Summary, &sum}, {Unified, &uni}, {JSON, &js}} {
		if err := c.WriteDiff(f.buf, changes, DiffOptions{Format: f.format}); err != nil {
			t.Fatal(err)
		}
	}
	return sum, uni, js
}

// TestReviewShowsModes: the modes git's mode lines cannot show (a new
// file's 0600 or 0666, a change from 0644 to 0666, a new directory's
// 0777) are in the unified review and the summary, and one anyone may
// write is a warning; a sticky 1777 directory is no warning. The control:
// a new 0644 file gets no note.
func TestReviewShowsModes(t *testing.T) {
	_, c := newSet(t, map[string]string{"exist": "a\n", "gone": "g\n"})
	up := c.UpperDir()
	tree(t, up, map[string]string{"exist": "a\n", "ww": "w\n", "priv": "p\n", "plain": "x\n", "wd/": "", "tmp/": ""})
	whiteout(t, filepath.Join(up, "gone"))
	for p, m := range map[string]fs.FileMode{"exist": 0o666, "ww": 0o666, "priv": 0o600, "plain": 0o644, "wd": 0o777, "tmp": 0o777 | fs.ModeSticky} {
		if err := os.Chmod(filepath.Join(up, p), m); err != nil {
			t.Fatal(err)
		}
	}
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	var unified, summary bytes.Buffer
	if err := c.WriteDiff(&unified, changes, DiffOptions{Format: Unified}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteDiff(&summary, changes, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# exist: WARNING: anyone may write it, mode 0644 -> 0666\n", "# ww: WARNING: anyone may write it, mode 0666\n",
		"# priv: mode 0600\n", "# new directory wd/ (mode 0777)\n", "# wd: WARNING: anyone may write it\n", "# new directory tmp/ (mode 1777)\n"} {
		if !strings.Contains(unified.String(), want) {
			t.Errorf("unified review lacks %q:\n%s", want, unified.String())
		}
	}
	// A deletion has no change of mode (it read "mode 0000 -> 0644",
	// found by a tester).
	if strings.Contains(unified.String(), "# plain") || strings.Contains(unified.String(), "# tmp:") || strings.Contains(unified.String(), "# gone") {
		t.Errorf("control: a note on a 0644 file or a sticky directory:\n%s", unified.String())
	}
	for _, want := range []string{"M exist (mode 644 -> 666) (WARNING: anyone may write it)", "A priv (mode 600)", "A ww (mode 666) (WARNING: anyone may write it)", "A tmp/ (mode 1777)\n"} {
		if !strings.Contains(summary.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary.String())
		}
	}
	// A patch carries none of it: moat diff says it beside the patch.
	notes := strings.Join(PatchNotes(changes), "\n")
	for _, want := range []string{"ww: WARNING: anyone may write it, mode 0666", "priv: mode 0600", "tmp: directory mode 1777", "wd: WARNING: anyone may write it, directory mode 0777"} {
		if !strings.Contains(notes, want) {
			t.Errorf("patch notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "plain") {
		t.Errorf("control: a note on a 0644 file:\n%s", notes)
	}
}

// A workspace file's set-ID bits, which apply never carries, show in the
// review as a change of mode when the change set rewrites the file or
// drops them, and a copy-up that keeps them is no change.
func TestReviewShowsSetIDDropped(t *testing.T) {
	_, c := newSet(t, map[string]string{"s#4755": "a\n", "kept#4755": "b\n", "cleared#2755": "c\n", "plain#755": "d\n"})
	up := c.UpperDir()
	tree(t, up, map[string]string{"s#755": "a\nmore\n", "kept#4755": "b\n", "cleared#755": "c\n", "plain#755": "d\nmore\n"})
	changes, err := c.Changes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summarize(changes), []string{"mode file cleared", "modified file plain", "modified file s"}; !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
	var unified, summary bytes.Buffer
	if err := c.WriteDiff(&unified, changes, DiffOptions{Format: Unified}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteDiff(&summary, changes, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"M s (mode 4755 -> 755)", "M cleared (mode 2755 -> 755)"} {
		if !strings.Contains(summary.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, summary.String())
		}
	}
	if strings.Contains(summary.String(), "plain (mode") || strings.Contains(summary.String(), "kept") {
		t.Errorf("control: a mode note where none changed:\n%s", summary.String())
	}
	if want := "# s: mode 4755 -> 0755\n"; !strings.Contains(unified.String(), want) {
		t.Errorf("unified review lacks %q:\n%s", want, unified.String())
	}
	if notes := strings.Join(PatchNotes(changes), "\n"); !strings.Contains(notes, "s: mode 4755 -> 0755") {
		t.Errorf("patch notes lack the dropped bit:\n%s", notes)
	}
	if _, err := c.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]fs.FileMode{"s": 0o755, "cleared": 0o755, "kept": 0o755 | fs.ModeSetuid, "plain": 0o755} {
		fi, err := os.Lstat(filepath.Join(c.Workspace(), name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid); got != want {
			t.Errorf("%s: mode %v after apply, want %v", name, got, want)
		}
	}
}
