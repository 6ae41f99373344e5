//go:build linux

package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain dispatches the helper modes the tests re-execute the test
// binary in: "overlay" mounts an overlay in a new user and mount namespace
// and plays an agent in it; "crash" applies a change set and dies after
// a given operation; "copy" dies in the middle of CreateCopy.
func TestMain(m *testing.M) {
	switch os.Getenv("MOAT_WS_HELPER") {
	case "overlay":
		if err := overlayHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "overlay helper:", err)
			os.Exit(3)
		}
		os.Exit(0)
	case "crash":
		crashHelper()
	case "undocrash":
		undoCrashHelper()
	case "copy":
		copyHelper()
	}
	os.Exit(m.Run())
}

// crashHelper applies the change set $MOAT_WS_ID and exits with status
// 1 right after operation $MOAT_WS_CRASH_AFTER.
func crashHelper() {
	after, _ := strconv.Atoi(os.Getenv("MOAT_WS_CRASH_AFTER"))
	testHookAfterOp = func(i int) {
		if i == after {
			os.Exit(1)
		}
	}
	helperDo(func(c *ChangeSet) error { _, err := c.Apply(nil, nil); return err })
}

// helperDo runs do on the change set $MOAT_WS_ID of the store
// $MOAT_STATE_DIR and exits: 0 when it returns (the crash point was never
// reached), 3 with its error.
func helperDo(do func(*ChangeSet) error) {
	s := &Store{Dir: os.Getenv("MOAT_STATE_DIR")}
	c, err := s.Open(os.Getenv("MOAT_WS_ID"))
	if err == nil {
		err = do(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0)
}

// undoCrashHelper recovers the change set $MOAT_WS_ID, whose apply was
// cut short, and exits with status 1 once the rollback has undone
// $MOAT_WS_UNDO_CRASH_AFTER operations.
func undoCrashHelper() {
	after, _ := strconv.Atoi(os.Getenv("MOAT_WS_UNDO_CRASH_AFTER"))
	n := 0
	testHookAfterUndo = func(int) {
		if n++; n == after {
			os.Exit(1)
		}
	}
	helperDo((*ChangeSet).Recover)
}

// copyHelper runs CreateCopy of the workspace $MOAT_WS_DIR and dies, as a
// SIGKILL would (no deferred call runs), while copying its file number
// $MOAT_WS_COPY_DIE, leaving that file as CopyFile leaves it before its
// write: empty, mode 0600.
func copyHelper() {
	die, _ := strconv.Atoi(os.Getenv("MOAT_WS_COPY_DIE"))
	n := 0
	testHookCopyFile = func(dst string) {
		if n++; n == die {
			os.WriteFile(dst, nil, 0o600)
			os.Exit(1)
		}
	}
	s := &Store{Dir: os.Getenv("MOAT_STATE_DIR")}
	if _, err := s.CreateCopy(context.Background(), os.Getenv("MOAT_WS_DIR"), "sess", 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0) // the file to die at was never reached
}

// manifest describes a tree: path -> "type mode content". gitView keeps
// what git tracks: no .git, no directories, only the owner's x bit.
func manifest(t *testing.T, root string, gitView bool) map[string]string {
	t.Helper()
	m, err := manifestOf(root, gitView)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func manifestOf(root string, gitView bool) (map[string]string, error) {
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if gitView && d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := fi.Mode().Perm()
		if gitView {
			mode &= 0o100
		}
		switch {
		case fi.IsDir():
			if !gitView {
				m[rel] = fmt.Sprintf("dir %o", mode)
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "symlink " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			m[rel] = fmt.Sprintf("file %o %s", mode, hex.EncodeToString(sum[:8]))
		default:
			m[rel] = "special"
		}
		return nil
	})
	return m, err
}

func diffManifests(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, fmt.Sprintf("%s: %q vs %q", k, v, b[k]))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: missing vs %q", k, v))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// tree writes files described as path -> content; a path ending in "/"
// is a directory, content "-> X" makes a symlink to X, and a "#755"
// suffix on the path sets the mode ("#4755", "#2755": with set-ID bits).
func tree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		content := files[k]
		name, mode := k, fs.FileMode(0o644)
		if i := strings.Index(k, "#"); i >= 0 {
			m, _ := strconv.ParseUint(k[i+1:], 8, 32)
			name, mode = k[:i], fs.FileMode(m&0o777)
			if m&0o4000 != 0 {
				mode |= fs.ModeSetuid
			}
			if m&0o2000 != 0 {
				mode |= fs.ModeSetgid
			}
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			if err = os.MkdirAll(p, 0o755); err == nil {
				err = os.Chmod(p, mode|0o111)
			}
		case strings.HasPrefix(content, "-> "):
			err = os.Symlink(strings.TrimPrefix(content, "-> "), p)
		default:
			if err = os.WriteFile(p, []byte(content), mode); err == nil {
				err = os.Chmod(p, mode)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// whiteout makes an overlay whiteout at p (any user may create char 0/0
// since Linux 5.8).
func whiteout(t *testing.T, p string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := mknodWhiteout(p); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("mknod whiteout %s: %v (needs CAP_MKNOD on kernels before 5.8)", p, err)
		}
		t.Fatal(err)
	}
}

func mknodWhiteout(p string) error { return unix.Mknod(p, syscall.S_IFCHR|0o600, 0) }

func opaque(t *testing.T, p string) {
	t.Helper()
	if err := unix.Lsetxattr(p, xattrOpaque, []byte("y"), 0); err != nil {
		t.Skipf("setxattr %s on %s: %v (the filesystem of the temporary directory lacks user xattrs)", xattrOpaque, p, err)
	}
}

// newSet creates a change set over a fresh workspace holding files.
func newSet(t *testing.T, files map[string]string) (*Store, *ChangeSet) {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	os.Mkdir(ws, 0o755)
	tree(t, ws, files)
	s := &Store{Dir: filepath.Join(root, "state")}
	c, err := s.Create(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func summarize(changes []Change) []string {
	var out []string
	for _, ch := range changes {
		s := fmt.Sprintf("%s %s %s", ch.Kind, ch.Type, ch.Path)
		if ch.Binary {
			s += " binary"
		}
		if ch.Count > 0 {
			s += fmt.Sprintf(" count=%d", ch.Count)
		}
		out = append(out, s)
	}
	return out
}
