//go:build linux

package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGitConfigReadBelow: what git's config names inside the workspace
// (core.hooksPath here) decides what Apply refuses (ChangeSet.Protects),
// what the daemon's file API refuses (GitProtected) and what a run's
// guard protects (NewGuard), and .gitmodules which submodule checkouts
// the guard watches. Run as root (the daemon), none of them reads a
// config through a link the workspace's owner put there on the host, at
// the file or at .git, to a file outside the workspace that user cannot
// read (mode 0600 here, in a directory of its own): what it says would
// decide what the user sees refused or protected. The control: the same
// content in the workspace's own files is read, and decides.
func TestGitConfigReadBelow(t *testing.T) {
	const hooks = "[core]\n\thooksPath = tools/hooks\n"
	const modules = "[submodule \"x\"]\n\tpath = probe\n"
	for _, tc := range []string{"control", "config link", ".git link"} {
		t.Run(tc, func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			private := filepath.Join(root, "private")
			tree(t, ws, map[string]string{"tools/hooks/": "", "probe/": ""})
			tree(t, private, map[string]string{"config#600": hooks, "gitmodules#600": modules})
			tree(t, filepath.Join(private, "repo"), guardRepo)
			tree(t, filepath.Join(private, "repo"), map[string]string{".git/config#600": hooks})
			switch tc {
			case "control":
				tree(t, ws, guardRepo)
				tree(t, ws, map[string]string{".git/config": hooks, ".gitmodules": modules})
			case "config link":
				tree(t, ws, guardRepo)
				os.Remove(filepath.Join(ws, ".git/config"))
				for name, to := range map[string]string{".git/config": "config", ".gitmodules": "gitmodules"} {
					if err := os.Symlink(filepath.Join(private, to), filepath.Join(ws, name)); err != nil {
						t.Fatal(err)
					}
				}
			case ".git link":
				if err := os.Symlink(filepath.Join(private, "repo/.git"), filepath.Join(ws, ".git")); err != nil {
					t.Fatal(err)
				}
			}
			want := tc == "control"
			hook := "tools/hooks/pre-commit"
			if got := GitProtected(ws, hook); got != want {
				t.Errorf("GitProtected(%s) = %v, want %v", hook, got, want)
			}
			s := &Store{Dir: filepath.Join(root, "state")}
			c, err := s.Create(ws, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Protects(Change{Path: hook, Type: File, Kind: Added}); got != want {
				t.Errorf("Protects(%s) = %v, want %v", hook, got, want)
			}
			// Written in place, a workspace whose git files are links is
			// refused: git on the host follows them, and what they name
			// unprotected would be what it runs.
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			var linkErr *GitLinkError
			if !want {
				if !errors.As(err, &linkErr) {
					t.Fatalf("NewGuard = %v, want a GitLinkError", err)
				}
				if g, err := NewGuard(ws, GuardOptions{}); err != nil {
					t.Fatalf("NewGuard of a read-only root: %v", err)
				} else {
					g.Close()
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			got := slices.ContainsFunc(g.Protections(), func(p Protection) bool { return p.Path == filepath.Join(ws, "tools/hooks") })
			if !got {
				t.Errorf("NewGuard does not protect tools/hooks (protections %+v)", g.Protections())
			}
			if !g.gitlinks["probe"] {
				t.Errorf("NewGuard does not watch the submodule checkout probe")
			}
		})
	}
}

// TestNewGuardReadsBelowAfterSwap: the workspace's .git swapped, once
// NewGuard found it and before it read its config, for a link to another
// repository outside the workspace whose config the workspace's owner
// cannot read: NewGuard does not read that config (what it names would
// be protected). The control: swapped for another .git directory inside
// the workspace, its config is read and decides.
func TestNewGuardReadsBelowAfterSwap(t *testing.T) {
	const hooks = "[core]\n\thooksPath = tools/hooks\n"
	for _, link := range []bool{false, true} {
		name := "control"
		if link {
			name = "link"
		}
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			tree(t, ws, guardRepo)
			tree(t, ws, map[string]string{"tools/hooks/": ""})
			tree(t, filepath.Join(root, "new"), guardRepo)
			tree(t, filepath.Join(root, "new"), map[string]string{".git/config#600": hooks})
			swapped := false
			testHookGitDirFound = func() {
				swapped = true
				if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(root, "old.git")); err != nil {
					t.Fatal(err)
				}
				if link {
					err := os.Symlink(filepath.Join(root, "new/.git"), filepath.Join(ws, ".git"))
					if err != nil {
						t.Fatal(err)
					}
				} else if err := os.Rename(filepath.Join(root, "new/.git"), filepath.Join(ws, ".git")); err != nil {
					t.Fatal(err)
				}
			}
			defer func() { testHookGitDirFound = nil }()
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if !swapped {
				t.Fatal("the hook did not run")
			}
			got := slices.ContainsFunc(g.Protections(), func(p Protection) bool { return p.Path == filepath.Join(ws, "tools/hooks") })
			if got == link {
				t.Errorf("NewGuard protects tools/hooks: %v, want %v", got, !link)
			}
		})
	}
}

