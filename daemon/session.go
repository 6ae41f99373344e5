package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// CreateRequest is a new session.
type CreateRequest struct {
	Policy        string // TOML; "" is the default policy
	Workspace     string // a host directory; "" is a new one the daemon removes with the session
	WorkspaceMode string // overrides the policy's workspace.mode
	TTL           time.Duration
	IdleTimeout   time.Duration
	// PolicyFile is the absolute path Policy was read from on the host,
	// if it was; only the daemon's own user's is taken (tenantPolicy).
	PolicyFile string
	// Checked is the policy as policy.Trust.Load returned it for
	// PolicyFile, whose checked document Policy is: the session's policy
	// keeps what that check took (policy.Policy.KeepChecks), so that the
	// programs it runs on the host are checked again before each runs.
	// Only an in-process caller of the daemon's own user sets it (moat
	// mcp); the HTTP API has no way to, as a tenant must never claim a
	// check. A Policy that is not the checked document is refused.
	Checked *policy.Policy
	// NetworkEvents, if set, receives every network decision of an
	// allow-mode session as it happens (an in-process caller's hook: the
	// MCP server tells a command's result the refusals it met).
	NetworkEvents func(egress.Event)
	// Template names one of the daemon's templates (Config.Templates),
	// whose policy the session gets instead of Policy; a request that
	// matches its warm pool gets a sandbox made in advance.
	Template string
	// Learn runs the session's rules in report-only mode (see
	// sandbox.SessionRequest.Learn): what they would deny or ask about
	// happens and is audited as "learn", for moat policy suggest.
	Learn bool
}

// Session is a live session. Its exported fields do not change.
type Session struct {
	ID            string
	Tenant        Tenant
	Workspace     string // the workspace's host path
	WorkspaceMode string
	TempWorkspace bool // made by the daemon, removed with the session
	Created       time.Time
	Expires       time.Time
	IdleTimeout   time.Duration

	m    *Manager
	eng  Engine
	root *os.File // the workspace, opened once: the files API resolves beneath it
	// rootMu is held for reading while the root is used, so that it is
	// never closed under a files request (whose fd number could then name
	// another directory).
	rootMu  sync.RWMutex
	rootEnd bool
	protect []string           // protected paths, relative to the root
	gate    *sandbox.WriteGate // the policy's write rules (writerules.go)
	policy  *policy.Policy     // the policy in force, resolved
	fsOnce  sync.Once          // fsl, made at the first files-API check
	fsl     fsLists
	ctx     context.Context // cancelled when the session ends: kills its commands
	cancel  context.CancelFunc
	// made is closed once Create is done with the engine it makes: set
	// up, or refused and undone, or closed because the session ended
	// while it was made (close waits for it).
	made  chan struct{}
	execs sync.WaitGroup // foreground commands
	bg    sync.WaitGroup // background commands

	mu         sync.Mutex
	lastUsed   time.Time
	nExecs     int
	running    int // foreground commands
	background int
	procs      map[string]*Process
	order      []string // process ids, oldest first
	nextProc   int
	ended      bool
	ready      bool // made: under the Manager's lock, which Get and List take
	// memory and cpus are the policy's limits, counted against the
	// tenant's quotas; under the Manager's lock.
	memory int64
	cpus   float64

	events *eventLog     // its audit records (events.go)
	aud    *sessionAudit // and the daemon's audit stream's (auditlog.go)
	// disk is the policy's limits.disk, counted against the tenant's disk
	// quota; template is the template the session was made from, or "".
	disk     int64
	template string
	// cgroups are the directories of its sandbox's cgroup, kept in its
	// record (record.Cgroups); under mu.
	cgroups []string
	// guards is the state of its workspace guards, kept in its record
	// (record.Guards); under mu.
	guards []byte
	// endedWhy is why the session ended, once it has (Manager.endFor);
	// under mu.
	endedWhy string
	// endWarnings are the warnings its sandbox's end gave (EndWarnings);
	// under mu.
	endWarnings []string
	// watchers are told of the asks of the session's own (watch); under
	// mu.
	watchers    map[int]func(*Approval)
	nextWatcher int
	// wsTmpfs: the daemon mounted a tmpfs of limits.disk on the workspace
	// it made (boundWorkspace).
	wsTmpfs bool
}

