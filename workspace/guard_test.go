package workspace

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestProtects: what Apply refuses without --force, and what it applies.
func TestProtects(t *testing.T) {
	named := []string{"tools/hooks"}
	for _, tc := range []struct {
		ch   Change
		want bool
	}{
		{Change{Path: ".git/config", Type: File}, true},
		{Change{Path: ".git/commondir", Type: File}, true},
		{Change{Path: ".git/config.worktree", Type: File}, true},
		{Change{Path: ".git/hooks/pre-commit", Type: File}, true},
		{Change{Path: ".git/rebase-merge/git-rebase-todo", Type: File}, true},
		{Change{Path: ".git/sequencer/todo", Type: File}, true},
		{Change{Path: ".git/rebase-apply/next", Type: File}, true},
		{Change{Path: ".git/modules/lib/config", Type: File}, true},
		{Change{Path: ".git/modules/a/b/hooks/post-checkout", Type: File}, true},
		{Change{Path: ".git/worktrees/w/commondir", Type: File}, true},
		{Change{Path: ".git", Type: File, Kind: Added}, true},
		{Change{Path: "sub/.git", Type: File}, true},
		{Change{Path: "vendor/x/.git/config", Type: File}, true},
		{Change{Path: ".npmrc", Type: File}, true},
		{Change{Path: ".cargo/config.toml", Type: File}, true},
		{Change{Path: ".vscode/tasks.json", Type: File}, true},
		{Change{Path: ".claude/settings.json", Type: File}, true},
		// Other agents' settings start the MCP servers and commands they
		// name (they were applied without --force, found by a tester).
		{Change{Path: "opencode.json", Type: File}, true},
		{Change{Path: ".opencode/plugin/x.js", Type: File}, true},
		{Change{Path: ".kiro/settings/mcp.json", Type: File}, true},
		{Change{Path: ".amazonq/mcp.json", Type: File}, true},
		{Change{Path: ".continue/config.yaml", Type: File}, true},
		{Change{Path: ".roo/mcp.json", Type: File}, true},
		{Change{Path: ".aider.conf.yml", Type: File}, true},
		{Change{Path: "crush.json", Type: File}, true},
		{Change{Path: ".qwen/settings.json", Type: File}, true},
		{Change{Path: ".junie/mcp/mcp.json", Type: File}, true},
		{Change{Path: ".github/hooks/hooks.json", Type: File}, true},
		{Change{Path: ".clinerules/hooks/TaskStart", Type: File}, true},
		// Toolchain files naming programs the host runs (a
		// rust-toolchain.toml's path made cargo run the command's
		// binary; found by a tester).
		{Change{Path: "rust-toolchain.toml", Type: File}, true},
		{Change{Path: "rust-toolchain", Type: File}, true},
		{Change{Path: ".tool-versions", Type: File}, true},
		{Change{Path: ".devcontainer.json", Type: File}, true},
		// Build tools' settings that run programs at any command, an
		// editor's and an agent's project files (found by a tester).
		{Change{Path: ".pnpmfile.cjs", Type: File}, true},
		{Change{Path: "bunfig.toml", Type: File}, true},
		{Change{Path: ".mvn/extensions.xml", Type: File}, true},
		{Change{Path: ".bazelrc", Type: File}, true},
		{Change{Path: "tools/bazel", Type: File}, true},
		{Change{Path: ".bazelversion", Type: File}, true},
		{Change{Path: "tools/build.sh", Type: File}, false},
		{Change{Path: ".lazy.lua", Type: File}, true},
		{Change{Path: ".openhands/setup.sh", Type: File}, true},
		{Change{Path: ".mvn/wrapper/maven-wrapper.properties", Type: File}, false},
		{Change{Path: "pkg/bunfig.toml", Type: File}, false},
		{Change{Path: "src/rust-toolchain.rs", Type: File}, false},
		{Change{Path: ".clinerules/style.md", Type: File}, false},
		{Change{Path: "docs/opencode.md", Type: File}, false},
		{Change{Path: "tools/hooks/pre-push", Type: File}, true},
		{Change{Path: "deploy/run.sh", Type: File}, true},
		// What commits and ordinary work change.
		{Change{Path: ".git", Type: Dir, Kind: Modified}, false},
		{Change{Path: ".git/objects/ab/cdef", Type: File}, false},
		{Change{Path: ".git/refs/heads/main", Type: File}, false},
		{Change{Path: ".git/index", Type: File}, false},
		{Change{Path: ".git/modules/lib/objects/ab/cd", Type: File}, false},
		{Change{Path: "src/main.go", Type: File}, false},
		{Change{Path: ".github/workflows/ci.yml", Type: File}, false},
		{Change{Path: "gitconfig", Type: File}, false},
	} {
		if got := protects(tc.ch, append(HostConfig(), "deploy"), named); got != tc.want {
			t.Errorf("protects(%s %s) = %v, want %v", tc.ch.Path, tc.ch.Type, got, tc.want)
		}
	}
}

