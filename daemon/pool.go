package daemon

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The warm pool keeps, per template with Template.Pool > 0, that many
// sessions made in advance: the sandbox started over an empty workspace
// the daemon made, in the template's workspace mode. A create request
// that would make exactly such a session claims one instead (claim), and
// the pool is refilled in the background, one sandbox at a time so that
// refilling never takes both cores from the sessions in use.
//
// A pooled session belongs to no tenant until claimed: it counts in no
// quota and is in no list, and it does not expire. It has a record in the
// state directory like any session, so a daemon that dies leaves it to
// the next one to reap; Shutdown closes it.
//
// A pooled sandbox is made as the daemon with a workspace the daemon
// owns, so only a request whose cold session would be the same matches:
// it names the template, no workspace (the daemon makes it), no other
// workspace mode, no network hook; and its tenant's workspace would not
// be given to the tenant (a root daemon gives a local user other than
// root its workspace, which the sandbox's identity mapping then follows).
type warmPool struct {
	mu    sync.Mutex
	ready map[string][]*Session // by template, oldest first
	kick  chan struct{}
	// lastClaim is when a session was last claimed, in Unix nanoseconds.
	lastClaim atomic.Int64
}

// poolTenant owns the pooled sessions until they are claimed.
var poolTenant = Tenant{ID: "pool", UID: -1}

// poolBackoff is how long the pool waits after the nth failure in a
// row to make a sandbox of a template: poolRetry, doubled each time, at
// most poolRetryMax.
func poolBackoff(n int) time.Duration {
	d := poolRetry
	for i := 1; i < n && d < poolRetryMax; i++ {
		d *= 2
	}
	return min(d, poolRetryMax)
}

// poolRetryMax bounds the wait between attempts at a failing template.
const poolRetryMax = 5 * time.Minute

// poolRetry is how long the pool waits after a sandbox of a template
// could not be made before it tries that template again.
const poolRetry = 5 * time.Second

// refillDelay is how long after a claim the pool starts its refill.
const refillDelay = 20 * time.Millisecond

// startPool starts the refill of the templates that ask for a pool.
func (m *Manager) startPool() {
	m.pool.ready = map[string][]*Session{}
	m.pool.kick = make(chan struct{}, 1)
	any := false
	for _, t := range m.cfg.Templates {
		any = any || t.Pool > 0
	}
	if !any {
		return
	}
	m.ticker.Add(1)
	go m.refill()
}

// PoolSizes returns how many sandboxes wait in each template's pool.
func (m *Manager) PoolSizes() map[string]int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	out := map[string]int{}
	for name, t := range m.cfg.Templates {
		if t.Pool > 0 {
			out[name] = len(m.pool.ready[name])
		}
	}
	return out
}

func (m *Manager) kickPool() {
	select {
	case m.pool.kick <- struct{}{}:
	default:
	}
}

