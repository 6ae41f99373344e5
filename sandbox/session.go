package sandbox

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/internal/netrule"
	"github.com/moatbox/moat/internal/termsafe"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// SessionRequest is a sandbox that lives across commands: a validated and
// resolved policy, and what serves it on the host. The fields mean what
// they mean in Request.
type SessionRequest struct {
	Policy        *policy.Policy
	Caller        *Caller
	AllowDegraded bool
	// Approver answers the asks of the policy's rules about each command
	// the session runs; AuditDecision receives each decision a rule made
	// (an error refuses the action, as Request.AuditDecision's does).
	Approver      Approver
	AuditDecision func(audit.Decision) error
	// Audit receives every network event of an allow-mode session as it
	// happens; they are also in the Report of Close.
	Audit    func(egress.Event)
	Resolver ResolverFunc
	Dial     DialFunc
	// TUNDir is Request.TUNDir.
	TUNDir string
	// SecretRoots verifies the servers the policy's secrets are for (see
	// Request.SecretRoots).
	SecretRoots *x509.CertPool
	// Backend keeps the sandbox; it must implement backend.Lifecycle. Nil
	// means the one the policy's sandbox.isolation names; a policy that
	// asks for gvisor is refused with any other (ErrRefused).
	Backend backend.Backend
	// Session names the change set of an overlay or copy workspace, which
	// every command of the session writes to, and which successive
	// sessions (and runs) of that name accumulate into; empty means a new
	// change set.
	Session string
	// Learn runs the rules in report-only mode for the session's whole
	// life, as Request.Learn does for a run: what they would deny or ask
	// about runs, audited with the outcome "learn" (moat policy suggest).
	Learn bool
	// OnCgroup, when set, is given the directories of the sandbox's
	// cgroup before any process of the sandbox starts
	// (backend.Stdio.OnCgroup), for a caller that records them so that
	// whoever cleans up after its death removes them (cgroup.Reclaim).
	// An error fails Create. It is not called where the backend makes no
	// cgroup, or reclaims it itself.
	OnCgroup func(dirs []string) error
	// OnGuard, when set, is given what finishes the session's workspace
	// guards (the quarantine of what its commands plant where a
	// protected path belongs) before any process of the sandbox starts,
	// for a caller that records it, so that whoever cleans up after its
	// death does what Close would have (FinishAbandoned). An error fails
	// Create. It is not called when nothing is to finish (no writable
	// workspace or read-write directory).
	OnGuard func(state []byte) error
}

// ExecRequest is one command of a session.
type ExecRequest struct {
	Args []string
	// Env is added to the environment the policy gives (a name set here
	// replaces the policy's value).
	Env []string
	// Dir is the working directory inside the sandbox; empty means the
	// policy's (the workspace, or the caller's directory within it).
	Dir string
	// Wall and Output limit this command; zero means the policy's limits.
	Wall   time.Duration
	Output int64
	// Tty gives the command a pseudo-terminal of Rows by Cols (see
	// backend.ProcessSpec).
	Tty        bool
	Rows, Cols uint16
	// Approver, when set, answers the asks about this command instead of
	// the session's: the person behind this one request (an MCP client's
	// user) rather than whoever answers for the session.
	Approver Approver
}

// Session is a live sandbox whose commands share its file system (the
// workspace, /tmp, home), its processes and its network. Every command
// gets the restrictions of the policy, and is decided by its rules, as a
// Run's is. Its methods may be called concurrently. Close ends it.
type Session struct {
	id       string
	req      SessionRequest
	inst     backend.Instance
	backend  string
	spec     *backend.Spec
	base     *Report // what every command's report starts from
	cs       *workspace.ChangeSet
	guards   []*workspace.Guard
	er       *egressRun
	secrets  *runSecrets
	wsDir    string
	landlock string
	created  time.Time
	// landlockABI is the highest Landlock ABI a command of the session
	// ran under, for the closing report.
	landlockABI atomic.Int32
	// rules decide each command; approvals are the grants a person gave
	// during the session (a prefix or session scope holds across its
	// commands).
	rules     *harness.Rules
	plain     *harness.Rules // rules before InSandbox (execCheck.plain)
	approvals *harness.Approvals
	// check decides the programs started in the session that no command
	// can be told for (backend.Lifecycle); nil when the policy has no
	// command rules.
	check *execCheck
	// spend counts what the session's commands spend against the
	// policy's [budgets], across the session: once one is spent, new
	// commands are refused.
	spend *harness.Spend

	closeOnce sync.Once
	closeRep  *Report
	closeErr  error
	// endWarnings: those of closeRep's warnings that Close added.
	endWarnings []string

	// live are the commands started and not yet waited for (Signal).
	liveMu sync.Mutex
	live   map[*Process]struct{}
}