// Create makes a session for t. The workspace and the policy are checked
// for the tenant (checkWorkspace, tenantPolicy); the quotas are counted
// before anything is made.
func (m *Manager) Create(ctx context.Context, t Tenant, req *CreateRequest) (_ *Session, err error) {
	if err := t.MaySessions(); err != nil {
		return nil, err
	}
	t.Role = RoleAll // the session's tenant is the tenant, whichever credential made it
	ttl, idle := req.TTL, req.IdleTimeout
	if ttl <= 0 {
		ttl = m.cfg.TTL
	}
	if idle <= 0 {
		idle = m.cfg.IdleTimeout
	}
	if ttl > m.cfg.MaxTTL {
		return nil, fmt.Errorf("%w: ttl %s is over the daemon's maximum %s", ErrBadRequest, ttl, m.cfg.MaxTTL)
	}
	// Shorter, the session would end before its creator could use it.
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttl", ttl}, {"idle_timeout", idle}} {
		if d.v < time.Second {
			return nil, fmt.Errorf("%w: %s %s is under a second: a session that short ends before it is used (leave it out for the daemon's default)", ErrBadRequest, d.name, d.v)
		}
	}
	if req.Template != "" {
		if _, err := m.template(req); err != nil {
			return nil, err
		}
		if s, err := m.claim(t, req, ttl, idle); s != nil || err != nil {
			return s, err
		}
	}
	ws, temp := "", req.Workspace == ""
	var root *os.File
	if !temp {
		if ws, root, err = checkWorkspace(t, req.Workspace); err != nil {
			return nil, err
		}
		if err := m.outsideState(ws); err != nil {
			root.Close()
			return nil, err
		}
	}
	id := newID()
	s := &Session{
		ID: id, Tenant: t, TempWorkspace: temp,
		Created: time.Now(), IdleTimeout: idle,
		m: m, procs: map[string]*Process{}, root: root, template: req.Template, events: newEventLog(),
		Workspace: ws, made: make(chan struct{}),
	}
	// The first deferred, so the last to run: after the undoing below.
	defer close(s.made)
	s.aud = m.newSessionAudit(id, t.ID)
	s.Expires = s.Created.Add(ttl)
	s.lastUsed = s.Created

	// Reserve the place first, so that concurrent creates cannot pass the
	// quota together.
	m.mu.Lock()
	if err := m.admitLocked(t); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	m.sessions[id] = s
	m.mu.Unlock()
	rec := s.record()
	defer func() {
		if err != nil {
			m.mu.Lock()
			delete(m.sessions, id)
			m.mu.Unlock()
			if s.root != nil {
				s.root.Close()
			}
			m.removeRecord(rec)
		}
	}()

	if temp {
		ws = filepath.Join(m.dir, "workspaces", id)
		rec.TempWorkspace = ws
	}
	// The record is written before the workspace is made: a daemon that
	// dies in between leaves a record the next one reaps.
	if err := m.writeRecord(rec); err != nil {
		return nil, fmt.Errorf("session record: %w", err)
	}
	if temp {
		if err := os.Mkdir(ws, 0o700); err != nil {
			return nil, fmt.Errorf("make workspace: %w", err)
		}
		if t.UID >= 0 && os.Geteuid() == 0 {
			// The tenant's commands write it as the tenant, as they would
			// write a workspace of its own.
			if err := os.Chown(ws, t.UID, -1); err != nil {
				return nil, fmt.Errorf("make workspace: %w", err)
			}
		}
		if s.root, err = os.Open(ws); err != nil {
			return nil, fmt.Errorf("make workspace: %w", err)
		}
	}
	s.Workspace = ws
	p, err := m.requestPolicy(t, req, ws)
	if err != nil {
		return nil, err
	}
	s.WorkspaceMode = p.Workspace.Mode
	s.policy = p
	if rec.Revoke = revokeNames(p); len(rec.Revoke) > 0 {
		if err := m.writeRecord(rec); err != nil {
			return nil, fmt.Errorf("session record: %w", err)
		}
	}
	if temp && p.Sandbox.Isolation == policy.IsolationGVisor && os.Geteuid() == 0 {
		// runsc has no id-mapped mounts: its command writes as its own
		// uid, which must own what it writes. The workspace the daemon
		// made is in a directory no tenant reaches on the host, so it is
		// that uid's, whoever the tenant is.
		if err := os.Chown(ws, p.User.UID, p.User.GID); err != nil {
			return nil, fmt.Errorf("make workspace: %w", err)
		}
	}
	if err := m.boundWorkspace(s); err != nil {
		return nil, err
	}
	if err := m.reserveLimits(s); err != nil {
		return nil, err
	}
	if err := refuseUnboundedCopy(p); err != nil {
		return nil, err
	}
	s.protect = protectList(p)
	s.gate = s.newWriteGate(p)
	s.gate.Learn = req.Learn
	s.mu.Lock()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.Unlock()
	caller := daemonCaller()
	caller.StateWorkspace = temp // made in the daemon's directory
	if !t.self() && t.UID > 0 {
		// The paths the tenant named are mounted only if they lead to
		// the tenant's own files when the sandbox is made: checked on
		// what is mounted, so a link swapped in after checkWorkspace is
		// refused (backend.Mount.Owner). As root, they are looked at
		// and opened with the tenant's rights, so that what it cannot
		// reach is as missing to it; a workspace the daemon made, in
		// its own directory, with the daemon's.
		caller.Owner = t.UID
		caller.OwnerGID, caller.OwnerGroups = t.fsIDs()
		caller.WorkspaceMade = temp
	}
	espec := &EngineSpec{ID: id, Policy: p, Caller: caller, NetworkEvents: req.NetworkEvents, Approver: s.approver(), Audit: s.audit, AuditErr: m.auditErr, Learn: req.Learn,
		OnCgroup: s.recordCgroups(rec), AllowDegraded: m.cfg.AllowDegraded}
	if !temp {
		espec.OnGuard = s.recordGuards(rec)
	}
	// The session's end (a daemon's shutdown) while the sandbox is made
	// ends the making too: a secret's program, a copy.
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	context.AfterFunc(s.ctx, stop)
	eng, err := m.cfg.Engine(ectx, espec)
	if err != nil {
		m.mu.Lock()
		draining := m.draining
		m.mu.Unlock()
		if draining && s.ctx.Err() != nil && ctx.Err() == nil {
			// Ended by the daemon's shutdown while it was made: no fault
			// of the request's.
			s.cancel()
			return nil, ErrDraining
		}
		s.cancel()
		if errors.Is(err, sandbox.ErrRefused) {
			return nil, err // already says so
		}
		return nil, fmt.Errorf("%w: %w", sandbox.ErrRefused, err)
	}
	s.mu.Lock()
	s.eng = eng
	s.mu.Unlock()
	m.mu.Lock()
	if m.sessions[id] != s || m.draining {
		// Shutdown passed it by while the sandbox was being made.
		m.mu.Unlock()
		s.cancel()
		eng.Close(context.Background())
		return nil, ErrDraining
	}
	s.ready = true
	m.mu.Unlock()
	s.aud.start(s)
	m.log.Info("session created", "session", id, "tenant", t.ID, "mode", s.WorkspaceMode, "ttl", ttl.String())
	return s, nil
}

