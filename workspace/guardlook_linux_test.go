//go:build linux

package workspace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var guardRepo = map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n"}

func quarantinedPaths(moved []Quarantined) []string {
	var got []string
	for _, m := range moved {
		got = append(got, m.Path)
	}
	slices.Sort(got)
	return got
}

// TestFinishReadsGitmodulesBelow: Finish reads .gitmodules to find the
// submodule checkouts whose .git the run made. Run as root (the daemon)
// it must not read, through a link the workspace's owner put there on
// the host, a file that user cannot read (here one of mode 0600 outside
// the workspace): what it names would decide what is quarantined, which
// the user sees. The control: the same content in the workspace's own
// .gitmodules has the checkout's new .git quarantined.
func TestFinishReadsGitmodulesBelow(t *testing.T) {
	for _, link := range []bool{false, true} {
		name := "control"
		if link {
			name = "link"
		}
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			tree(t, ws, guardRepo)
			tree(t, ws, map[string]string{".gitmodules": "# none yet\n"})
			secret := filepath.Join(root, "private/secret")
			tree(t, filepath.Dir(secret), map[string]string{"secret#600": "[submodule \"x\"]\n\tpath = probe\n"})
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
			tree(t, ws, map[string]string{"probe/.git/config": "[core]\n"})
			gm := filepath.Join(ws, ".gitmodules")
			os.Remove(gm)
			if link {
				if err := os.Symlink(secret, gm); err != nil {
					t.Fatal(err)
				}
			} else {
				b, _ := os.ReadFile(secret)
				os.WriteFile(gm, b, 0o644)
			}
			moved, err := g.Finish(filepath.Join(root, "quarantine"))
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			got := quarantinedPaths(moved)
			if link && slices.Contains(got, "probe/.git") {
				t.Errorf("Finish read %s through the link at .gitmodules: quarantined %q", secret, got)
			}
			if !link && !slices.Contains(got, "probe/.git") {
				t.Errorf("control: quarantined %q, want probe/.git", got)
			}
		})
	}
}

// TestFinishReadsIndexBelow: the git index stays writable to the
// command, which may leave a link there to a file it cannot read, such
// as another repository's index; Finish, as root, must not read it (nor
// a named pipe, where it would wait). An index it does not read is one
// it cannot read: it walks the workspace for new .git instead, and still
// quarantines the checkout's. The control: the same index copied in is
// read, and names the checkout without a walk.
func TestFinishReadsIndexBelow(t *testing.T) {
	root := t.TempDir()
	other := filepath.Join(root, "private/repo")
	tree(t, other, guardRepo)
	cmd := exec.Command("git", "update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("a", 40)+",probe")
	cmd.Dir = other
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git update-index: %v %s", err, out)
	}
	os.Chmod(filepath.Join(other, ".git/index"), 0o600)
	for _, kind := range []string{"control", "link", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			ws := filepath.Join(root, kind)
			tree(t, ws, guardRepo)
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
			tree(t, ws, map[string]string{"probe/.git/config": "[core]\n"})
			index := filepath.Join(ws, ".git/index")
			switch kind {
			case "control":
				b, _ := os.ReadFile(filepath.Join(other, ".git/index"))
				os.WriteFile(index, b, 0o644)
			case "link":
				os.Symlink(filepath.Join(other, ".git/index"), index)
			case "fifo":
				if err := exec.Command("mkfifo", index).Run(); err != nil {
					t.Fatal(err)
				}
			}
			walks := 0
			testHookDotGitsSince = func() { walks++ }
			defer func() { testHookDotGitsSince = nil }()
			done := make(chan struct{})
			var moved []Quarantined
			go func() {
				defer close(done)
				moved, err = g.Finish(filepath.Join(root, "quarantine", kind))
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Finish hangs on the index")
			}
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			want := []string{"probe/.git"}
			if kind == "fifo" {
				// A FIFO where git reads a file goes too (specialsOut).
				want = []string{".git/index", "probe/.git"}
			}
			if got := quarantinedPaths(moved); !slices.Equal(got, want) {
				t.Errorf("quarantined %q, want %q", got, want)
			}
			if want := map[string]int{"control": 0, "link": 1, "fifo": 1}[kind]; walks != want {
				t.Errorf("Finish walked the workspace %d times, want %d (0: it read the index)", walks, want)
			}
		})
	}
}