// Signal sends sig to the process group of every command of the session
// that has not ended (Exec's and Start's), and returns how many it
// reached: a daemon that drains asks them to end before Close kills
// them. A process a command put in a process group of its own is not
// reached; Close ends it.
func (s *Session) Signal(sig os.Signal) int {
	s.liveMu.Lock()
	list := make([]*Process, 0, len(s.live))
	for p := range s.live {
		list = append(list, p)
	}
	s.liveMu.Unlock()
	n := 0
	for _, p := range list {
		if p.proc.Signal(sig) == nil {
			n++
		}
	}
	return n
}

// ErrNoLifecycle is returned (wrapped) by Create when the backend cannot
// keep a sandbox across commands.
var ErrNoLifecycle = errors.New("backend cannot keep a sandbox across commands")

// Create builds a session's sandbox from req's policy. When it fails,
// nothing of the session remains (a change set it made is discarded).
func Create(ctx context.Context, req *SessionRequest) (_ *Session, err error) {
	p := req.Policy
	if p == nil {
		return nil, errors.New("session: no policy")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	caller := CurrentCaller()
	if req.Caller != nil {
		caller = *req.Caller
	}
	be, err := backendFor(req.Backend, p, false)
	if err != nil {
		return nil, err
	}
	if be == nil {
		return nil, fmt.Errorf("sessions are only supported on Linux: %w", errors.ErrUnsupported)
	}
	lc, ok := be.(backend.Lifecycle)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoLifecycle, be.Name())
	}
	s := &Session{id: NewRunID(), req: *req, backend: be.Name(), landlock: p.Filesystem.Landlock, created: time.Now(),
		rules: harness.New(p), approvals: &harness.Approvals{}, spend: harness.NewSpend(p.Budgets)}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	m := p.Workspace.Mode
	if req.Session != "" && m != policy.WorkspaceOverlay && m != policy.WorkspaceCopy {
		return nil, fmt.Errorf("a session's change set (%q) keeps the changes of an overlay or copy workspace, but workspace.mode is %q", req.Session, m)
	}
	if err := refuseCopyUnderDisk(p, req.AllowDegraded); err != nil {
		return nil, err
	}
	// A tenant's denied paths are looked at with its rights, as Compile
	// looks at them: the daemon tells it nothing of what it cannot see.
	var linkGaps []string
	look := func() { linkGaps, err = denyHardLinks(p, req.AllowDegraded) }
	if c := req.Caller; c != nil {
		if derr := asOwner(*c, look); derr != nil {
			return nil, derr
		}
	} else {
		look()
	}
	if err != nil {
		return nil, err
	}
	// As for a run: not in a tree half applied.
	recovered, err := workspace.RecoverApplyInto(p.Workspace.Path)
	if err != nil {
		return nil, err
	}
	if m == policy.WorkspaceOverlay || m == policy.WorkspaceCopy {
		cs, created, err := openChangeSet(ctx, p.Workspace.Path, req.Session, m, int64(p.Limits.Disk))
		if err != nil {
			return nil, err
		}
		s.cs = cs
		undo = append(undo, func() { cs.Unlock() })
		if created {
			undo = append(undo, func() { cs.Discard() })
		}
	}
	stdio := backend.Stdio{OnCgroup: req.OnCgroup}
	if p.Network.Mode == policy.NetworkAllow {
		rules, err := networkRules(p)
		if err != nil {
			return nil, err
		}
		s.er = newEgressRun(rules, p, &Request{Audit: req.Audit, Resolver: req.Resolver, Dial: req.Dial}, s.id)
		if s.rules.HasHostRules() || s.spend.CountsRequests() {
			// The host rules hold for every request of every command of
			// the session, decided as in a one-shot run; an ask goes to
			// the session's approver, and a grant for the session holds
			// for its later requests. The request budgets count what
			// they let through, across the session.
			hc := &execCheck{rules: s.rules, approvals: s.approvals, req: &Request{Policy: p, Approver: req.Approver, AuditDecision: req.AuditDecision, Learn: req.Learn},
				runID: s.id, dir: p.Workspace.Path}
			if s.spend.CountsRequests() {
				hc.spend = s.spend
				spend, record := s.spend, s.er.proxy.Audit
				s.er.proxy.Audit = func(e egress.Event) {
					spend.NetworkBytes(e.Spent())
					if record != nil {
						record(e)
					}
				}
			}
			s.er.proxy.Check = hc.host
		}
		stdio.ServeProxy = s.er.serve
		stdio.ServeTUN = s.er.serveTUN
		undo = append(undo, func() { s.er.report() })
	}
	// The secrets' values stay on the host, with the proxy; commands get
	// placeholders.
	secrets, err := loadSecrets(ctx, p, caller.Cwd, req.SecretRoots)
	if err != nil {
		return nil, err
	}
	if secrets != nil {
		s.er.proxy.Secrets = secrets.set
		s.secrets = secrets
		undo = append(undo, func() { secrets.revokeAll() })
	}
	direct := m == "" || m == policy.WorkspaceDirect
	guards, err := newGuards(p, direct, caller)
	if err != nil {
		return nil, err
	}
	s.guards = guards
	undo = append(undo, func() { closeGuards(guards) })
	if req.OnGuard != nil {
		if state, err := guardStates(guards); err != nil {
			return nil, err
		} else if state != nil {
			if err := req.OnGuard(state); err != nil {
				return nil, err
			}
		}
	}
	// The Spec's command line is each command's own (ExecRequest); the
	// one compiled here only stands in for them.
	spec, err := Compile(p, []string{"/bin/true"}, caller, s.id, s.cs, guards)
	if err != nil {
		return nil, err
	}
	spec.Args = nil
	if err := secrets.apply(spec); err != nil {
		return nil, err
	}
	s.spec = spec
	// Its commands' lines and programs are decided knowing its mounts.
	s.plain = s.rules
	s.rules = s.rules.InSandbox(sandboxTrees(spec))
	s.base = newReport("", nil, p)
	s.base.Degraded = append(s.base.Degraded, linkGaps...)
	if err := guardGaps(s.guards, req.AllowDegraded, s.base); err != nil {
		return nil, err
	}
	if recovered != "" {
		s.base.Warnings = append(s.base.Warnings, recovered)
	}
	s.base.Backend = be.Name()
	s.base.Warnings = append(s.base.Warnings, networkWarnings(p)...)
	s.base.Warnings = append(s.base.Warnings, writtenInPlace(p)...)
	s.base.Warnings = append(s.base.Warnings, linksLeadingNowhere(p, spec)...)
	if w := prepareTUN(spec, req.TUNDir); w != "" {
		s.base.Warnings = append(s.base.Warnings, w)
	}
	if w := backendTUN(be, spec); w != "" {
		s.base.Warnings = append(s.base.Warnings, w)
	}
	if err := checkSpec(be, p, spec, req.AllowDegraded, s.base); err != nil {
		return nil, err
	}
	// Every command's report says what the session runs without: a
	// client sees a command's warnings, not the session's making.
	for _, d := range s.base.Degraded {
		if !slices.Contains(s.base.Warnings, d) {
			s.base.Warnings = append(s.base.Warnings, "running degraded: "+d)
		}
	}
	if direct || m == policy.WorkspaceReadOnly {
		s.wsDir = p.Workspace.Path
	}
	if !s.rules.Empty() {
		// The rules hold for every program a command starts (see
		// Session.start); what no command can be told for is decided
		// with nobody to ask. A backend that cannot check them refuses
		// the session, unless degradation is allowed.
		if d, err := checkExecOn(be, req.AllowDegraded); err != nil {
			return nil, err
		} else if d != "" {
			s.base.Degraded = append(s.base.Degraded, d)
			s.base.Warnings = append(s.base.Warnings, d)
		} else {
			s.check = &execCheck{rules: s.rules, plain: s.plain, approvals: &harness.Approvals{}, req: &Request{Policy: p, AuditDecision: req.AuditDecision, Learn: req.Learn}, runID: s.id, dir: spec.Dir}
			stdio.CheckExec = s.check.check
		}
	}
	// The cpu budget is read from the sandbox's count of all its
	// processes (Session.cpuTime): one that misses some would let
	// commands spend past it unseen.
	spec.CountCPU = p.Budgets.CPU > 0
	inst, err := lc.Create(ctx, spec, stdio)
	if errors.Is(err, backend.ErrNoCPUCount) {
		const what = "cpu budget ([budgets] cpu) not enforced exactly"
		const why = "the CPU time of a process reaped without a wait (its parent ignores SIGCHLD) is not counted"
		if !req.AllowDegraded {
			return nil, fmt.Errorf("%w: moat cannot enforce here what the policy asks for:\n  %s: %w; %s\n(see `moat doctor` for how to delegate cgroups to a user; remove the cpu budget, or "+allowDegradedHint+")", ErrRefused, what, err, why)
		}
		gap := fmt.Sprintf("%s: %v; %s", what, err, why)
		s.base.Degraded = append(s.base.Degraded, gap)
		s.base.Warnings = append(s.base.Warnings, gap)
		spec.CountCPU = false
		inst, err = lc.Create(ctx, spec, stdio)
	}
	if errors.Is(err, backend.ErrNoExecCheck) {
		return nil, fmt.Errorf("%w: %w; the policy's command rules (its [[rules]] and [harness] builtin) are checked at every program a command starts, and here they could not be: with neither, the session needs no such check", ErrRefused, err)
	}
	if err != nil {
		var ie *backend.InitError
		if errors.As(err, &ie) && strings.HasPrefix(ie.Stage, "overlay") {
			err = fmt.Errorf("%w\n(overlayfs could not be mounted here; workspace mode copy runs on a copy of the workspace instead)", err)
		}
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	s.inst = inst
	return s, nil
}

