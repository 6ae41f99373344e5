package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moatbox/moat/internal/cgroup"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
	"golang.org/x/sys/unix"
)

// record is what the state directory keeps of a live session, so that
// the next daemon can clean up after this one if it dies: the session's
// sandboxes die with the daemon (their init has the parent-death signal),
// what remains is what the daemon made on disk for them.
type record struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// TempWorkspace is the workspace the daemon made, removed with the
	// session; empty when the tenant brought its own.
	TempWorkspace string `json:"temp_workspace,omitempty"`
	// Workspace is the tenant's own workspace, where a write of the files
	// API that the daemon's death cut short leaves its temporary entry at
	// the root (reapWrites).
	Workspace string    `json:"workspace,omitempty"`
	Created   time.Time `json:"created"`
	PID       int       `json:"pid"`
	// Cgroups are the directories of the session's sandbox's cgroup
	// (cgroup.(*Cgroup).Dirs), written before its processes start: the
	// next daemon removes them whatever their age (reapCgroups), where
	// cgroup.Sweep leaves young ones alone.
	Cgroups []string `json:"cgroups,omitempty"`
	// Guards is what quarantines the paths the commands of a session
	// with a writable workspace of the tenant's own plant where a
	// protected path belongs (sandbox.SessionRequest.OnGuard), written
	// before its processes start: the next daemon does what the
	// session's Close would have (sandbox.FinishAbandoned). TenantUID is
	// then the tenant's uid, whose planted files it removes rather than
	// keep in its state directory, unless Self says the tenant is the
	// daemon's own user.
	Guards    string `json:"guards,omitempty"`
	TenantUID int    `json:"tenant_uid,omitempty"`
	Self      bool   `json:"self,omitempty"`
	// Revoke names the session's secrets that have a revoke program:
	// the dead daemon's session could not run it, and the next daemon
	// says so (the value it would be given is gone with the daemon).
	Revoke []string `json:"revoke,omitempty"`

	// made says the session's sandbox was made, and changeSet is then its
	// change set's id, "" for none: removeRecord opens it by id rather
	// than looking through the store for it (see discardChangeSet). Not
	// kept on disk.
	made      bool
	changeSet string
	// warnings are what reap says of the quarantine (the session's
	// audited end).
	warnings []string
}

func (m *Manager) recordPath(id string) string {
	return filepath.Join(m.dir, "sessions", id+".json")
}

// writeRecord writes r atomically (temp file, rename).
func (m *Manager) writeRecord(r *record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := m.recordPath(r.ID) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, m.recordPath(r.ID))
}

