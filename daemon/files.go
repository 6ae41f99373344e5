package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// The files API: a session's workspace read and written by path, relative
// to its root. Every path is resolved beneath the root the session pinned
// when it was made (openat2 RESOLVE_BENEATH): `..`, absolute symbolic
// links and links leading out are refused by the kernel, not by string
// checks. Writes are atomic (a temporary file renamed over the target)
// and owned by the workspace's owner. The protected paths (host tools'
// configuration, the git directory's hooks and config) cannot be written
// or removed, as a direct-mode command cannot write them.

// ErrUnsupportedMode: the files API of a session whose workspace mode
// keeps changes apart (overlay, copy) or forbids them (readonly writes).
var ErrUnsupportedMode = errors.New("not supported for this workspace mode")

// ErrNoFile: the files API's path does not exist.
var ErrNoFile = errors.New("no such file")

// ErrProtected: a write or removal of a protected path.
var ErrProtected = errors.New("protected path")

// MaxFileSize bounds a file read or written through the files API.
const MaxFileSize = 16 << 20

// maxEntries bounds a directory listing.
const maxEntries = 10000

// FileInfo describes a workspace entry; Path is relative to the root.
type FileInfo struct {
	Path    string
	Type    string // "file", "dir", "symlink" or "other"
	Size    int64
	Mode    fs.FileMode // permission bits
	ModTime time.Time
}

// cleanRel checks a path relative to the workspace root: "" and "." are
// the root. An absolute path or a ".." component is refused rather than
// reinterpreted: where it would lead is the client's mistake to hear of.
func cleanRel(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: path %q must be relative to the workspace", ErrBadRequest, p)
	}
	if strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("%w: path contains a NUL byte", ErrBadRequest)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", fmt.Errorf("%w: path %q must not contain \"..\"", ErrBadRequest, p)
		}
	}
	c := path.Clean("/" + p)[1:]
	if c == "" {
		c = "."
	}
	return c, nil
}

func (s *Session) filesAllowed(write bool) error {
	switch s.WorkspaceMode {
	case policy.WorkspaceDirect:
		return nil
	case policy.WorkspaceReadOnly:
		if !write {
			return nil
		}
		return fmt.Errorf("%w: the workspace is read-only", ErrUnsupportedMode)
	}
	return fmt.Errorf("%w: the files of a session in %s mode are its change set's; the files API serves direct sessions (and reads readonly ones)", ErrUnsupportedMode, s.WorkspaceMode)
}

// protected says whether rel (real, relative to the root) is, contains or
// lies under a protected path: the list, and the git paths the sandbox's
// guard and an overlay's apply keep too (submodules' and nested
// repositories' git directories, core.hooksPath).
func (s *Session) protected(rel string) bool {
	if rel == "." {
		return true
	}
	for _, p := range s.protect {
		if rel == p || strings.HasPrefix(rel, p+"/") || strings.HasPrefix(p, rel+"/") {
			return true
		}
	}
	return workspace.GitProtected(s.Workspace, rel)
}

// Protected lists the workspace paths the session's commands and the
// files API may not change (relative, slash-separated): the built-in
// ones host tools run or read (workspace.HostConfig), the policy's
// workspace.protect, and the files the policy itself loads or runs. A
// git directory's nested and submodule entries are held besides.
func (s *Session) Protected() []string { return slices.Clone(s.protect) }

func protectList(p *policy.Policy) []string {
	out := workspace.HostConfig()
	for _, e := range p.Workspace.Protect {
		if c, err := cleanRel(e); err == nil {
			out = append(out, c)
		}
	}
	// The files the policy loads or runs on the host (a template, the
	// profile and secret programs it names), as the sandbox keeps them
	// read-only in the workspace: a write here would choose what the
	// daemon runs next.
	home, _ := os.UserHomeDir()
	ws := p.Workspace.Path
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		real = ws
	}
	for _, f := range p.HostFiles("", home) {
		for _, pair := range [][2]string{{ws, f}, {real, f}, {real, evalOr(f)}} {
			if r, err := filepath.Rel(pair[0], pair[1]); err == nil && r != "." && r != ".." && !strings.HasPrefix(r, "../") {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// evalOr is path with its links resolved, or path when they cannot be.
func evalOr(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// sameRoot checks that the workspace path still names the directory the
// session pinned: a tenant that swapped its workspace for a link to
// another directory must not have the next sandbox mount that one.
func (s *Session) sameRoot() error {
	done, err := s.useRoot()
	if err != nil {
		return err
	}
	defer done()
	a, err1 := s.root.Stat()
	b, err2 := os.Stat(s.Workspace)
	if err1 != nil || err2 != nil || !os.SameFile(a, b) {
		return fmt.Errorf("%w: the workspace directory was replaced since the session began", ErrWorkspace)
	}
	return nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return filepath.Join(dir, name)
}

// namesDir says whether rel, as written, names a directory only, as POSIX
// reads it: a trailing slash, or a last component "." ("f/." is ENOTDIR
// for a file f, though cleaning it leaves "f").
func namesDir(rel string) bool {
	return strings.HasSuffix(rel, "/") || rel == "." || strings.HasSuffix(rel, "/.")
}
