package gvisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moatbox/moat/internal/inputfile"
	"github.com/moatbox/moat/workspace"
)

// RunscVersion is the version of gVisor's module that scripts/runsc.sh
// builds runsc from, and so the name of the cache directory Find looks in.
// The two must agree (TestScriptPinsRunscVersion).
const RunscVersion = "v0.0.0-20260905035102-160fafc42237"

// ErrNoRunsc is returned (wrapped) by Find when runsc is nowhere moat
// looks; the message says how to get it.
var ErrNoRunsc = errors.New("runsc not found")

// CachePath is where scripts/runsc.sh puts runsc:
// ${XDG_CACHE_HOME:-$HOME/.cache}/moat/runsc-VERSION/runsc. "" when
// neither variable is set.
func CachePath() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home := os.Getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "moat", "runsc-"+RunscVersion, "runsc")
}

// Find returns the runsc binary to use: configured (the policy's
// [sandbox] runsc) when set, else $MOAT_RUNSC, else the cache of
// scripts/runsc.sh (CachePath), else runsc on PATH. A path that is named
// (configured or $MOAT_RUNSC) must be an executable file: a typo is an
// error, never a quiet fall back to another runsc.
func Find(configured string) (string, error) {
	for _, named := range []struct{ path, what string }{{configured, "[sandbox] runsc"}, {os.Getenv("MOAT_RUNSC"), "$MOAT_RUNSC"}} {
		if named.path == "" {
			continue
		}
		if err := executable(named.path); err != nil {
			return "", fmt.Errorf("%s: %w", named.what, err)
		}
		return named.path, nil
	}
	if p := CachePath(); p != "" && executable(p) == nil {
		return p, nil
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: build it with scripts/runsc.sh (CGO_ENABLED=0 go install gvisor.dev/gvisor/runsc@%s, into %s), or put runsc on PATH, or name it with $MOAT_RUNSC or [sandbox] runsc", ErrNoRunsc, RunscVersion, filepath.Dir(CachePath()))
}

// executable checks that p is an executable file that nobody but root
// and this process's user can change: moat runs it as root (a daemon,
// on a policy a tenant wrote), so a runsc that another user owns, or may
// rewrite or replace, would hand that user root. Each directory on the
// way must be as safe, but for one whose sticky bit keeps others from
// renaming what root owns in it (/tmp).
func executable(p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	real, err = filepath.Abs(real)
	if err != nil {
		return err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	if err := safeOwner(real, fi, false); err != nil {
		return err
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		di, err := os.Stat(d)
		if err != nil {
			return err
		}
		if err := safeOwner(d, di, true); err != nil {
			return fmt.Errorf("runsc %s: %w", p, err)
		}
		if d == "/" {
			return nil
		}
	}
}

// safeOwner refuses a file or directory owned by a user other than root
// and this one, or writable by group or others (a directory with the
// sticky bit owned by root excepted).
func safeOwner(p string, fi os.FileInfo, dir bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is owned by uid %d, neither root nor this user: moat will not run it", p, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && !(dir && fi.Mode()&os.ModeSticky != 0 && ok && st.Uid == 0) {
		return fmt.Errorf("%s is writable by group or others: moat will not run it", p)
	}
	return nil
}

// ErrRunscChanged is wrapped by the refusal of a runsc whose content is
// no longer the one its trust check hashed (Backend.Checked).
var ErrRunscChanged = errors.New("runsc is not the one its trust check hashed")

// checkedCopy returns a copy of runsc with the content whose hex SHA-256
// is digest, made when there is none yet: copied from runsc and hashed
// as it is copied, so that the copy is the bytes hashed whatever happens
// to runsc meanwhile, and kept only when they are the ones the trust
// check hashed. runsc is too large to copy into memory for each run (as
// a secret's program is); a copy on disk, named by its digest, costs one
// copy per runsc, and later runs only a look. The copies are kept in
// moat's state directory, where only this user and root may change them
// (checked as Find checks a named runsc) and no sandbox may write
// (checkedDir): the sandboxed command, which may write where runsc lies,
// cannot reach them.
func checkedCopy(runsc, digest string) (string, error) {
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return "", fmt.Errorf("runsc %s: %q is not a SHA-256 digest", runsc, digest)
	}
	dir, err := checkedDir()
	if err != nil {
		return "", fmt.Errorf("runsc %s: a directory for its checked copy: %w", runsc, err)
	}
	dst := filepath.Join(dir, digest)
	if _, err := os.Lstat(dst); err == nil {
		if err := executable(dst); err != nil {
			return "", fmt.Errorf("runsc %s: its checked copy: %w", runsc, err)
		}
		return dst, nil
	}
	tmp, err := os.CreateTemp(dir, ".copy-*")
	if err != nil {
		return "", fmt.Errorf("runsc %s: copy: %w", runsc, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing
	got, err := inputfile.DigestCopy(runsc, "program", inputfile.MaxProgram, tmp)
	if err == nil && got != digest {
		tmp.Close()
		return "", fmt.Errorf("%w: %s changed since the check", ErrRunscChanged, runsc)
	}
	if err == nil {
		err = tmp.Chmod(0o700)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Two moats making the same copy make the same bytes: the last
		// rename wins, and either is the checked runsc.
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", fmt.Errorf("runsc %s: copy: %w", runsc, err)
	}
	if err := executable(dst); err != nil {
		return "", fmt.Errorf("runsc %s: its checked copy: %w", runsc, err)
	}
	return dst, nil
}

// checkedDir is where checkedCopy keeps its copies: runsc-checked in
// moat's state directory (workspace.StateDir). No sandbox may write
// there (a writable path that holds it is refused, and a read-only one
// has it masked), which is why it is not the user's cache: a workspace
// or read-write path holding that would let a command replace a copy,
// which is looked at, not hashed, at each start. Made private to this user.
func checkedDir() (string, error) {
	state, err := workspace.StateDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(state, "runsc-checked")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}
