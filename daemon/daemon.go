// Package daemon is moat's session manager: sessions that outlive one
// command, owned by tenants, bounded by quotas, a time to live and an idle
// timeout, and recorded on disk so that a daemon that died is cleaned up
// after by the next one.
//
// It owns who may do what with a session: a tenant sees and touches only
// its own sessions; a workspace must be a directory the tenant owns (or
// one the daemon makes for it); a tenant other than the daemon's own user
// may not widen the policy beyond its workspace and the system
// directories (see Manager.Create); the files API (and its tar archives)
// stays beneath the workspace and off its protected paths; the review of
// an overlay session (Manager.Diff, Apply, Discard) ends the session first
// and applies only what workspace.Apply accepts; an ask of a session's
// rules that no request answers waits as a pending approval that only the
// session's tenant or the daemon's own user may answer, with a grant bound
// to what was shown, and only so many wait per session and per tenant
// (approvals.go). Every caller (the HTTP API, tests, the
// MCP server) goes through these checks. It knows nothing of HTTP;
// package httpapi serves it.
//
// A session runs its commands through an Engine: Sandboxes, one sandbox
// per session (sandbox.Create) that its commands share, processes left
// running included.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/sandbox"
)

// Sentinel errors; callers test them with errors.Is. Every error the
// Manager returns wraps one of them, or is a *policy.Errors, and its text
// is safe to show the tenant.
var (
	ErrNotFound      = errors.New("no such session")
	ErrQuota         = errors.New("quota exceeded")
	ErrWorkspace     = errors.New("workspace refused")
	ErrPolicyRefused = errors.New("policy refused")
	ErrDraining      = errors.New("the daemon is shutting down")
	ErrEnded         = errors.New("session has ended")
	ErrBadRequest    = errors.New("bad request")
	ErrLocked        = errors.New("another daemon serves this state directory")
)

// What else may be missing. Each is an ErrNotFound too (errors.Is), so
// that a caller branching on "not found" (the HTTP API's not_found code)
// needs no list of them, while its text names what is missing rather than
// a session.
var (
	ErrNoApproval  error = &notFound{"no such approval"}
	ErrNoProcess   error = &notFound{"no such process"}
	ErrNoChangeSet error = &notFound{"no such change set"}
)

type notFound struct{ msg string }

func (e *notFound) Error() string        { return e.msg }
func (e *notFound) Is(target error) bool { return target == ErrNotFound }

