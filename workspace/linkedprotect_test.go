package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// linkedWorkspace makes a workspace whose protected paths are links to
// ordinary-looking workspace files, as projects keep them: the git
// config and hooks in the tree, .envrc and editor settings in conf/.
func linkedWorkspace(t *testing.T, gitConfigLink bool) string {
	t.Helper()
	ws := t.TempDir()
	for _, d := range []string{".git", "scripts/hooks", "conf/vscode", ".claude", ".git/hooks", "src"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"repo.gitconfig", "scripts/pre-commit", "conf/claude.json", "src/main.go"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		".git/hooks/pre-commit": "../../scripts/pre-commit",
		".claude/settings.json": "../conf/claude.json",
		".envrc":                "conf/envrc", // dangling: the run could make it
		".vscode":               "conf/vscode",
	}
	if gitConfigLink {
		links[".git/config"] = "../repo.gitconfig"
		os.Remove(filepath.Join(ws, ".git/hooks"))
		links[".git/hooks"] = "../scripts/hooks"
		delete(links, ".git/hooks/pre-commit") // .git/hooks is a link now
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, l)); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// TestApplyFollowsLinkedProtections: a protected path that is a link to a
// workspace file is protected where it leads, for Apply as for a direct
// run's guard: an overlay run wrote repo.gitconfig (.git/config's
// target, a core.fsmonitor), scripts/hooks, conf/envrc and a file a hook
// or a setting inside a protected directory links to, and apply wrote
// them without a word (found by a tester). The control: ordinary files
// beside them apply.
func TestApplyFollowsLinkedProtections(t *testing.T) {
	ws := linkedWorkspace(t, true)
	linked := linkedProtections(ws, HostConfig())
	list := append(HostConfig(), linked...)
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"repo.gitconfig", true},
		{"scripts/hooks/pre-commit", true},
		{"conf/envrc", true},
		{"conf/vscode/tasks.json", true},
		{"conf/claude.json", true},
		{"src/main.go", false},
		{"conf/other.json", false},
		{"scripts/build.sh", false},
	} {
		if got := protects(Change{Path: tc.path, Type: File, Kind: Modified}, list, nil); got != tc.want {
			t.Errorf("protects(%s) = %v, want %v (linked: %v)", tc.path, got, tc.want, linked)
		}
	}
	// A directory above a linked target made a link or a file leads the
	// protected path elsewhere (found by a tester); a directory's own
	// change, or its removal, does not.
	for _, tc := range []struct {
		ch   Change
		want bool
	}{
		{Change{Path: "scripts", Type: Symlink, Kind: TypeChanged, OldType: Dir}, true},
		{Change{Path: "conf", Type: File, Kind: TypeChanged, OldType: Dir}, true},
		{Change{Path: "scripts", Type: Dir, Kind: Modified}, false},
		{Change{Path: "scripts", Type: Dir, Kind: Deleted}, false},
		{Change{Path: "src", Type: Symlink, Kind: TypeChanged, OldType: Dir}, false},
	} {
		if got := protects(tc.ch, list, nil); got != tc.want {
			t.Errorf("protects(%s %s %s) = %v, want %v", tc.ch.Path, tc.ch.Kind, tc.ch.Type, got, tc.want)
		}
	}
}

// TestGuardProtectsLinksInProtectedDirs: in a direct run, a link inside a
// protected directory (a hook, an agent's settings) has its target kept
// read-only: the read-only mount over the directory left the file it
// links to writable (found by a tester). The control: the files beside
// the targets are not protected.
func TestGuardProtectsLinksInProtectedDirs(t *testing.T) {
	ws := linkedWorkspace(t, false)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var ro []string
	for _, p := range g.Protections() {
		if !p.Pin {
			ro = append(ro, p.Path)
		}
	}
	for _, want := range []string{"scripts/pre-commit", "conf/claude.json", "conf/vscode"} {
		if !slices.Contains(ro, filepath.Join(ws, want)) {
			t.Errorf("%s is not read-only: %v", want, ro)
		}
	}
	for _, not := range []string{"src", "src/main.go", "scripts", "conf"} {
		if slices.Contains(ro, filepath.Join(ws, not)) {
			t.Errorf("%s is read-only: %v", not, ro)
		}
	}
}

// TestGuardKeepsLinksOnTheWay: a hook that links through another link
// (.git/hooks/pre-commit -> ../../scripts/pre-commit, scripts -> tools)
// keeps that link: replaced by a directory of the command's, it led the
// hook there (found by a tester). The guard names it among its links, and
// its target's file is read-only.
func TestGuardKeepsLinksOnTheWay(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{".git/hooks", "tools"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	os.WriteFile(filepath.Join(ws, "tools/pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("tools", filepath.Join(ws, "scripts"))
	os.Symlink("../../scripts/pre-commit", filepath.Join(ws, ".git/hooks/pre-commit"))
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	kept := false
	for _, l := range g.links {
		kept = kept || l.rel == "scripts"
	}
	if !kept {
		t.Errorf("the link scripts on the hook's way is not kept: %+v", g.links)
	}
	var ro []string
	for _, p := range g.Protections() {
		if !p.Pin {
			ro = append(ro, p.Path)
		}
	}
	if !slices.Contains(ro, filepath.Join(ws, "tools/pre-commit")) {
		t.Errorf("tools/pre-commit is not read-only: %v", ro)
	}
}