// Policy returns a copy of the policy in force in s, resolved: what its
// commands may read, write and reach.
func (s *Session) Policy() *policy.Policy {
	return s.policy.Clone()
}

// reserveResources counts s's memory and CPU limits against its tenant's
// quotas, with those of the tenant's other sessions (those made, and those
// being made that have reserved theirs).
func (m *Manager) reserveResources(s *Session, memory int64, cpus float64) error {
	// A limit left unset is the request's to fix, not a quota to wait
	// for: bad_request, which a client does not retry.
	if m.cfg.TenantMemory > 0 && memory == 0 {
		return fmt.Errorf("%w: this daemon bounds each tenant's memory: set limits.memory", ErrBadRequest)
	}
	if m.cfg.TenantCPUs > 0 && cpus == 0 {
		return fmt.Errorf("%w: this daemon bounds each tenant's CPUs: set limits.cpus", ErrBadRequest)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var usedMem int64
	var usedCPUs float64
	for _, o := range m.sessions {
		if o != s && o.Tenant.ID == s.Tenant.ID {
			usedMem += o.memory
			usedCPUs += o.cpus
		}
	}
	if q := m.cfg.TenantMemory; q > 0 && usedMem+memory > q {
		return fmt.Errorf("%w: limits.memory %s with the tenant's other sessions' %s is over its %s", ErrQuota,
			policy.Size(memory), policy.Size(usedMem), policy.Size(q))
	}
	if q := m.cfg.TenantCPUs; q > 0 && usedCPUs+cpus > q {
		return fmt.Errorf("%w: limits.cpus %g with the tenant's other sessions' %g is over its %g", ErrQuota, cpus, usedCPUs, q)
	}
	s.memory, s.cpus = memory, cpus
	return nil
}

func (m *Manager) countLocked(t Tenant) int {
	n := 0
	for _, s := range m.sessions {
		if s.Tenant.ID == t.ID {
			n++
		}
	}
	return n
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Session) record() *record {
	s.mu.Lock()
	cgroups, guards := s.cgroups, s.guards
	made := s.eng != nil
	s.mu.Unlock()
	r := &record{ID: s.ID, Tenant: s.Tenant.ID, Created: s.Created, PID: os.Getpid(), Cgroups: cgroups, made: made}
	if guards != nil {
		r.Guards, r.TenantUID, r.Self = string(guards), s.Tenant.UID, s.Tenant.self()
	}
	if s.policy != nil {
		r.Revoke = revokeNames(s.policy)
	}
	if made {
		r.changeSet = s.ChangeSet()
	}
	if s.TempWorkspace {
		r.TempWorkspace = filepath.Join(s.m.dir, "workspaces", s.ID)
	} else {
		r.Workspace = s.Workspace
	}
	return r
}

// recordCgroups returns what the engine is to call with the directories
// of s's sandbox's cgroup: they are written in rec (s's record, already on
// disk) before the sandbox's processes start, so that the next daemon
// removes them after this one's death however young they are (reap).
func (s *Session) recordCgroups(rec *record) func([]string) error {
	return func(dirs []string) error {
		s.mu.Lock()
		s.cgroups = dirs
		s.mu.Unlock()
		rec.Cgroups = dirs
		if err := s.m.writeRecord(rec); err != nil {
			return fmt.Errorf("session record: %w", err)
		}
		return nil
	}
}

// revokeNames names p's secrets that have a revoke program.
func revokeNames(p *policy.Policy) []string {
	var names []string
	for _, sec := range p.Secrets {
		if sec.Revoke != "" {
			names = append(names, sec.Name)
		}
	}
	return names
}

// recordGuards returns what the engine is to call with the state of s's
// workspace guards: it is written in rec before the sandbox's processes
// start, so that the next daemon quarantines what they planted after
// this one's death (reap).
func (s *Session) recordGuards(rec *record) func([]byte) error {
	return func(state []byte) error {
		s.mu.Lock()
		s.guards = state
		s.mu.Unlock()
		rec.Guards, rec.TenantUID, rec.Self = string(state), s.Tenant.UID, s.Tenant.self()
		if err := s.m.writeRecord(rec); err != nil {
			return fmt.Errorf("session record: %w", err)
		}
		return nil
	}
}

// ChangeSet is the id of an overlay or copy session's change set, where
// its commands' writes are kept for review (moat diff, apply), "" in
// other modes. The change set outlives the session.
func (s *Session) ChangeSet() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng == nil {
		return ""
	}
	return s.eng.ChangeSet()
}

