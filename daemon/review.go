package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/workspace"
)

// The review of an overlay or copy session: its change set's diff, its
// apply into the real workspace, its discard. They act on the change set
// once nothing can write it, so a review of a live session ends it first
// (its commands are killed, as by Delete): a command still running could
// otherwise change what is shown, or swap a directory of the change set
// for a link while the daemon reads or applies through it. The change set
// of a session that ended (reviewed; or deleted, expired, when its
// workspace is the tenant's) stays reviewable by its tenant until applied
// or discarded. One over the tenant's own workspace stays so across a
// restart of the daemon, or its death (reviews/ in the state directory,
// loadReviews): a root daemon keeps it in root's store, which the tenant
// cannot reach on the host, and forgotten it would hold what the session
// wrote for good, outside every quota. One over a workspace the daemon
// made goes with the daemon, as that workspace does.
//
// Apply is workspace.Apply: it refuses protected paths and paths the host
// changed, applying nothing, unless forced path by path, as moat apply
// does.
//
// The daemon reads and writes the workspace with its own rights, through
// paths. It does so only where those rights are the workspace owner's
// (the daemon's user owns the workspace): a daemon running as root would
// otherwise read or write wherever a link the owner planted leads.

// ErrConflict: an apply refused because the host changed the paths it
// would write since the session began.
var ErrConflict = errors.New("the workspace changed on the host")

// maxReviews bounds the ended sessions' change sets kept per tenant; the
// oldest is forgotten first (its change set stays on disk).
const maxReviews = 32

type review struct {
	tenant    string
	session   string
	changeSet string
	owner     int // the workspace's owner
	// temp is the workspace the daemon made for the session, kept as the
	// change set's lower layer until the review is forgotten. Nobody
	// reaches it on the host (it is in the daemon's state directory), so
	// the daemon reviews it whoever owns it.
	temp string
	// disk is what the change set and temp hold on the daemon's disk,
	// counted against the tenant's disk quota while the review is kept
	// (measured under a quota only).
	disk int64
}

// keepReview keeps the change set of s, an ended session, for review,
// and says whether it did. A session in a workspace the daemon made is
// kept only when a review ends it (reviewing): its workspace, the change
// set's lower layer, is kept with it; one deleted or expired leaves
// nothing of the daemon's behind (its change set stays, as every change
// set does, for moat apply and moat discard on the host).
func (m *Manager) keepReview(s *Session, reviewing bool) bool {
	cs := s.ChangeSet()
	if cs == "" || (s.TempWorkspace && !reviewing) {
		return false
	}
	r := &review{tenant: s.Tenant.ID, session: s.ID, changeSet: cs, owner: workspaceOwner(s)}
	if s.TempWorkspace {
		r.temp = s.Workspace
	}
	if m.cfg.TenantDisk > 0 {
		r.disk = reviewDisk(r)
	}
	m.mu.Lock()
	var evicted *review
	n := 0
	for i := len(m.reviews) - 1; i >= 0; i-- {
		if m.reviews[i].tenant == s.Tenant.ID {
			if n++; n >= maxReviews && evicted == nil {
				evicted = m.reviews[i]
				m.reviews = append(m.reviews[:i], m.reviews[i+1:]...)
			}
		}
	}
	m.reviews = append(m.reviews, r)
	m.mu.Unlock()
	m.saveReview(r)
	if evicted != nil {
		m.unsaveReview(evicted)
		if !evicted.reviewable() {
			// In the store of a daemon of another user (root's), which
			// the workspace's owner cannot reach on the host: forgotten,
			// it would stay for good, counted nowhere.
			m.discardReview(evicted)
		}
		m.dropReview(evicted)
	}
	return true
}

// discardEmpty discards the change set cs, and says so, when it is an
// overlay set that holds no change (workspace.ChangeSet.DiscardIfEmpty).
func discardEmpty(cs string) bool {
	if cs == "" {
		return false
	}
	c, err := workspace.Open(cs)
	if err != nil {
		return false
	}
	ok, _ := c.DiscardIfEmpty()
	return ok
}

// discardReview discards r's change set.
func (m *Manager) discardReview(r *review) {
	cs, err := workspace.Open(r.changeSet)
	if err == nil {
		err = cs.Discard()
	}
	if err != nil && !errors.Is(err, workspace.ErrNotFound) {
		m.log.Warn("discard a forgotten change set", "session", r.session, "change_set", r.changeSet, "err", err)
	}
}