// removeRecord removes what the daemon made for r: its temp workspace,
// then the record itself (last, so that a crash between the two leaves
// the record for the next daemon to finish).
func (m *Manager) removeRecord(r *record) error {
	if ws := r.TempWorkspace; ws != "" && m.ownWorkspace(ws) {
		m.discardChangeSet(r, ws)
		unmountWorkspace(ws)
		if err := removeAll(ws); err != nil {
			return err
		}
	}
	if err := os.Remove(m.recordPath(r.ID)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// discardChangeSet discards the change set of the session id (an overlay
// or copy session's, named after it) over ws, a workspace the daemon made
// and is removing. Nobody can apply it once its lower layer is gone, and
// a token's tenant never reaches the host to discard it: kept, it would
// hold what the session's commands wrote on the daemon's disk for good,
// outside every quota, and a tenant could fill the disk session by
// session. Only a change set over ws itself is discarded.
func (m *Manager) discardChangeSet(r *record, ws string) {
	id, name := r.ID, r.ID // the change set is named after the session
	if r.made {
		if r.changeSet == "" {
			return // a direct or read-only session's
		}
		name = r.changeSet
	}
	cs, err := workspace.Open(name)
	if err != nil {
		if !errors.Is(err, workspace.ErrNotFound) {
			m.log.Warn("discard the change set of a removed workspace", "session", id, "err", err)
		}
		return
	}
	real, _ := filepath.EvalSymlinks(ws)
	if cs.Session() != id || (cs.Workspace() != ws && cs.Workspace() != real) {
		return
	}
	if err := cs.Discard(); err != nil {
		m.log.Warn("discard the change set of a removed workspace", "session", id, "change_set", cs.ID(), "err", err)
	}
}

// ownWorkspace says whether ws is a workspace this daemon made: a
// directory directly under its workspaces directory. A record is data on
// disk; it never makes the daemon remove anything else.
func (m *Manager) ownWorkspace(ws string) bool {
	return filepath.Dir(ws) == filepath.Join(m.dir, "workspaces") && !strings.HasPrefix(filepath.Base(ws), ".")
}

// removeAll removes a workspace made by the daemon, whose contents the
// sandbox user may have made read-only (workspace.RemoveTree).
func removeAll(dir string) error { return workspace.RemoveTree(dir) }

// cgroupSweepAge is when a cgroup is old enough for cgroup.Sweep.
const cgroupSweepAge = 11 * time.Second

// sweepCgroups removes the sandboxes' cgroups that a killed daemon could
// not remove; those of a run still alive elsewhere are not empty, and
// stay.
func sweepCgroups(log *slog.Logger) {
	if err := cgroup.Sweep("moat-"); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		log.Warn("sweep cgroups", "err", err)
	}
}

// cgroupPrefix begins the name of every cgroup a sandbox gets (the native
// backend names them after the run).
const cgroupPrefix = "moat-"

// reapCgroups kills what is left in the cgroup of r's sandbox and removes
// its directories. A record is data on disk (written by the daemon alone,
// in a directory only its user can enter): still, cgroup.Reclaim takes
// only directories of a cgroup file system named like a sandbox's cgroup,
// so that nothing else is ever killed or removed.
func reapCgroups(r *record) error {
	if len(r.Cgroups) == 0 {
		return nil
	}
	if err := cgroup.Reclaim(cgroupPrefix, r.Cgroups); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// private is sandbox.PrivateDir: dir is this process's user's and no one
// else may write it.
func private(dir string) bool { return sandbox.PrivateDir(dir) }

// reap cleans up after a previous daemon: every record left is a session
// whose sandboxes died with that daemon. It returns their records.
func (m *Manager) reap() []record {
	ents, _ := os.ReadDir(filepath.Join(m.dir, "sessions"))
	// The daemon makes its directories private; one that is not (made
	// beforehand by someone else) may hold records it did not write,
	// whose cgroups are left to the sweeps of empty ones.
	trusted := private(m.dir) && private(filepath.Join(m.dir, "sessions"))
	if !trusted && len(ents) > 0 {
		m.log.Warn("session records in a directory others may write: their cgroups are not reclaimed", "dir", filepath.Join(m.dir, "sessions"))
	}
	var reaped []record
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(m.dir, "sessions", name)
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(p)
			continue
		}
		id, ok := strings.CutSuffix(name, ".json")
		if !ok {
			continue
		}
		var r record
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err != nil || r.ID != id {
			m.log.Warn("unreadable session record removed", "file", name, "err", err)
			os.Remove(p)
			continue
		}
		if r.Workspace != "" && r.TempWorkspace == "" {
			if n, err := reapWrites(r.Workspace); err != nil {
				m.log.Warn("reap writes", "session", id, "err", err)
			} else if n > 0 {
				m.log.Info("removed writes cut short", "session", id, "entries", n)
			}
			// Its change set, if it has one, stays the tenant's to
			// review, as a session that ended would have left it; not
			// for ReapAbandoned, which removes the directory the record
			// would be in, and whose runs' change sets are in the
			// store of their own user.
			if trusted && m.cfg.StateDir != "" {
				m.adoptChangeSet(&r)
			}
		}
		// A cgroup it cannot remove is left to the sweeps (sweepCgroups);
		// the record goes anyway, as it would name nothing else to do.
		if trusted {
			if err := reapCgroups(&r); err != nil {
				m.log.Warn("reap the session's cgroup", "session", id, "err", err)
			}
			m.finishGuards(&r)
		}
		if len(r.Revoke) > 0 {
			w := fmt.Sprintf("the session's secrets %s were not revoked (their revoke programs ran with the daemon that died): they stay valid until they expire", strings.Join(r.Revoke, ", "))
			m.log.Warn("reaped session's secrets", "session", id, "warning", w)
			r.warnings = append(r.warnings, w)
		}
		if err := m.removeRecord(&r); err != nil {
			m.log.Error("reap session", "session", id, "err", err)
			continue
		}
		m.log.Info("reaped session of a previous daemon", "session", id, "tenant", r.Tenant, "pid", r.PID)
		reaped = append(reaped, r)
	}
	sweepCgroups(m.log)
	// A workspace without a record was being made when a daemon died.
	wss, _ := os.ReadDir(filepath.Join(m.dir, "workspaces"))
	for _, e := range wss {
		if _, err := os.Stat(m.recordPath(e.Name())); os.IsNotExist(err) {
			removeAll(filepath.Join(m.dir, "workspaces", e.Name()))
		}
	}
	return reaped
}

