package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A nested repository planted in one run and named by the index in
// another (or the other way round) is a submodule checkout git status
// opens from the top: its .git goes, whichever run made which half.
// The control: a nested repository the index does not name stays.
func TestGitlinkAcrossRuns(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	oid := strings.Repeat("1", 40)
	git := func(t *testing.T, dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=a@b", "-c", "user.name=a"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	nested := func(t *testing.T, ws string) {
		os.MkdirAll(filepath.Join(ws, "sub/.git"), 0o755)
		os.WriteFile(filepath.Join(ws, "sub/.git/config"), []byte("[core]\n\tfsmonitor = touch /tmp/pwned\n"), 0o644)
	}
	addLink := func(t *testing.T, ws string) {
		git(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+oid+",sub")
	}
	// The gitlink added by writing the index in place, as git never
	// does: the held index is then no longer the start's.
	inPlace := func(t *testing.T, ws string) {
		tmp := filepath.Join(t.TempDir(), "index")
		b, _ := os.ReadFile(filepath.Join(ws, ".git/index"))
		os.WriteFile(tmp, b, 0o644)
		cmd := exec.Command("git", "update-index", "--add", "--cacheinfo", "160000,"+oid+",sub")
		cmd.Dir, cmd.Env = ws, append(os.Environ(), "GIT_INDEX_FILE="+tmp)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git update-index: %v: %s", err, out)
		}
		b, _ = os.ReadFile(tmp)
		f, err := os.OpenFile(filepath.Join(ws, ".git/index"), os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(b)
		f.Close()
	}
	split := func(t *testing.T, ws string) {
		nested(t, ws)
		git(t, ws, "update-index", "--split-index")
	}
	for _, tc := range []struct {
		name           string
		before, during func(*testing.T, string)
		want           bool
	}{
		{"repository before, gitlink during", nested, addLink, true},
		{"gitlink before, repository during", addLink, nested, true},
		{"repository before, gitlink written in place", nested, inPlace, true},
		{"split index, gitlink during", split, addLink, true},
		{"repository before, nothing during (control)", nested, func(*testing.T, string) {}, false},
		{"split index, nothing during (control)", split, func(*testing.T, string) {}, false},
		{"repository before, another file staged (control)", nested, func(t *testing.T, ws string) {
			os.WriteFile(filepath.Join(ws, "f"), nil, 0o644)
			git(t, ws, "add", "f")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			git(t, ws, "init", "-q", ".")
			git(t, ws, "commit", "-q", "--allow-empty", "-m", "init")
			tc.before(t, ws)
			time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			time.Sleep(20 * time.Millisecond)
			tc.during(t, ws)
			moved, err := g.Finish(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			got := len(moved) == 1 && moved[0].Path == "sub/.git"
			if got != tc.want || len(moved) > 1 {
				t.Errorf("quarantined %+v; want sub/.git quarantined: %t", moved, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(ws, "sub/.git")); (err == nil) == tc.want {
				t.Errorf("sub/.git still there: %t", err == nil)
			}
		})
	}
}
