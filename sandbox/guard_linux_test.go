package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// These tests plant, from inside a direct-mode sandbox, what would make a
// plain git command on the host run code, then run that git command on
// the host and check nothing ran. Each has a positive control: the same
// attack made on the host directly does run the probe, so a test cannot
// pass because the probe itself is broken.

// hostGit runs git on the host in dir, with no user or system config of
// the test machine, and returns its combined output.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// linkedWorktree makes a repository (newRepo) and a linked worktree of
// it in another new directory, whose .git is a file naming main's.
func linkedWorktree(t *testing.T) (main, ws string) {
	t.Helper()
	main = newRepo(t)
	ws = filepath.Join(t.TempDir(), "linked")
	if out := hostGit(t, main, "worktree", "add", "-q", ws); !isDir(ws) {
		t.Fatalf("git worktree add: %s", out)
	}
	return main, ws
}

// newRepo makes a git repository with one commit in a new directory.
func newRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ws := t.TempDir()
	hostGit(t, ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, "README"), []byte("hello\n"), 0o644)
	hostGit(t, ws, "add", "README")
	hostGit(t, ws, "commit", "-q", "-m", "first")
	return ws
}

// gitInside is git with an identity, for commands run in the sandbox.
const gitInside = `git -c user.name=a -c user.email=a@example.com`

type plant struct {
	name   string
	setup  func(t *testing.T) (ws, gitDir string) // gitDir: where host git runs
	attack string                                 // a shell script; PROOF is the probe's path
	// quarantined is a path the report must list as quarantined ("" for
	// an attack the mounts refuse outright).
	quarantined string
}

func plants() []plant {
	repo := func(t *testing.T) (string, string) { ws := newRepo(t); return ws, ws }
	return []plant{
		{name: "rename .git and remake it", setup: repo,
			attack: `mv .git .git-moved; cp -a .git-moved .git; git config core.fsmonitor "touch $PROOF; false"`},
		{name: "config moved aside and remade", setup: repo,
			attack: `mv .git/config .git/c || rm -f .git/config; git config core.fsmonitor "touch $PROOF; false"`},
		{name: "config written in place", setup: repo,
			attack: `printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" >> .git/config`},
		{name: "commondir to a planted git dir", setup: repo, quarantined: ".git/commondir",
			attack: `mkdir -p evil/objects evil/refs && printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" > evil/config && echo ../evil > .git/commondir`},
		{name: "config.worktree", quarantined: ".git/config.worktree",
			setup: func(t *testing.T) (string, string) {
				ws := newRepo(t)
				hostGit(t, ws, "config", "extensions.worktreeConfig", "true") // as git sparse-checkout does
				return ws, ws
			},
			attack: `printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" > .git/config.worktree`},
		{name: "submodule checkout made and added to the index", setup: repo, quarantined: "sub/.git",
			attack: `mkdir sub && cd sub && git init -q && ` + gitInside + ` commit -q --allow-empty -m x && git config core.fsmonitor "touch $PROOF; false" && cd .. && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub`},
		{name: "submodule checkout added through a split index", setup: repo, quarantined: "sub/.git",
			attack: `git update-index --split-index && mkdir sub && cd sub && git init -q && ` + gitInside + ` commit -q --allow-empty -m x && git config core.fsmonitor "touch $PROOF; false" && cd .. && git update-index --add --cacheinfo 160000,$(git -C sub rev-parse HEAD),sub && git update-index --split-index`},
		{name: "repository made where there was none",
			setup:       func(t *testing.T) (string, string) { ws := t.TempDir(); return ws, ws },
			quarantined: ".git/config",
			attack:      `git init -q && git config core.fsmonitor "touch $PROOF; false"`},
	}
}

