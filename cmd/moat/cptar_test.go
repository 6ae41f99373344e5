//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCpDirectories: moat cp copies a directory into a session and back,
// links as links; a session directory that holds a link out of the
// workspace comes back as that link, not what it points to.
func TestCpDirectories(t *testing.T) {
	sock, _ := startServe(t)
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "sub/a"), []byte("alpha"), 0o600)
	os.Symlink("sub/a", filepath.Join(src, "link"))
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, src, id+":in/copy"); code != 0 {
		t.Fatalf("cp to the session: %d %q", code, errs)
	}
	if code, out, _ := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c", "cat in/copy/link; readlink in/copy/link; ln -s /etc in/copy/etc"); code != 0 || out != "alphasub/a\n" {
		t.Errorf("the session sees %d %q", code, out)
	}
	back := filepath.Join(dir, "back")
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, id+":in", back); code != 0 {
		t.Fatalf("cp from the session: %d %q", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(back, "copy/sub/a")); string(b) != "alpha" {
		t.Errorf("copied back: %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(back, "copy/etc")); l != "/etc" {
		t.Errorf("the link out came back as %q", l)
	}
	if fi, err := os.Stat(filepath.Join(back, "copy/sub/a")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v", fi, err)
	}
	// A file copied back over a link the session made replaces the link.
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("original"), 0o644)
	os.Symlink(victim, filepath.Join(dir, "out.txt"))
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, id+":in/copy/sub/a", filepath.Join(dir, "out.txt")); code != 0 {
		t.Fatalf("cp of a file from the session: %d %q", code, errs)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original" {
		t.Errorf("the file was written through the link: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "alpha" {
		t.Errorf("copied file: %q", b)
	}
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, "/nonexistent-dir", id+":x"); code != exitMoatError || !strings.Contains(errs, "nonexistent") {
		t.Errorf("cp of a missing host path: %d %q", code, errs)
	}
}

// TestCpLeavesOutHostRunPaths: a session's directory copied out leaves
// out what would run on the host by itself there (a repository's config
// and hooks, a .envrc), says so and exits 125, and copies the rest; with
// --force all of it comes out. Before, `git status` in the copy ran the
// session's core.fsmonitor on the host.
func TestCpLeavesOutHostRunPaths(t *testing.T) {
	sock, _ := startServe(t)
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c",
		"mkdir -p out/repo/.git/hooks out/sub && echo ok > out/result.txt && printf '[core]\\n\\tfsmonitor = touch pwned\\n' > out/repo/.git/config && echo x > out/repo/.git/hooks/pre-commit && echo 'touch pwned' > out/sub/.envrc"); code != 0 {
		t.Fatalf("exec: %d %q", code, errs)
	}
	back := filepath.Join(dir, "back")
	code, _, errs = moat(t, dir, "cp", "--socket", sock, id+":out", back)
	if code != exitMoatError || !strings.Contains(errs, "left out repo/.git") || !strings.Contains(errs, "left out sub/.envrc") || !strings.Contains(errs, "--force") {
		t.Errorf("cp out: %d %q", code, errs)
	}
	for _, p := range []string{"repo/.git/config", "repo/.git/hooks/pre-commit", "sub/.envrc"} {
		if _, err := os.Lstat(filepath.Join(back, p)); err == nil {
			t.Errorf("%s was copied out", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(back, "result.txt")); string(b) != "ok\n" {
		t.Errorf("the rest was not copied: %q", b)
	}
	forced := filepath.Join(dir, "forced")
	if code, _, errs := moat(t, dir, "cp", "--socket", sock, "--force", id+":out", forced); code != 0 {
		t.Fatalf("cp --force: %d %q", code, errs)
	}
	for _, p := range []string{"repo/.git/config", "repo/.git/hooks/pre-commit", "sub/.envrc", "result.txt"} {
		if _, err := os.Lstat(filepath.Join(forced, p)); err != nil {
			t.Errorf("cp --force: %s: %v", p, err)
		}
	}
}

// TestCpSaysWhatTheDaemonCouldNotRead: a file a session's command made
// mode 000 cannot come out through a daemon of the same user; the copy of
// the rest is made (the positive control), the file named, and the exit
// status says the copy is not whole, into a directory and to stdout.
// Before, the archive left it out without a word. A daemon run as root
// reads every mode, and the copy is whole.
func TestCpSaysWhatTheDaemonCouldNotRead(t *testing.T) {
	sock, _ := startServe(t)
	dir := t.TempDir()
	code, out, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("session create: %d %q", code, errs)
	}
	if code, _, errs := moat(t, dir, "exec", "--socket", sock, id, "--", "sh", "-c",
		"mkdir out && echo ok > out/ok.txt && echo closed > out/closed.txt && chmod 000 out/closed.txt"); code != 0 {
		t.Fatalf("exec: %d %q", code, errs)
	}
	back := filepath.Join(dir, "back")
	code, _, errs = moat(t, dir, "cp", "--socket", sock, id+":out", back)
	if b, _ := os.ReadFile(filepath.Join(back, "ok.txt")); string(b) != "ok\n" {
		t.Errorf("the rest was not copied: %q (%d %q)", b, code, errs)
	}
	code2, tarOut, errs2 := moat(t, dir, "cp", "--socket", sock, id+":out", "-")
	if !strings.Contains(tarOut, "ok.txt") {
		t.Errorf("cp to stdout: no ok.txt in the archive (%d %q)", code2, errs2)
	}
	if os.Geteuid() == 0 {
		if code != 0 || code2 != 0 {
			t.Errorf("as root: %d %q; to stdout %d %q", code, errs, code2, errs2)
		}
		return
	}
	for _, r := range []struct {
		code int
		errs string
	}{{code, errs}, {code2, errs2}} {
		if r.code != exitMoatError || !strings.Contains(r.errs, "left out closed.txt: the daemon could not read it (permission denied)") {
			t.Errorf("cp with an unreadable file: %d %q", r.code, r.errs)
		}
	}
	if _, err := os.Lstat(filepath.Join(back, "closed.txt")); err == nil {
		t.Errorf("the unreadable file was made on the host")
	}
}