// TestEnclosingRepositoryConfig: a workspace that is a subdirectory of a
// larger checkout: the outer repository's config names a hooks path and
// an include inside the workspace (relative to the outer top and to its
// git directory). Git at the outer top runs and reads them, so Apply
// refuses them, the file API refuses them, and a direct run's guard
// quarantines them when the run made them. The controls: another path
// of the workspace is none of these, and the same workspace out of the
// checkout protects nothing of them.
func TestEnclosingRepositoryConfig(t *testing.T) {
	for _, inside := range []bool{true, false} {
		t.Run(map[bool]string{true: "inside", false: "control"}[inside], func(t *testing.T) {
			root := t.TempDir()
			outer := filepath.Join(root, "outer")
			tree(t, outer, map[string]string{"sub/keep": "k\n"})
			if inside {
				tree(t, outer, guardRepo)
				tree(t, outer, map[string]string{".git/config": "[core]\n\thooksPath = sub/hooks\n[include]\n\tpath = ../sub/inc\n"})
			}
			ws := filepath.Join(outer, "sub")
			for _, p := range []string{"hooks/pre-commit", "inc", "hooks"} {
				if got := GitProtected(ws, p); got != inside {
					t.Errorf("GitProtected(%s) = %v, want %v", p, got, inside)
				}
			}
			if GitProtected(ws, "keep") {
				t.Errorf("control: GitProtected(keep)")
			}
			s := &Store{Dir: filepath.Join(root, "state")}
			c, err := s.Create(ws, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Discard()
			for _, p := range []string{"hooks/pre-commit", "inc"} {
				if got := c.Protects(Change{Path: p, Type: File, Kind: Added}); got != inside {
					t.Errorf("Protects(%s) = %v, want %v", p, got, inside)
				}
			}
			if c.Protects(Change{Path: "keep", Type: File, Kind: Modified}) {
				t.Errorf("control: Protects(keep)")
			}
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			tree(t, ws, map[string]string{"hooks/pre-commit": "#!/bin/sh\n", "inc": "[core]\n", "new": "n\n"})
			moved, err := g.Finish(filepath.Join(root, "quarantine"))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"hooks", "inc"}
			if !inside {
				want = nil
			}
			if got := quarantinedPaths(moved); !slices.Equal(got, want) {
				t.Errorf("quarantined %q, want %q", got, want)
			}
			if _, err := os.Stat(filepath.Join(ws, "new")); err != nil {
				t.Errorf("control: the run's other file: %v", err)
			}
		})
	}
}