// refill keeps every pool full until the daemon stops.
func (m *Manager) refill() {
	defer m.ticker.Done()
	names := make([]string, 0, len(m.cfg.Templates))
	for n, t := range m.cfg.Templates {
		if t.Pool > 0 {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	// A template whose sandboxes cannot be made (a limit this host
	// cannot enforce) is tried again later and later, and its error
	// logged again only when it changes.
	type failure struct {
		at  time.Time
		n   int
		msg string
	}
	failed := map[string]failure{}
	tick := time.NewTicker(m.cfg.Tick)
	defer tick.Stop()
	for {
		m.dropDead()
		for made := true; made; {
			made = false
			for _, n := range names {
				if m.stopping() {
					return
				}
				f := failed[n]
				if f.n > 0 && time.Since(f.at) < poolBackoff(f.n) || m.poolLen(n) >= m.cfg.Templates[n].Pool {
					continue
				}
				s, err := m.prewarm(m.cfg.Templates[n])
				if err != nil {
					f.n++
					f.at = time.Now()
					if f.n == 1 || err.Error() != f.msg {
						m.log.Error("pool: make a sandbox", "template", n, "err", err, "retry_in", poolBackoff(f.n))
					}
					f.msg = err.Error()
					failed[n] = f
					continue
				}
				delete(failed, n)
				if m.stopping() {
					m.closePooled(s)
					return
				}
				m.pool.mu.Lock()
				m.pool.ready[n] = append(m.pool.ready[n], s)
				m.pool.mu.Unlock()
				made = true
			}
		}
		select {
		case <-m.stop:
			return
		case <-m.pool.kick:
		case <-tick.C:
		}
		// A claim's answer goes out first: making a sandbox forks and
		// takes the cores the claim's request needs, and claims come in
		// bursts.
		if wait := refillDelay - time.Since(time.Unix(0, m.pool.lastClaim.Load())); wait > 0 {
			select {
			case <-m.stop:
				return
			case <-time.After(wait):
			}
		}
	}
}

func (m *Manager) stopping() bool {
	select {
	case <-m.stop:
		return true
	default:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.draining
}

func (m *Manager) poolLen(name string) int {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	return len(m.pool.ready[name])
}

// dropDead closes the pooled sessions whose sandbox has ended on its own.
func (m *Manager) dropDead() {
	var dead []*Session
	m.pool.mu.Lock()
	for n, list := range m.pool.ready {
		live := list[:0]
		for _, s := range list {
			select {
			case <-s.eng.Done():
				dead = append(dead, s)
			default:
				live = append(live, s)
			}
		}
		m.pool.ready[n] = live
	}
	m.pool.mu.Unlock()
	for _, s := range dead {
		m.log.Warn("pool: a waiting sandbox ended", "session", s.ID)
		m.closePooled(s)
	}
}

// prewarm makes a session of tpl for the pool.
func (m *Manager) prewarm(tpl *Template) (_ *Session, err error) {
	id := newID()
	s := &Session{ID: id, Tenant: poolTenant, TempWorkspace: true, Created: time.Now(), m: m, procs: map[string]*Process{}, template: tpl.Name, events: newEventLog()}
	s.aud = m.newSessionAudit(id, poolTenant.ID)
	rec := s.record()
	defer func() {
		if err != nil {
			if s.cancel != nil {
				s.cancel()
			}
			if s.root != nil {
				s.root.Close()
			}
			m.removeRecord(rec)
		}
	}()
	ws := rec.TempWorkspace
	if err := m.writeRecord(rec); err != nil {
		return nil, fmt.Errorf("session record: %w", err)
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		return nil, fmt.Errorf("make workspace: %w", err)
	}
	if s.root, err = os.Open(ws); err != nil {
		return nil, fmt.Errorf("make workspace: %w", err)
	}
	p, err := tpl.policy(ws, "")
	if err == nil {
		err = m.checkSockets(p, ws)
	}
	if err != nil {
		return nil, err
	}
	s.Workspace, s.WorkspaceMode, s.policy = ws, p.Workspace.Mode, p
	// As Create records them: a daemon killed while the sandbox waits
	// says, when the next one reaps it, which tokens stay valid (found by
	// a tester: a pooled session's record named none).
	if rec.Revoke = revokeNames(p); len(rec.Revoke) > 0 {
		if err := m.writeRecord(rec); err != nil {
			return nil, fmt.Errorf("session record: %w", err)
		}
	}
	if err := m.boundWorkspace(s); err != nil {
		return nil, err
	}
	s.protect = protectList(p)
	s.gate = s.newWriteGate(p)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// As Create makes it: the asks of its proxy wait for the tenant that
	// claims it, and its rules' decisions go to the daemon's audit stream.
	caller := daemonCaller()
	caller.StateWorkspace = true // made in the daemon's directory
	spec := &EngineSpec{ID: id, Policy: p, Caller: caller, Approver: s.approver(), Audit: s.audit, AuditErr: m.auditErr, OnCgroup: s.recordCgroups(rec),
		AllowDegraded: m.cfg.AllowDegraded}
	eng, err := m.cfg.Engine(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	s.eng = eng
	return s, nil
}

// poolMatches says whether req, from t, would make a session that a
// pooled one of its template is (see warmPool): it sets no field but
// those a claim applies (poolField); a field added to CreateRequest
// later keeps its requests off the pool until it is listed there.
func (m *Manager) poolMatches(t Tenant, req *CreateRequest) bool {
	tpl := m.cfg.Templates[req.Template]
	if tpl == nil || tpl.Pool == 0 {
		return false
	}
	v := reflect.ValueOf(req).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsZero() && !poolField(v.Type().Field(i).Name) {
			return false
		}
	}
	ownWorkspace := t.UID > 0 && os.Geteuid() == 0 // Create gives it to the tenant
	return !ownWorkspace
}

// poolField says whether a claim of a pooled session honours the
// CreateRequest field name: the template, the workspace mode (takePooled
// matches it), the TTL and the idle timeout.
func poolField(name string) bool {
	switch name {
	case "Template", "WorkspaceMode", "TTL", "IdleTimeout":
		return true
	}
	return false
}

// claim gives t a pooled session for req, or nil when none matches or
// waits. Its quotas are counted as Create counts them; its TTL and idle
// timeout start now.
func (m *Manager) claim(t Tenant, req *CreateRequest, ttl, idle time.Duration) (*Session, error) {
	if !m.poolMatches(t, req) {
		return nil, nil
	}
	m.mu.Lock()
	if err := m.admitLocked(t); err != nil {
		m.mu.Unlock()
		return nil, err
	}
	s := m.takePooled(req.Template, req.WorkspaceMode)
	if s == nil {
		m.mu.Unlock()
		return nil, nil
	}
	now := time.Now()
	s.Tenant, s.Created, s.Expires, s.IdleTimeout = t, now, now.Add(ttl), idle
	s.aud.setTenant(t.ID)
	s.lastUsed = now
	m.sessions[s.ID] = s
	m.mu.Unlock()
	m.pool.lastClaim.Store(now.UnixNano())
	m.kickPool()

	if err := m.reserveLimits(s); err != nil {
		// Back to the pool: a refusal does not cost a sandbox.
		m.mu.Lock()
		delete(m.sessions, s.ID)
		m.mu.Unlock()
		s.Tenant = poolTenant
		s.aud.setTenant(poolTenant.ID)
		m.pool.mu.Lock()
		m.pool.ready[s.template] = append([]*Session{s}, m.pool.ready[s.template]...)
		m.pool.mu.Unlock()
		return nil, err
	}
	// The record names its tenant now, for the log of a daemon that reaps it.
	if err := m.writeRecord(s.record()); err != nil {
		m.end(context.Background(), s, "claim failed")
		return nil, fmt.Errorf("session record: %w", err)
	}
	m.mu.Lock()
	if m.sessions[s.ID] != s || m.draining {
		m.mu.Unlock()
		m.end(context.Background(), s, "shutdown")
		return nil, ErrDraining
	}
	s.ready = true
	m.mu.Unlock()
	s.aud.start(s)
	m.log.Info("session created", "session", s.ID, "tenant", t.ID, "template", s.template, "pool", true, "mode", s.WorkspaceMode, "ttl", ttl.String())
	return s, nil
}

// takePooled removes and returns the oldest live pooled session of
// template in mode ("" is the template's), or nil.
func (m *Manager) takePooled(template, mode string) *Session {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	list := m.pool.ready[template]
	for i, s := range list {
		if mode != "" && mode != s.WorkspaceMode {
			continue
		}
		select {
		case <-s.eng.Done():
			continue // dropDead closes it
		default:
		}
		m.pool.ready[template] = append(list[:i:i], list[i+1:]...)
		return s
	}
	return nil
}

// closePooled ends a session that was never claimed.
func (m *Manager) closePooled(s *Session) {
	if err := s.close(context.Background()); err != nil {
		m.log.Warn("pool: close a sandbox", "session", s.ID, "err", err)
	}
	if err := m.removeRecord(s.record()); err != nil {
		m.log.Warn("pool: remove a sandbox's record", "session", s.ID, "err", err)
	}
}

// closePool ends every pooled session; the refill has stopped.
func (m *Manager) closePool() {
	m.pool.mu.Lock()
	var all []*Session
	for _, list := range m.pool.ready {
		all = append(all, list...)
	}
	m.pool.ready = map[string][]*Session{}
	m.pool.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() { defer wg.Done(); m.closePooled(s) }()
	}
	wg.Wait()
}
