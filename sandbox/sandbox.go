// Package sandbox is moat's library entry point. It compiles a policy and
// a command line into a backend Spec, checks that the backend can enforce
// everything the policy asks for on this host (refusing, or with
// AllowDegraded recording each gap, when it cannot), runs the Spec and
// returns a Report that says how and why the run ended. Around the
// backend it runs what a run needs on the host side: the egress proxy of
// network mode allow (package egress) and the change set of an overlay or
// copy workspace (package workspace). It fills the audit records of a
// run (NetworkRecord, Report.AuditRecords), and answers what a program
// asks of the host before it runs anything: what the host offers
// (ProbeHost) and whether a seccomp profile would be accepted
// (CheckSeccompProfile).
//
// A Session (Create) is a sandbox that lives across commands: each Exec
// or Start is decided by the policy's rules and runs with the same
// restrictions, in the same file system and process tree; Close ends it,
// finishes a direct workspace's guard and reports the session's network
// events. Sessions need a backend.Lifecycle, whose sandboxes never share
// the caller's memory. Run is not a session of one command: it keeps the
// backend's one-shot path, whose start shares the memory of its caller
// (the CLI, which exits after it) and is as fast as bubblewrap, where a
// session's start pays for a second Go runtime in the sandbox's init.
// Both check the Spec and report the same way (checkSpec, fillReport).
//
// It never prints and never exits the process: the CLI does that. The
// native backend re-executes the running binary as the sandbox's init;
// linking package backend/native is enough for that (its init function
// takes over such a process), and calling native.MaybeInit first thing in
// main makes it explicit.
package sandbox

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/internal/seccomp"
	"github.com/moatbox/moat/internal/termsafe"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// ReasonSeccompKill is Report.Reason for a command killed by its seccomp
// profile (SIGSYS).
const ReasonSeccompKill = "seccomp_kill"

// Request is one run: a validated and resolved policy and the command.
type Request struct {
	Policy *policy.Policy
	Args   []string
	// Caller describes who runs it; zero means CurrentCaller().
	Caller *Caller
	// Session names the change set of an overlay or copy workspace, so
	// that successive runs accumulate into one; empty means a new change
	// set for this run.
	Session string
	// Approver answers the asks of the policy's rules (see package
	// harness); nil means nobody can be asked, and an ask refuses the run.
	Approver Approver
	// Learn runs the rules in report-only mode: what they would deny or
	// ask about runs, and is audited with the outcome "learn" (for moat
	// policy suggest). The sandbox is unchanged: the network lists,
	// mounts and filters hold as ever, and what they refuse is recorded
	// as always.
	Learn bool
	// Spend counts what this run spends against the policy's [budgets],
	// with what earlier runs of a session spent; nil means a fresh count
	// for this run alone.
	Spend *harness.Spend
	// AuditDecision, if set, receives the harness's decision about the
	// command line when a rule matched it, before anything runs, and
	// about each program the command starts that a rule asks about or
	// denies (At "exec"), as the run goes on: it may be called from
	// several goroutines at once. An error (the record could not be
	// written) refuses the action the record is of, if it was let
	// through: nothing a rule decides runs unrecorded.
	AuditDecision func(audit.Decision) error
	// Audit, if set, receives every network event of an allow-mode run as
	// it happens (the CLI's --audit stream); they are also in the Report.
	Audit func(egress.Event)
	// RecordFiles are the host files the caller keeps this run's record
	// in (the CLI's --audit and --report). One that lies where the
	// command may write is warned of in the report: the command can
	// rewrite it, a hash-chained stream from its first record on, and
	// the record then says what the command chose.
	RecordFiles []string
	// Resolver and Dial replace how the egress proxy resolves names and
	// connects; nil means the system's. Tests point names at loopback
	// servers with them.
	Resolver ResolverFunc
	Dial     DialFunc
	// TUNDir, if set, is where the TUN clone device "tun" is opened
	// instead of /dev/net (tests make a node of their own there).
	TUNDir string
	// SecretRoots verifies the certificates of the servers the policy's
	// secrets are for, which the proxy connects to itself; nil means the
	// host's roots. Tests trust their loopback servers with it.
	SecretRoots *x509.CertPool
	// AllowDegraded runs even when a limit the policy asks for cannot be
	// enforced here; each gap is listed in Report.Degraded.
	AllowDegraded bool
	// BeforeStart, when set, is called once everything is checked, just
	// before the sandbox is made, with the report so far: what runs
	// degraded (Degraded) and the warnings known then, for a caller to
	// say before a command that may run for hours, not after it.
	BeforeStart func(*Report)
	// Backend runs the Spec; nil means the one the policy's
	// sandbox.isolation names. A policy that asks for gvisor is refused
	// with any other backend (ErrRefused).
	Backend backend.Backend
	// ExitAfter says that the caller is a program whose one job is this
	// run, as the CLI is. It promises three things, each of which spares
	// the run some work: the caller exits as soon as Run returns (the
	// default backend then leaves the sandbox's init, idle once every
	// other process of the run is dead, to end with the caller, which
	// spares the caller's exit some teardown: native.Backend.ExitAfter);
	// no goroutine of the caller ends while locked to its OS thread, so
	// that any thread may start the sandbox's init
	// (native.Backend.NoLockedExits); and no other run is in progress
	// meanwhile, so that a run without cgroup limits needs no cgroup
	// (native.Backend.OneAtATime). A caller that goes on, or runs
	// sandboxes concurrently, leaves it false.
	ExitAfter bool
}