// TestPlantedGitConfigDoesNotRunOnHost: each attack, made inside the
// sandbox, leaves nothing that a host `git status` runs.
func TestPlantedGitConfigDoesNotRunOnHost(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	for _, pl := range plants() {
		t.Run(pl.name, func(t *testing.T) {
			// Positive control: on the host, the attack makes git run the probe.
			ws, gd := pl.setup(t)
			proof := filepath.Join(t.TempDir(), "PROOF")
			cmd := exec.Command("sh", "-c", pl.attack)
			cmd.Dir, cmd.Env = ws, append(os.Environ(), "PROOF="+proof, "HOME="+t.TempDir())
			cmd.CombinedOutput()
			hostGit(t, gd, "status")
			if _, err := os.Stat(proof); err != nil {
				t.Fatalf("control: the attack made on the host did not make git status run the probe; the test cannot tell")
			}

			ws, gd = pl.setup(t)
			proof = filepath.Join(t.TempDir(), "PROOF")
			r := sh(t, ws, func(p *policy.Policy) { p.Env.Set["PROOF"] = proof }, pl.attack)
			if r.err != nil {
				t.Fatalf("run: %v\n%s", r.err, r.stderr)
			}
			out := hostGit(t, gd, "status")
			if _, err := os.Stat(proof); err == nil {
				t.Fatalf("git status on the host ran what the command planted\nreport: %+v\nstderr: %s\ngit: %s", r.rep.Quarantined, r.stderr, out)
			}
			if pl.quarantined != "" {
				if !slices.ContainsFunc(r.rep.Quarantined, func(q workspace.Quarantined) bool { return q.Path == pl.quarantined }) {
					t.Errorf("quarantined %+v, want %s among them", r.rep.Quarantined, pl.quarantined)
				}
				if !slices.Contains(r.rep.ProtectedCreated, pl.quarantined) {
					t.Errorf("protected_created %q, want %s", r.rep.ProtectedCreated, pl.quarantined)
				}
				for _, q := range r.rep.Quarantined {
					if _, err := os.Lstat(q.To); err != nil {
						t.Errorf("%s is not kept in the quarantine: %v", q.Path, err)
					}
				}
			}
		})
	}
}

// TestGitWorksInside: the agent keeps what it legitimately needs: add,
// commit, branch, checkout, and they land in the host's repository.
func TestGitWorksInside(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := newRepo(t)
	r := sh(t, ws, nil, `set -e
echo two > second
`+gitInside+` add second
`+gitInside+` commit -q -m inside
git branch feature
git checkout -q feature
echo three > third
`+gitInside+` add third
`+gitInside+` commit -q -m on-feature
git checkout -q -
echo dirty >> README && git stash -q && git stash pop -q && git checkout -q README
`+gitInside+` merge -q --no-edit feature
git checkout -q -b topic HEAD~1
echo four > fourth && `+gitInside+` add fourth && `+gitInside+` commit -q -m topic
`+gitInside+` rebase -q feature
git status --short
echo OK`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "OK") {
		t.Fatalf("git inside: %s%s", r.stdout, r.stderr)
	}
	if log := hostGit(t, ws, "log", "--oneline", "--all"); !strings.Contains(log, "inside") || !strings.Contains(log, "on-feature") {
		t.Errorf("the commits made inside are not in the host's repository:\n%s", log)
	}
	if len(r.rep.Quarantined) != 0 {
		t.Errorf("ordinary git use quarantined %+v", r.rep.Quarantined)
	}
}

// TestStoppedRebaseQuarantined: a rebase the command began and left
// stopped (a conflict) has its state quarantined (its todo list could
// name commands git --continue would run on the host), and the warning
// says how to resume or leave it; moved back, git aborts it as usual,
// which is the control that the hint is right.
func TestStoppedRebaseQuarantined(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := newRepo(t)
	hostGit(t, ws, "checkout", "-q", "-b", "topic")
	os.WriteFile(filepath.Join(ws, "README"), []byte("topic\n"), 0o644)
	hostGit(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "-am", "topic")
	hostGit(t, ws, "checkout", "-q", "-")
	os.WriteFile(filepath.Join(ws, "README"), []byte("main\n"), 0o644)
	hostGit(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "-am", "main")
	hostGit(t, ws, "checkout", "-q", "topic")
	r := sh(t, ws, nil, gitInside+` rebase -q - >/dev/null 2>&1; test -d .git/rebase-merge && echo STOPPED`)
	if !strings.Contains(r.stdout, "STOPPED") {
		t.Fatalf("the rebase did not stop on its conflict: %s%s", r.stdout, r.stderr)
	}
	if len(r.rep.Quarantined) != 1 || r.rep.Quarantined[0].Path != ".git/rebase-merge" {
		t.Fatalf("quarantined %+v", r.rep.Quarantined)
	}
	q := r.rep.Quarantined[0]
	if !slices.ContainsFunc(r.rep.Warnings, func(w string) bool {
		return strings.Contains(w, "move it back to .git/rebase-merge for git to continue or abort it")
	}) {
		t.Errorf("no word of how to resume: %q", r.rep.Warnings)
	}
	if err := os.Rename(q.To, filepath.Join(ws, ".git", "rebase-merge")); err != nil {
		t.Fatal(err)
	}
	hostGit(t, ws, "rebase", "--abort")
	if head := hostGit(t, ws, "symbolic-ref", "--short", "HEAD"); strings.TrimSpace(head) != "topic" {
		t.Errorf("after the abort HEAD is %q, want topic", head)
	}
}

