package gvisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
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