// Report is how a run ended. It is what `moat run --json` prints.
type Report struct {
	RunID   string   `json:"run_id"`
	Command []string `json:"command"`
	Backend string   `json:"backend"`
	// ExitCode is the status moat exits with: the command's own, 128+N
	// for signal N, 125 for moat's own failure, 126/127 when the command
	// could not be executed / was not found.
	ExitCode int `json:"exit_code"`
	// Signal is the name of the signal that ended the command, or null.
	Signal *string `json:"signal"`
	// Reason is why the run ended: exit, signal, seccomp_kill (the command
	// died of SIGSYS under a seccomp profile: a system call the profile
	// kills on), timeout, cpu, memory, pids, output, file_size, killed,
	// error (moat could not run it), denied (the policy's rules refused
	// the command line: nothing ran, and ExitCode is 125), or budget (a
	// [budgets] entry, named by Budget, ended the run or, for runs, kept
	// it from starting); the Report of Session.Close, which covers a
	// whole session, says closed.
	Reason string `json:"reason"`
	// LimitsHit lists every limit reached during the run, even ones the
	// command survived (forks refused, say). A process limit enforced by
	// an rlimit (LimitsEnforcedBy) is never listed: nothing counts the
	// forks it refuses.
	LimitsHit []string `json:"limits_hit"`
	// LimitsEnforcedBy names, for each of memory, pids, cpus and disk
	// that is in force, the mechanism enforcing it: "cgroup", "rlimit"
	// (pids without a cgroup: RLIMIT_NPROC in the sandbox's own user
	// namespace) or "tmpfs" (disk).
	LimitsEnforcedBy map[string]string `json:"limits_enforced_by"`
	StartedAt        time.Time         `json:"started_at"`
	WallSeconds      float64           `json:"wall_seconds"`
	// SetupSeconds is the part of WallSeconds the sandbox took to set up,
	// until the command had been started inside it; 0 where the backend
	// cannot tell (gvisor).
	SetupSeconds   float64 `json:"setup_seconds"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	MaxMemoryBytes int64   `json:"max_memory_bytes"`
	OutputBytes    int64   `json:"output_bytes"`
	// Seccomp names the system-call filter in force: "default", "strict",
	// the path of a Docker-format profile (moat's floor is stacked under
	// it), or "unconfined" (no filter at all).
	Seccomp string `json:"seccomp"`
	// LandlockABI is the Landlock ABI in force as a second wall around
	// file access (0: the kernel has none; the mounts still apply).
	LandlockABI int `json:"landlock_abi"`
	// Degraded lists protections the policy asked for that were not in
	// force (only with AllowDegraded).
	Degraded []string `json:"degraded"`
	// Denials are the refusals the sandbox saw as they happened: the
	// system calls the seccomp profile refused, and the programs the
	// command rules refused to start (Layer LayerRules), each with the
	// rule.
	Denials []backend.Denial `json:"denials"`
	// Network is what the network did: every connection the proxy
	// decided, in allow mode.
	Network *NetworkReport `json:"network"`
	// Warnings are things the policy asked for that weaken the sandbox
	// (an unfiltered host network, no system-call filter), and protected
	// paths the command created (see ProtectedCreated).
	Warnings []string `json:"warnings"`
	// ProtectedCreated lists what a direct-mode run left where a
	// protected path belongs (workspace.protect and the git directory as
	// git reads it; see workspace.Guard): a protected path that did not
	// exist when the run started (a bind mount cannot make a missing path
	// read-only), a link on the way to one that it retargeted, a
	// submodule's git directory it made. Each was moved to a quarantine
	// after the run (Quarantined), so no host tool runs it.
	ProtectedCreated []string `json:"protected_created,omitempty"`
	// Quarantined says where each of ProtectedCreated went, and why.
	Quarantined []workspace.Quarantined `json:"quarantined,omitempty"`
	// ChangeSet is where an overlay or copy workspace's changes are kept
	// for review (moat diff) and apply.
	ChangeSet *ChangeSetRef `json:"change_set,omitempty"`
	// Decision is the harness's decision about the command line, when a
	// rule matched it or the line hides what it runs.
	Decision *harness.Decision `json:"decision,omitempty"`
	// Approval is what came of an ask: approved, denied, or "no approver".
	Approval string `json:"approval,omitempty"`
	// Budget names the [budgets] entry that ended the run (Reason
	// "budget": wall, cpu, output, runs) or refused a request (network,
	// requests[HOST]).
	Budget string `json:"budget,omitempty"`
	// SessionEnded, for a session's command that its session's end
	// killed (Reason "killed"), is why the session ended: "ttl", "idle",
	// "deleted", "shutdown", "review" (set by whoever ends sessions: a
	// daemon).
	SessionEnded string `json:"session_ended,omitempty"`
	// Error and Stage describe a failure to set up or start the run.
	Error  string         `json:"error,omitempty"`
	Stage  string         `json:"stage,omitempty"`
	Policy *policy.Policy `json:"policy"`
}

// ChangeSetRef names a kept change set.
type ChangeSetRef struct {
	ID      string `json:"id"`
	Session string `json:"session,omitempty"`
	Dir     string `json:"dir"`
}

// ErrRefused is returned (wrapped) when the host cannot enforce what the
// policy asks for and degradation was not allowed.
var ErrRefused = errors.New("refusing to run")

// backendFor is the backend a run or session of p uses: be if the caller
// chose one, else the one p's sandbox.isolation names. The isolation is a
// floor the policy sets: a caller's backend never runs with less of it.
func backendFor(be backend.Backend, p *policy.Policy, exitAfter bool) (backend.Backend, error) {
	if be == nil {
		return defaultBackend(p, exitAfter), nil
	}
	if p.Sandbox.Isolation == policy.IsolationGVisor && be.Name() != policy.IsolationGVisor {
		return nil, fmt.Errorf("%w: the policy asks for sandbox.isolation = %q, and the caller's backend is %q", ErrRefused, p.Sandbox.Isolation, be.Name())
	}
	return be, nil
}

// NewRunID returns a fresh random run id.
func NewRunID() string {
	// The runtime's generator (ChaCha8, seeded from the kernel at start):
	// an id names a run, it guards nothing, and crypto/rand's first read
	// costs every moat run the set-up of its random state.
	v := rand.Uint64()
	var b [6]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// Run compiles and runs req. The returned Report is never nil: when moat
// itself fails, it says so (Reason "error", ExitCode 125, 126 or 127) and
// the error is returned as well. Cancelling ctx kills the whole sandbox;
// the Report's Reason is then "killed", with Error set when the command
// was never started.
func Run(ctx context.Context, req *Request, stdio backend.Stdio) (*Report, error) {
	stdio = joinOutputs(stdio)
	runID := NewRunID()
	rep := newReport(runID, req.Args, req.Policy)
	// fresh is the change set this run created, until its command may
	// have run: a run that fails before then leaves nothing to review,
	// and an empty change set behind would only clutter moat runs.
	var fresh *workspace.ChangeSet
	fail := func(err error) (*Report, error) {
		if fresh != nil && fresh.Discard() == nil {
			rep.ChangeSet = nil
		}
		return rep, setError(rep, err)
	}
	// Cancelled (moat got Ctrl-C) before the sandbox was started: nothing
	// ran, and the report says so.
	interrupted := func() (*Report, error) {
		rep, _ := fail(errors.New("interrupted before the command started"))
		rep.Reason, rep.ExitCode = string(backend.CauseKilled), 128+int(syscall.SIGKILL)
		return rep, nil
	}
	// A library caller may have skipped validation; running an invalid
	// policy would be running something nobody checked.
	if err := req.Policy.Validate(); err != nil {
		return fail(err)
	}
	caller := CurrentCaller()
	if req.Caller != nil {
		caller = *req.Caller
	}
	// The rules come before anything of the run exists: a refused command
	// leaves nothing behind, and the time a person takes to answer is not
	// part of the run.
	dir := req.Policy.Workspace.Path
	if caller.Cwd != "" && within(dir, caller.Cwd) {
		dir = caller.Cwd
	}
	// An apply into the workspace that moat was killed in is finished or
	// rolled back first: nothing is decided about, runs in, or starts a
	// change set over, a tree half applied.
	if said, err := workspace.RecoverApplyInto(req.Policy.Workspace.Path); err != nil {
		return fail(err)
	} else if said != "" {
		rep.Warnings = append(rep.Warnings, said)
	}
	rules, approvals := harness.New(req.Policy), &harness.Approvals{}
	lineEnv := buildEnv(req.Policy.Env, caller.Environ)
	lr := lineRules(rules, req.Policy, req.Args, dir, lineEnv)
	prog, progPath, progFile := lineProgram(lr, req.Args, dir, lineEnv)
	if err := decide(ctx, req, rep, dir, lr, approvals, approvals, prog); err != nil {
		if errors.Is(err, ErrDenied) {
			rep.Reason = "denied"
		}
		rep.Error = err.Error()
		return rep, err
	}
	spend := req.Spend
	if spend == nil {
		spend = harness.NewSpend(req.Policy.Budgets)
	}
	_, cpuLeft, outputLeft, err := spend.Left()
	if err == nil {
		err = spend.StartRun()
	}
	if err != nil {
		var be *harness.BudgetError
		errors.As(err, &be)
		rep.Reason, rep.Budget, rep.Error = ReasonBudget, be.Name, err.Error()
		return rep, err
	}
	rep.StartedAt = time.Now()
	be, err := backendFor(req.Backend, req.Policy, req.ExitAfter)
	if err != nil {
		return fail(err)
	}
	if be == nil {
		return fail(fmt.Errorf("moat run is only supported on Linux: %w", errors.ErrUnsupported))
	}
	rep.Backend = be.Name()
	var cs *workspace.ChangeSet
	m := req.Policy.Workspace.Mode
	if req.Session != "" && m != policy.WorkspaceOverlay && m != policy.WorkspaceCopy {
		return fail(fmt.Errorf("a session (%q) keeps the changes of an overlay or copy workspace, but workspace.mode is %q; add --workspace-mode overlay", req.Session, m))
	}
	if err := refuseCopyUnderDisk(req.Policy, req.AllowDegraded); err != nil {
		return fail(err)
	}
	gaps, err := denyHardLinks(req.Policy, req.AllowDegraded)
	if err != nil {
		return fail(err)
	}
	rep.Degraded = append(rep.Degraded, gaps...)
	if err := workspaceAccess(req.Policy.Workspace.Path); err != nil {
		return fail(req.Policy.FieldErr("workspace.path", err))
	}
	if m == policy.WorkspaceOverlay || m == policy.WorkspaceCopy {
		var err error
		var created bool
		cs, created, err = openChangeSet(ctx, req.Policy.Workspace.Path, req.Session, m, int64(req.Policy.Limits.Disk))
		if err != nil {
			if ctx.Err() != nil {
				return interrupted()
			}
			return fail(err)
		}
		defer cs.Unlock()
		if created {
			fresh = cs
		}
		rep.ChangeSet = &ChangeSetRef{ID: cs.ID(), Session: cs.Session(), Dir: cs.Dir()}
		if err := cs.Record(req.Args, req.Policy.Workspace.Protect); err != nil {
			return fail(fmt.Errorf("record command in change set: %w", err))
		}
	}
	// What the run's programs and requests are checked against as it
	// goes on, with the approvals given so far.
	ec := &execCheck{rules: rules, approvals: approvals, req: req, runID: runID, dir: dir, lineByFile: true}
	// Code the loader runs in the command's program is decided with its
	// exec (execCheck.preloaded), which the backend then sends; so is an
	// rm whose paths may pass through a link (execCheck.throughLinks).
	if !rules.Empty() && (!lineSeenAlike(req.Policy, progPath, progFile, cs == nil || fresh == cs) || slices.ContainsFunc(lineEnv, func(w string) bool {
		return seccomp.IsPreload(w) && !systemPreload(req.Policy, w)
	}) || rmOfPaths(req.Args, progPath, progFile)) {
		ec.firstAgain, ec.lineProg = true, prog
	}
	if testHookLineDecided != nil {
		testHookLineDecided()
	}
	if spend.CountsRequests() {
		ec.spend = spend
	}
	var er *egressRun
	if req.Policy.Network.Mode == policy.NetworkAllow {
		nrules, err := networkRules(req.Policy)
		if err != nil {
			return fail(err)
		}
		er = newEgressRun(nrules, req.Policy, req, runID)
		if rules.HasHostRules() || ec.spend != nil {
			er.proxy.Check = ec.host
		}
		if ec.spend != nil {
			record := er.proxy.Audit
			er.proxy.Audit = func(e egress.Event) {
				spend.NetworkBytes(e.Spent())
				record(e)
			}
		}
		stdio.ServeProxy = er.serve
		stdio.ServeTUN = er.serveTUN
		defer func() { rep.Network = er.report() }()
	}
	secrets, err := loadSecrets(ctx, req.Policy, caller.Cwd, req.SecretRoots)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted()
		}
		return fail(err)
	}
	if secrets != nil {
		er.proxy.Secrets = secrets.set
		// A token minted for this run dies with it, however it ends.
		defer func() { rep.Warnings = append(rep.Warnings, secrets.revokeAll()...) }()
	}
	rep.Warnings = append(rep.Warnings, networkWarnings(req.Policy)...)
	direct := m == "" || m == policy.WorkspaceDirect
	rep.Warnings = append(rep.Warnings, recordsWritable(req.Policy, direct, req.RecordFiles)...)
	rep.Warnings = append(rep.Warnings, writtenInPlace(req.Policy)...)
	// What earlier runs of the caller killed before their end left
	// planted, before this one's guards look at the workspace.
	rep.Warnings = append(rep.Warnings, finishAbandonedRuns()...)
	guards, err := newGuards(req.Policy, direct, caller)
	if err != nil {
		return fail(err)
	}
	// quarantine closes them at the end; this, on the ways out before it.
	defer closeGuards(guards)
	// Removed once quarantine has run (deferred calls run after it).
	if rr, err := recordRun(runID, guards); err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%v: were moat killed during the run, what the command planted where a protected path belongs would stay there until removed by hand", err))
	} else {
		defer rr.done()
	}
	spec, err := Compile(req.Policy, req.Args, caller, runID, cs, guards)
	if err != nil {
		return fail(err)
	}
	// After Compile, which refuses what no guard can make safe (a --rw
	// of /) in words of its own.
	if err := guardGaps(guards, req.AllowDegraded, rep); err != nil {
		return fail(err)
	}
	spec.CheckFirstExec = ec.firstAgain
	// The programs the command starts are decided knowing the mounts as
	// made (the line, by those found ahead: lineRules).
	ec.rules, ec.plain = rules.InSandbox(sandboxTrees(spec)), rules
	rep.Warnings = append(rep.Warnings, linksLeadingNowhere(req.Policy, spec)...)
	if err := secrets.apply(spec); err != nil {
		return fail(err)
	}
	if w := prepareTUN(spec, req.TUNDir); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	if w := backendTUN(be, spec); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	if err := checkSpec(be, req.Policy, spec, req.AllowDegraded, rep); err != nil {
		return fail(err)
	}
	if ctx.Err() != nil {
		return interrupted()
	}
	if !rules.Empty() {
		// The rules hold for every program the command starts, not only
		// for the line given: checked at each exec (see execCheck), or,
		// on a backend that cannot, refused unless degradation is allowed.
		if d, err := checkExecOn(be, req.AllowDegraded); err != nil {
			return fail(err)
		} else if d != "" {
			rep.Degraded = append(rep.Degraded, d)
			rep.Warnings = append(rep.Warnings, d)
		} else {
			stdio.CheckExec = ec.check
		}
	}
	// Budgets bound what the command may still spend: CPU time and output
	// through the backend's limits (the tighter of the two), wall time by
	// a clock that stops while a person is asked.
	cpuBudget := cpuLeft > 0 && (spec.Limits.CPUTime == 0 || cpuLeft < spec.Limits.CPUTime)
	if cpuBudget {
		spec.Limits.CPUTime = cpuLeft
	}
	outputBudget := outputLeft > 0 && (spec.Limits.OutputBytes == 0 || outputLeft < spec.Limits.OutputBytes)
	if outputBudget {
		spec.Limits.OutputBytes = outputLeft
	}
	if req.BeforeStart != nil {
		req.BeforeStart(rep)
	}
	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	ec.clock = spend.StartClock(cancelRun)
	st, err := be.Run(runCtx, spec, stdio)
	ec.clock.Stop()
	if st != nil {
		spend.AddCPU(st.CPU)
		spend.Output(st.OutputBytes)
	}
	rep.Budget = ec.spentBudget()
	rep.Denials = append(rep.Denials, ec.report()...)
	if errors.Is(err, backend.ErrNoExecCheck) {
		err = fmt.Errorf("%w: %w; the policy's command rules (its [[rules]] and [harness] builtin) are checked at every program the command starts, and here they could not be: with neither, the run needs no such check", ErrRefused, err)
	}
	// A backend that refused to run unchecked (ErrNoExecCheck) started
	// nothing either.
	made := fresh
	if ie := (*backend.InitError)(nil); err == nil || !errors.As(err, &ie) && !errors.Is(err, backend.ErrNoExecCheck) {
		fresh = nil // the command may have run: what it wrote is kept
	}
	// No process of the run is alive now: a change set still waiting for
	// its changes (under a disk limit) will never get them.
	if cs != nil && err == nil {
		if lost, derr := cs.DropUnsavedRun(); derr != nil {
			err = derr
		} else if lost {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("the run's changes were lost: it ended before they were saved from its own tmpfs into change set %s (moat's init was killed first: the memory limit's OOM killer picks it when the command's memory is in pipes or files); what earlier runs saved there is kept", cs.ID()))
		}
	}
	// No process of the run is alive now: what it planted stays put.
	qerr := quarantine(guards, runID, rep)
	if err == nil && qerr != nil {
		err = qerr
	}
	var ie *backend.InitError
	if errors.As(err, &ie) && strings.HasPrefix(ie.Stage, "overlay") {
		err = fmt.Errorf("%w\n(overlayfs could not be mounted here; --workspace-mode copy runs on a copy of the workspace instead)", err)
	}
	if err != nil {
		return fail(err)
	}
	fillReport(rep, st, req.Policy.Filesystem.Landlock)
	// A budget that ended the run is its reason, rather than the limit
	// or the cancellation it ended it through.
	var spent *harness.BudgetError
	switch {
	case errors.As(context.Cause(runCtx), &spent) && ctx.Err() == nil:
		rep.Reason, rep.Budget = ReasonBudget, spent.Name
	case st.Cause == backend.CauseCPU && cpuBudget:
		rep.Reason, rep.Budget = ReasonBudget, "cpu"
	case st.Cause == backend.CauseOutput && outputBudget:
		rep.Reason, rep.Budget = ReasonBudget, "output"
	}
	if made != nil && req.Session == "" && unchanged(made, m) && made.Discard() == nil {
		// Nothing was written: no change set to review, or to clutter
		// moat runs with. A named one (--session) stays for the next run.
		rep.ChangeSet = nil
	}
	return rep, nil
}

// unchanged says whether the run's fresh change set (of workspace mode m)
// holds no change: an overlay's upper layer is empty; a copy, compared
// with the workspace, differs in nothing (a walk of both, as long as the
// copy took).
func unchanged(cs *workspace.ChangeSet, m string) bool {
	switch m {
	case policy.WorkspaceOverlay:
		return upperEmpty(cs)
	case policy.WorkspaceCopy:
		changes, err := cs.Changes()
		return err == nil && len(changes) == 0
	}
	return false
}

// upperEmpty says whether an overlay change set's upper layer holds
// nothing: its command changed nothing in the workspace.
func upperEmpty(cs *workspace.ChangeSet) bool {
	f, err := os.Open(cs.UpperDir())
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// newReport is the Report of a command that has not run yet: until
// something says otherwise, moat failed.
func newReport(runID string, args []string, p *policy.Policy) *Report {
	return &Report{RunID: runID, Command: args, StartedAt: time.Now(), Policy: p,
		Reason: "error", ExitCode: 125, LimitsHit: []string{}, LimitsEnforcedBy: map[string]string{}, Degraded: []string{}, Warnings: []string{}, Denials: []backend.Denial{},
		Network: &NetworkReport{Mode: p.Network.Mode, Events: []egress.Event{}, Refused: []egress.Refusal{}}}
}

// FailedReport is the Report of a run refused before it began (a bad
// flag, a policy that does not load): Reason "error", exit status 125,
// and err's message. A caller that promised a report writes this one, so
// that no earlier run's report is read for this run's.
func FailedReport(args []string, err error) *Report {
	return &Report{Command: args, StartedAt: time.Now(), Reason: "error", ExitCode: 125, Error: err.Error(),
		LimitsHit: []string{}, LimitsEnforcedBy: map[string]string{}, Degraded: []string{}, Warnings: []string{}, Denials: []backend.Denial{}}
}

// setError says in rep that moat could not run the command, and why; it
// returns err, with a hint when the policy is its likely cause.
func setError(rep *Report, err error) error {
	if errors.Is(err, backend.ErrNotFound) && rep.Policy != nil && !slices.ContainsFunc(rep.Policy.Filesystem.ReadOnly, func(e string) bool { return filepath.Clean(e) == "/usr" || filepath.Clean(e) == "/" }) {
		// A policy's read_only replaces the default list: one that
		// names only its own paths shows no system programs.
		err = fmt.Errorf("%w (filesystem.read_only, which replaces the default list, does not list /usr: add those of the default's \"/usr\", \"/bin\", \"/sbin\", \"/lib\", \"/lib64\", \"/etc\" the command needs)", err)
	}
	rep.Error = err.Error()
	// Nothing ran, so no limit was in force: a reader of the field alone
	// must not take the run for one held to them.
	rep.LimitsEnforcedBy = map[string]string{}
	var ie *backend.InitError
	if errors.As(err, &ie) {
		rep.Stage = ie.Stage
	}
	switch {
	case errors.Is(err, backend.ErrNotFound):
		rep.ExitCode = 127
	case errors.Is(err, backend.ErrNotExecutable):
		rep.ExitCode = 126
	}
	rep.WallSeconds = time.Since(rep.StartedAt).Seconds()
	return err
}

// checkSpec fills in what rep says of the Spec's protections (the seccomp
// profile, the warnings of weakened ones, what enforces each limit), and
// refuses a Spec that asks for what the backend cannot enforce here,
// unless allowDegraded, when each gap is listed in rep.Degraded instead.
func checkSpec(be backend.Backend, p *policy.Policy, spec *backend.Spec, allowDegraded bool, rep *Report) error {
	rep.Seccomp = p.Syscalls.Profile
	if rep.Seccomp == "" {
		rep.Seccomp = policy.ProfileDefault
	}
	if len(spec.Seccomp) == 0 {
		rep.Seccomp = policy.ProfileUnconfined
		rep.Warnings = append(rep.Warnings, "syscalls.profile is \"unconfined\": no system-call filter, not even the floor a custom profile gets: the command reaches its caller's session keyring and can make set-id files in the workspace and new namespaces")
		if p.Limits.FileSize > 0 {
			// The limit's rule against reserving blocks past a file's
			// end (fallocate's KEEP_SIZE) lives in moat's filter.
			rep.Warnings = append(rep.Warnings, "limits.file_size bounds what writes make a file's size, not fallocate's blocks reserved past a file's end (--keep-size) or ranges inserted (--insert-range): moat refuses those in its system-call filter, which an unconfined run has not")
		}
	}
	if len(spec.Seccomp) == 2 {
		rep.Warnings = append(rep.Warnings, customProfileGaps(p.Syscalls.Profile, spec.Seccomp[0])...)
	}
	landlock := p.Filesystem.Landlock
	if landlock == policy.LandlockOff {
		rep.Warnings = append(rep.Warnings, "filesystem.landlock is \"off\": file access is checked by the mounts only")
	}
	// Probing the backend costs a little (cgroups); only a run that asks
	// for a cgroup limit, or requires Landlock, needs to know beforehand.
	var caps backend.Capabilities
	tcpRules := spec.Network.RestrictBind || spec.Network.RestrictConnect
	if l := spec.Limits; l.MemoryBytes > 0 || l.Pids > 0 || l.CPUs > 0 || landlock == policy.LandlockRequired || tcpRules {
		caps = be.Capabilities()
	}
	if landlock == policy.LandlockRequired && caps.LandlockABI == 0 {
		why := "this host has no Landlock (see moat doctor)"
		if caps.LandlockWhy != "" {
			why = caps.LandlockWhy
		}
		return fmt.Errorf("%w: filesystem.landlock is \"required\" and %s; use \"auto\" or \"best-effort\" to run without it", ErrRefused, why)
	}
	u, limited := be.(unsupporter)
	if limited && tcpRules {
		// Refused below by name (Unsupported), with or without
		// --allow-degraded, as a backend that has no Landlock at all
		// says: not dropped as a kernel's too old Landlock would be.
		caps.LandlockABI = max(caps.LandlockABI, 4)
	}
	degraded, err := checkCapabilities(spec, caps, allowDegraded)
	if err != nil {
		// Refused, not run degraded: the error names the gaps.
		return err
	}
	rep.Degraded = append(rep.Degraded, degraded...)
	if limited {
		gaps := u.Unsupported(spec)
		if h := p.User; spec.User.HostUID != spec.User.UID && (h.HostUID != policy.DefaultHostID || h.HostGID != policy.DefaultHostID) {
			// Such a backend runs the command as its own ids on the
			// host (runsc maps none): a host identity the policy chose
			// would be silently someone else's.
			gaps = append(gaps, fmt.Sprintf("user.host_uid/host_gid %d:%d: this backend maps no ids, so the command's host ids are user.uid and user.gid (%d:%d)", h.HostUID, h.HostGID, h.UID, h.GID))
		}
		if len(gaps) > 0 {
			return fmt.Errorf("%w: the %s backend cannot enforce here what the policy asks for:\n  %s\n(change or remove the setting, or run with --isolation native)", ErrRefused, be.Name(), strings.Join(gaps, "\n  "))
		}
	}
	rep.LimitsEnforcedBy = enforcedBy(spec.Limits)
	return nil
}

// allowDegradedHint is how a refusal of what cannot be enforced here
// says to run without it: a run's flag, and for sessions their server's.
const allowDegradedHint = "pass --allow-degraded to run without it (moat run, moat mcp; moat serve, for all its sessions)"

// fillReport says in rep how the command ended, from the backend's
// ExitStatus.
func fillReport(rep *Report, st *backend.ExitStatus, landlock string) {
	rep.Error = ""
	rep.Reason = string(st.Cause)
	for _, c := range st.LimitsHit {
		rep.LimitsHit = append(rep.LimitsHit, string(c))
	}
	rep.WallSeconds = st.Wall.Seconds()
	rep.SetupSeconds = st.Setup.Seconds()
	rep.CPUSeconds = st.CPU.Seconds()
	rep.MaxMemoryBytes = st.MaxMemory
	rep.OutputBytes = st.OutputBytes
	rep.LandlockABI = st.LandlockABI
	if st.LandlockABI == 0 && (landlock == "" || landlock == policy.LandlockAuto) {
		why := "the kernel has none"
		if rep.Backend == policy.IsolationGVisor {
			why = "gVisor has none; its own kernel stands between the command and the host's"
		}
		rep.Warnings = append(rep.Warnings, "no Landlock was applied ("+why+"): file access was checked by the mounts only")
	}
	for _, d := range st.Denials {
		if d.Layer == backend.LayerTerminal {
			d.Hint = termsafe.Hint
			rep.Denials = append(rep.Denials, d)
			continue
		}
		if d.Layer == backend.LayerMount {
			rep.Denials = append(rep.Denials, d)
			continue
		}
		d.Profile = rep.Seccomp
		if d.Errno == "ENOSYS" {
			if f := seccomp.FallbackOf(d.What); f != "" {
				d.Fallback = f
				rep.Denials = append(rep.Denials, d)
				continue
			}
		}
		d.Hint = fmt.Sprintf("to allow %s, run with a profile that allows it (--seccomp FILE, a Docker-format profile; moat seccomp check shows what one allows) or, without any filter, --seccomp unconfined", d.What)
		if seccomp.FloorNames(d.What) {
			// The floor under every custom profile refuses it too.
			d.Hint = fmt.Sprintf("%s is refused under every profile but unconfined (the floor moat keeps under a custom one protects the host): only --seccomp unconfined, with no filter at all, allows it", d.What)
		}
		if d.What == "listen" && d.Errno == "EACCES" && strings.Contains(d.Rule, "network.tcp_bind") {
			// Refused for the TCP bind rule, which no profile changes.
			d.Hint = "bind the socket to a port network.tcp_bind lists before listening, or add 0 to tcp_bind (--tcp-bind 0,...) to allow any ephemeral port"
		}
		rep.Denials = append(rep.Denials, d)
	}
	if st.Signal != 0 {
		name := SignalName(syscall.Signal(st.Signal))
		rep.Signal = &name
		rep.ExitCode = 128 + st.Signal
		// The kernel ends a process with SIGSYS when a seccomp filter's
		// answer to a call is to kill it (or to trap, unhandled); only a
		// profile's rules (or a command raising SIGSYS itself) do that,
		// never a limit.
		if st.Cause == backend.CauseSignal && syscall.Signal(st.Signal) == syscall.SIGSYS && rep.Seccomp != policy.ProfileUnconfined {
			rep.Reason = ReasonSeccompKill
		}
	} else {
		rep.ExitCode = st.ExitCode
	}
}

// checkExecOn says whether the policy's command rules can be checked at
// each program started on be: "" when they can, a degradation to report
// when be cannot and allow is set, and a refusal otherwise (fail closed:
// the rules would hold for command lines only).
func checkExecOn(be backend.Backend, allow bool) (string, error) {
	nc, ok := be.(interface{ NoExecCheck() string })
	if !ok {
		return "", nil
	}
	why := nc.NoExecCheck()
	if !allow {
		return "", fmt.Errorf("%w: the policy's command rules (its [[rules]] and [harness] builtin) are checked at every program a command starts, and %s; set [harness] builtin = [] and no command rules, use --isolation native, or --allow-degraded to check command lines only", ErrRefused, why)
	}
	return "exec checks: " + why + "; the rules were checked on command lines only", nil
}

// unsupporter is a backend that can only run some Specs (gvisor): it
// names each protection of spec it cannot enforce, and the run is
// refused, with or without AllowDegraded, since running without them
// would be running a weaker sandbox than the one chosen.
type unsupporter interface {
	Unsupported(spec *backend.Spec) []string
}

// checkCapabilities refuses a Spec that asks for limits the backend cannot
// enforce here, or, when allowed, drops them and lists each as degraded.
func checkCapabilities(spec *backend.Spec, caps backend.Capabilities, allow bool) ([]string, error) {
	var gaps []string
	l := &spec.Limits
	check := func(asked bool, ok bool, why, what, flag string, drop func()) {
		if !asked || ok {
			return
		}
		gaps = append(gaps, fmt.Sprintf("%s (%s) not enforced: %s", what, flag, why))
		drop()
	}
	check(l.MemoryBytes > 0, caps.Memory, caps.MemoryWhy, "memory limit", "limits.memory / --memory", func() { l.MemoryBytes = 0 })
	check(l.Pids > 0, caps.Pids, caps.PidsWhy, "process limit", "limits.pids / --pids", func() { l.Pids = 0 })
	l.PidsRlimit = l.Pids > 0 && caps.PidsBy == backend.PidsRlimit
	check(l.CPUs > 0, caps.CPU, caps.CPUWhy, "CPU quota", "limits.cpus / --cpus", func() { l.CPUs = 0 })
	cgroupGap := len(gaps) > 0 // the gaps so far are those of cgroup limits
	if w := unboundedWrites(spec); l.DiskBytes > 0 && len(w) > 0 {
		// The limit still bounds /tmp, home and /dev/shm; what escapes it
		// is written in place on the host's filesystem, which a tmpfs
		// cannot hold and a watchdog could only notice after the fact.
		gaps = append(gaps, diskGap(w))
	}
	n := &spec.Network
	tcpWhy := fmt.Sprintf("Landlock restricts TCP ports from ABI 4 (Linux 6.7); this kernel has %s", landlockABIName(caps.LandlockABI))
	if caps.LandlockWhy != "" {
		tcpWhy = "they are Landlock's, and " + caps.LandlockWhy
	}
	check(n.RestrictBind || n.RestrictConnect, caps.LandlockABI >= 4, tcpWhy,
		"TCP port rules", "network.tcp_bind, tcp_connect / --tcp-bind, --tcp-connect",
		func() { n.RestrictBind, n.BindPorts, n.RestrictConnect, n.ConnectPorts = false, nil, false, nil })
	if len(gaps) > 0 && !allow {
		msg := ""
		for _, g := range gaps {
			msg += "\n  " + g
		}
		if cgroupGap && caps.Delegation != "" {
			msg += "\n  to have cgroups for these limits here: " + caps.Delegation
		}
		return gaps, fmt.Errorf("%w: moat cannot enforce here what the policy asks for:%s\n(see `moat doctor` for what this host can enforce and how to delegate cgroups to a user; change or remove the setting, or "+allowDegradedHint+")", ErrRefused, msg)
	}
	return gaps, nil
}

// PolicyGaps are what p asks for that no host can enforce as it is set,
// and that a run therefore refuses unless degraded (Request.AllowDegraded),
// for moat policy check: a disk limit over a workspace written in place
// on the host (direct or copy mode), or with read-write paths. What a host can enforce is its run's
// to say (moat doctor).
func PolicyGaps(p *policy.Policy) []string {
	if p.Limits.Disk <= 0 {
		return nil
	}
	var w []string
	if m := p.Workspace.Mode; m == policy.WorkspaceDirect || m == policy.WorkspaceCopy {
		w = append(w, p.Workspace.Path)
	}
	// A read-write path is written in place whatever the workspace's
	// mode, as a run's Spec binds it.
	w = append(w, p.Filesystem.ReadWrite...)
	if len(w) > 0 {
		return []string{diskGap(w)}
	}
	return nil
}

// linksLeadingNowhere warns of each filesystem.read_only entry that is a
// symbolic link (made anew in the sandbox, as it is on the host) to a path
// the sandbox does not show: the link dangles inside, and what its author
// meant read-only is not there at all.
func linksLeadingNowhere(p *policy.Policy, spec *backend.Spec) []string {
	var out []string
	for _, m := range spec.Mounts {
		if m.Kind != backend.MountSymlink || !slices.Contains(p.Filesystem.ReadOnly, m.Target) {
			continue
		}
		dest := m.Source
		if !filepath.IsAbs(dest) {
			dest = filepath.Join(filepath.Dir(m.Target), dest)
		}
		dest = filepath.Clean(dest)
		if slices.Contains(p.Filesystem.ReadOnly, dest) || slices.Contains(p.Filesystem.ReadWrite, dest) || shownAbove(p, p.Workspace.Path, dest) != "" {
			continue
		}
		out = append(out, fmt.Sprintf("filesystem.read_only: %s is a symbolic link to %s, which the sandbox does not show: the link leads nowhere inside (name %s instead, or as well)", m.Target, m.Source, dest))
	}
	return out
}

// networkWarnings warns of a network mode that gives the command what
// its author may not have meant: the host's network unfiltered, or an
// allow mode whose lists allow nothing.
func networkWarnings(p *policy.Policy) []string {
	switch n := p.Network; {
	case n.Mode == policy.NetworkHost:
		return []string{"network.mode is \"host\": the command has the host's network, unfiltered"}
	case n.Mode == policy.NetworkAllow && len(n.Allow) == 0 && len(n.AllowCIDRs) == 0:
		return []string{"network.mode is \"allow\" and network.allow lists no destination: every connection is refused (list hosts, as with --net allow:HOST,...)"}
	}
	return nil
}

// writtenInPlace warns of each read-write path inside a workspace whose
// mode keeps the command's writes off the real directory (overlay, copy,
// readonly): the command writes that path in place on the host, outside
// the change set and the review.
func writtenInPlace(p *policy.Policy) []string {
	m := p.Workspace.Mode
	if m == "" || m == policy.WorkspaceDirect {
		return nil
	}
	var out []string
	for i, rw := range p.Filesystem.ReadWrite {
		if within(p.Workspace.Path, rw) {
			out = append(out, fmt.Sprintf("filesystem.read_write[%d] %s is in the %s workspace: the command writes it in place on the host, outside the change set", i, rw, m))
		}
	}
	return out
}

// diskGap is the gap of a disk limit that cannot hold what a command
// writes in place at the places w.
func diskGap(w []string) string {
	return fmt.Sprintf("disk limit (limits.disk / --disk) not enforced on %s: written in place on the host's filesystem (a direct or copy workspace, filesystem.read_write / --rw); --workspace-mode overlay keeps the workspace's writes under the limit, and readonly keeps them out", strings.Join(w, ", "))
}

// refuseCopyUnderDisk refuses a copy workspace under a disk limit, unless
// degradation is allowed, before the copy is made: the command writes
// the copy in place on the state directory's filesystem, beyond the
// limit's tmpfs, so checkCapabilities would refuse it anyway, but only
// once the whole workspace had been copied for nothing.
func refuseCopyUnderDisk(p *policy.Policy, allow bool) error {
	if allow || p.Workspace.Mode != policy.WorkspaceCopy || p.Limits.Disk == 0 {
		return nil
	}
	return fmt.Errorf("%w: moat cannot enforce here what the policy asks for:\n  %s\n(change or remove the setting, or "+allowDegradedHint+")", ErrRefused, diskGap([]string{p.Workspace.Path}))
}

// guardGaps refuses, unless allow, what the workspace guards could not
// protect (Guard.Gaps); with allow each is a degradation in rep.
func guardGaps(guards []*workspace.Guard, allow bool, rep *Report) error {
	for _, g := range guards {
		for _, gap := range g.Gaps() {
			if !allow {
				return fmt.Errorf("%w: moat cannot enforce here what the policy asks for:\n  %s\n(remove entries from it, or "+allowDegradedHint+")", ErrRefused, gap)
			}
			rep.Degraded = append(rep.Degraded, gap)
		}
	}
	return nil
}

// denyHardLinks refuses, unless allow, a denied file of several hard
// links: its other names show it to the command, and no mask covers
// them, nor could any walk short of the whole file system find them (a
// link made beside it in the workspace showed the denied file; found by
// a tester). With allow, each is a degradation. A denied directory's
// files are not looked at.
func denyHardLinks(p *policy.Policy, allow bool) ([]string, error) {
	var gaps []string
	for i, d := range p.Filesystem.Deny {
		fi, err := os.Stat(d)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Nlink < 2 {
			continue
		}
		gap := fmt.Sprintf("filesystem.deny[%d]: %s has %d hard links, whose other names show it to the command", i, d, st.Nlink)
		if !allow {
			return nil, fmt.Errorf("%w: moat cannot enforce here what the policy asks for:\n  %s\n(remove its other names: find / -xdev -samefile %s; or "+allowDegradedHint+")", ErrRefused, gap, d)
		}
		gaps = append(gaps, gap)
	}
	return gaps, nil
}

// enforcedBy names what enforces each of l's limits that needs more than
// an rlimit every process has (Report.LimitsEnforcedBy).
func enforcedBy(l backend.Limits) map[string]string {
	by := map[string]string{}
	if l.MemoryBytes > 0 {
		by["memory"] = "cgroup"
	}
	if l.Pids > 0 {
		by["pids"] = backend.PidsCgroup
		if l.PidsRlimit {
			by["pids"] = backend.PidsRlimit
		}
	}
	if l.CPUs > 0 {
		by["cpus"] = "cgroup"
	}
	if l.DiskBytes > 0 {
		by["disk"] = "tmpfs"
	}
	return by
}

// unboundedWrites lists where the command writes straight to host
// storage: the targets of writable binds of host directories (a direct
// workspace, a copy workspace's copy, read_write paths, a worktree's git
// directory). A pin re-binds what is mounted already, and an overlay's
// changes, tmpfs mounts and /dev/shm go to the disk limit's tmpfs. A
// directory on a tmpfs no larger than the disk limit is bounded by it (a
// daemon's empty workspace, see package daemon): the limit then holds per
// filesystem, that one and the sandbox's own.
func unboundedWrites(spec *backend.Spec) []string {
	var out []string
	for _, m := range spec.Mounts {
		if m.Kind == backend.MountBind && !m.ReadOnly && !onBoundedTmpfs(m.Source, spec.Limits.DiskBytes) {
			out = append(out, m.Target)
		}
	}
	return out
}

// ErrQuarantine is returned (wrapped) when a run left something where a
// protected path belongs and moat could not move it out of the workspace:
// it is still there, and a host tool may run it.
var ErrQuarantine = errors.New("could not quarantine a protected path")

// newGuards computes what a run protects (workspace.Guard): the
// workspace, and each read-write directory, which the command writes as
// it writes a direct-mode workspace.
//
// They are made with the rights of the user who named the paths
// (asOwner): a .git file of the workspace's naming another user's git
// directory tells that user nothing about it.
func newGuards(p *policy.Policy, direct bool, c Caller) (guards []*workspace.Guard, err error) {
	// The files the policy came from (a --policy file in the workspace,
	// the profile and programs it names) are protected where the command
	// writes, as .moat.toml is: they need no trust, since the person
	// named them, so a command that rewrote one would choose the next
	// run's policy, and a secret's program runs on the host.
	own := p.HostFiles(c.Cwd, c.Home)
	if !c.WorkspaceMade {
		if derr := asOwner(c, func() { guards, err = makeGuards(p, direct, nil, own) }); derr != nil {
			return nil, derr
		}
		return guards, err
	}
	// The workspace and the writable paths in it are the caller's; the
	// writable paths outside it, the owner's, looked at with its rights.
	outside := map[string]*workspace.Guard{}
	if derr := asOwner(c, func() {
		for _, rw := range p.Filesystem.ReadWrite {
			if within(p.Workspace.Path, rw) {
				continue
			}
			var g *workspace.Guard
			if g, err = rwGuard(rw, own, kept(p)); err != nil {
				return
			}
			outside[rw] = g
		}
	}); derr != nil {
		return nil, derr
	}
	if err != nil {
		return nil, err
	}
	return makeGuards(p, direct, outside, own)
}

// makeGuards makes the workspace's guard and those of the writable
// directories, but for those in done, made already (nil for none).
func makeGuards(p *policy.Policy, direct bool, done map[string]*workspace.Guard, own []string) ([]*workspace.Guard, error) {
	extra := append(slices.Clone(p.Workspace.Protect), filesIn(p.Workspace.Path, own)...)
	extra = append(extra, readOnlyIn(p.Workspace.Path, kept(p))...)
	g, err := workspace.NewGuard(p.Workspace.Path, workspace.GuardOptions{Extra: extra, Writable: direct})
	if err != nil {
		return nil, guardError("workspace", err)
	}
	guards := []*workspace.Guard{g}
	for _, rw := range p.Filesystem.ReadWrite {
		g, ok := done[rw]
		if !ok {
			if g, err = rwGuard(rw, own, kept(p)); err != nil {
				closeGuards(guards)
				return nil, err
			}
		}
		if g != nil {
			guards = append(guards, g)
		}
	}
	return guards, nil
}

// kept are the policy's paths that must stay where they are inside a
// writable tree: the read-only ones, and the denied ones, whose masks
// would otherwise go with a directory above them that the command
// renames, the real file then readable by its new name to whatever reads
// the workspace on the host (the files API of a daemon, found by a
// tester; the masks are mounted over the guard's).
func kept(p *policy.Policy) []string {
	return append(slices.Clone(p.Filesystem.ReadOnly), p.Filesystem.Deny...)
}

// rwGuard is the guard of the writable path rw; nil if rw is not a
// directory.
func rwGuard(rw string, own, readOnly []string) (*workspace.Guard, error) {
	if fi, err := os.Stat(rw); err != nil || !fi.IsDir() {
		return nil, nil
	}
	extra := append(filesIn(rw, own), readOnlyIn(rw, readOnly)...)
	g, err := workspace.NewGuard(rw, workspace.GuardOptions{Extra: extra, Writable: true, Absolute: true})
	if err != nil {
		return nil, guardError("filesystem.read_write "+rw, err)
	}
	return g, nil
}

// guardError wraps a guard's error for what it guards; a refusal of
// what the caller can change (a git file that is a link) also wraps
// ErrRefused, so that a daemon's tenant gets sandbox_refused, with the
// message, rather than an internal error.
func guardError(what string, err error) error {
	if _, ok := errors.AsType[*workspace.GitLinkError](err); ok {
		return fmt.Errorf("%w: %s: %w", ErrRefused, what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// filesIn returns those of files (absolute) that are regular files under
// root, relative to it, by their paths as given or as the links on the
// way resolve. What is not a file now is left alone: a word a secret's
// program takes that names nothing must not make a name the command may
// not create, nor a directory it names read-only.
func filesIn(root string, files []string) []string {
	return pathsIn(root, files, func(f string) bool {
		fi, err := os.Stat(f)
		return err == nil && fi.Mode().IsRegular()
	})
}

// readOnlyIn returns those of the policy's read-only paths (absolute)
// that exist under the writable root, relative to it: protected paths of
// its guard, whose directories above them are pinned. The read-only
// mount alone follows its file when the command renames a directory
// above it, and the command then makes its own at the path (found by a
// tester).
func readOnlyIn(root string, paths []string) []string {
	return pathsIn(root, paths, func(f string) bool {
		_, err := os.Lstat(f)
		return err == nil
	})
}

// pathsIn returns those of paths (absolute) that keep takes and that are
// under root, relative to it, by their paths as given or as the links on
// the way resolve.
func pathsIn(root string, paths []string, keep func(string) bool) []string {
	var rel []string
	realRoot := realPath(root)
	for _, f := range paths {
		if !keep(f) {
			continue
		}
		for _, pair := range [][2]string{{root, f}, {realRoot, realPath(f)}} {
			if r, err := filepath.Rel(pair[0], pair[1]); err == nil && r != "." && within(pair[0], pair[1]) {
				rel = append(rel, r)
				break
			}
		}
	}
	return rel
}

// quarantine moves what a run planted where a protected path belongs out
// of the workspace and the read-write directories (workspace.Guard.Finish),
// into the quarantine directory of the state directory, and says so in
// rep.
// closeGuards releases what the guards hold open (workspace.Guard.Close;
// closing one twice does nothing more).
func closeGuards(guards []*workspace.Guard) {
	for _, g := range guards {
		g.Close()
	}
}

func quarantine(guards []*workspace.Guard, runID string, rep *Report) error {
	// Each guard quarantines once, at the run's or the session's end.
	defer closeGuards(guards)
	state, err := workspace.StateDir()
	if err != nil {
		return fmt.Errorf("%w: state directory: %v", ErrQuarantine, err)
	}
	var moved []workspace.Quarantined
	var errs []error
	for i, g := range guards {
		m, err := g.Finish(filepath.Join(state, "quarantine", runID, fmt.Sprint(i)))
		moved = append(moved, m...)
		rep.Warnings = append(rep.Warnings, g.Restored()...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	report(rep, moved)
	if len(errs) == 0 {
		return nil
	}
	// Every path left in place is named, each in a warning of its own:
	// one failure must not hide another.
	err = errors.Join(errs...)
	for _, e := range unjoin(err) {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%v: remove it before git, an editor or direnv uses this workspace", e))
	}
	return fmt.Errorf("%w: %s", ErrQuarantine, strings.Join(strings.Split(err.Error(), "\n"), "; "))
}

// unjoin lists the errors errors.Join joined, at any depth.
func unjoin(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, unjoin(e)...)
	}
	return out
}

// guardStates is what FinishAbandoned needs to finish guards: each
// one's workspace.Guard.State, by its place in guards, which names its
// quarantine directory; nil when none has anything to finish.
func guardStates(guards []*workspace.Guard) ([]byte, error) {
	var out []byte
	for i, g := range guards {
		s, err := g.State()
		if err != nil {
			return nil, err
		}
		if s != nil {
			out = append(out, fmt.Sprintf("%s%d\n", guardSection, i)...)
			out = append(out, s...)
		}
	}
	return out, nil
}

// guardSection begins a guard's state in guardStates, with its place.
const guardSection = "== guard "

// splitGuardStates is guardStates undone: each guard's state by its place.
func splitGuardStates(state []byte) (map[int][]byte, error) {
	out := map[int][]byte{}
	text := string(state)
	if !strings.HasPrefix(text, guardSection) {
		return nil, errors.New("not the guards' state this moat writes")
	}
	for _, part := range strings.Split(text, guardSection)[1:] {
		n, body, _ := strings.Cut(part, "\n")
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("guard %q: not a place", n)
		}
		out[i] = []byte(body)
	}
	return out, nil
}

// FinishAbandoned quarantines what the commands of the session or run id
// planted where a protected path belongs, as its Close would have, when
// the process that ran it died first: state is what SessionRequest.OnGuard
// was given. The caller makes sure that no process of the sandbox is
// alive. The Report holds the quarantine (Quarantined, Warnings); a guard
// whose root is no longer the directory the session began with
// (workspace.ErrGuardMoved) is skipped, with a warning. The error is the
// first guard that could not finish.
func FinishAbandoned(id string, state []byte) (*Report, error) {
	rep := &Report{RunID: id}
	states, err := splitGuardStates(state)
	if err != nil {
		return rep, fmt.Errorf("guard state: %w", err)
	}
	dir, err := workspace.StateDir()
	if err != nil {
		return rep, fmt.Errorf("%w: state directory: %v", ErrQuarantine, err)
	}
	var first error
	for _, i := range slices.Sorted(maps.Keys(states)) {
		g, err := workspace.ResumeGuard(states[i])
		if errors.Is(err, workspace.ErrGuardMoved) {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("what its commands may have planted was not looked for: %v (moved or replaced since); where that directory went, look for protected paths there by hand (.envrc, .git/hooks, .vscode, ...: the README lists them)", err))
			continue
		}
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("what the commands planted was not looked for: %v", err))
			if !errors.Is(err, workspace.ErrGuardMoved) && first == nil {
				first = fmt.Errorf("%w: %v", ErrQuarantine, err)
			}
			continue
		}
		moved, err := g.Finish(filepath.Join(dir, "quarantine", id, fmt.Sprint(i)))
		g.Close()
		report(rep, moved)
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%v: remove it before git, an editor or direnv uses this workspace", err))
			if first == nil {
				first = fmt.Errorf("%w: %v", ErrQuarantine, err)
			}
		}
	}
	return rep, first
}

// report lists quarantined paths in rep.
func report(rep *Report, moved []workspace.Quarantined) {
	for _, q := range moved {
		rep.ProtectedCreated = append(rep.ProtectedCreated, q.Path)
		rep.Quarantined = append(rep.Quarantined, q)
		rep.Warnings = append(rep.Warnings, quarantineWarning(q))
	}
}

func quarantineWarning(q workspace.Quarantined) string {
	w := fmt.Sprintf("the command left %s (%s): moved to %s, so that no host tool runs it; review it there", q.Path, q.Why, q.To)
	switch filepath.Base(q.Path) {
	case "rebase-merge", "rebase-apply", "sequencer":
		// Its todo list can name commands (exec) that git --continue
		// would run on the host; without it git knows of no rebase.
		w += fmt.Sprintf(" (git's state of a rebase, cherry-pick or revert it began, which stays stopped, HEAD perhaps detached: once reviewed, move it back to %s for git to continue or abort it, or leave it with git checkout -f BRANCH)", q.Path)
	}
	return w
}

// QuarantineRemoved says in r that what the run quarantined to to was
// removed rather than kept, for the reason why (a daemon keeps nothing of
// a tenant's in its own state directory, which the tenant cannot reach):
// its entry of Quarantined keeps its path but no longer names where it
// went, and its warning says it was removed, so that nobody looks for it.
func (r *Report) QuarantineRemoved(to, why string) {
	for i, q := range r.Quarantined {
		if q.To != to {
			continue
		}
		if w := slices.Index(r.Warnings, quarantineWarning(q)); w >= 0 {
			r.Warnings[w] = fmt.Sprintf("the command left %s (%s): removed, so that no host tool runs it; %s", q.Path, q.Why, why)
		}
		r.Quarantined[i].To = ""
	}
}

func landlockABIName(abi int) string {
	if abi == 0 {
		return "no Landlock"
	}
	return fmt.Sprintf("ABI %d", abi)
}

// SignalName is the conventional name of a signal ("SIGKILL").
func SignalName(s syscall.Signal) string {
	if n, ok := signalNames()[s]; ok {
		return n
	}
	return fmt.Sprintf("SIG%d", int(s))
}

var signalNames = sync.OnceValue(func() map[syscall.Signal]string {
	return map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
		syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
		syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
		syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
		syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP",
		syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
		syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
		syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF", syscall.SIGWINCH: "SIGWINCH",
		syscall.SIGSYS: "SIGSYS",
	}
})

// openChangeSet reopens the session's change set, or makes a new one
// (created), and locks it for the run: an upper layer must not be mounted
// twice. A new copy (mode copy) holds at most disk bytes of files when
// disk is set (limits.disk): it is made on the host's disk, where no
// tmpfs of the limit bounds it, so a workspace over the limit is refused
// before it is copied, not after.
func openChangeSet(ctx context.Context, ws, session, mode string, disk int64) (cs *workspace.ChangeSet, created bool, err error) {
	store, err := workspace.DefaultStore()
	if err != nil {
		return nil, false, fmt.Errorf("state directory: %w", err)
	}
	if session != "" {
		cs, err = store.Open(session)
		if err != nil && !errors.Is(err, workspace.ErrNotFound) {
			return nil, false, fmt.Errorf("session %q: %w", session, err)
		}
	}
	if cs == nil {
		if mode == policy.WorkspaceCopy {
			cs, err = store.CreateCopy(ctx, ws, session, disk)
		} else {
			cs, err = store.Create(ws, session)
		}
		if err != nil {
			return nil, false, fmt.Errorf("create change set: %w", err)
		}
		created = true
	} else if real, _ := filepath.EvalSymlinks(ws); real != cs.Workspace() {
		return nil, false, fmt.Errorf("session %q belongs to workspace %s, not %s", session, cs.Workspace(), ws)
	}
	if err := cs.Lock(); err != nil {
		return nil, false, fmt.Errorf("change set %s: %w", cs.ID(), err)
	}
	// A session whose copy was interrupted holds no run's changes, and a
	// run in it would start from a partial workspace.
	if err := cs.CheckComplete(); err != nil {
		cs.Unlock()
		return nil, false, fmt.Errorf("session %q: %w", session, err)
	}
	return cs, created, nil
}

// recordsWritable returns a warning for each of files that lies in a
// tree the command may write on the host: the workspace when its writes
// go to the host (direct), or a read_write path. A relative name is the
// caller's, from moat's working directory, and the links of its
// directory are followed as the caller's open does.
func recordsWritable(p *policy.Policy, direct bool, files []string) []string {
	var out []string
	ws := p.Workspace.Path
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			continue
		}
		if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			abs = filepath.Join(dir, filepath.Base(abs))
		}
		tree := writableIn(p, ws, abs)
		if tree == "" || (tree == ws && !direct) {
			continue
		}
		out = append(out, fmt.Sprintf("%s, where this run's record is kept, lies in %s, which the command may write: it can rewrite the record (an audit stream's hash chain too, from its first record); keep it elsewhere", f, tree))
	}
	return out
}