// TestReadGitlinks: the submodule checkouts of a real index, in every
// index version git writes.
func TestReadGitlinks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for _, n := range []string{"a.txt", "deep/dir/b.txt", "deep/dir/c.txt"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(n)), 0o755)
		os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644)
		git("add", n)
	}
	oid := "1234567890123456789012345678901234567890"
	git("update-index", "--add", "--cacheinfo", "160000,"+oid+",deep/dir/sub")
	git("update-index", "--add", "--cacheinfo", "160000,"+oid+",zz")
	for _, v := range []string{"2", "3", "4", "3", "4"} {
		if v == "3" {
			// An intent-to-add entry has the extended flags (two more
			// bytes), which need version 3 at least.
			os.WriteFile(filepath.Join(dir, "deep/e.txt"), nil, 0o644)
			git("add", "-N", "deep/e.txt")
		}
		git("update-index", "--index-version", v)
		got, err := readGitlinks(filepath.Join(dir, ".git/index"), "")
		if err != nil {
			t.Fatalf("version %s: %v", v, err)
		}
		if want := []string{"deep/dir/sub", "zz"}; !slices.Equal(got, want) {
			t.Errorf("version %s: gitlinks %q, want %q", v, got, want)
		}
	}
}

// TestReadGitConfig: the paths the guard reads out of git's config.
func TestReadGitConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	os.WriteFile(cfg, []byte(`[core]
	bare = false
	hooksPath = "tools/hooks" ; a comment
[include]
	path = ../project.gitconfig
[includeIf "gitdir:~/work/"]
	path = /etc/elsewhere
[submodule "lib"]
	path = vendor/lib
[Core "Sub"]
	key = v
`), 0o644)
	vals := looker(dir).readGitConfig(cfg)
	for k, want := range map[string]string{"core.hookspath": "tools/hooks", "include.path": "../project.gitconfig",
		"includeif.gitdir:~/work/.path": "/etc/elsewhere", "submodule.lib.path": "vendor/lib", "core.Sub.key": "v"} {
		if got := vals[k]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	ws := filepath.Dir(dir)
	os.Rename(cfg, filepath.Join(dir, "config"))
	n := newConfigNamer(looker(ws))
	n.read(filepath.Join(dir, "config"), ws, 0, false)
	if got, want := n.list(), []string{"project.gitconfig", "tools/hooks"}; !slices.Equal(got, want) {
		t.Errorf("named = %q, want %q", got, want)
	}
}