// Status is a snapshot of a session's use.
type Status struct {
	LastUsed time.Time
	Execs    int // commands run so far
	Running  int // commands running now, background ones included
}

// Status returns how s is used now.
func (s *Session) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{LastUsed: s.lastUsed, Execs: s.nExecs, Running: s.running + s.background}
}

// endReason is why s's sandbox ended by itself, when its engine says
// (a protection went: sandbox.Session.EndReason), or "".
func (s *Session) endReason() string {
	if e, ok := s.eng.(interface{ EndReason() string }); ok {
		return e.EndReason()
	}
	return ""
}

// expired returns why s has expired at now, or "".
func (s *Session) expired(now time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !now.Before(s.Expires):
		return "ttl"
	case s.running == 0 && now.Sub(s.lastUsed) >= s.IdleTimeout:
		return "idle"
	}
	if s.ready {
		select {
		case <-s.eng.Done():
			// A protection's going ended it (the host replaced or
			// removed a protected file): said apart, and logged with
			// the path by the caller.
			if s.endReason() != "" {
				return "protection"
			}
			return "sandbox ended"
		default:
		}
	}
	return ""
}

// begin counts a command in, or refuses it once the session or the
// daemon is ending.
//
// A background command counts as running for Status, but neither keeps
// the session from going idle nor holds up a drain: a dev server never
// ends on its own.
func (s *Session) begin(background bool) error {
	s.m.mu.Lock()
	draining := s.m.draining
	s.m.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ended:
		return fmt.Errorf("%w: %s", ErrEnded, s.ID)
	case draining:
		return ErrDraining
	}
	s.nExecs++
	s.lastUsed = time.Now()
	if background {
		s.background++
		s.bg.Add(1)
	} else {
		s.running++
		s.execs.Add(1)
	}
	return nil
}

// touch marks s as used now, for its idle timeout.
func (s *Session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (s *Session) finish(background bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUsed = time.Now()
	if background {
		s.background--
		s.bg.Done()
	} else {
		s.running--
		s.execs.Done()
	}
}

// Exec runs a command in s to its end. Cancelling ctx, or the session's
// end, kills it.
func (s *Session) Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*sandbox.Report, error) {
	if err := checkExec(req); err != nil {
		return nil, err
	}
	if err := s.begin(false); err != nil {
		return nil, err
	}
	defer s.finish(false)
	if err := s.sameRoot(); err != nil {
		return nil, err
	}
	if err := s.checkDir(req.Dir); err != nil {
		return nil, err
	}
	if req.StderrToStdout {
		stdio.Stderr = stdio.Stdout // one pipe (see backend.Stdio)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	if req.OnPending != nil {
		// A program the command left behind may ask after Exec has
		// returned, when whatever OnPending writes to (the request's
		// answer) is gone: it is told no more.
		on, end := onlyDuring(req.OnPending)
		defer end()
		r := *req
		r.OnPending = on
		req = &r
		defer s.watch(on)()
	}
	fullAtStart := s.workspaceFull()
	rep, err := s.eng.Exec(ctx, s.withApprover(req), stdio)
	s.noteEnd(rep)
	s.noteDisk(rep, fullAtStart)
	if rep != nil {
		s.auditAll(rep.AuditRecords(err))
	}
	return rep, err
}