// ID names the session (its run id in cgroups and reports).
func (s *Session) ID() string { return s.id }

// Workspace is the host directory the session's commands see as their
// workspace: in direct mode, where they write it in place, and in
// read-only mode; "" in overlay and copy mode, whose writes are in
// ChangeSet.
func (s *Session) Workspace() string { return s.wsDir }

// ChangeSet names the change set of an overlay or copy session, nil in
// direct and read-only mode.
func (s *Session) ChangeSet() *ChangeSetRef {
	if s.cs == nil {
		return nil
	}
	return &ChangeSetRef{ID: s.cs.ID(), Session: s.cs.Session(), Dir: s.cs.Dir()}
}

// SpendRequest counts a request made for the session outside its
// sandbox (the daemon's fetch) to host against its [budgets] requests
// and network, as its proxy counts its commands' requests: past them it
// is refused with a *harness.BudgetError. SpendNetwork adds the bytes
// such a request moved once it is done.
func (s *Session) SpendRequest(host string) error {
	if n, err := netrule.NormalizeHost(host); err == nil {
		host = n
	}
	return s.spend.Request(host)
}

// SpendNetwork adds n bytes moved for the session outside its sandbox to
// its network budget (see SpendRequest).
func (s *Session) SpendNetwork(n int64) { s.spend.NetworkBytes(n) }