// TestWorktreeWorkspace: a linked worktree (its .git is a file) works as
// a workspace: commits land in the main repository's git directory, whose
// config and the worktree's own indirections stay out of reach.
func TestWorktreeWorkspace(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	main, ws := linkedWorktree(t)
	proof := filepath.Join(t.TempDir(), "PROOF")
	gd := filepath.Join(main, ".git")
	r := sh(t, ws, func(p *policy.Policy) { p.Env.Set["PROOF"] = proof }, `
echo new > file && `+gitInside+` add file && `+gitInside+` commit -q -m from-worktree && echo COMMITTED
printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" >> `+gd+`/config 2>/dev/null && echo WROTE-config
echo ../../../evil > `+gd+`/worktrees/linked/commondir 2>/dev/null && echo WROTE-commondir
mv `+gd+`/worktrees `+gd+`/wt 2>/dev/null && echo MOVED
echo 'gitdir: /tmp/x' > .git 2>/dev/null && echo WROTE-gitfile
true`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "COMMITTED") {
		t.Fatalf("git commit in a worktree workspace failed:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "WROTE") || strings.Contains(r.stdout, "MOVED") {
		t.Errorf("the git directory of the worktree was not protected:\n%s", r.stdout)
	}
	hostGit(t, ws, "status")
	if _, err := os.Stat(proof); err == nil {
		t.Fatal("git status on the host ran what the command planted")
	}
	if log := hostGit(t, main, "log", "--oneline", "--all"); !strings.Contains(log, "from-worktree") {
		t.Errorf("the commit made inside is not in the repository:\n%s", log)
	}
}

// TestRetargetedHooksLinkIsRestored: a .git/hooks that links elsewhere
// in the workspace cannot be pinned (it is a link); one the command
// points elsewhere is quarantined and the link put back.
func TestRetargetedHooksLinkIsRestored(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := newRepo(t)
	os.RemoveAll(filepath.Join(ws, ".git/hooks"))
	os.MkdirAll(filepath.Join(ws, "myhooks"), 0o755)
	os.Symlink("../myhooks", filepath.Join(ws, ".git/hooks"))
	r := sh(t, ws, nil, `mkdir evilhooks && printf '#!/bin/sh\ntouch /tmp/x\n' > evilhooks/pre-commit && chmod +x evilhooks/pre-commit && rm .git/hooks && ln -s ../evilhooks .git/hooks && echo RETARGETED`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "RETARGETED") {
		t.Fatalf("control: the command could not retarget the link, so the test cannot tell: %s%s", r.stdout, r.stderr)
	}
	if got, _ := os.Readlink(filepath.Join(ws, ".git/hooks")); got != "../myhooks" {
		t.Errorf(".git/hooks links to %q after the run, want ../myhooks put back", got)
	}
	if !slices.Contains(r.rep.ProtectedCreated, ".git/hooks") {
		t.Errorf("protected_created %q, want .git/hooks", r.rep.ProtectedCreated)
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TestSubmoduleCheckoutWorkspace: a submodule's checkout (its .git is a
// file naming the superproject's .git/modules/NAME) works as a
// workspace, with that git directory's config and hooks out of reach.
func TestSubmoduleCheckoutWorkspace(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	lib := newRepo(t)
	super := newRepo(t)
	hostGit(t, super, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
	ws := filepath.Join(super, "lib")
	if fi, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the submodule checkout has no .git file: %v", err)
	}
	gd := filepath.Join(super, ".git/modules/lib")
	proof := filepath.Join(t.TempDir(), "PROOF")
	r := sh(t, ws, func(p *policy.Policy) { p.Env.Set["PROOF"] = proof }, `
echo new > file && `+gitInside+` add file && `+gitInside+` commit -q -m in-submodule && echo COMMITTED
printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" >> `+gd+`/config 2>/dev/null && echo WROTE-config
printf '#!/bin/sh\n' > `+gd+`/hooks/pre-commit 2>/dev/null && echo WROTE-hook
true`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "COMMITTED") {
		t.Fatalf("git commit in a submodule checkout failed:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("the submodule's git directory was not protected:\n%s", r.stdout)
	}
	hostGit(t, ws, "status")
	if _, err := os.Stat(proof); err == nil {
		t.Fatal("git status on the host ran what the command planted")
	}
	if log := hostGit(t, ws, "log", "--oneline"); !strings.Contains(log, "in-submodule") {
		t.Errorf("the commit made inside is not in the submodule's repository:\n%s", log)
	}
}

// TestReadWriteRepositoryGuarded: a read-write path is written by the
// command as a direct-mode workspace is, so a repository there keeps its
// git directory as the workspace's does.
func TestReadWriteRepositoryGuarded(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	other := newRepo(t)
	proof := filepath.Join(t.TempDir(), "PROOF")
	r := sh(t, ws, func(p *policy.Policy) {
		p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, other)
		p.Env.Set["PROOF"] = proof
	}, `cd `+other+` && echo ok > written && echo WROTE-ok
mv .git .git-moved 2>/dev/null && echo MOVED
printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" >> .git/config 2>/dev/null && echo WROTE-config
echo ../evil > .git/commondir && echo WROTE-commondir
true`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "WROTE-ok") {
		t.Fatalf("control: the read-write path is not writable, so the test cannot tell:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "MOVED") || strings.Contains(r.stdout, "WROTE-config") {
		t.Errorf("the read-write repository's git directory was not protected:\n%s", r.stdout)
	}
	want := filepath.Join(other, ".git/commondir")
	if !slices.ContainsFunc(r.rep.Quarantined, func(q workspace.Quarantined) bool { return q.Path == want }) {
		t.Errorf("quarantined %+v, want %s", r.rep.Quarantined, want)
	}
	hostGit(t, other, "status")
	if _, err := os.Stat(proof); err == nil {
		t.Fatal("git status on the host ran what the command planted")
	}
}

// TestGitFileInsideWorkspace: a workspace whose .git is a file naming a
// git directory inside it (git init --separate-git-dir below the
// workspace) keeps that file: rewritten, it would have git on the host
// read another directory the command made, with a config that runs what
// it says on git status. The control: the command could make that
// directory, and git works inside.
func TestGitFileInsideWorkspace(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ws := t.TempDir()
	hostGit(t, ws, "init", "-q", "--separate-git-dir", filepath.Join(ws, "store"))
	if fi, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("git init --separate-git-dir made no .git file: %v", err)
	}
	os.WriteFile(filepath.Join(ws, "README"), []byte("hello\n"), 0o644)
	hostGit(t, ws, "add", "README")
	hostGit(t, ws, "commit", "-q", "-m", "first")
	proof := filepath.Join(t.TempDir(), "PROOF")
	r := sh(t, ws, func(p *policy.Policy) { p.Env.Set["PROOF"] = proof }, `
echo new > file && `+gitInside+` add file && `+gitInside+` commit -q -m inside && echo COMMITTED
cp -r store evil && printf '[core]\n\tfsmonitor = touch %s; false\n' "$PROOF" >> evil/config && echo MADE
echo 'gitdir: evil' > .git 2>/dev/null && echo WROTE-gitfile
true`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "COMMITTED") || !strings.Contains(r.stdout, "MADE") {
		t.Fatalf("control: git inside, or making a git directory, failed:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "WROTE") {
		t.Errorf("the command rewrote the .git file:\n%s", r.stdout)
	}
	hostGit(t, ws, "status")
	if _, err := os.Stat(proof); err == nil {
		t.Fatal("git status on the host ran what the command planted")
	}
}

// TestToolchainFilesProtected: the toolchain files that name programs
// the host runs are protected as the other host configuration is: one the
// command makes is quarantined, one that is there stays read-only (a
// rust-toolchain.toml whose path led cargo on the host to the command's
// binary; found by a tester). The control: another file of the same kind
// is written and kept.
func TestToolchainFilesProtected(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "rust-toolchain"), []byte("stable\n"), 0o644)
	r := sh(t, ws, nil, `printf '[toolchain]\npath = "/x"\n' > rust-toolchain.toml
echo 'nodejs path:/x' > .tool-versions
echo '{"initializeCommand": "x"}' > .devcontainer.json
echo nightly > rust-toolchain 2>/dev/null && echo WROTE-existing
echo kept > notes.toml`)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") {
		t.Error("the existing rust-toolchain was written")
	}
	var got []string
	for _, q := range r.rep.Quarantined {
		got = append(got, q.Path)
	}
	slices.Sort(got)
	if want := []string{".devcontainer.json", ".tool-versions", "rust-toolchain.toml"}; !slices.Equal(got, want) {
		t.Errorf("quarantined %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes.toml")); err != nil || string(b) != "kept\n" {
		t.Errorf("control: notes.toml %q %v", b, err)
	}
}

// TestFIFOsWhereGitReadsQuarantined: a FIFO the command leaves at the
// top's .gitignore or .gitattributes, or at .git/info/exclude, is
// quarantined: a host `git status` opened it and waited for ever (found
// by a tester). The control: git status on the host ends, and a FIFO
// elsewhere in the workspace stays.
func TestFIFOsWhereGitReadsQuarantined(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := newRepo(t)
	r := sh(t, ws, nil, `mkdir -p .git/info && rm -f .git/info/exclude && mkfifo .gitignore .gitattributes .git/info/exclude other`)
	mustExit(t, r, 0)
	var got []string
	for _, q := range r.rep.Quarantined {
		got = append(got, q.Path)
	}
	slices.Sort(got)
	if want := []string{".git/info/exclude", ".gitattributes", ".gitignore"}; !slices.Equal(got, want) {
		t.Errorf("quarantined %q, want %q", got, want)
	}
	done := make(chan string, 1)
	go func() { done <- hostGit(t, ws, "status", "--short") }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("git status on the host hangs")
	}
	if fi, err := os.Lstat(filepath.Join(ws, "other")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("control: the FIFO elsewhere: %v %v", fi, err)
	}
}

