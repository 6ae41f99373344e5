//go:build linux

package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFinishRaceSwap: Finish runs on the host (as root in the daemon)
// while the workspace's owner, a local user outside the sandbox, may
// still change the workspace: it can swap a directory on the way to a
// protected path (.git) for a link to another repository's, back and
// forth, while Finish looks and moves. What Finish moves must be what it
// looked at, below the workspace: the other repository keeps its hooks,
// however the swaps fall. The positive control: on a try whose swaps
// left the workspace's own .git in place, the hooks planted there are
// quarantined, so Finish did its work; the test asks for some.
func TestFinishRaceSwap(t *testing.T) {
	root := t.TempDir()
	repo := map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n"}
	tree(t, filepath.Join(root, "other"), repo)
	tree(t, filepath.Join(root, "other"), map[string]string{".git/hooks/post-checkout": "#!/bin/sh\n"})
	victim := filepath.Join(root, "other/.git")
	controls := 0
	for try := range 200 {
		ws := filepath.Join(root, fmt.Sprint("ws", try))
		tree(t, ws, repo) // a repository without hooks: .git/hooks is an absent route
		g, err := NewGuard(ws, GuardOptions{Writable: true})
		if err != nil {
			t.Fatal(err)
		}
		tree(t, ws, map[string]string{".git/hooks/pre-commit": "#!/bin/sh\n"}) // planted
		dotgit, aside := filepath.Join(ws, ".git"), filepath.Join(ws, "aside")
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				os.Rename(dotgit, aside)
				os.Symlink(victim, dotgit)
				os.Remove(dotgit)
				os.Rename(aside, dotgit)
			}
		}()
		time.Sleep(time.Duration(try%7) * 100 * time.Microsecond)
		moved, _ := g.Finish(filepath.Join(root, "quarantine", fmt.Sprint(try)))
		stop.Store(true)
		wg.Wait()
		if _, err := os.Lstat(filepath.Join(victim, "hooks", "post-checkout")); err != nil {
			t.Fatalf("try %d: the other repository lost its hooks through the swapped .git: %v (quarantined %+v)", try, err, moved)
		}
		if _, err := os.Lstat(filepath.Join(dotgit, "hooks")); os.IsNotExist(err) {
			if _, err := os.Lstat(filepath.Join(aside, "hooks")); os.IsNotExist(err) {
				controls++
			}
		}
	}
	if controls == 0 {
		t.Errorf("control: no try quarantined the hooks planted in the workspace's own .git")
	}
	t.Logf("%d tries quarantined the workspace's own hooks", controls)
}

// TestFinishRestoresLinkInPlace: a link on the way to a protected path
// (.cargo/config, a link to a file in the workspace at the start) that
// changed is put back by Finish. The workspace's owner, on the host, may
// meanwhile have swapped the directory holding it (.cargo) for a link to
// another directory: the link must be put back where it was, not through
// that link, where root would make another user's config say what the
// workspace's owner chose. The positive control: the same run without
// the swap has the link put back.
func TestFinishRestoresLinkInPlace(t *testing.T) {
	for _, swap := range []bool{false, true} {
		t.Run(fmt.Sprint("swap=", swap), func(t *testing.T) {
			root := t.TempDir()
			ws, victim := filepath.Join(root, "ws"), filepath.Join(root, "other/.cargo")
			tree(t, ws, map[string]string{"cfg.toml": "", ".cargo/": ""})
			tree(t, victim, map[string]string{"credentials.toml": ""})
			if err := os.Symlink("../cfg.toml", filepath.Join(ws, ".cargo/config")); err != nil {
				t.Fatal(err)
			}
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			// The command retargets the link.
			os.Remove(filepath.Join(ws, ".cargo/config"))
			os.Symlink("/tmp/elsewhere", filepath.Join(ws, ".cargo/config"))
			if swap {
				os.Rename(filepath.Join(ws, ".cargo"), filepath.Join(ws, "aside"))
				os.Symlink(victim, filepath.Join(ws, ".cargo"))
			}
			g.Finish(filepath.Join(root, "quarantine"))
			if _, err := os.Lstat(filepath.Join(victim, "config")); err == nil {
				t.Errorf("Finish made %s/config, through the link the host put at .cargo", victim)
			}
			dir := filepath.Join(ws, ".cargo")
			if swap {
				dir = filepath.Join(ws, "aside")
			}
			if tgt, err := os.Readlink(filepath.Join(dir, "config")); !swap && (err != nil || tgt != "../cfg.toml") {
				t.Errorf("control: the link was not put back: %q, %v", tgt, err)
			}
		})
	}
}