// reviewable says whether the daemon reviews r's change set (see
// reviewed): in a workspace it made, or one its own user owns.
func (r *review) reviewable() bool { return r.temp != "" || r.owner == os.Geteuid() }

// workspaceOwner is the uid that owns s's workspace, or -1.
func workspaceOwner(s *Session) int {
	if fi, err := os.Stat(s.Workspace); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return int(st.Uid)
		}
	}
	return -1
}

// errNotReviewed refuses a diff or an apply of a change set the daemon
// does not review (see reviewable).
func errNotReviewed(changeSet string) error {
	return fmt.Errorf("%w: the daemon reviews a change set only in a workspace its own user owns, and this one is another user's: the change set %s is kept in the daemon's state directory, where the daemon's user reviews and applies it on the host (moat diff %s, moat apply %s, with MOAT_STATE_DIR set to that directory); the session's tenant can discard it",
		ErrUnsupportedMode, changeSet, changeSet, changeSet)
}

// reviewDisk is what r keeps on the daemon's disk: its change set's
// changes and, for a workspace the daemon made, that workspace. What the
// session's commands wrote, bounded by its limits.disk while it ran, is
// now there, outside any tmpfs.
func reviewDisk(r *review) int64 {
	var n int64
	if cs, err := workspace.Open(r.changeSet); err == nil {
		n = cs.Info().Size
	}
	if r.temp != "" {
		t, _ := workspace.DirSize(r.temp)
		n += t
	}
	return n
}

// reviewDiskLocked is what t's kept reviews hold on disk, and the
// sessions of those that hold some, oldest first (m.mu held).
func (m *Manager) reviewDiskLocked(t Tenant) (n int64, sessions []string) {
	for _, r := range m.reviews {
		if r.tenant == t.ID && r.disk > 0 {
			n += r.disk
			sessions = append(sessions, r.session)
		}
	}
	return n, sessions
}

// dropReview removes what a forgotten review kept: the daemon's
// workspace, with the change set over it (see discardChangeSet); the
// change set of a tenant's own workspace stays, for moat apply on the
// host.
func (m *Manager) dropReview(r *review) {
	if r.temp != "" && m.ownWorkspace(r.temp) {
		m.discardChangeSet(&record{ID: r.session, made: true, changeSet: r.changeSet}, r.temp)
		if err := removeAll(r.temp); err != nil {
			m.log.Error("remove reviewed workspace", "session", r.session, "err", err)
		}
	}
}

// forgetReviews forgets every review (the daemon is ending).
func (m *Manager) forgetReviews() {
	m.mu.Lock()
	all := m.reviews
	m.reviews = nil
	m.mu.Unlock()
	for _, r := range all {
		m.dropReview(r)
	}
}

// reviewed ends the tenant's session id if it is live, and returns its
// change set's review. Only discard may have a change set the daemon
// does not review (see reviewable): removing it from the daemon's store
// reads nothing of the workspace, and the tenant could free its disk no
// other way.
func (m *Manager) reviewed(ctx context.Context, t Tenant, id string, discard bool) (*review, error) {
	if err := t.MaySessions(); err != nil {
		return nil, err
	}
	if s, err := m.Get(t, id); err == nil {
		if s.ChangeSet() == "" {
			return nil, fmt.Errorf("%w: a %s session has no change set to review (overlay and copy sessions do)", ErrUnsupportedMode, s.WorkspaceMode)
		}
		// Refused before anything is ended: a request that changes
		// nothing must not end the session either.
		if !discard && !s.TempWorkspace && workspaceOwner(s) != os.Geteuid() {
			return nil, errNotReviewed(s.ChangeSet())
		}
		if err := m.endFor(ctx, s, true, "review"); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.reviews {
		if r.tenant == t.ID && r.session == id {
			if !r.reviewable() && !discard {
				return nil, errNotReviewed(r.changeSet)
			}
			return r, nil
		}
	}
	if e, gone := m.ended[id]; gone && e.tenant == t.ID {
		// Gone, not unknown: the session was the tenant's.
		return nil, fmt.Errorf("%w: %s ended at %s (%s), and its change set is no longer kept (applied, discarded, deleted with the session, or its review's place taken by a newer one)", ErrEnded, id, e.at.UTC().Format(time.RFC3339), e.reason)
	}
	return nil, fmt.Errorf("%w %q (or its change set was applied or discarded)", ErrNotFound, shownID(id))
}

func (m *Manager) forgetReview(r *review) {
	m.mu.Lock()
	for i, o := range m.reviews {
		if o == r {
			m.reviews = append(m.reviews[:i], m.reviews[i+1:]...)
			break
		}
	}
	m.mu.Unlock()
	m.unsaveReview(r)
	m.dropReview(r)
}

// reviewRecord is what the state directory keeps of a review of a
// tenant's own workspace, for the next daemon (loadReviews).
type reviewRecord struct {
	Tenant    string `json:"tenant"`
	Session   string `json:"session"`
	ChangeSet string `json:"change_set"`
}

func (m *Manager) reviewPath(session string) string {
	return filepath.Join(m.dir, "reviews", session+".json")
}

// saveReview records r, unless it is over a workspace the daemon made
// (which goes with the daemon, its change set with it).
func (m *Manager) saveReview(r *review) {
	if r.temp != "" {
		return
	}
	data, err := json.Marshal(&reviewRecord{Tenant: r.tenant, Session: r.session, ChangeSet: r.changeSet})
	if err == nil {
		tmp := m.reviewPath(r.session) + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, m.reviewPath(r.session))
		}
	}
	if err != nil {
		m.log.Error("record a change set kept for review: the next daemon will not know it", "session", r.session, "change_set", r.changeSet, "err", err)
	}
}