// TestFinishLooksBelow: what Finish looks at to decide what to move is
// looked up below the workspace it opened. The workspace's owner, on
// the host, swaps .git for a link to another user's repository while
// Finish runs: whether that repository has hooks must not show in what
// is quarantined (Finish, as root, would otherwise tell that user
// whether a path exists where it cannot look). The control: a link to
// a directory inside the workspace is followed as before, and the hooks
// planted there quarantined.
func TestFinishLooksBelow(t *testing.T) {
	results := map[string][]string{}
	for _, tc := range []string{"inside", "outside with hooks", "outside without hooks"} {
		t.Run(tc, func(t *testing.T) {
			root := t.TempDir()
			ws := filepath.Join(root, "ws")
			tree(t, ws, guardRepo) // no hooks: .git/hooks is an absent route
			victim := filepath.Join(root, "private/repo/.git")
			tree(t, filepath.Dir(victim), guardRepo)
			if tc == "outside with hooks" {
				tree(t, victim, map[string]string{"hooks/post-checkout": "#!/bin/sh\n"})
			}
			os.Chmod(filepath.Join(root, "private"), 0o700)
			g, err := NewGuard(ws, GuardOptions{Writable: true})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			time.Sleep(20 * time.Millisecond) // past the coarse clock's tick
			dotgit := filepath.Join(ws, ".git")
			os.Rename(dotgit, filepath.Join(ws, "aside"))
			target := victim
			if tc == "inside" {
				tree(t, ws, map[string]string{"aside/hooks/pre-commit": "#!/bin/sh\n"})
				target = "aside"
			}
			if err := os.Symlink(target, dotgit); err != nil {
				t.Fatal(err)
			}
			moved, _ := g.Finish(filepath.Join(root, "quarantine"))
			results[tc] = quarantinedPaths(moved)
			if _, err := os.Lstat(filepath.Join(victim, "hooks")); tc == "outside with hooks" && err != nil {
				t.Errorf("the other repository lost its hooks: %v", err)
			}
			if tc == "inside" && !slices.Contains(results[tc], ".git/hooks") {
				t.Errorf("control: quarantined %q, want .git/hooks", results[tc])
			}
		})
	}
	if a, b := results["outside with hooks"], results["outside without hooks"]; !slices.Equal(a, b) {
		t.Errorf("what Finish quarantined tells whether another repository has hooks: %q with, %q without", a, b)
	}
}

// BenchmarkGuard is what the guard costs every direct-mode run that
// changes nothing it protects: NewGuard and Finish, on an empty
// workspace and on a git repository (git init, one commit).
func BenchmarkGuard(b *testing.B) {
	for _, kind := range []string{"empty", "git"} {
		b.Run(kind, func(b *testing.B) {
			ws := b.TempDir()
			if kind == "git" {
				os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
				for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "a"}} {
					cmd := exec.Command("git", args...)
					cmd.Dir = ws
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("git %v: %v %s", args, err, out)
					}
				}
			}
			q := b.TempDir()
			b.ResetTimer()
			for range b.N {
				g, err := NewGuard(ws, GuardOptions{Writable: true})
				if err != nil {
					b.Fatal(err)
				}
				if moved, err := g.Finish(q); err != nil || len(moved) > 0 {
					b.Fatal(moved, err)
				}
				g.Close()
			}
		})
	}
}

// TestFinishTakesOutGitFIFOs: a FIFO or socket a run leaves where git
// reads a file (HEAD, packed-refs, a ref) is quarantined: git status on
// the host waited on it for ever (found by a tester). The control: a FIFO
// elsewhere in the workspace, which git does not open, stays.
func TestFinishTakesOutGitFIFOs(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, guardRepo)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.MkdirAll(filepath.Join(ws, ".git/refs/heads"), 0o755)
	for _, p := range []string{".git/packed-refs", ".git/refs/heads/topic", "fifo"} {
		if err := exec.Command("mkfifo", filepath.Join(ws, p)).Run(); err != nil {
			t.Fatal(err)
		}
	}
	// A link git follows to a FIFO (found by a reviewer).
	os.Remove(filepath.Join(ws, ".git/HEAD"))
	os.Symlink("../fifo", filepath.Join(ws, ".git/HEAD"))
	moved, err := g.Finish(filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := quarantinedPaths(moved), []string{".git/HEAD", ".git/packed-refs", ".git/refs/heads/topic"}; !slices.Equal(got, want) {
		t.Errorf("quarantined %q, want %q", got, want)
	}
	if _, err := os.Lstat(filepath.Join(ws, "fifo")); err != nil {
		t.Errorf("control: the FIFO outside .git: %v", err)
	}
}