// Config is how a Manager works. Zero fields take the defaults named.
type Config struct {
	// StateDir holds the daemon's state (daemon/ beneath it): its lock,
	// a record per live session, the workspaces it makes. Required.
	StateDir string
	// Engine makes a session's sandbox; nil means Sandboxes.
	Engine NewEngine
	// MaxSessions is the per-tenant session quota (16); MaxTotal bounds
	// all tenants together (256).
	MaxSessions int
	MaxTotal    int
	// TenantMemory and TenantCPUs bound the sum of the memory and CPU
	// limits (limits.memory, limits.cpus) of a tenant's sessions; zero
	// means no bound. Under a bound, a session must set that limit.
	TenantMemory int64
	TenantCPUs   float64
	// MaxBackground bounds the running background commands of a session (16).
	MaxBackground int
	// TTL is a session's default time to live (1h), MaxTTL the longest a
	// request may ask for (24h); IdleTimeout ends a session no command has
	// used for that long (15m).
	TTL, MaxTTL, IdleTimeout time.Duration
	// Tick is how often expiry is checked (1s).
	Tick time.Duration
	// OutputBuffer bounds the output kept per background command (1 MiB),
	// each write kept counted with its bookkeeping (chunkOverhead).
	OutputBuffer int
	Logger       *slog.Logger
	// Templates are the named policies a create request may ask for, and
	// their warm pools (LoadTemplates); nil means none.
	Templates map[string]*Template
	// TenantDisk bounds the sum of the disk limits (limits.disk) of a
	// tenant's sessions, with what the change sets of its ended sessions
	// kept for review hold; zero means no bound. Under a bound, a session
	// must set that limit, and keep its writes where it applies (see
	// reserveLimits).
	TenantDisk int64
	// Approvals makes an ask of a session's rules that its request brings
	// no approver for wait as a pending approval (see Approval) for
	// ApprovalTimeout (5m; the policy's harness.ask_timeout if shorter),
	// refused when nobody answers; without it such an ask refuses the
	// command at once. ApprovalWebhook, if set, is POSTed each new
	// pending approval (WebhookEvent).
	Approvals       bool
	ApprovalTimeout time.Duration
	ApprovalWebhook string
	// MaxPending bounds the pending approvals of a session (16), and
	// TenantPending those of all a tenant's sessions together (64): an
	// ask beyond either is refused at once, without asking, so that a
	// command starting asked programs or requests without end cannot fill
	// the daemon's memory or a person's page.
	MaxPending    int
	TenantPending int
	// Audit, if set, receives the records of the sessions' event
	// streams, each tagged with its session and tenant, the sessions'
	// starts and ends, the approvals' outcomes, and the daemon's own
	// start and stop (auditlog.go). AuditRate (records a second, 10) and
	// AuditBurst (1000) bound what one session's records may take of
	// it, AuditDaemonRate (100) and AuditDaemonBurst (10000) what all
	// sessions' together may; those beyond are counted, not written,
	// but for the rules' decisions and the runs' ends, which wait for
	// their session's rate instead.
	Audit            AuditSink
	AuditRate        float64
	AuditBurst       int
	AuditDaemonRate  float64
	AuditDaemonBurst int
	// Fetcher makes the sessions' fetches (Session.Fetch); nil means one
	// with egress.Fetcher's defaults (public HTTPS only). Tests point
	// names at loopback with it.
	Fetcher *egress.Fetcher
	// Sockets are the unix sockets through which the daemon is driven
	// (its API, an approvals socket): a session whose commands would see
	// one (in its workspace, or a path its policy shows them) is refused,
	// since a command could make sessions or answer its own approvals
	// through it.
	Sockets []string
	// AllowDegraded is the operator's choice (moat serve --allow-degraded)
	// that a session whose policy asks for a protection this host cannot
	// give runs without it rather than be refused; every command's
	// report then says what it runs without (sandbox.SessionRequest).
	AllowDegraded bool
	// SharedSockets says that Sockets let other users connect (moat
	// serve --socket-mode): a root daemon then also records them where
	// every user's run reads them (sandbox.RecordPublicDaemonSockets).
	// A socket only its owner can connect to needs no such record.
	SharedSockets bool
}

