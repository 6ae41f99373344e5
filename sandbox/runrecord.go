package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/moatbox/moat/workspace"
)

// A run in a writable workspace quarantines, at its end, what its
// command planted where a protected path belongs (workspace.Guard). moat
// killed outright (SIGKILL: a framework's timeout, `kill -9`, the OOM
// killer) never gets there, and a planted .envrc or git hook would stay
// for the host's tools to run. So such a run first writes its guards'
// state in a record of the state directory, locked for as long as the run
// lives (the lock goes with the last process holding it: moat, and init
// where it shares moat's files), and removes it at its end; the next run
// of the same user finds a record whose lock it can take, and finishes
// what the dead one could not (FinishAbandoned).

// abandonedTmpAge is how old a record under its temporary name must be
// to be taken for a dead run's: a live one locks and renames it at once.
const abandonedTmpAge = time.Minute

// PrivateDir says whether dir is a directory of this process's user that
// no one else may write: one where nobody else can have put a record
// (this package's run records, a daemon's session records).
func PrivateDir(dir string) bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		return false
	}
	return st.Mode&syscall.S_IFMT == syscall.S_IFDIR && int(st.Uid) == os.Geteuid() && st.Mode&0o022 == 0
}

// runsDir holds the records, in the caller's state directory.
func runsDir() (string, error) {
	state, err := workspace.StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(state, "runs"), nil
}

// runRecord is the record of a live run; nil for a run with nothing to
// finish.
type runRecord struct {
	f    *os.File
	path string
}

// recordRun writes the record of run id for guards: made under a
// temporary name, locked, then renamed into place, so that no other run
// ever sees it unlocked while this one lives.
func recordRun(id string, guards []*workspace.Guard) (*runRecord, error) {
	state, err := guardStates(guards)
	if err != nil || state == nil {
		return nil, err
	}
	dir, err := runsDir()
	if err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	path := filepath.Join(dir, id+".json")
	f, err := os.OpenFile(path+".tmp", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	fail := func(err error) (*runRecord, error) {
		f.Close()
		os.Remove(path + ".tmp")
		return nil, fmt.Errorf("run record: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fail(err)
	}
	if _, err := f.Write(state); err != nil {
		return fail(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fail(err)
	}
	return &runRecord{f: f, path: path}, nil
}

// done removes the record: the run finished its guards itself.
func (r *runRecord) done() {
	if r == nil {
		return
	}
	os.Remove(r.path)
	r.f.Close()
}

// finishAbandonedRuns finishes the guards of the caller's earlier runs
// that died before their end (their records' locks are free), and
// returns what it says of them, for the report of the run that found
// them. A record it cannot read goes.
func finishAbandonedRuns() []string {
	dir, err := runsDir()
	if err != nil {
		return nil
	}
	// Only a directory of this user's alone holds records this user's
	// runs wrote: root pointed at another user's state directory
	// (MOAT_STATE_DIR) must not move files for records that user wrote.
	if !PrivateDir(dir) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var said []string
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			id, ok = strings.CutSuffix(name, ".json.tmp")
		}
		if !ok {
			continue
		}
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // its run is alive
			continue
		}
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Nlink == 0 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			f.Close() // another run finished it meanwhile, or not this user's
			continue
		}
		if strings.HasSuffix(name, ".tmp") {
			// Its run died before it began, or is about to lock it (it
			// is made, then locked): only one left long enough goes.
			if time.Since(fi.ModTime()) > abandonedTmpAge {
				os.Remove(p)
			}
			f.Close()
			continue
		}
		if fi.Size() < 16<<20 {
			state := make([]byte, fi.Size())
			if _, err := f.ReadAt(state, 0); err == nil {
				// FinishAbandoned's warnings say what it did, and what
				// it could not.
				rep, _ := FinishAbandoned(id, state)
				for _, w := range rep.Warnings {
					said = append(said, fmt.Sprintf("an earlier run, %s, was killed before its end: %s", id, w))
				}
			}
		}
		os.Remove(p)
		f.Close()
	}
	return said
}