func (m *Manager) unsaveReview(r *review) {
	if err := os.Remove(m.reviewPath(r.session)); err != nil && !os.IsNotExist(err) {
		m.log.Warn("remove the record of a review", "session", r.session, "err", err)
	}
}

// adoptChangeSet keeps for review the change set of r, a session of a
// daemon that died, in the tenant's own workspace: it is named after the
// session, over that workspace. Left alone, nothing would reach it.
func (m *Manager) adoptChangeSet(r *record) {
	cs, err := workspace.Open(r.ID)
	if err != nil {
		if !errors.Is(err, workspace.ErrNotFound) {
			m.log.Warn("keep the change set of a reaped session", "session", r.ID, "err", err)
		}
		return
	}
	real, _ := filepath.EvalSymlinks(r.Workspace)
	if cs.Session() != r.ID || (cs.Workspace() != r.Workspace && cs.Workspace() != real) {
		return
	}
	// One that holds no change is discarded, as the session's end would
	// have (endFor): kept, each daemon killed would add one more to
	// review, and to the tenant's count of reviews.
	if ok, _ := cs.DiscardIfEmpty(); ok {
		m.log.Info("empty change set of a reaped session discarded", "session", r.ID, "tenant", r.Tenant, "change_set", cs.ID())
		return
	}
	m.saveReview(&review{tenant: r.Tenant, session: r.ID, changeSet: cs.ID()})
	m.log.Info("change set of a reaped session kept for review", "session", r.ID, "tenant", r.Tenant, "change_set", cs.ID())
}

// auditRecovered says, in the log and the audit stream, that an apply
// of cs (the change set of the tenant's session) into its workspace,
// which a previous daemon's end cut short, was completed or rolled back
// (did, workspace.RecoverApply), or could be neither (err); nothing when
// there was none.
func (m *Manager) auditRecovered(tenant, session string, cs *workspace.ChangeSet, did string, err error) {
	if did == "" {
		return
	}
	msg := fmt.Sprintf("an apply of change set %s into %s was cut short by the end of the previous daemon: this daemon %s it, so the workspace holds all of its changes or none", cs.ID(), cs.Workspace(), did)
	reason := "apply " + did
	if err != nil {
		msg = fmt.Sprintf("an apply of change set %s into %s was cut short by the end of the previous daemon, and could not be %s: %v; the workspace may be half applied (moat apply %s or moat discard %s on the host finishes it)", cs.ID(), cs.Workspace(), did, err, cs.ID(), cs.ID())
		reason = "apply not " + did
	} else {
		m.log.Warn("interrupted apply "+did, "session", session, "tenant", tenant, "change_set", cs.ID(), "workspace", cs.Workspace(), "outcome", did)
	}
	if m.cfg.Audit != nil {
		m.auditWrite(audit.SessionEvent{Type: audit.TypeSession, Time: time.Now().UTC(), Session: session, Tenant: tenant,
			Event: "recovered", Reason: reason, Workspace: cs.Workspace(), Warnings: []string{msg}})
	}
}