// workspaceFull says whether the tmpfs of limits.disk the daemon mounted
// on the session's workspace (boundWorkspace) is full.
func (s *Session) workspaceFull() bool {
	s.mu.Lock()
	root, on := s.root, s.wsTmpfs
	s.mu.Unlock()
	return on && tmpfsFull(root, int64(s.policy.Limits.Disk))
}

// noteDisk says in rep that the command failed with its workspace's disk
// limit reached (the tmpfs the daemon mounted there), as the sandbox
// says of its own tmpfs: reason "disk", unless it was full already when
// the command started, which then did not reach it.
func (s *Session) noteDisk(rep *sandbox.Report, fullAtStart bool) {
	if rep == nil || fullAtStart || (rep.Reason != "exit" && rep.Reason != "signal") || rep.ExitCode == 0 || !s.workspaceFull() {
		return
	}
	rep.Reason = string(backend.CauseDisk)
	if !slices.Contains(rep.LimitsHit, string(backend.CauseDisk)) {
		rep.LimitsHit = append(rep.LimitsHit, string(backend.CauseDisk))
	}
}

// noteEnd says in rep, the report of a command the session's end
// killed, why the session ended.
func (s *Session) noteEnd(rep *sandbox.Report) {
	if rep == nil || rep.Reason != "killed" || s.ctx.Err() == nil {
		return
	}
	s.mu.Lock()
	rep.SessionEnded = s.endedWhy
	s.mu.Unlock()
}

// checkDir refuses a working directory that a link in the workspace
// leads out of it: the backends would each do something else with it
// (the native one follows it to the sandbox's skeleton, gVisor fails),
// and the API says a path leading out is refused. What the host cannot
// see (a link an overlay session's command made) is left to the
// sandbox, where it leads nowhere outside either.
func (s *Session) checkDir(dir string) error {
	if dir == "" || s.filesAllowed(false) != nil {
		return nil
	}
	real, err := s.Resolve(dir)
	switch {
	case errors.As(err, new(*hiddenError)):
		// Refused as the files API refuses it, there or not: what a
		// hidden directory holds is not probed through dir either.
		return err
	case errors.Is(err, ErrWorkspace):
		return fmt.Errorf("%w: dir %q leads out of the workspace", ErrBadRequest, dir)
	case errors.Is(err, ErrNoFile):
		// Said here, in the workspace's own terms: the sandbox's chdir
		// would name the daemon's path to it.
		return fmt.Errorf("%w: dir %q does not exist in the workspace", ErrBadRequest, dir)
	}
	// Where it leads (Resolve followed its links): a link to a file is
	// no directory either.
	if fi, err := s.Stat(real); err == nil && fi.Type != "dir" {
		return fmt.Errorf("%w: dir %q is a file, not a directory", ErrBadRequest, dir)
	}
	return nil
}

// onlyDuring returns f as a function that calls it only until end is
// called, and never while end runs: end waits for a call under way.
func onlyDuring(f func(*Approval)) (g func(*Approval), end func()) {
	var mu sync.Mutex
	live := true
	g = func(p *Approval) {
		mu.Lock()
		defer mu.Unlock()
		if live {
			f(p)
		}
	}
	end = func() {
		mu.Lock()
		live = false
		mu.Unlock()
	}
	return g, end
}

// withApprover is req, with the session's pending approvals as its
// approver when it brings none.
func (s *Session) withApprover(req *ExecRequest) *ExecRequest {
	if req.Approver != nil {
		return req
	}
	if s.approver() == nil {
		return req
	}
	r := *req
	r.Approver = queueApprover{s: s, pending: req.OnPending}
	return &r
}

// checkExec refuses a command line or directory that cannot be right.
func checkExec(req *ExecRequest) error {
	if len(req.Args) == 0 {
		return fmt.Errorf("%w: args is empty", ErrBadRequest)
	}
	if req.Args[0] == "" {
		return fmt.Errorf("%w: args[0], the program, is empty", ErrBadRequest)
	}
	// A NUL cannot be in an argument, a variable or a path the kernel is
	// given: it would end the string there.
	for i, a := range req.Args {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("%w: args[%d] contains a NUL byte", ErrBadRequest, i)
		}
	}
	for _, kv := range append(slices.Clone(req.Env), req.Dir) {
		if strings.ContainsRune(kv, 0) {
			return fmt.Errorf("%w: env or dir contains a NUL byte", ErrBadRequest)
		}
	}
	if d := req.Dir; d != "" && (filepath.IsAbs(d) || filepath.Clean(d) != d || d == ".." || strings.HasPrefix(d, "../")) {
		return fmt.Errorf("%w: dir %q must be a clean path relative to the workspace", ErrBadRequest, d)
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("%w: env entry %q is not NAME=VALUE", ErrBadRequest, kv)
		}
	}
	return nil
}