// TestGitConfigNamesEverywhere: what every config git reads names inside
// the workspace is protected, however it is written: a hooks path that
// is the workspace's root (its hooks' names), one through a symbolic
// link or "~", one set by a file an include names outside the
// workspace, a program named by core.fsmonitor, a filter or a "!" alias,
// a repository's config.worktree, and the config of a repository two
// levels up. The controls: a pager found in PATH, a plain alias and a
// file of the workspace no config names are none of these.
func TestGitConfigNamesEverywhere(t *testing.T) {
	root := t.TempDir()
	oo := filepath.Join(root, "oo")
	o := filepath.Join(oo, "o")
	ws := filepath.Join(o, "sub")
	tree(t, ws, map[string]string{"keep": "k\n"})
	tree(t, oo, guardRepo)
	tree(t, o, guardRepo)
	if err := os.Symlink("sub", filepath.Join(o, "lnk")); err != nil {
		t.Fatal(err)
	}
	// The global config and the included file are links, as a dotfiles
	// manager makes them: git reads through them.
	dots := filepath.Join(root, "dotfiles")
	os.MkdirAll(dots, 0o755)
	ext := filepath.Join(root, "ext.cfg")
	os.WriteFile(filepath.Join(dots, "ext.cfg"), []byte("[core]\n\thooksPath = sub/hooks4\n"), 0o644)
	if err := os.Symlink(filepath.Join(dots, "ext.cfg"), ext); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	os.MkdirAll(home, 0o755)
	t.Setenv("HOME", home)
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(root, "global.cfg"))
	os.WriteFile(filepath.Join(dots, "global.cfg"), []byte("[core]\n\thooksPath = ~/../oo/o/sub/hooks6\n"), 0o644)
	if err := os.Symlink(filepath.Join(dots, "global.cfg"), filepath.Join(root, "global.cfg")); err != nil {
		t.Fatal(err)
	}
	tree(t, o, map[string]string{".git/config": "[core]\n\thooksPath = sub\n\tfsmonitor = sub/fsmon.sh\n\tpager = less -R\n" +
		"[include]\n\tpath = " + ext + "\n[alias]\n\tst = !sub/al.sh --x\n\tco = checkout\n" +
		"[filter \"x\"]\n\tclean = \"'sub/clean me.sh' %f\"\n[diff \"y\"]\n\ttextconv = lnk/conv.sh\n",
		".git/config.worktree": "[core]\n\tsshCommand = sub/ssh.sh\n"})
	tree(t, oo, map[string]string{".git/config": "[core]\n\thooksPath = o/lnk/hooks5\n"})
	for _, p := range []string{"pre-commit", "post-checkout", "hooks4", "hooks4/x", "hooks5/pre-push", "hooks6",
		"fsmon.sh", "al.sh", "clean me.sh", "conv.sh", "ssh.sh"} {
		if !GitProtected(ws, p) {
			t.Errorf("GitProtected(%s) = false", p)
		}
	}
	for _, p := range []string{"keep", "less", "checkout", "hooks", "sub"} {
		if GitProtected(ws, p) {
			t.Errorf("control: GitProtected(%s) = true", p)
		}
	}
}

// TestGitProtectedRootGitDir: a workspace that git reads as its own git
// directory (a bare repository given as the workspace) has its config,
// hooks and HEAD refused to the daemon's file API, as .git's are (found by
// a tester: the API wrote hooks/pre-commit and config there, and the
// host's git ran what they named); a workspace with no git layout has
// its HEAD refused, which would make it one. The controls: the same names
// in an ordinary repository's top (a config/ directory, a hooks/ of the
// project's) are not refused, nor is an ordinary file in the bare one.
func TestGitProtectedRootGitDir(t *testing.T) {
	tree := func(files map[string]string) string {
		ws := t.TempDir()
		for name, body := range files {
			p := filepath.Join(ws, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if body != "/" {
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return ws
	}
	bare := tree(map[string]string{"HEAD": "ref: refs/heads/main\n", "objects": "/", "refs/heads": "/", "config": "[core]\n\tbare = true\n"})
	for rel, want := range map[string]bool{"config": true, "hooks/pre-commit": true, "hooks": true, "HEAD": true, "info/exclude": false, "description": false,
		"worktrees/wt/commondir": true, "worktrees/wt/config.worktree": true, "modules/m/hooks/x": true, "worktrees/wt/HEAD": false} {
		if got := GitProtected(bare, rel); got != want {
			t.Errorf("a bare repository's %s: %v, want %v", rel, got, want)
		}
	}
	plain := tree(map[string]string{"README": "x\n"})
	for rel, want := range map[string]bool{"HEAD": true, "config/app.yaml": false, "hooks/x.py": false, "worktrees/wt/commondir": false} {
		if got := GitProtected(plain, rel); got != want {
			t.Errorf("a workspace without git's %s: %v, want %v", rel, got, want)
		}
	}
	repo := tree(map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects": "/", ".git/refs": "/", "config/app.yaml": "a: 1\n"})
	for _, rel := range []string{"config/app.yaml", "hooks/x.py", "HEAD"} {
		if GitProtected(repo, rel) {
			t.Errorf("an ordinary repository's top %s was refused", rel)
		}
	}
}