// finishGuards quarantines what the commands of r's session planted in
// its tenant's workspace where a protected path belongs, once its
// processes are gone (reapCgroups; init's death ended the others): the
// dead daemon's Close would have. A workspace the daemon made goes
// whole with the record.
func (m *Manager) finishGuards(r *record) {
	if len(r.Guards) == 0 || r.TempWorkspace != "" {
		return
	}
	rep, err := sandbox.FinishAbandoned(r.ID, []byte(r.Guards))
	if !r.Self && len(rep.Quarantined) > 0 {
		removeQuarantined(rep, r.TenantUID, "the daemon keeps nothing of another user's in its own state directory, which that user cannot reach")
	}
	for _, w := range rep.Warnings {
		m.log.Warn("reaped session's workspace", "session", r.ID, "warning", w)
	}
	if err != nil {
		m.log.Error("reaped session's workspace: what its commands planted is still in place", "session", r.ID, "err", err)
	}
	r.warnings = rep.Warnings
}

// writeTempPrefix begins the name of an entry the files API is writing,
// before it is renamed into place; newID makes the rest.
const writeTempPrefix = ".moat-write-"

// isWriteTemp says whether name is one of those entries: the prefix and
// sixteen lower-case hex digits, nothing a person would name a file.
func isWriteTemp(name string) bool {
	id, ok := strings.CutPrefix(name, writeTempPrefix)
	if !ok || len(id) != 16 {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ReapAbandoned cleans up a state directory that a Manager used and that
// no Manager will open again (a local MCP server makes one per process),
// after that Manager's process died without Shutdown: the sessions it
// recorded are reaped as a restarted daemon reaps them (their workspaces
// made by the daemon, the files API's writes cut short in the tenants'
// workspaces), then stateDir is removed whole. While a live Manager holds
// the directory it does nothing and returns ErrLocked; a directory that
// was never opened by a Manager (no lock file) is fs.ErrNotExist, left
// to the caller, which knows how long making one may take. Like New, it
// removes nothing a record names outside the directory but the files
// API's temporary entries.
func ReapAbandoned(stateDir string, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lock, err := lockState(stateDir, 0)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	m := &Manager{dir: filepath.Join(stateDir, "daemon"), log: log}
	var reaped []string
	for _, r := range m.reap() {
		reaped = append(reaped, r.ID)
	}
	// Removed under the lock, so that no Manager opens it meanwhile.
	if err := removeAll(stateDir); err != nil {
		return reaped, fmt.Errorf("remove %s: %w", stateDir, err)
	}
	return reaped, nil
}

// lockState opens the lock of the state directory stateDir (flags: 0, or
// os.O_CREATE to make it) and takes it, or fails with ErrLocked while
// another Manager holds it. A lock that is not there and not to be made
// is an error wrapping fs.ErrNotExist.
func lockState(stateDir string, flags int) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(stateDir, "daemon", "lock"), os.O_RDWR|flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w (%s)", ErrLocked, stateDir)
	}
	return lock, nil
}