// drain waits until s has no command running or ctx is done.
func (s *Session) drain(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.execs.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// terminate sends SIGTERM to every command still running in s, its
// background ones included, and reports whether there was one: a drain
// gives them drainGrace to end on their own (a dev server that closes
// its connections, a build that removes its temporary files) before the
// session's end kills them.
func (s *Session) terminate() bool {
	sig, ok := s.eng.(signaller)
	if !ok || s.Status().Running == 0 {
		return false
	}
	return sig.Signal(syscall.SIGTERM) > 0
}

// settled waits until no command runs in s, foreground or background, or
// ctx is done.
func (s *Session) settled(ctx context.Context) {
	done := make(chan struct{})
	go func() { s.execs.Wait(); s.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// EndWarnings are the warnings the session's end gave, once it has
// ended: a secret's revoke that failed (its minted value may still be
// valid), changes lost. Whoever ended it is told (a DELETE's answer);
// the daemon's log and the audit stream have them too.
func (s *Session) EndWarnings() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.endWarnings)
}

// close kills what runs in s and closes its engine.
func (s *Session) close(ctx context.Context) error {
	s.mu.Lock()
	s.ended = true
	cancel, eng, made := s.cancel, s.eng, s.made
	s.mu.Unlock()
	defer s.closeRoot()
	if cancel == nil {
		return nil // Create failed before the engine existed
	}
	cancel()
	if eng == nil {
		// Being made (a shutdown during Create): cancelled, Create undoes
		// what it made, or closes the engine it made, seeing the session
		// gone.
		if made != nil {
			<-made
		}
		return nil
	}
	// Closing the sandbox kills the commands still running; their
	// requests then end.
	rep, err := eng.Close(ctx)
	s.execs.Wait()
	s.bg.Wait()
	if rep != nil {
		ended := rep.Warnings
		if ew, ok := eng.(endWarner); ok {
			ended = ew.EndWarnings()
		}
		s.mu.Lock()
		s.endWarnings = ended
		s.mu.Unlock()
		s.m.log.Info("session sandbox closed", "session", s.ID, "reason", rep.Reason, "quarantined", len(rep.Quarantined))
		// A secret not revoked may still be valid: whoever runs the
		// daemon (moat mcp's user, on its stderr) must hear of it, not
		// only the audit log.
		for _, w := range rep.Warnings {
			s.m.log.Warn("session closed with a warning", "session", s.ID, "warning", w)
		}
		// Before the report reaches the session's events, which then say
		// what was removed rather than where it went.
		switch {
		case len(rep.Quarantined) == 0:
		case s.TempWorkspace:
			removeQuarantined(rep, -1, "the workspace the daemon made for the session goes with it")
		case !s.Tenant.self():
			removeQuarantined(rep, s.Tenant.UID, "the daemon keeps nothing of another user's in its own state directory, which that user cannot reach")
		}
		s.auditAll(rep.AuditRecords(err))
	}
	s.events.close()
	return err
}

// removeQuarantined removes what the sandbox quarantined, into the
// daemon's state directory, from a workspace that is not the daemon's
// own user's: the one the daemon made, which goes with the session, or
// a local user's own. Kept, it would stay on the host's disk for good,
// counted in no quota, and grow with each session of the tenant (up to
// what the tenant's own filesystem holds, each time, since the move
// frees it there); the tenant could neither review nor remove it. The
// directories the quarantine made for it go too, once empty, and rep
// says, for each, that it was removed and why.
//
// With owner at zero or above, only what owner owns goes: what a command
// planted is its tenant's. The quarantine moves only what is below the
// workspace directory the session began with (workspace.Guard), however
// the tenant changes it on the host while its session ends; were
// something of another user's moved in all the same, it stays in the
// quarantine, for the host's administrator, rather than be lost.
func removeQuarantined(rep *sandbox.Report, owner int, why string) {
	for _, q := range slices.Clone(rep.Quarantined) {
		if owner >= 0 && ownerOf(q.To) != owner {
			continue
		}
		if removeAll(q.To) != nil {
			continue
		}
		rep.QuarantineRemoved(q.To, why)
		for d := filepath.Dir(q.To); filepath.Base(d) != "quarantine" && filepath.Dir(d) != d; d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
	}
}

// Start starts a background command in s; its output is kept, bounded,
// for Process.Read. With openStdin, its standard input is a pipe that
// Process.WriteStdin writes (else /dev/null).
func (s *Session) Start(req *ExecRequest, openStdin bool) (*Process, error) {
	if err := checkExec(req); err != nil {
		return nil, err
	}
	if err := s.checkDir(req.Dir); err != nil {
		return nil, err
	}
	p := &Process{
		Args: append([]string(nil), req.Args...), Started: time.Now(),
		done: make(chan struct{}),
		out:  newBuffer(s.m.cfg.OutputBuffer),
	}
	// The count and the place are taken under one lock, so that
	// concurrent starts cannot pass the bound together: p runs, for the
	// count, from now until it ends or is dropped.
	s.mu.Lock()
	n := 0
	for _, p := range s.procs {
		if p.Running() {
			n++
		}
	}
	if n >= s.m.cfg.MaxBackground {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %d background commands run in this session, the most allowed", ErrQuota, n)
	}
	s.nextProc++
	p.ID = strconv.Itoa(s.nextProc)
	s.procs[p.ID] = p
	s.order = append(s.order, p.ID)
	s.forgetEndedLocked()
	s.mu.Unlock()
	drop := func() {
		s.mu.Lock()
		delete(s.procs, p.ID)
		s.order = slices.DeleteFunc(s.order, func(id string) bool { return id == p.ID })
		s.mu.Unlock()
	}
	if err := s.begin(true); err != nil {
		drop()
		return nil, err
	}
	if err := s.sameRoot(); err != nil {
		drop()
		s.finish(true)
		return nil, err
	}

	stdio := backend.Stdio{Stdout: p.out.writer("stdout"), Stderr: p.out.writer("stderr")}
	if req.StderrToStdout {
		stdio.Stderr = stdio.Stdout // one pipe (see backend.Stdio)
	}
	var stdinR *os.File
	if openStdin {
		// An OS pipe, passed to the command as it is, whose write end
		// takes a deadline: a command that does not read cannot block a
		// request for longer than its deadline.
		r, w, err := os.Pipe()
		if err != nil {
			drop()
			s.finish(true)
			return nil, err
		}
		p.inMu.Lock() // p is listed already: a write may look
		p.stdin = w
		p.inMu.Unlock()
		stdinR, stdio.Stdin = r, r
	}
	ep, err := s.eng.Start(s.ctx, s.withApprover(req), stdio)
	if stdinR != nil {
		stdinR.Close() // the command has its own copy
	}
	if err != nil {
		drop()
		p.inMu.Lock()
		if p.stdin != nil && !p.stdinClosed {
			p.stdin.Close()
			p.stdinClosed = true
		}
		p.inMu.Unlock()
		s.finish(true)
		return nil, err
	}
	p.mu.Lock()
	p.proc = ep
	p.mu.Unlock()
	fullAtStart := s.workspaceFull()
	go func() {
		rep, err := ep.Wait()
		s.noteEnd(rep)
		s.noteDisk(rep, fullAtStart)
		if rep != nil {
			s.auditAll(rep.AuditRecords(err))
		}
		p.mu.Lock()
		p.report, p.err = rep, err
		p.mu.Unlock()
		p.inMu.Lock()
		if p.stdin != nil && !p.stdinClosed {
			p.stdin.Close()
			p.stdinClosed = true
		}
		p.inMu.Unlock()
		// Counted as ended before Done says so: a caller that waited
		// for it (MCP's apply after stop_process) must not find it
		// still running.
		s.finish(true)
		close(p.done)
		p.out.close()
		s.mu.Lock()
		s.forgetEndedLocked()
		s.mu.Unlock()
	}()
	return p, nil
}

// maxEnded is how many ended background commands a session remembers.
const maxEnded = 64

// endedOutputBuffers is how many times Config.OutputBuffer the ended
// background commands of a session keep of their output together. Each
// running command keeps up to the bound; were each ended one to keep as
// much, a command that starts short background commands without end would
// make the daemon hold maxEnded times the bound for every session.
const endedOutputBuffers = 4

// forgetEndedLocked forgets a session's ended background commands past
// maxEnded, and lets go of the output of the oldest ended ones past
// endedOutputBuffers (a read of it then says how much was dropped);
// under s.mu.
func (s *Session) forgetEndedLocked() {
	ended := 0
	room := endedOutputBuffers * s.m.cfg.OutputBuffer
	for i := len(s.order) - 1; i >= 0; i-- {
		id := s.order[i]
		p := s.procs[id]
		if p.Running() {
			continue
		}
		if ended++; ended > maxEnded {
			delete(s.procs, id)
			s.order = append(s.order[:i], s.order[i+1:]...)
			continue
		}
		room -= p.out.trim(room)
	}
}

// Processes returns s's background commands, oldest first.
func (s *Session) Processes() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Process, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, s.procs[id])
	}
	return out
}