// TestFinishRestoresOpenedModes: a run that let other users write the
// workspace's root or its .git has their modes put back, and says so:
// any user could otherwise swap in hooks the owner's git runs (found by
// a tester). The control: a mode the command narrowed stays its choice.
func TestFinishRestoresOpenedModes(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, guardRepo)
	os.Chmod(ws, 0o755)
	os.Chmod(filepath.Join(ws, ".git"), 0o755)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.Chmod(ws, 0o777)
	os.Chmod(filepath.Join(ws, ".git"), 0o700)
	if _, err := g.Finish(filepath.Join(t.TempDir(), "q")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(ws); fi.Mode().Perm() != 0o755 {
		t.Errorf("the root is %04o, want 0755 back", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Join(ws, ".git")); fi.Mode().Perm() != 0o700 {
		t.Errorf("control: .git is %04o, want the command's 0700", fi.Mode().Perm())
	}
	if r := g.Restored(); len(r) != 1 || !strings.Contains(r[0], "0777") {
		t.Errorf("Restored() = %q", r)
	}
}

// TestFinishRestoresRouteModes: a directory on the way to a protected
// path that the command opened to other users' writes (.cargo, there
// before, or .config, made by it) is closed again, so that no other user
// plants .cargo/config.toml after the run (found by a tester). The
// control: another directory keeps the command's mode.
func TestFinishRestoresRouteModes(t *testing.T) {
	ws := t.TempDir()
	os.Chmod(ws, 0o755)
	os.Mkdir(filepath.Join(ws, ".cargo"), 0o755)
	os.Mkdir(filepath.Join(ws, "src"), 0o755)
	os.Mkdir(filepath.Join(ws, ".vim"), 0o755)
	os.Chmod(filepath.Join(ws, ".vim"), 0o755|os.ModeSetgid)
	os.Mkdir(filepath.Join(ws, ".hg"), 0o755)
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.Chmod(filepath.Join(ws, ".cargo"), 0o777)
	os.Mkdir(filepath.Join(ws, ".github"), 0o777)
	os.Chmod(filepath.Join(ws, ".github"), 0o777)
	os.Chmod(filepath.Join(ws, "src"), 0o777)
	os.Chmod(filepath.Join(ws, ".vim"), 0o777)
	// A route directory replaced with a link: its target (the root
	// here) does not get the directory's mode.
	os.Remove(filepath.Join(ws, ".hg"))
	os.Symlink(".", filepath.Join(ws, ".hg"))
	os.Chmod(ws, 0o751)
	if _, err := g.Finish(filepath.Join(t.TempDir(), "q")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{".cargo": 0o755, ".github": 0o755, "src": 0o777, ".vim": 0o755 | os.ModeSetgid, ".": 0o751} {
		if fi, err := os.Stat(filepath.Join(ws, name)); err != nil || fi.Mode()&(os.ModePerm|os.ModeSetgid) != want {
			t.Errorf("%s: %v %v, want %v", name, fi.Mode(), err, want)
		}
	}
	if r := g.Restored(); len(r) != 3 {
		t.Errorf("Restored() = %q, want .cargo, .github and .vim", r)
	}
}

// TestLinkScanBoundWarns: a protected directory with more entries than
// the links' scan looks at is a gap naming it (the scan stopped without
// a word), which a run refuses unless degraded; each protected path has
// its own budget. The control: a small one is none.
func TestLinkScanBoundWarns(t *testing.T) {
	for _, n := range []int{10, maxLinkScan + 10} {
		ws := t.TempDir()
		dir := filepath.Join(ws, ".vscode")
		os.Mkdir(dir, 0o755)
		for i := range n {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0o644)
		}
		g, err := NewGuard(ws, GuardOptions{Writable: true})
		if err != nil {
			t.Fatal(err)
		}
		w := g.Gaps()
		g.Close()
		if big := n > maxLinkScan; big != (len(w) == 1) || big && !strings.Contains(w[0], ".vscode (host tools") {
			t.Errorf("%d entries: gaps %q", n, w)
		}
	}
}

// TestFinishRemovesDefaultACL: a default ACL the command put on the root
// or its .git, which every file the owner made there later inherited
// (other users' write, whatever the umask; found by a tester), is removed
// after the run; positive control: one the directory had at the start
// stays.
func TestFinishRemovesDefaultACL(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	os.Mkdir(filepath.Join(ws, ".cargo"), 0o755)
	// user::rwx group::rwx other::rwx, the xattr's binary form.
	acl := []byte{2, 0, 0, 0}
	for _, tag := range []uint16{1, 4, 0x20} {
		acl = append(acl, byte(tag), byte(tag>>8), 7, 0, 0xff, 0xff, 0xff, 0xff)
	}
	if err := unix.Setxattr(filepath.Join(ws, ".cargo"), "system.posix_acl_default", acl, 0); err != nil {
		t.Skipf("this filesystem keeps no POSIX ACLs: %v", err)
	}
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, d := range []string{".", ".git"} {
		if err := unix.Setxattr(filepath.Join(ws, d), "system.posix_acl_default", acl, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Finish(filepath.Join(t.TempDir(), "q")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".", ".git"} {
		if hasDefaultACL(filepath.Join(ws, d)) {
			t.Errorf("%s keeps the default ACL the command gave it", d)
		}
	}
	if !hasDefaultACL(filepath.Join(ws, ".cargo")) {
		t.Error("control: .cargo lost the default ACL it had at the start")
	}
	if r := g.Restored(); len(r) != 2 || !strings.Contains(r[0], "default ACL") {
		t.Errorf("Restored() = %q, want the root and .git", r)
	}
}

// TestFinishClosesGitDirs: a directory of the git directory that the
// command made or changed and left writable by other users, or gave a
// default ACL that lets them write, is closed after the run: a tester's
// .git/modules, mode 0777 with such an ACL, let another user plant the
// hooks of a submodule the owner added later. The controls: the same
// mode on a directory the run did not touch stays, as does the group's
// write.
func TestFinishClosesGitDirs(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{".git/refs/heads", ".git/objects", ".git/old"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	os.WriteFile(filepath.Join(ws, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.Chmod(filepath.Join(ws, ".git/old"), 0o777)
	open := []byte{2, 0, 0, 0}
	for _, tag := range []uint16{1, 4, 0x20} {
		open = append(open, byte(tag), byte(tag>>8), 7, 0, 0xff, 0xff, 0xff, 0xff)
	}
	// A repository shared through an ACL: the owner's, which stays though
	// git changes the directory in the run (the control).
	shared := filepath.Join(ws, ".git/refs/tags")
	os.Mkdir(shared, 0o755)
	sharedOK := unix.Setxattr(shared, "system.posix_acl_default", open, 0) == nil
	time.Sleep(50 * time.Millisecond) // the control's change is before the run, as the kernel stamps it
	g, err := NewGuard(ws, GuardOptions{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.WriteFile(filepath.Join(shared, "v1"), []byte("x\n"), 0o644)
	mods := filepath.Join(ws, ".git/modules")
	os.Mkdir(mods, 0o777)
	os.Chmod(mods, 0o777)
	aclOK := unix.Setxattr(mods, "system.posix_acl_default", open, 0) == nil
	os.Chmod(filepath.Join(ws, ".git/refs/heads"), 0o775)
	// A named user's write in a directory's own ACL (its mode shows the
	// mask, 0775), and the scan's budget spent on a directory that sorts
	// first (a reviewer's).
	wt := filepath.Join(ws, ".git/worktrees")
	os.Mkdir(wt, 0o755)
	named := []byte{2, 0, 0, 0}
	for _, e := range [][2]uint32{{1, 7}, {2, 7}, {4, 5}, {0x10, 7}, {0x20, 5}} {
		id := uint32(0xffffffff)
		if e[0] == 2 {
			id = 65534
		}
		named = append(named, byte(e[0]), byte(e[0]>>8), byte(e[1]), 0, byte(id), byte(id>>8), byte(id>>16), byte(id>>24))
	}
	namedOK := unix.Setxattr(wt, "system.posix_acl_access", named, 0) == nil
	for i := range maxGitDirScan + 10 {
		os.MkdirAll(filepath.Join(ws, ".git/aaa", fmt.Sprint(i)), 0o755)
	}
	if _, err := g.Finish(filepath.Join(t.TempDir(), "q")); err != nil {
		t.Fatal(err)
	}
	if namedOK && openAccessACL(wt) {
		t.Error(".git/worktrees keeps an ACL that lets a named user write it")
	}
	if r := strings.Join(g.Restored(), "\n"); !strings.Contains(r, "were not looked at") {
		t.Errorf("Restored() does not say the scan stopped short: %s", r)
	}
	for name, want := range map[string]os.FileMode{".git/modules": 0o775, ".git/refs/heads": 0o775, ".git/old": 0o777} {
		if fi, err := os.Stat(filepath.Join(ws, name)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", name, fi.Mode(), err, want)
		}
	}
	if aclOK && hasDefaultACL(mods) {
		t.Error(".git/modules keeps the default ACL that lets others write")
	}
	if sharedOK && !hasDefaultACL(shared) {
		t.Error("control: .git/refs/tags lost the ACL it had at the start")
	}
}