// TestGuardGapRefused: a protected directory too large for the links'
// scan leaves files its links lead to writable: the run is refused, or
// run degraded with the gap said (it ran with a warning only; found by a
// reviewer). The control: the same directory, smaller, runs.
func TestGuardGapRefused(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	dir := filepath.Join(ws, ".vscode")
	os.Mkdir(dir, 0o755)
	for i := range 5000 {
		os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644)
	}
	r := sh(t, ws, nil, "echo ran")
	if r.err == nil || !strings.Contains(r.err.Error(), ".vscode (host tools") || strings.Contains(r.stdout, "ran") {
		t.Errorf("refused? %v %q", r.err, r.stdout)
	}
	r = runDegraded(t, ws, func(*policy.Policy) {}, "echo ran")
	if r.err != nil || r.stdout != "ran\n" || !slices.ContainsFunc(r.rep.Degraded, func(d string) bool { return strings.Contains(d, ".vscode (host tools") }) {
		t.Errorf("degraded: %v %q %q", r.err, r.stdout, r.rep.Degraded)
	}
	for i := 100; i < 5000; i++ {
		os.Remove(filepath.Join(dir, "f"+strconv.Itoa(i)))
	}
	if r := sh(t, ws, nil, "echo ran"); r.err != nil || r.stdout != "ran\n" {
		t.Errorf("control: %v %q", r.err, r.stdout)
	}
}

