package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// ErrStateDirUnsafe: the state directory, or the directory holding it,
// can be written by another user. What moat keeps there decides what it
// does next (the change sets apply writes into workspaces, the policies
// trusted, the run records whose quarantine it finishes), so another
// user who can write it can make moat plant files in a workspace or
// trust a policy that nobody trusted: moat refuses it, as ssh refuses a
// key file others can write.
var ErrStateDirUnsafe = errors.New("state directory not safe")

// checkedStateDirs holds the state directories found safe in this
// process, so that the check costs two stats once.
var checkedStateDirs sync.Map

// checkStateDir refuses d when it, or its parent, is another user's
// (root's parent aside) or writable by other users: others' write bit
// without the sticky bit, or the group's for a group other than the
// caller's (a user's private group, many systems' default, is the
// user's own). A missing directory passes: moat makes it, mode 0700.
func checkStateDir(d string) error {
	if _, ok := checkedStateDirs.Load(d); ok {
		return nil
	}
	euid, egid := uint32(os.Geteuid()), uint32(os.Getegid())
	// Where it really is: a link to a directory in a shared one is that
	// shared directory's entry (found by a reviewer).
	real := d
	if r, err := filepath.EvalSymlinks(d); err == nil {
		real = r
	}
	missing := false
	for i, p := range []string{real, filepath.Dir(real)} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			// Not made yet: looked at again next time, once made.
			missing = true
			continue
		}
		if err != nil {
			return fmt.Errorf("state directory %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		what := "the state directory " + p
		if i == 1 {
			what = "the directory " + p + " holding the state directory " + d
		}
		mode := fi.Mode()
		otherW := mode&0o002 != 0
		// The state directory's own group bits count whatever the group
		// (a shared primary group, or an ACL's mask, which shows there);
		// its parent's only for another group than the caller's, whose
		// private group many systems make every directory writable by.
		groupW := mode&0o020 != 0 && (i == 0 || st.Gid != egid)
		// The sticky bit keeps others from renaming the state directory
		// out of its parent; in the state directory itself they could
		// still make the entries moat makes later (runs/, trusted
		// policies) before it does.
		shared := (otherW || groupW) && (i == 0 || mode&fs.ModeSticky == 0)
		switch {
		case st.Uid != euid && (i == 0 || st.Uid != 0):
			return fmt.Errorf("%w: %s is owned by uid %d, not by you (uid %d): its owner could plant change sets, run records and trusted policies that moat would act on; use a directory of your own (MOAT_STATE_DIR), or chown it", ErrStateDirUnsafe, what, st.Uid, euid)
		case shared:
			return fmt.Errorf("%w: other users can write %s (mode %04o): they could plant change sets, run records and trusted policies that moat would act on; chmod go-w it, or use another directory (MOAT_STATE_DIR)", ErrStateDirUnsafe, what, mode.Perm())
		case i == 0 && hasACL(p):
			return fmt.Errorf("%w: %s has a POSIX ACL, which may let other users write it: remove it (setfacl -b), or use another directory (MOAT_STATE_DIR)", ErrStateDirUnsafe, what)
		}
	}
	if !missing {
		checkedStateDirs.Store(d, true)
	}
	return nil
}