// Process returns s's background command id.
func (s *Session) Process(id string) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[id]
	if !ok {
		return nil, fmt.Errorf("%w %q in session %s", ErrNoProcess, id, s.ID)
	}
	return p, nil
}

// Process is a background command of a session.
type Process struct {
	ID      string
	Args    []string
	Started time.Time

	proc  EngineProcess // nil until the sandbox has started it; under mu
	done  chan struct{}
	out   *buffer
	stdin *os.File // the write end of its standard input, or nil

	mu     sync.Mutex
	report *sandbox.Report
	err    error

	// inMu serialises the writes to stdin, which may wait for the command.
	inMu        sync.Mutex
	stdinClosed bool
}

// ErrNoStdin: a write to the standard input of a process that was not
// started with it open, or whose input was closed.
var ErrNoStdin = errors.New("the process's standard input is not open")

// ErrStdinBlocked: the command did not read its input before the
// write's deadline (part of it may have been written).
var ErrStdinBlocked = errors.New("the command did not read its input in time")

// WriteStdin writes data to p's standard input, waiting at most until
// deadline for the command to read it, and closes it after with close.
func (p *Process) WriteStdin(data []byte, close bool, deadline time.Time) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdin == nil || p.stdinClosed {
		return ErrNoStdin
	}
	p.stdin.SetWriteDeadline(deadline)
	if n, err := p.stdin.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// What went in is the command's now: the caller must know
			// where to go on from, or a retry would send it twice.
			return fmt.Errorf("%w: the first %d of the %d bytes went in; send the rest after them", ErrStdinBlocked, n, len(data))
		}
		return fmt.Errorf("%w: %v", ErrNotRunning, err)
	}
	if close {
		p.stdinClosed = true
		return p.stdin.Close()
	}
	return nil
}