// TestHookAndStartupFilesProtected: the files hook managers, yarn,
// direnv's usual .envrc, lazygit and interpreters' start-up read from the
// project, which a tester planted to run code on the host's next commit
// or yarn command, are quarantined when a direct run makes them, and an
// existing one cannot be written; positive control: another file is kept.
func TestHookAndStartupFilesProtected(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := newRepo(t)
	os.MkdirAll(filepath.Join(ws, ".yarn", "releases"), 0o755)
	os.WriteFile(filepath.Join(ws, ".yarn", "releases", "yarn-4.5.0.cjs"), []byte("// yarn\n"), 0o644)
	made := []string{"lefthook-local.json", ".lefthook.toml", ".config/lefthook-local.yml", "prek.toml",
		".lintstagedrc.mjs", ".envrc.local", ".Rprofile", ".ghci", ".git/lazygit.yml", ".yarn/plugins/p.cjs"}
	script := `echo x > .yarn/releases/yarn-4.5.0.cjs 2>/dev/null && echo WROTE-yarn
mkdir -p .config .yarn/plugins
echo kept > notes.yml
`
	for _, p := range made {
		script += "echo x > " + p + "\n"
	}
	r := sh(t, ws, nil, script)
	mustExit(t, r, 0)
	if strings.Contains(r.stdout, "WROTE") {
		t.Error("the existing yarn release was written")
	}
	var got []string
	for _, q := range r.rep.Quarantined {
		got = append(got, q.Path)
	}
	for _, p := range made {
		top, _, _ := strings.Cut(p, "/")
		if strings.HasPrefix(p, ".git/") || p == ".yarn/plugins/p.cjs" {
			top = p
			if p == ".yarn/plugins/p.cjs" {
				top = ".yarn/plugins"
			}
		}
		if !slices.Contains(got, top) {
			t.Errorf("%s: not quarantined (quarantined: %q)", p, got)
		}
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is still in the workspace", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "notes.yml")); err != nil || string(b) != "kept\n" {
		t.Errorf("control: notes.yml %q %v", b, err)
	}
}

