//go:build linux

package workspace

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moatbox/moat/internal/pty"
)

// gitEnv is an environment for git that reads no configuration but the
// repository's own and never walks up past ceiling.
func gitEnv(home, ceiling string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "PAGER=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES="+ceiling, "TERM=xterm")
}

// plantBareRepo makes dir a bare repository, as `git init --bare` and a
// commit make it, whose config names a pager that creates marker.
func plantBareRepo(t *testing.T, dir, marker string) {
	t.Helper()
	env := gitEnv(t.TempDir(), filepath.Dir(dir))
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	init := exec.Command("git", "init", "-q", "--bare", "--initial-branch=main", dir)
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v\n%s", err, out)
	}
	git("", "config", "core.pager", "echo ran > '"+marker+"'; cat >/dev/null")
	tree := git("", "mktree")
	commit := git("", "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree", "-m", "x", tree)
	git("", "update-ref", "HEAD", commit)
}

// pagerRuns runs `git log` in dir as a person at a terminal does, and
// reports whether the pager the repository's config names ran (it makes
// marker).
func pagerRuns(t *testing.T, dir, marker string) bool {
	t.Helper()
	os.Remove(marker)
	master, tty, err := pty.Open(0, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	// git pages only when its output is a terminal.
	cmd := exec.Command("git", "log", "-1", "--oneline")
	cmd.Dir = dir
	cmd.Env = gitEnv(t.TempDir(), filepath.Dir(dir))
	cmd.Stdout = tty
	cmd.Run() // fails outside a repository: the marker says what ran
	_, err = os.Stat(marker)
	return err == nil
}

// TestApplyRefusesBareGitDirs: a bare repository's layout, which git's
// discovery takes for a repository whatever its name, is refused by Apply
// unless forced: made in a new directory, completed in one the host had,
// at the top of a workspace without .git; its config changed where the
// host already had one. Ordinary files named like its entries apply. The
// layouts are live: git log in one the host made, or in one forced in,
// runs the pager its config names.
func TestApplyRefusesBareGitDirs(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	marker := filepath.Join(t.TempDir(), "pager-ran")

	// The control: a layout the host made is live.
	host := filepath.Join(t.TempDir(), "hostbare")
	plantBareRepo(t, host, marker)
	if !pagerRuns(t, host, marker) {
		t.Fatal("git log in a bare repository the host made did not run its pager: the probe proves nothing")
	}

	_, c := newSet(t, map[string]string{"README": "r\n", "data/objects/a": "a\n", "data/notes": "n\n"})
	ws, up := c.Workspace(), c.UpperDir()
	plantBareRepo(t, filepath.Join(up, "sub"), marker)
	// data: the host has objects/; the command adds HEAD, refs/ and config.
	tree(t, up, map[string]string{
		"data/HEAD": "ref: refs/heads/main\n", "data/refs/heads/": "", "data/config": "[core]\n\tpager = evil\n",
		"data/notes": "changed\n",
		// Ordinary files named as a git directory's entries, in
		// directories that are not one.
		"docs/HEAD": strings.Repeat("0123456789", 4) + "\n", "docs/objects/": "", "docs/config": "c\n",
		"notes/HEAD": "ref: refs/heads/x\n", "notes/refs/": "", "notes/hooks/x": "x\n",
		"fine.txt": "f\n",
	})
	rep, err := c.Apply(nil, nil)
	if !errors.Is(err, ErrProtected) {
		t.Fatalf("apply: %v, want ErrProtected", err)
	}
	for _, p := range []string{"sub", "sub/HEAD", "sub/config", "sub/refs/heads/main", "data/HEAD", "data/refs", "data/config"} {
		if !slices.Contains(rep.Protected, p) {
			t.Errorf("%s not refused: %q", p, rep.Protected)
		}
	}
	for _, p := range rep.Protected {
		if !strings.HasPrefix(p, "sub") && !strings.HasPrefix(p, "data/") || p == "data/notes" || p == "sub/description" {
			t.Errorf("refused %s, which makes no git directory", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "sub")); err == nil {
		t.Fatal("a refused apply applied sub")
	}
	if pagerRuns(t, filepath.Join(ws, "data"), marker) {
		t.Fatal("the pager ran in data, which the refused apply should have left alone")
	}

	// The ordinary names apply.
	if rep, err := c.Apply([]string{"docs", "notes", "fine.txt", "data/notes"}, nil); err != nil {
		t.Fatalf("apply of ordinary files: %v (%q)", err, rep.Protected)
	}

	// Forced, they land, and git takes them for repositories.
	if rep, err := c.Apply(nil, []string{"sub", "data"}); err != nil {
		t.Fatalf("forced apply: %v (%q)", err, rep.Protected)
	}
	if !pagerRuns(t, filepath.Join(ws, "sub"), marker) {
		t.Error("git log in the bare repository forced in did not run its pager")
	}

	// A git directory the host already has: its config is guarded, a
	// commit into it is not.
	root := t.TempDir()
	ws = filepath.Join(root, "ws")
	plantBareRepo(t, filepath.Join(ws, "mirror"), marker)
	os.WriteFile(filepath.Join(ws, "mirror/config"), []byte("[core]\n\tbare = true\n"), 0o644)
	if c, err = (&Store{Dir: filepath.Join(root, "state")}).Create(ws, ""); err != nil {
		t.Fatal(err)
	}
	up = c.UpperDir()
	os.MkdirAll(filepath.Join(up, "mirror/refs/heads"), 0o755)
	tree(t, up, map[string]string{"mirror/config": "[core]\n\tpager = evil\n", "mirror/refs/heads/topic": strings.Repeat("ab", 20) + "\n"})
	rep, err = c.Apply(nil, nil)
	if !errors.Is(err, ErrProtected) || !slices.Equal(rep.Protected, []string{"mirror/config"}) {
		t.Fatalf("apply over the host's bare repository: %v, refused %q, want mirror/config alone", err, rep.Protected)
	}
	if _, err := c.Apply([]string{"mirror/refs"}, nil); err != nil {
		t.Fatalf("apply of a new ref in the host's bare repository: %v", err)
	}

	// The top of a workspace without .git.
	_, c = newSet(t, map[string]string{"README": "r\n"})
	ws, up = c.Workspace(), c.UpperDir()
	plantBareRepo(t, up, marker)
	os.WriteFile(filepath.Join(up, "README"), []byte("changed\n"), 0o644)
	rep, err = c.Apply(nil, nil)
	if !errors.Is(err, ErrProtected) {
		t.Fatalf("apply of a bare layout at the top: %v, want ErrProtected", err)
	}
	for _, p := range []string{"HEAD", "config", "objects", "refs/heads/main"} {
		if !slices.Contains(rep.Protected, p) {
			t.Errorf("%s not refused: %q", p, rep.Protected)
		}
	}
	if slices.Contains(rep.Protected, "README") || slices.Contains(rep.Protected, ".") {
		t.Errorf("refused what makes no git directory: %q", rep.Protected)
	}
	if pagerRuns(t, ws, marker) {
		t.Fatal("the pager ran at the top after a refused apply")
	}
	if _, err := c.Apply(nil, []string{"."}); err != nil {
		t.Fatalf("forced apply at the top: %v", err)
	}
	if !pagerRuns(t, ws, marker) {
		t.Error("git log at the top, made a bare repository, did not run its pager")
	}
}

// TestIsGitDirectory: the layouts git's is_git_directory accepts, checked
// against git itself (rev-parse --git-dir in the directory), with those it
// does not.
func TestIsGitDirectory(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	hex := strings.Repeat("0123456789", 4)
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		{"symbolic HEAD", map[string]string{"HEAD": "ref: refs/heads/main\n", "objects/": "", "refs/": ""}, true},
		{"spaces after ref:", map[string]string{"HEAD": "ref:  \trefs/x", "objects/": "", "refs/": ""}, true},
		{"detached HEAD, upper case", map[string]string{"HEAD": strings.ToUpper(hex) + "\n", "objects/": "", "refs/": ""}, true},
		{"HEAD a link into refs", map[string]string{"HEAD": "-> refs/heads/main", "objects/": "", "refs/": ""}, true},
		{"objects an executable file", map[string]string{"HEAD": hex, "objects#755": "", "refs/": ""}, true},
		{"commondir", map[string]string{"HEAD": hex, "commondir": "c\n", "c/objects/": "", "c/refs/": ""}, true},
		{"HEAD too short", map[string]string{"HEAD": hex[:39], "objects/": "", "refs/": ""}, false},
		{"HEAD not a ref", map[string]string{"HEAD": "ref: heads/main\n", "objects/": "", "refs/": ""}, false},
		{"HEAD a link elsewhere", map[string]string{"HEAD": "-> heads/main", "objects/": "", "refs/": ""}, false},
		{"HEAD a directory", map[string]string{"HEAD/": "", "objects/": "", "refs/": ""}, false},
		{"no refs", map[string]string{"HEAD": hex, "objects/": ""}, false},
		{"objects a plain file", map[string]string{"HEAD": hex, "objects": "", "refs/": ""}, false},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		tree(t, dir, tc.files)
		if got := isGitDirAt(dir); got != tc.want {
			t.Errorf("%s: isGitDirAt = %v, want %v", tc.name, got, tc.want)
		}
		cmd := exec.Command("git", "rev-parse", "--git-dir")
		cmd.Dir = dir
		cmd.Env = gitEnv(t.TempDir(), filepath.Dir(dir))
		out, err := cmd.Output()
		if git := err == nil && strings.TrimSpace(string(out)) == "."; git != tc.want {
			t.Errorf("%s: git takes it for a git directory: %v (%s), the test wants %v", tc.name, git, out, tc.want)
		}
	}
}