// Running says whether p has not ended yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Done is closed when p has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Result is how p ended; nil, nil while it runs.
func (p *Process) Result() (*sandbox.Report, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.report, p.err
}

// ErrNotRunning: a signal for a process that has ended.
var ErrNotRunning = errors.New("process has ended")

// Signal sends sig to p's process group.
func (p *Process) Signal(sig os.Signal) error {
	if !p.Running() {
		return ErrNotRunning
	}
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc == nil {
		// Listed from its start, before the sandbox has started it.
		return fmt.Errorf("%w: it is still starting", ErrNotRunning)
	}
	if err := proc.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return ErrNotRunning
		}
		return err
	}
	return nil
}

// Read returns the output chunks after sequence number after, waiting up
// to wait for some when there are none yet and p runs.
func (p *Process) Read(ctx context.Context, after int64, wait time.Duration) (chunks []Chunk, next, dropped int64) {
	return p.out.read(ctx, after, wait)
}

// useRoot holds the workspace root open until the returned func is
// called; ErrEnded once the session has ended.
func (s *Session) useRoot() (func(), error) {
	s.rootMu.RLock()
	if s.rootEnd || s.root == nil {
		s.rootMu.RUnlock()
		return nil, fmt.Errorf("%w: %s", ErrEnded, s.ID)
	}
	return s.rootMu.RUnlock, nil
}

func (s *Session) closeRoot() {
	s.rootMu.Lock()
	defer s.rootMu.Unlock()
	if !s.rootEnd && s.root != nil {
		s.root.Close()
	}
	s.rootEnd = true
}

// admitLocked says whether t may have one more session now (m.mu held):
// not while the daemon drains, nor past the tenant's or the daemon's
// count. A cold create and a claim from the pool both go through it.
func (m *Manager) admitLocked(t Tenant) error {
	switch {
	case m.draining:
		return ErrDraining
	case m.countLocked(t) >= m.cfg.MaxSessions:
		return fmt.Errorf("%w: tenant %s has %d sessions, the most allowed", ErrQuota, t.ID, m.cfg.MaxSessions)
	case len(m.sessions) >= m.cfg.MaxTotal:
		return fmt.Errorf("%w: the daemon serves %d sessions, the most allowed", ErrQuota, m.cfg.MaxTotal)
	}
	return nil
}

// ownerOf is the uid that owns path (its links not followed), or -1.
func ownerOf(path string) int {
	fi, err := os.Lstat(path)
	if err != nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// outsideState refuses a workspace in the daemon's state directory (or
// holding it): a command there would write the records of the sessions
// that the next daemon acts on as root, and the workspaces the daemon
// made for its tenants. The sandbox refuses one in moat's state
// directory too; this holds for a daemon whose directory is another.
func (m *Manager) outsideState(ws string) error {
	dir := m.cfg.StateDir
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	under := func(parent, p string) bool {
		rel, err := filepath.Rel(parent, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	for _, d := range []string{dir, real} {
		if under(d, ws) {
			return fmt.Errorf("%w: %q is inside the daemon's state directory, whose records a command there could forge", ErrWorkspace, ws)
		}
		if under(ws, d) {
			return fmt.Errorf("%w: %q holds the daemon's state directory, whose records a command there could forge", ErrWorkspace, ws)
		}
	}
	return nil
}