func (c *Config) defaults() {
	set := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	setD := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	set(&c.MaxSessions, 16)
	set(&c.MaxTotal, 256)
	set(&c.MaxBackground, 16)
	set(&c.OutputBuffer, 1<<20)
	setD(&c.TTL, time.Hour)
	setD(&c.MaxTTL, 24*time.Hour)
	setD(&c.IdleTimeout, 15*time.Minute)
	setD(&c.Tick, time.Second)
	setD(&c.ApprovalTimeout, 5*time.Minute)
	set(&c.MaxPending, 16)
	set(&c.TenantPending, 64)
	set(&c.AuditBurst, 1000)
	if !(c.AuditRate > 0) { // NaN too
		c.AuditRate = 10
	}
	set(&c.AuditDaemonBurst, 10000)
	if !(c.AuditDaemonRate > 0) {
		c.AuditDaemonRate = 100
	}
	if c.Engine == nil {
		c.Engine = Sandboxes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Manager holds the live sessions. Create one with New and end it with
// Shutdown.
type Manager struct {
	cfg  Config
	dir  string // StateDir/daemon
	lock *os.File
	log  *slog.Logger
	// auditFailed is the audit stream's first failed write: from then on
	// an action a rule decides is refused (auditErr).
	auditFailed atomic.Pointer[error]

	mu       sync.Mutex
	sessions map[string]*Session
	draining bool
	stop     chan struct{}
	ticker   sync.WaitGroup

	ap approvals

	// uploads counts the tar uploads being spooled, per tenant (see
	// startUpload); under mu.
	uploads counts

	// ended remembers the latest sessions that ended, and why, so that a
	// request about one is told so (ErrEnded) rather than not found;
	// under mu, at most maxEndedSessions (endedOrder, oldest first).
	ended      map[string]endedSession
	endedLines int // lines in the journal of ended sessions (endedlog.go)
	endedOrder []string

	// Reaped lists the sessions of a previous daemon that New cleaned up.
	Reaped []string

	// reviews are the change sets of ended overlay and copy sessions,
	// kept for their tenants to review (review.go); under mu.
	reviews []*review
	// inReview counts the reviews under way that change something (an
	// apply, a discard: beginReview), and reviewing waits for them: Shutdown
	// lets each finish before it lets go of the state directory, since
	// an apply cut short leaves the tenant's workspace half applied.
	// inReview under mu; reviewing's Add too, never once draining.
	inReview  int
	reviewing sync.WaitGroup
	// endingDisk is, per tenant, the disk of its sessions being ended
	// whose change sets are about to be kept for review (endFor): counted
	// against its disk quota until the reviews count them; under mu.
	endingDisk map[string]int64
	pool       warmPool

	// audBucket bounds the sessions' records in the audit stream, all
	// together (auditlog.go).
	audBucket audit.Bucket
}

// New starts a Manager on cfg.StateDir. It takes the state directory's
// lock (ErrLocked if another daemon holds it) and reaps what a previous
// daemon left: records of sessions whose sandboxes died with it, and the
// workspaces it had made for them. The change sets a previous daemon kept
// for review in tenants' own workspaces (and those of its sessions there
// when it died) stay their tenants' to review (loadReviews).
func New(cfg Config) (*Manager, error) {
	cfg.defaults()
	if cfg.TTL > cfg.MaxTTL {
		// Every create without a ttl of its own would be refused.
		return nil, fmt.Errorf("a session's default time to live, %s, is over the longest one may live, %s", cfg.TTL, cfg.MaxTTL)
	}
	if err := checkWebhook(cfg.ApprovalWebhook); err != nil {
		return nil, err
	}
	if err := checkTemplateQuotas(&cfg); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("state directory %q is not absolute", cfg.StateDir)
	}
	dir := filepath.Join(cfg.StateDir, "daemon")
	for _, d := range []string{dir, filepath.Join(dir, "sessions"), filepath.Join(dir, "workspaces"), filepath.Join(dir, "reviews")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	lock, err := lockState(cfg.StateDir, os.O_CREATE)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, dir: dir, lock: lock, log: cfg.Logger, sessions: map[string]*Session{}, stop: make(chan struct{})}
	// The sockets are recorded where a run of this user finds them
	// (sandbox.DaemonSocketsRecord), which then refuses to show them.
	if err := sandbox.RecordDaemonSockets(cfg.StateDir, cfg.Sockets); err != nil {
		lock.Close()
		return nil, fmt.Errorf("state directory: %w", err)
	}
	// A root daemon's that let other users in (moat serve --socket-mode)
	// also where every user's run finds them
	// (sandbox.PublicDaemonSocketsRecord): it knows each by its uid, and
	// their runs cannot read root's state directory. Off Linux a socket's peer is
	// not known, and no other user is let in.
	if m.publicSockets() {
		if err := sandbox.RecordPublicDaemonSockets(cfg.StateDir, cfg.Sockets); err != nil {
			sandbox.RecordDaemonSockets(cfg.StateDir, nil)
			lock.Close()
			return nil, fmt.Errorf("the record of the daemon's sockets for other users' runs: %w", err)
		}
	}
	unclean, prevPID := m.markRunning()
	m.loadEnded()
	reaped := m.reap()
	for _, r := range reaped {
		m.Reaped = append(m.Reaped, r.ID)
		// Its tenant, asking about it, is told it ended (gone), not
		// that it was never there.
		e := endedSession{tenant: r.Tenant, reason: "its daemon stopped; this daemon reaped it when it started", at: time.Now()}
		m.remember(r.ID, e)
		m.appendEnded(r.ID, e)
	}
	m.auditStart(unclean, prevPID, reaped)
	m.loadReviews()
	if len(m.Reaped) > 0 {
		// reap removed the cgroups the records named. One a record could
		// not name (a daemon killed between making it and recording it,
		// a record of an older daemon) is too young for the sweep in
		// reap, which leaves alone what a concurrent run may have just
		// made: it is swept again once old enough.
		m.ticker.Add(1)
		go func() {
			defer m.ticker.Done()
			select {
			case <-time.After(cgroupSweepAge):
				sweepCgroups(m.log)
			case <-m.stop:
			}
		}()
	}
	m.ticker.Add(1)
	go m.expire()
	m.startPool()
	return m, nil
}

// publicSockets says whether the daemon records its sockets for every
// user's runs too: root's, on Linux, when they let other users in
// (Config.SharedSockets).
func (m *Manager) publicSockets() bool {
	return m.cfg.SharedSockets && os.Geteuid() == 0 && runtime.GOOS == "linux"
}

// expire ends sessions past their TTL or idle timeout.
func (m *Manager) expire() {
	defer m.ticker.Done()
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			var ended []*Session
			var whys []string
			for _, s := range m.sessions {
				if !s.ready {
					continue
				}
				if why := s.expired(now); why != "" {
					ended, whys = append(ended, s), append(whys, why)
					m.logExpired(s, why)
				}
			}
			m.mu.Unlock()
			for i, s := range ended {
				m.end(context.Background(), s, whys[i])
			}
		}
	}
}