// Stats is what the session's sandbox uses now.
func (s *Session) Stats() backend.Stats { return s.inst.Stats() }

// Done is closed once the session's sandbox has ended: closed, or its
// init died. Close must still be called, to finish the workspace.
func (s *Session) Done() <-chan struct{} { return s.inst.Done() }

// EndReason says why the session's sandbox ended by itself when it was
// the going of a protection (the host replaced or removed a protected
// file, backend.CauseProtection), naming it; "" otherwise.
func (s *Session) EndReason() string {
	if e, ok := s.inst.(interface{ EndReason() string }); ok {
		return e.EndReason()
	}
	return ""
}

// Process is a command running in a session (Session.Start).
type Process struct {
	sess     *Session
	proc     backend.Process
	rep      *Report
	landlock string
	check    *execCheck // the programs it starts, checked (nil: no rules)
	once     sync.Once
	// spend is the session's budgets, told what the command spent.
	spend *harness.Spend
	// clock counts the command's time against the wall budget, with the
	// session's other commands', stopped while a person is asked. It,
	// and the output budget as the command writes, end the command
	// through cancelLife, with a *harness.BudgetError as the cause (life
	// and cancelLife are nil when the session has neither budget).
	clock      *harness.Clock
	life       context.Context
	cancelLife context.CancelCauseFunc
	// cpu reads the sandbox's CPU time, for the CPU budget (nil without
	// one).
	cpu func() time.Duration
	// network ends the account of the network while the command runs
	// (nil without the proxy; see egressRun.watch).
	network func() *NetworkReport
	// term filters its output to a terminal, if any.
	term termsafe.Set
}