// TestFIFOInGitDirDoesNotHang: a FIFO where the index or commondir
// belongs (the command can write both) is not read.
func TestFIFOInGitDirDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"index", "commondir"} {
		if err := syscall.Mkfifo(filepath.Join(dir, n), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	done := make(chan bool)
	go func() {
		readGitlinks(filepath.Join(dir, "index"), "")
		looker(dir).commonDir(dir)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO in the git directory hangs")
	}
}

// TestUnreadableIndexFallsBack: an index the reader cannot parse, but
// that the run changed, makes Finish look for every .git the run made.
func TestUnreadableIndexFallsBack(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
	os.WriteFile(filepath.Join(ws, ".git/index"), []byte("DIRC\x00\x00\x00\x09garbage"), 0o644)
	os.MkdirAll(filepath.Join(ws, "deep/sub/.git"), 0o755)
	os.WriteFile(filepath.Join(ws, "deep/sub/.git/config"), []byte("[core]\n"), 0o644)
	moved, err := g.Finish(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) != 1 || moved[0].Path != "deep/sub/.git" {
		t.Errorf("quarantined %+v, want deep/sub/.git", moved)
	}
}

// TestFileOnARouteStays: a regular file where a protected path needs a
// directory (.cargo as a file) is the person's own and stays; the same
// name made a directory holding the protected path is quarantined.
func TestFileOnARouteStays(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(ws string)
		want []string
	}{
		{"unchanged", func(string) {}, nil},
		{"made a directory", func(ws string) {
			os.Remove(filepath.Join(ws, ".cargo"))
			os.MkdirAll(filepath.Join(ws, ".cargo"), 0o755)
			os.WriteFile(filepath.Join(ws, ".cargo/config.toml"), []byte("[build]\n"), 0o644)
		}, []string{".cargo/config.toml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			os.WriteFile(filepath.Join(ws, ".cargo"), []byte("mine\n"), 0o644)
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			tc.run(ws)
			moved, err := g.Finish(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range moved {
				got = append(got, m.Path)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("quarantined %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGitConfigCommandKeys: every key git takes a program from names a
// path to protect, found by a tester for the ones after core.fsmonitor's
// (core.gitProxy ran on the host's `git fetch git://…` after an apply);
// keys that hold no program (a URL, a path of a checkout, a tool's
// trust setting) name none, and neither does a submodule's update that is
// not a "!" command.
func TestGitConfigCommandKeys(t *testing.T) {
	for k, v := range map[string]string{
		"core.fsmonitor": "./t/a", "core.gitproxy": "./t/a", "core.alternaterefscommand": "./t/a",
		"gpg.ssh.defaultkeycommand": "./t/a", "gpg.ssh.program": "./t/a", "difftool.x.cmd": "./t/a $LOCAL",
		"difftool.x.path": "./t/a", "mergetool.X.cmd": "./t/a", "mergetool.x.path": "./t/a",
		"sendemail.sendmailcmd": "./t/a", "sendemail.tocmd": "./t/a", "sendemail.cccmd": "./t/a",
		"sendemail.work.smtpserver": "./t/a", "remote.origin.uploadpack": "./t/a",
		"remote.origin.receivepack": "./t/a", "trailer.sign.command": "./t/a", "trailer.sign.cmd": "./t/a",
		"hook.lint.command": "./t/a", "imap.tunnel": "./t/a -q", "submodule.lib.update": "!./t/a",
		"browser.b.cmd": "./t/a", "man.m.path": "./t/a", "guitool.g.cmd": "./t/a", "alias.x": "!./t/a",
	} {
		if !commandKey(k) || commandPath(k, v) != "./t/a" {
			t.Errorf("%s = %q: command key %v, path %q", k, v, commandKey(k), commandPath(k, v))
		}
	}
	for k, v := range map[string]string{
		"remote.origin.url": "./t/a", "submodule.lib.path": "./t/a", "submodule.lib.update": "rebase",
		"difftool.x.trustexitcode": "./t/a", "sendemail.smtpserver": "smtp.example.com", "core.bare": "./t/a",
	} {
		if commandKey(k) && commandPath(k, v) != "" {
			t.Errorf("%s = %q names a program: %q", k, v, commandPath(k, v))
		}
	}
}

// TestBareRootNestedOut: in a workspace that is a bare repository, a
// worktree's git directory the run added (worktrees/NAME/commondir,
// which would lead the host's git in that worktree to a config of the
// command's) and a link the run put where git keeps them are quarantined
// by Finish, as from a .git; the host's own worktree stays (the control).
func TestBareRootNestedOut(t *testing.T) {
	for _, how := range []string{"added", "link"} {
		t.Run(how, func(t *testing.T) {
			ws := t.TempDir()
			for _, d := range []string{"objects", "refs/heads", "worktrees/own"} {
				os.MkdirAll(filepath.Join(ws, d), 0o755)
			}
			os.WriteFile(filepath.Join(ws, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "config"), []byte("[core]\n\tbare = true\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "worktrees/own/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "worktrees/own/commondir"), []byte("../..\n"), 0o644)
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
			want := "worktrees/new/commondir"
			switch how {
			case "added":
				os.MkdirAll(filepath.Join(ws, "worktrees/new"), 0o755)
				os.WriteFile(filepath.Join(ws, "worktrees/new/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
				os.WriteFile(filepath.Join(ws, "worktrees/new/commondir"), []byte("../../evil\n"), 0o644)
			case "link":
				// The host's worktrees/ is pinned in a run; here its
				// place is taken as a run could where there was none.
				os.RemoveAll(filepath.Join(ws, "worktrees"))
				os.Symlink("elsewhere", filepath.Join(ws, "worktrees"))
				want = "worktrees"
			}
			moved, err := g.Finish(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, m := range moved {
				found = found || m.Path == want
				if m.Path == "worktrees/own/commondir" {
					t.Errorf("the host's own worktree was quarantined: %+v", moved)
				}
			}
			if !found {
				t.Errorf("quarantined %+v, want %s", moved, want)
			}
		})
	}
}