// List returns the tenant's sessions, oldest first.
func (m *Manager) List(t Tenant) []*Session {
	if t.MaySessions() != nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Session
	for _, s := range m.sessions {
		if s.ready && s.Tenant.ID == t.ID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Get returns the tenant's session id. Another tenant's session is
// ErrNotFound too: a tenant cannot learn that it exists.
func (m *Manager) Get(t Tenant, id string) (*Session, error) {
	if err := t.MaySessions(); err != nil {
		return nil, err
	}
	s, err := m.get(t, id)
	if err != nil {
		return nil, err
	}
	// The expiry's tick may not have come yet: a session past its TTL
	// (or idle past its timeout) ends here rather than take one more
	// request (found by a tester).
	if why := s.expired(time.Now()); why != "" {
		m.logExpired(s, why)
		m.end(context.Background(), s, why)
		return m.get(t, id)
	}
	return s, nil
}

func (m *Manager) logExpired(s *Session, why string) {
	m.log.Info("session expired", "session", s.ID, "tenant", s.Tenant.ID, "why", why)
	if why == "protection" {
		m.log.Warn("session ended: a protection went", "session", s.ID, "tenant", s.Tenant.ID, "detail", s.endReason())
	}
}

// get is Get without the look at the session's expiry.
func (m *Manager) get(t Tenant, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if e, gone := m.ended[id]; !ok && gone && e.tenant == t.ID {
		return nil, fmt.Errorf("%w: %s ended at %s (%s)", ErrEnded, id, e.at.UTC().Format(time.RFC3339), e.reason)
	}
	if !ok || !s.ready || s.Tenant.ID != t.ID {
		return nil, fmt.Errorf("%w %q", ErrNotFound, shownID(id))
	}
	return s, nil
}

// shownID is an id a client sent, cut short for an error message: any
// id longer than a session's is no session's, and echoing it whole would
// return whatever the client sent.
func shownID(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}

// endedSession is what Get tells of a session that ended.
type endedSession struct {
	tenant, reason string
	at             time.Time
}

// maxEndedSessions bounds the ended sessions the daemon remembers.
const maxEndedSessions = 1024

// noteEnded remembers that session s ended for reason; under mu.
func (m *Manager) noteEnded(s *Session, reason string) {
	if !s.ready {
		return // never served: nobody can ask about it
	}
	e := endedSession{tenant: s.Tenant.ID, reason: reason, at: time.Now()}
	m.remember(s.ID, e)
	m.appendEnded(s.ID, e)
}

// remember keeps e as what Get tells of the ended session id, forgetting
// the oldest past maxEndedSessions; under mu, or before the daemon
// serves.
func (m *Manager) remember(id string, e endedSession) {
	if m.ended == nil {
		m.ended = map[string]endedSession{}
	}
	if _, again := m.ended[id]; again {
		// Told anew (the journal's line, then a reap): its place is the
		// newest, and the older place must not evict it later.
		m.endedOrder = slices.DeleteFunc(m.endedOrder, func(o string) bool { return o == id })
	}
	if len(m.endedOrder) >= maxEndedSessions {
		delete(m.ended, m.endedOrder[0])
		m.endedOrder = m.endedOrder[1:]
	}
	m.ended[id] = e
	m.endedOrder = append(m.endedOrder, id)
}

// Delete ends the tenant's session id: its commands are killed, its
// engine closed, a workspace the daemon made removed.
func (m *Manager) Delete(ctx context.Context, t Tenant, id string) error {
	s, err := m.Get(t, id)
	if err != nil {
		return err
	}
	return m.end(ctx, s, "deleted")
}

// end removes s from the live sessions and tears it down; reason is why,
// for the audit stream (audit.SessionEvent).
func (m *Manager) end(ctx context.Context, s *Session, reason string) error {
	return m.endFor(ctx, s, false, reason)
}

// endFor is end; reviewing says that a review of s ends it, which keeps
// a workspace the daemon made (keepReview).
func (m *Manager) endFor(ctx context.Context, s *Session, reviewing bool, reason string) error {
	m.mu.Lock()
	if m.sessions[s.ID] != s {
		m.mu.Unlock()
		return nil // ended already
	}
	delete(m.sessions, s.ID)
	m.noteEnded(s, reason)
	// What its commands wrote, bounded by its limits.disk, is about to
	// be a change set kept for review: it stays counted while the sandbox
	// closes, or a create meanwhile would take the disk it is to hold.
	held := int64(0)
	if s.disk > 0 && s.ChangeSet() != "" && (reviewing || !s.TempWorkspace) {
		held = s.disk
		if m.endingDisk == nil {
			m.endingDisk = map[string]int64{}
		}
		m.endingDisk[s.Tenant.ID] += held
	}
	m.mu.Unlock()
	s.mu.Lock()
	s.endedWhy = reason // before close kills its commands (noteEnd)
	s.mu.Unlock()
	err := s.close(ctx)
	rec := s.record()
	if !reviewing && discardEmpty(s.ChangeSet()) {
		// Nothing to review: the session wrote nothing.
	} else if m.keepReview(s, reviewing) {
		rec.TempWorkspace = "" // the review's, removed with it
	}
	if held > 0 {
		m.mu.Lock()
		if m.endingDisk[s.Tenant.ID] -= held; m.endingDisk[s.Tenant.ID] <= 0 {
			delete(m.endingDisk, s.Tenant.ID)
		}
		m.mu.Unlock()
	}
	if rerr := m.removeRecord(rec); rerr != nil && err == nil {
		err = rerr
	}
	if s.ready {
		s.aud.end(reason)
	}
	m.log.Info("session ended", "session", s.ID, "tenant", s.Tenant.ID, "reason", reason)
	return err
}

// Count returns the number of live sessions (for metrics).
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// drainGrace is how long a drain gives the commands it sent SIGTERM to
// before the sessions' end kills them.
const drainGrace = 3 * time.Second

// Shutdown drains the daemon: new sessions, commands and reviews are
// refused, running commands get until ctx is done to end, then what
// still runs (background commands too) gets SIGTERM and drainGrace more,
// unless ctx was done already at the call; then every session is ended,
// which kills the rest. A review under way (an apply into a tenant's
// workspace above all) is waited for, whatever ctx says: it is bounded
// work, and one cut short would leave the workspace half applied until
// the next daemon rolled it back; its client gets its answer. The
// daemon's stop record is written, and the state directory's lock
// released, last.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	if m.draining {
		m.mu.Unlock()
		return nil
	}
	m.draining = true
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	// A bound already over (moat serve --drain 0) kills at once;
	// otherwise, once the foreground commands have ended or the bound is
	// reached, what still runs gets a SIGTERM and drainGrace to end.
	killNow := ctx.Err() != nil
	for _, s := range all {
		s.drain(ctx)
	}
	if !killNow {
		var termed []*Session
		for _, s := range all {
			if s.terminate() {
				termed = append(termed, s)
			}
		}
		if len(termed) > 0 {
			m.log.Info("draining: asked the commands still running to end", "sessions", len(termed), "grace", drainGrace.String())
			gctx, cancel := context.WithTimeout(context.Background(), drainGrace)
			for _, s := range termed {
				s.settled(gctx)
			}
			cancel()
		}
	}
	var errs []error
	for _, s := range all {
		if err := m.end(context.Background(), s, "shutdown"); err != nil {
			errs = append(errs, err)
		}
	}
	// No review begins once draining is set (beginReview): those under
	// way are all that reviewing counts. Before forgetReviews, which
	// removes the workspaces the daemon made that a review may be
	// applying into.
	m.mu.Lock()
	n := m.inReview
	m.mu.Unlock()
	if n > 0 {
		m.log.Info("draining: waiting for the reviews under way (diff, apply, discard) to end", "reviews", n)
	}
	m.reviewing.Wait()
	m.forgetReviews()
	close(m.stop)
	m.ticker.Wait()
	m.closePool()
	sandbox.RecordDaemonSockets(m.cfg.StateDir, nil)
	if m.publicSockets() {
		sandbox.RecordPublicDaemonSockets(m.cfg.StateDir, nil)
	}
	m.auditStop()
	m.markStopped()
	m.lock.Close()
	return errors.Join(errs...)
}