// loadReviews takes up the reviews a previous daemon recorded, oldest
// first, counted in their tenants' disk quotas as this daemon's own. A
// record whose change set is gone (applied or discarded on the host) is
// removed. Records in a directory others may write are not trusted: one
// could give a change set to another tenant.
func (m *Manager) loadReviews() {
	dir := filepath.Join(m.dir, "reviews")
	ents, _ := os.ReadDir(dir)
	if len(ents) == 0 {
		return
	}
	if !private(m.dir) || !private(dir) {
		m.log.Warn("review records in a directory others may write: not taken up", "dir", dir)
		return
	}
	type loaded struct {
		r       *review
		created time.Time
	}
	var all []loaded
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			os.Remove(p) // a .tmp a death left
			continue
		}
		var rec reviewRecord
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err != nil || rec.Session != id || rec.Tenant == "" || rec.ChangeSet == "" {
			m.log.Warn("unreadable review record removed", "file", e.Name(), "err", err)
			os.Remove(p)
			continue
		}
		cs, err := workspace.Open(rec.ChangeSet)
		if err != nil || cs.Session() != rec.Session {
			if err != nil && !errors.Is(err, workspace.ErrNotFound) {
				m.log.Warn("review record of a change set that cannot be opened removed", "session", id, "change_set", rec.ChangeSet, "err", err)
			}
			os.Remove(p)
			continue
		}
		// An apply the previous daemon's death cut short is finished or
		// rolled back now, not left half done in the tenant's workspace
		// until someone applies or discards again; and said, since the
		// tenant's workspace changes under it.
		did, err := cs.RecoverApply()
		if err != nil {
			m.log.Warn("recover the interrupted apply of a change set kept for review", "session", id, "change_set", rec.ChangeSet, "workspace", cs.Workspace(), "err", err)
		}
		m.auditRecovered(rec.Tenant, rec.Session, cs, did, err)
		r := &review{tenant: rec.Tenant, session: rec.Session, changeSet: cs.ID(), owner: -1}
		if fi, err := os.Stat(cs.Workspace()); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				r.owner = int(st.Uid)
			}
		}
		if m.cfg.TenantDisk > 0 {
			r.disk = reviewDisk(r)
		}
		all = append(all, loaded{r, cs.Info().Created})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].created.Before(all[j].created) })
	m.mu.Lock()
	for _, l := range all {
		m.reviews = append(m.reviews, l.r)
	}
	m.mu.Unlock()
	if len(all) > 0 {
		m.log.Info("change sets kept for review by a previous daemon taken up", "reviews", len(all))
	}
}

// beginReview counts a review that changes something (Apply, Discard)
// under way, until
// the returned func is called, so that Shutdown waits for it. Once the
// daemon drains, none begins: the change set stays as it is, taken up
// by the next daemon when it is over the tenant's own workspace.
func (m *Manager) beginReview() (done func(), err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.draining {
		return nil, fmt.Errorf("%w: no review begins while it drains (the change set stays as it is)", ErrDraining)
	}
	m.inReview++
	m.reviewing.Add(1)
	return func() {
		m.mu.Lock()
		m.inReview--
		m.mu.Unlock()
		m.reviewing.Done()
	}, nil
}

// testHookApply, when set, runs as an apply begins to write the
// workspace (its session ended, its change set opened): tests hold it
// there to shut the daemon down meanwhile.
var testHookApply func()

func openReview(r *review) (*workspace.ChangeSet, error) {
	cs, err := workspace.Open(r.changeSet)
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, fmt.Errorf("%w: the change set of session %s is gone (applied or discarded on the host)", ErrNoChangeSet, r.session)
	}
	return cs, err
}

// Diff ends the tenant's overlay or copy session id if it is live, and
// writes the diff of its change set to w.
func (m *Manager) Diff(ctx context.Context, t Tenant, id string, w io.Writer, opts workspace.DiffOptions) error {
	// Refused before the review ends a live session.
	for _, g := range opts.Filter.Exclude {
		if _, err := path.Match(strings.TrimSuffix(g, "/"), ""); err != nil {
			return fmt.Errorf("%w: exclude %q is not a glob (path.Match syntax)", ErrBadRequest, g)
		}
	}
	// A diff is not counted among the reviews Shutdown waits for: it
	// changes nothing, and a client that stops reading its stream would
	// hold the daemon's end for ever.
	r, err := m.reviewed(ctx, t, id, false)
	if err != nil {
		return err
	}
	cs, err := openReview(r)
	if err != nil {
		return err
	}
	changes, err := cs.Changes()
	if err != nil {
		return err
	}
	return cs.WriteDiff(w, changes, opts)
}