// cpuTime is the sandbox's CPU time, all its processes' so far.
func (s *Session) cpuTime() time.Duration {
	if c, ok := s.inst.(backend.CPUCounter); ok {
		return c.CPUTime()
	}
	return s.inst.Stats().CPU
}

// cpuPoll is how often the CPU budget is checked while a command runs:
// the commands of a session can pass it by at most this long times the
// CPUs they use.
const cpuPoll = 100 * time.Millisecond

// watchCPU ends the command once the sandbox's CPU time, all its
// processes' together, reaches the CPU budget; it returns when the
// command's life ends.
func (p *Process) watchCPU() {
	t := time.NewTicker(cpuPoll)
	defer t.Stop()
	for {
		select {
		case <-p.life.Done():
			return
		case <-t.C:
			if err := p.spend.CPUAtLeast(p.cpu()); err != nil {
				p.cancelLife(err)
				return
			}
		}
	}
}

// Exec runs a command in the session to completion and returns its
// Report, as Run does: never nil, and with the error when moat could not
// run it. Cancelling ctx kills the command's process group.
func (s *Session) Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*Report, error) {
	p, err := s.start(ctx, req, stdio, ctx)
	if err != nil {
		return p.rep, err
	}
	return p.Wait()
}

// Start starts a command in the session and returns at once: it runs
// until it exits, is signalled (Process.Signal), hits its limits, or the
// session closes. ctx bounds the start only. The Report is Wait's.
func (s *Session) Start(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*Process, error) {
	p, err := s.start(ctx, req, stdio, context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	return p, nil
}

// start decides and starts a command; ctx bounds the decision (an ask
// waits for its answer), life the command.
func (s *Session) start(ctx context.Context, req *ExecRequest, stdio backend.Stdio, life context.Context) (*Process, error) {
	stdio = joinOutputs(stdio)
	rep := s.newReport(req.Args)
	p := &Process{rep: rep, landlock: s.landlock}
	// Output to a terminal is filtered as a Run's is (backend.Stdio):
	// a library caller may write a command's output to a person's.
	stdio = filterTerminals(stdio, &p.term)
	fail := func(err error) (*Process, error) {
		return p, setError(rep, err)
	}
	if len(req.Args) == 0 {
		return fail(errors.New("no command given"))
	}
	select {
	case <-s.inst.Done():
		return fail(ErrSessionEnded)
	default:
	}
	pol := s.req.Policy
	dir := s.spec.Dir
	if req.Dir != "" {
		if !filepath.IsAbs(req.Dir) {
			return fail(fmt.Errorf("working directory %q is not absolute", req.Dir))
		}
		dir = filepath.Clean(req.Dir)
	}
	// The rules decide every command, as they decide a Run's.
	ap := s.req.Approver
	if req.Approver != nil {
		ap = req.Approver
	}
	r := &Request{Policy: pol, Args: req.Args, Approver: ap, AuditDecision: s.req.AuditDecision, Learn: s.req.Learn}
	line := &harness.Approvals{}
	// The command's own exec is sent to the host in a session, which
	// decides its file then (execCheck.check).
	if err := decide(ctx, r, rep, dir, s.rules, line, s.approvals, harness.Decision{}); err != nil {
		if errors.Is(err, ErrDenied) {
			rep.Reason = "denied"
		}
		rep.Error = err.Error()
		return p, err
	}
	if err := s.secrets.checkEnv(req.Env); err != nil {
		return fail(err)
	}
	if s.cs != nil {
		if err := s.cs.Record(req.Args, pol.Workspace.Protect); err != nil {
			return fail(fmt.Errorf("record command in change set: %w", err))
		}
	}
	ps := &backend.ProcessSpec{Args: req.Args, Env: mergeEnv(s.spec.Env, req.Env), Dir: dir,
		Wall: s.spec.Limits.Wall, Output: s.spec.Limits.OutputBytes, Tty: req.Tty, Rows: req.Rows, Cols: req.Cols}
	if req.Wall > 0 {
		ps.Wall = req.Wall
	}
	if req.Output > 0 {
		ps.Output = req.Output
	}
	// The session's budgets: a spent one refuses the command. They are
	// spent by the commands under way together, and end them once spent,
	// so commands at once cannot each spend what was left: each has a
	// clock for the wall budget, output is counted as it is written, and
	// CPU time is the sandbox's own count (which holds background
	// processes too), read as each command starts and ends and every
	// cpuPoll while it runs.
	if pol.Budgets.CPU > 0 {
		s.spend.CPUAtLeast(s.cpuTime())
	}
	_, _, _, err := s.spend.Left()
	if err == nil {
		err = s.spend.StartRun()
	}
	if err != nil {
		var be *harness.BudgetError
		errors.As(err, &be)
		rep.Reason, rep.Budget, rep.Error = ReasonBudget, be.Name, err.Error()
		return p, err
	}
	p.spend = s.spend
	if pol.Budgets.Wall > 0 || pol.Budgets.Output > 0 || pol.Budgets.CPU > 0 {
		life, p.cancelLife = context.WithCancelCause(life)
		p.life = life
	}
	if pol.Budgets.CPU > 0 {
		p.cpu = s.cpuTime
		go p.watchCPU()
	}
	if pol.Budgets.Wall > 0 {
		// The clock stops while a program the command starts waits for
		// a person, as in a Run.
		p.clock = s.spend.StartClock(p.cancelLife)
	}
	if pol.Budgets.Output > 0 {
		one := stdio.OneOutput() // still one writer, so still one pipe
		stdio.Stdout = &budgetWriter{w: stdio.Stdout, spend: s.spend, over: p.cancelLife}
		if one {
			stdio.Stderr = stdio.Stdout
		} else {
			stdio.Stderr = &budgetWriter{w: stdio.Stderr, spend: s.spend, over: p.cancelLife}
		}
	}
	if s.check != nil {
		// What this command starts, its background processes' included,
		// is decided as in a Run, with its approver and its approvals.
		p.check = &execCheck{rules: s.rules, plain: s.plain, approvals: line, shared: s.approvals, req: r, runID: rep.RunID, dir: dir, clock: p.clock}
		stdio.CheckExec = p.check.check
	}
	rep.StartedAt = time.Now()
	if s.er != nil {
		p.network = s.er.watch()
	}
	proc, err := s.inst.Exec(life, ps, stdio)
	if err != nil {
		p.endBudgets()
		if p.network != nil {
			p.network()
		}
		select {
		case <-s.inst.Done():
			err = fmt.Errorf("%w: %v", ErrSessionEnded, err)
		default:
		}
		return fail(err)
	}
	p.proc = proc
	p.sess = s
	s.liveMu.Lock()
	if s.live == nil {
		s.live = map[*Process]struct{}{}
	}
	s.live[p] = struct{}{}
	s.liveMu.Unlock()
	return p, nil
}

// ErrSessionEnded is returned (wrapped) for a command of a session that
// has been closed, or whose sandbox died.
var ErrSessionEnded = errors.New("session has ended")

// newReport is a command's Report before it runs: the session's
// protections, warnings and gaps, with a run id of its own.
func (s *Session) newReport(args []string) *Report {
	b := s.base
	rep := newReport(NewRunID(), args, b.Policy)
	rep.Backend, rep.Seccomp = b.Backend, b.Seccomp
	rep.Warnings = append(rep.Warnings, b.Warnings...)
	rep.Degraded = append(rep.Degraded, b.Degraded...)
	for k, v := range b.LimitsEnforcedBy {
		rep.LimitsEnforcedBy[k] = v
	}
	rep.ChangeSet = s.ChangeSet()
	return rep
}

// mergeEnv is base with extra's entries added, each replacing base's
// entry of the same name.
func mergeEnv(base, extra []string) []string {
	if len(extra) == 0 {
		return base
	}
	set := map[string]bool{}
	for _, kv := range extra {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !set[name] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// Wait waits for the command to end and returns its Report. It may be
// called more than once.
func (p *Process) Wait() (*Report, error) {
	p.once.Do(func() {
		st, err := p.proc.Wait()
		p.sess.liveMu.Lock()
		delete(p.sess.live, p)
		p.sess.liveMu.Unlock()
		spent := p.endBudgets()
		if p.network != nil {
			p.rep.Network = p.network()
		}
		for _, d := range backend.TerminalDenials(p.term.Close()) {
			d.Hint = termsafe.Hint
			p.rep.Denials = append(p.rep.Denials, d)
		}
		if err != nil {
			setError(p.rep, err)
			return
		}
		fillReport(p.rep, st, p.landlock)
		for abi := int32(st.LandlockABI); ; {
			old := p.sess.landlockABI.Load()
			if abi <= old || p.sess.landlockABI.CompareAndSwap(old, abi) {
				break
			}
		}
		var total time.Duration
		if p.cpu != nil {
			total = p.cpu()
		}
		switch {
		case total > 0:
			// The sandbox's count holds this command's time with the
			// others': adding st.CPU to it would count that twice.
			p.spend.CPUAtLeast(total)
		case p.spend != nil:
			// No count from the sandbox: the command's own.
			p.spend.AddCPU(st.CPU)
		}
		if spent != "" {
			p.rep.Reason, p.rep.Budget = ReasonBudget, spent
		}
		if p.check != nil {
			// What a process it left in the background is refused later
			// is in the audit stream only.
			p.rep.Denials = append(p.rep.Denials, p.check.report()...)
		}
	})
	if p.rep.Reason == "error" {
		return p.rep, errors.New(p.rep.Error)
	}
	return p.rep, nil
}

// endBudgets stops the command's wall clock and releases its life, and
// returns the name of the budget that ended the command, if one did.
func (p *Process) endBudgets() string {
	if p.clock != nil {
		p.clock.Stop()
	}
	if p.cancelLife == nil {
		return ""
	}
	var be *harness.BudgetError
	spent := errors.As(context.Cause(p.life), &be) // before the cancel below sets a cause
	p.cancelLife(nil)
	if spent {
		return be.Name
	}
	return ""
}

// budgetWriter counts a command's output against the session's output
// budget as it is written, and ends the command (over) once it is spent;
// what is past the budget is dropped.
type budgetWriter struct {
	w     io.Writer // nil: discarded
	spend *harness.Spend
	over  context.CancelCauseFunc
}

func (b *budgetWriter) Write(buf []byte) (int, error) {
	n := len(buf)
	fit, err := b.spend.Output(int64(n))
	if err != nil {
		b.over(err)
		buf = buf[:fit]
	}
	if b.w != nil && len(buf) > 0 {
		if m, werr := b.w.Write(buf); werr != nil {
			return m, werr
		}
	}
	return n, nil
}

// Signal sends sig to the command's process group; os.ErrProcessDone
// once it has exited.
func (p *Process) Signal(sig os.Signal) error { return p.proc.Signal(sig) }

// Resize changes the size of the command's terminal (ExecRequest.Tty).
func (p *Process) Resize(rows, cols uint16) error { return p.proc.Resize(rows, cols) }

// Close ends the session: it kills every process in it and removes the
// sandbox, then, in direct mode, quarantines what its commands planted
// where a protected path belongs (workspace.Guard), and unlocks an
// overlay or copy session's change set, kept for review. The Report
// (Reason "closed") holds what the session did as a whole: its network
// events, the quarantine, the change set. Close is idempotent: later
// calls return the first one's Report.
func (s *Session) Close(ctx context.Context) (*Report, error) {
	s.closeOnce.Do(func() {
		rep := newReport(s.id, nil, s.req.Policy)
		rep.StartedAt = s.created
		rep.Backend, rep.Seccomp, rep.ChangeSet = s.backend, s.base.Seccomp, s.ChangeSet()
		rep.Warnings = append(rep.Warnings, s.base.Warnings...)
		rep.Degraded = append(rep.Degraded, s.base.Degraded...)
		started := len(rep.Warnings)
		err := s.inst.Destroy(ctx)
		// No process of the session is alive now: what it planted stays
		// put.
		if qerr := quarantine(s.guards, s.id, rep); err == nil {
			err = qerr
		}
		if s.er != nil {
			rep.Network = s.er.report()
		}
		// Tokens minted for the session die with it.
		rep.Warnings = append(rep.Warnings, s.secrets.revokeAll()...)
		if s.cs != nil {
			// A sandbox that ended before it saved its changes (under a
			// disk limit) will never save them: the set keeps what it
			// held before, reviewable.
			if lost, derr := s.cs.DropUnsavedRun(); derr != nil && err == nil {
				err = derr
			} else if lost {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("the session's changes were lost: its sandbox ended before they were saved from its own tmpfs into change set %s (moat's init was killed first: the memory limit's OOM killer picks it when the commands' memory is in pipes or files); what earlier runs saved there is kept", s.cs.ID()))
			}
			s.cs.Unlock()
		}
		if err != nil {
			setError(rep, err)
		} else {
			rep.Reason, rep.ExitCode = "closed", 0
		}
		// What the session's commands ran under: 0 only if none ran
		// under Landlock (or none ran).
		rep.LandlockABI = int(s.landlockABI.Load())
		rep.WallSeconds = time.Since(rep.StartedAt).Seconds()
		s.closeRep, s.closeErr = rep, err
		s.endWarnings = slices.Clone(rep.Warnings[started:])
	})
	return s.closeRep, s.closeErr
}

// EndWarnings are the warnings of the session's end, once Close has
// returned: a revoke that failed (a minted token that may still be
// valid), changes lost. Close's report carries the session's start
// warnings too, said when it began; whoever ends a session must hear
// these.
func (s *Session) EndWarnings() []string {
	return s.endWarnings
}

// checkEnv refuses an environment that would carry a secret's value into
// the sandbox: as for the policy's [env], the value must never be inside.
func (rs *runSecrets) checkEnv(env []string) error {
	if rs == nil {
		return nil
	}
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		for _, sec := range rs.list {
			if strings.Contains(val, sec.Value) {
				return fmt.Errorf("%w: the environment variable %s holds the value of secret %s; a command gets the secret's placeholder in %s", ErrRefused, name, sec.Name, sec.Name)
			}
		}
	}
	return nil
}
