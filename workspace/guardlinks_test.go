//go:build linux

package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFinishStaysInside: Finish, which runs on the host (as root in the
// daemon) once the command is dead, must not move anything outside the
// workspace through a link the command made: a link at .git/worktrees or
// .git/modules, or one on the way to a submodule checkout .gitmodules
// names, leading to another repository on the host. The link itself is
// what is quarantined. The control: a worktree git directory the command
// made for real is quarantined, as before.
func TestFinishStaysInside(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ws, victim string)
		want []string // quarantined, relative to the workspace
	}{
		{"control", func(ws, victim string) {
			tree(t, ws, map[string]string{".git/worktrees/w/HEAD": "ref: refs/heads/main\n", ".git/worktrees/w/config": "[core]\n"})
		}, []string{".git/worktrees/w/config"}},
		{"worktrees link", func(ws, victim string) {
			os.Symlink(filepath.Dir(victim), filepath.Join(ws, ".git/worktrees"))
		}, []string{".git/worktrees"}},
		{"modules link", func(ws, victim string) {
			os.Symlink(filepath.Dir(victim), filepath.Join(ws, ".git/modules"))
		}, []string{".git/modules"}},
		{"submodule through a link", func(ws, victim string) {
			// The index records a submodule checkout at lnk/repo, and lnk
			// leads to the other repository's parent.
			cmd := exec.Command("git", "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("a", 40)+",lnk/repo")
			cmd.Dir = ws
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git update-index: %v %s", err, out)
			}
			os.Symlink(filepath.Dir(filepath.Dir(victim)), filepath.Join(ws, "lnk"))
			// The other repository is in use meanwhile.
			os.WriteFile(filepath.Join(victim, "index.lock"), nil, 0o644)
			os.Remove(filepath.Join(victim, "index.lock"))
		}, []string{"lnk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			repo := map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n", ".git/hooks/": ""}
			tree(t, ws, repo)
			// Another repository of the host, with a git directory of
			// the layout nestedGitDirs looks for.
			tree(t, filepath.Join(root, "other/repo"), repo)
			victim := filepath.Join(root, "other/repo/.git")
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
			tc.run(ws, victim)
			moved, err := g.Finish(filepath.Join(root, "quarantine"))
			if err != nil {
				t.Errorf("Finish: %v", err)
			}
			for _, e := range []string{"config", "hooks", "HEAD"} {
				if _, err := os.Lstat(filepath.Join(victim, e)); err != nil {
					t.Errorf("the other repository lost %s: %v", e, err)
				}
			}
			var got []string
			for _, m := range moved {
				got = append(got, m.Path)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("quarantined %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFinishWalksOnce: a run that leaves many index files this package
// cannot read (split index files named as git names them) makes Finish
// walk the workspace for new .git once, not once per file: each walk
// costs the host's time after the run, with a workspace the command
// filled. The control: the walk still finds the .git the run made.
func TestFinishWalksOnce(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n"})
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
	for i := range 50 {
		os.WriteFile(filepath.Join(ws, ".git", "sharedindex."+strings.Repeat("0", 39)+string(rune('a'+i%26))+string(rune('a'+i/26))), []byte("garbage"), 0o644)
	}
	os.WriteFile(filepath.Join(ws, ".git/index"), []byte("DIRC\x00\x00\x00\x09garbage"), 0o644)
	os.MkdirAll(filepath.Join(ws, "deep/sub/.git"), 0o755)
	os.WriteFile(filepath.Join(ws, "deep/sub/.git/config"), []byte("[core]\n"), 0o644)
	walks := 0
	testHookDotGitsSince = func() { walks++ }
	defer func() { testHookDotGitsSince = nil }()
	moved, err := g.Finish(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 1 || moved[0].Path != "deep/sub/.git" {
		t.Errorf("control: quarantined %+v, want deep/sub/.git", moved)
	}
	if walks != 1 {
		t.Errorf("Finish walked the workspace %d times, want once", walks)
	}
}