// TestMercurialConfigProtected: Mercurial runs the hooks of more than
// .hg/hgrc: .hg/hgrc-not-shared, and the hgrc of the repository a
// share's .hg/sharedpath names (`share-safe` in .hg/requires), which the
// command can write anywhere in the workspace. Made by the run, both are
// quarantined; one that was there is read-only. The control: the rest
// of .hg (its store, its requires) stays writable, so commits work.
func TestMercurialConfigProtected(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".hg", "store"), 0o755)
	os.WriteFile(filepath.Join(ws, ".hg", "requires"), []byte("store\nshare-safe\n"), 0o644)
	r := sh(t, ws, nil, `printf '[hooks]\npre-status = touch /tmp/x\n' > .hg/hgrc-not-shared
mkdir -p notes && printf '[hooks]\npre-status = touch /tmp/x\n' > notes/hgrc
printf '../notes' > .hg/sharedpath
printf 'store\nshare-safe\nshared\nrelshared\n' > .hg/requires && echo requires written
echo data > .hg/store/00changelog.i && echo store written
`)
	mustExit(t, r, 0)
	if !strings.Contains(r.stdout, "requires written\nstore written\n") {
		t.Errorf("control: .hg's other files were not writable: %q", r.stdout)
	}
	var got []string
	for _, q := range r.rep.Quarantined {
		got = append(got, q.Path)
	}
	for _, p := range []string{".hg/hgrc-not-shared", ".hg/sharedpath"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s: not quarantined (quarantined: %q)", p, got)
		}
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is still in the workspace", p)
		}
	}
	// One the host made is read-only in the next run.
	os.WriteFile(filepath.Join(ws, ".hg", "sharedpath"), []byte("/srv/repo/.hg"), 0o644)
	r = sh(t, ws, nil, `printf '../notes' > .hg/sharedpath 2>/dev/null || echo refused`)
	if b, _ := os.ReadFile(filepath.Join(ws, ".hg", "sharedpath")); string(b) != "/srv/repo/.hg" || !strings.Contains(r.stdout, "refused") {
		t.Errorf("the host's .hg/sharedpath was rewritten: %q (%q)", b, r.stdout)
	}
}

// TestDeleteInTmpOnTheLine: a run's line that deletes a path in the
// sandbox's own /tmp, written out (rm -rf /tmp/scratch), runs, as the
// same deletion through a variable does at its exec; a line that deletes
// in the git directory a linked worktree's .git names, bound writable at
// its host path under /tmp, is still refused without an approver, and the
// repository keeps its refs (the control).
func TestDeleteInTmpOnTheLine(t *testing.T) {
	t.Setenv("MOAT_STATE_DIR", t.TempDir())
	main, ws := linkedWorktree(t)
	gd := filepath.Join(main, ".git")
	if !strings.HasPrefix(gd, "/tmp/") {
		t.Skipf("the test's directories are not under /tmp (%s): the case is a git directory bound there", gd)
	}
	r := sh(t, ws, nil, `mkdir -p /tmp/scratch/x && rm -rf /tmp/scratch && test ! -e /tmp/scratch && echo gone`)
	mustExit(t, r, 0)
	if r.stdout != "gone\n" {
		t.Errorf("rm -rf /tmp/scratch on the line: %q %s", r.stdout, r.stderr)
	}
	r = sh(t, ws, nil, `rm -rf `+gd+`/refs; echo ran`)
	if r.rep.Reason != "denied" || strings.Contains(r.stdout, "ran") {
		t.Errorf("rm -rf of the bound git directory's refs: reason %q, %q %s", r.rep.Reason, r.stdout, r.stderr)
	}
	if !isDir(filepath.Join(gd, "refs")) {
		t.Fatal("the repository's refs went")
	}
}