// Apply ends the tenant's overlay or copy session id if it is live, and
// applies its change set to the real workspace (workspace.Apply: paths
// select, force overrides). Applied in full and without keep, the change
// set is discarded. A refusal (ErrProtected, ErrConflict) applies nothing
// and keeps it, with the Report saying why.
func (m *Manager) Apply(ctx context.Context, t Tenant, id string, paths, force []string, keep bool) (workspace.Report, error) {
	for _, p := range append(append([]string(nil), paths...), force...) {
		if p == "" {
			// A client's unset variable must not select or force
			// the whole workspace.
			return workspace.Report{}, fmt.Errorf("%w: an empty path in paths or force names nothing (\".\" is the whole workspace)", ErrBadRequest)
		}
		if _, err := cleanRel(p); err != nil {
			return workspace.Report{}, err
		}
	}
	done, err := m.beginReview()
	if err != nil {
		return workspace.Report{}, err
	}
	defer done()
	// An apply that would be refused (a protected path, a host change, a
	// path that selects nothing) is refused before the review ends the
	// live session, whose commands would be killed for nothing: what
	// its commands write after this look, Apply finds.
	if s, err := m.Get(t, id); err == nil && s.ChangeSet() != "" && (s.TempWorkspace || workspaceOwner(s) == os.Geteuid()) {
		if cs, err := workspace.Open(s.ChangeSet()); err == nil {
			if rep, err := cs.Preview(paths, force); err != nil {
				if refused := applyRefusal(rep, err); refused != nil {
					return rep, refused
				}
			}
		}
	}
	r, err := m.reviewed(ctx, t, id, false)
	if err != nil {
		return workspace.Report{}, err
	}
	cs, err := openReview(r)
	if err != nil {
		return workspace.Report{}, err
	}
	if testHookApply != nil {
		testHookApply()
	}
	rep, err := cs.Apply(paths, force)
	if refused := applyRefusal(rep, err); refused != nil {
		return rep, refused
	}
	if err != nil {
		// The workspace's own errors name only the tenant's workspace
		// and change set.
		return rep, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if len(paths) == 0 && !keep {
		if err := cs.Discard(); err != nil {
			return rep, fmt.Errorf("applied, but the change set could not be discarded: %w", err)
		}
		m.forgetReview(r)
	}
	return rep, nil
}

// applyRefusal is the error of an apply the change set refused, said in
// the API's terms, or nil when err is no refusal (nil, or a failure).
func applyRefusal(rep workspace.Report, err error) error {
	var nc *workspace.NoChangeError
	switch {
	case errors.Is(err, workspace.ErrProtected):
		return fmt.Errorf("%w: nothing applied: %d changes touch files that tools run or read on the host; force them path by path after review", ErrProtected, len(rep.Protected))
	case errors.Is(err, workspace.ErrReplaced):
		return fmt.Errorf("%w: nothing applied: the workspace is no longer the directory the session began with (a link, or another directory, is at its path)", ErrConflict)
	case errors.Is(err, workspace.ErrConflict):
		return fmt.Errorf("%w: nothing applied: %d paths changed on the host since the session began; force them path by path after review", ErrConflict, len(rep.Conflicts))
	case errors.Is(err, workspace.ErrBusy):
		return fmt.Errorf("%w: the change set is in use on the host", ErrConflict)
	case errors.Is(err, workspace.ErrStaleReview):
		return fmt.Errorf("%w: nothing applied: the change set was last reviewed on the host (moat diff) while it was in use; review it again", ErrConflict)
	case errors.As(err, &nc):
		// A path that selects no change; the workspace's own errors name
		// only the tenant's workspace and change set.
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return nil
}

// Discard ends the tenant's overlay or copy session id if it is live, and
// removes its change set: also one the daemon does not diff or apply for
// the tenant (see reviewed).
func (m *Manager) Discard(ctx context.Context, t Tenant, id string) error {
	done, err := m.beginReview()
	if err != nil {
		return err
	}
	defer done()
	r, err := m.reviewed(ctx, t, id, true)
	if err != nil {
		return err
	}
	cs, err := openReview(r)
	if err != nil {
		m.forgetReview(r)
		return err
	}
	if err := cs.Discard(); err != nil {
		if errors.Is(err, workspace.ErrBusy) {
			return fmt.Errorf("%w: the change set is in use on the host", ErrConflict)
		}
		return err
	}
	m.forgetReview(r)
	return nil
}
