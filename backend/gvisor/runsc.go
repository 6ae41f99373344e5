package gvisor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// executable checks that p is an executable file that only its owner
// can change: moat runs it as root, so a runsc others may rewrite would
// hand them root.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others: moat will not run it", p)
	}
	return nil
}
