package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// fakeEngine runs nothing: these tests are about the Manager's
// bookkeeping under concurrency (run them with -race, which the real
// sandboxes refuse: they need CGO_ENABLED=0). The end-to-end tests in
// package httpapi run real sandboxes.
type fakeEngine struct {
	done   chan struct{}
	closed chan struct{}
	once   sync.Once
}

func newFake(context.Context, *EngineSpec) (Engine, error) {
	return &fakeEngine{done: make(chan struct{}), closed: make(chan struct{})}, nil
}

func (f *fakeEngine) Exec(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (*sandbox.Report, error) {
	if req.Args[0] == "block" {
		select {
		case <-ctx.Done():
			return &sandbox.Report{Reason: "killed", ExitCode: 137}, nil
		case <-f.closed:
			return &sandbox.Report{Reason: "killed", ExitCode: 137}, nil
		}
	}
	fmt.Fprint(stdio.Stdout, strings.Join(req.Args, " "))
	return &sandbox.Report{Reason: "exit"}, nil
}

type fakeProc struct {
	f   *fakeEngine
	sig chan os.Signal
}

func (f *fakeEngine) Start(ctx context.Context, req *ExecRequest, stdio backend.Stdio) (EngineProcess, error) {
	return &fakeProc{f: f, sig: make(chan os.Signal, 1)}, nil
}

func (p *fakeProc) Wait() (*sandbox.Report, error) {
	select {
	case <-p.sig:
	case <-p.f.closed:
	}
	return &sandbox.Report{Reason: "signal", ExitCode: 143}, nil
}

func (p *fakeProc) Signal(s os.Signal) error {
	select {
	case p.sig <- s:
	default:
	}
	return nil
}

func (f *fakeEngine) ChangeSet() string     { return "" }
func (f *fakeEngine) Done() <-chan struct{} { return f.done }
func (f *fakeEngine) Close(context.Context) (*sandbox.Report, error) {
	f.once.Do(func() { close(f.closed) })
	return &sandbox.Report{Reason: "closed"}, nil
}

func newManager(t *testing.T, cfg Config) *Manager {
	t.Helper()
	cfg.StateDir = t.TempDir()
	if cfg.Engine == nil {
		cfg.Engine = newFake
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

func TestQuotaHoldsUnderConcurrency(t *testing.T) {
	m := newManager(t, Config{MaxSessions: 5})
	tenant := TokenTenant("a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, quota := 0, 0
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := m.Create(context.Background(), tenant, &CreateRequest{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrQuota):
				quota++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 5 || quota != 35 {
		t.Errorf("%d created, %d refused; want 5 and 35", ok, quota)
	}
	// Another tenant has a quota of its own.
	if _, err := m.Create(context.Background(), TokenTenant("b"), &CreateRequest{}); err != nil {
		t.Errorf("another tenant: %v", err)
	}
}

func TestDeleteEndsRunningCommands(t *testing.T) {
	m := newManager(t, Config{})
	tenant := TokenTenant("a")
	s, err := m.Create(context.Background(), tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out strings.Builder
			s.Exec(context.Background(), &ExecRequest{Args: []string{"echo", "x"}}, backend.Stdio{Stdout: &out})
			s.Exec(context.Background(), &ExecRequest{Args: []string{"block"}}, backend.Stdio{})
		}()
	}
	p, err := s.Start(&ExecRequest{Args: []string{"bg"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := m.Delete(context.Background(), tenant, s.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	<-p.Done()
	if _, err := s.Exec(context.Background(), &ExecRequest{Args: []string{"true"}}, backend.Stdio{}); !errors.Is(err, ErrEnded) {
		t.Errorf("exec after delete: %v", err)
	}
	if _, err := m.Get(tenant, s.ID); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "(deleted)") {
		t.Errorf("get after delete: %v", err)
	}
	// Another tenant is not told it existed.
	if _, err := m.Get(TokenTenant("other"), s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's get after delete: %v", err)
	}
}

func TestSandboxDeathEndsSession(t *testing.T) {
	m := newManager(t, Config{Tick: 10 * time.Millisecond})
	tenant := TokenTenant("a")
	s, err := m.Create(context.Background(), tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	close(s.eng.(*fakeEngine).done)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := m.Get(tenant, s.ID); errors.Is(err, ErrEnded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a session whose sandbox died is still listed")
		}
	}
}

// TestRequestAfterTTLEnds: a request for a session past its TTL finds it
// ended, though the expiry's tick has not come (a tester's exec ran half
// a second past the TTL). The control: the same request before the TTL.
func TestRequestAfterTTLEnds(t *testing.T) {
	m := newManager(t, Config{Tick: time.Hour, TTL: time.Second})
	tenant := TokenTenant("a")
	s, err := m.Create(context.Background(), tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(tenant, s.ID); err != nil {
		t.Fatalf("control: before its TTL: %v", err)
	}
	time.Sleep(time.Until(s.Expires) + 10*time.Millisecond)
	if _, err := m.Get(tenant, s.ID); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "(ttl)") {
		t.Fatalf("after its TTL: %v, want ErrEnded (ttl)", err)
	}
	select {
	case <-s.eng.(*fakeEngine).closed:
	default:
		t.Error("the expired session's sandbox was not closed")
	}
}

func TestReapRemovesOnlyItsOwn(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "daemon")
	os.MkdirAll(filepath.Join(dir, "sessions"), 0o700)
	os.MkdirAll(filepath.Join(dir, "workspaces", "aaaa"), 0o700)
	victim := t.TempDir()
	for id, ws := range map[string]string{"aaaa": filepath.Join(dir, "workspaces", "aaaa"), "bbbb": victim} {
		data, _ := json.Marshal(&record{ID: id, TempWorkspace: ws})
		os.WriteFile(filepath.Join(dir, "sessions", id+".json"), data, 0o600)
	}
	os.WriteFile(filepath.Join(dir, "sessions", "cccc.json"), []byte("{broken"), 0o600)
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	if len(m.Reaped) != 2 {
		t.Errorf("reaped %v", m.Reaped)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspaces", "aaaa")); !os.IsNotExist(err) {
		t.Errorf("its own workspace is left: %v", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("a record made the daemon remove a directory it did not make: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "sessions")); len(ents) != 0 {
		t.Errorf("records left: %v", ents)
	}
}

// TestReapAbandoned: a state directory whose Manager died is reaped as a
// restart would reap it, then removed; one a live Manager holds is left
// (ErrLocked), and so is one no Manager ever opened.
func TestReapAbandoned(t *testing.T) {
	state := filepath.Join(t.TempDir(), "session-1")
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReapAbandoned(state, nil); !errors.Is(err, ErrLocked) {
		t.Errorf("reaping a live Manager's directory: %v, want ErrLocked", err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("a live Manager's directory was touched: %v", err)
	}
	m.Shutdown(context.Background())
	// What a Manager killed with a session leaves: its record and the
	// workspace it made.
	dir := filepath.Join(state, "daemon")
	os.MkdirAll(filepath.Join(dir, "workspaces", "aaaa"), 0o700)
	data, _ := json.Marshal(&record{ID: "aaaa", TempWorkspace: filepath.Join(dir, "workspaces", "aaaa")})
	os.WriteFile(filepath.Join(dir, "sessions", "aaaa.json"), data, 0o600)
	reaped, err := ReapAbandoned(state, nil)
	if err != nil || len(reaped) != 1 || reaped[0] != "aaaa" {
		t.Errorf("ReapAbandoned: %v %v, want [aaaa]", reaped, err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the directory is left: %v", err)
	}
	never := t.TempDir()
	if _, err := ReapAbandoned(never, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory without a lock: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(never); err != nil {
		t.Errorf("a directory without a lock was removed: %v", err)
	}
}

func TestBufferKeepsTheLatest(t *testing.T) {
	b := newBuffer(10 + 2*chunkOverhead) // room for two of the chunks below
	w := b.writer("stdout")
	for _, s := range []string{"aaaa", "bbbb", "cccc"} {
		w.Write([]byte(s))
	}
	chunks, next, dropped := b.read(context.Background(), 0, 0)
	if len(chunks) != 2 || string(chunks[0].Data) != "bbbb" || next != 3 || dropped != 1 {
		t.Errorf("chunks %+v next %d dropped %d", chunks, next, dropped)
	}
	if chunks, next, _ := b.read(context.Background(), 3, 0); len(chunks) != 0 || next != 3 {
		t.Errorf("nothing new: %+v %d", chunks, next)
	}
	go func() { time.Sleep(20 * time.Millisecond); w.Write([]byte("d")) }()
	if chunks, _, _ := b.read(context.Background(), 3, 5*time.Second); len(chunks) != 1 || string(chunks[0].Data) != "d" {
		t.Errorf("a waiting read: %+v", chunks)
	}
}

func TestCleanRel(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "a/b": "a/b", "a//b/": "a/b", "./a": "a"} {
		if got, err := cleanRel(in); err != nil || got != want {
			t.Errorf("cleanRel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"/etc", "..", "a/../b", "../a", "a\x00b"} {
		if _, err := cleanRel(in); !errors.Is(err, ErrBadRequest) {
			t.Errorf("cleanRel(%q): %v", in, err)
		}
	}
}

func TestTenantResourceQuotas(t *testing.T) {
	m := newManager(t, Config{TenantMemory: 1 << 30, TenantCPUs: 2})
	ctx := context.Background()
	a, b := TokenTenant("a"), TokenTenant("b")
	pol := func(mem string, cpus float64) string {
		return fmt.Sprintf("[limits]\nmemory = %q\ncpus = %g\n", mem, cpus)
	}
	s1, err := m.Create(ctx, a, &CreateRequest{Policy: pol("600MiB", 1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{pol("600MiB", 0.5), pol("100MiB", 1.5)} {
		if _, err := m.Create(ctx, a, &CreateRequest{Policy: p}); !errors.Is(err, ErrQuota) {
			t.Errorf("%q: %v", p, err)
		}
	}
	// A limit left unset is the request's to fix: no retry helps.
	for _, p := range []string{"", "[limits]\nmemory = \"1MiB\"\n"} {
		if _, err := m.Create(ctx, a, &CreateRequest{Policy: p}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v", p, err)
		}
	}
	if _, err := m.Create(ctx, b, &CreateRequest{Policy: pol("600MiB", 1)}); err != nil {
		t.Errorf("another tenant's quota: %v", err)
	}
	if _, err := m.Create(ctx, a, &CreateRequest{Policy: pol("400MiB", 1)}); err != nil {
		t.Errorf("within the quota: %v", err)
	}
	if err := m.Delete(ctx, a, s1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, a, &CreateRequest{Policy: pol("600MiB", 1)}); err != nil {
		t.Errorf("the quota freed by a deleted session: %v", err)
	}
}

// TestDefaultTTLWithinMax: a daemon whose default time to live is over
// the longest a session may live would refuse every create that names
// none: it is refused at the start instead. The control: at the maximum.
func TestDefaultTTLWithinMax(t *testing.T) {
	if _, err := New(Config{StateDir: t.TempDir(), TTL: 48 * time.Hour}); err == nil || !strings.Contains(err.Error(), "over the longest") {
		t.Errorf("a 48h default ttl: %v, want a refusal", err)
	}
	m, err := New(Config{StateDir: t.TempDir(), TTL: 24 * time.Hour})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	m.Shutdown(context.Background())
}

// TestEndedSurvivesRestart: a session that ended (deleted, or by the
// daemon's clean stop) is still told as ended, with why, by the next
// daemon on the same state directory (it was an id never made, 404,
// where a crash's reaped ones were told ended). Another tenant still
// hears of none.
func TestEndedSurvivesRestart(t *testing.T) {
	state := t.TempDir()
	tenant := TokenTenant("a")
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := m.Create(context.Background(), tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stopped, err := m.Create(context.Background(), tenant, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(context.Background(), tenant, deleted.ID); err != nil {
		t.Fatal(err)
	}
	m.Shutdown(context.Background())
	m2, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(context.Background())
	for id, why := range map[string]string{deleted.ID: "deleted", stopped.ID: "shutdown"} {
		if _, err := m2.Get(tenant, id); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), why) {
			t.Errorf("after a restart, the session %s ended by %s: %v", id, why, err)
		}
		if _, err := m2.Get(TokenTenant("other"), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("another tenant, after a restart: %v", err)
		}
	}
	if _, err := m2.Get(tenant, "never-made"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an id never made: %v", err)
	}
}

// TestEndedJournalBounded: the journal of ended sessions stays bounded
// while a daemon runs (it grew by a line a session before), and what the
// next daemon reads from it is the latest maxEndedSessions.
func TestEndedJournalBounded(t *testing.T) {
	state := t.TempDir()
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	tenant := TokenTenant("a")
	m.mu.Lock()
	for i := range 3*maxEndedSessions + 7 {
		e := endedSession{tenant: tenant.ID, reason: "deleted", at: time.Now()}
		id := fmt.Sprintf("s%05d", i)
		m.remember(id, e)
		m.appendEnded(id, e)
	}
	m.mu.Unlock()
	m.Shutdown(context.Background())
	b, err := os.ReadFile(filepath.Join(state, "daemon", endedLogName))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 2*maxEndedSessions {
		t.Errorf("the journal holds %d lines, want at most %d", n, 2*maxEndedSessions)
	}
	m2, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(context.Background())
	last := fmt.Sprintf("s%05d", 3*maxEndedSessions+6)
	if _, err := m2.Get(tenant, last); !errors.Is(err, ErrEnded) {
		t.Errorf("the latest ended session after a restart: %v", err)
	}
	if _, err := m2.Get(tenant, "s00000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest, past the bound: %v", err)
	}
}

// TestShutdownDuringCreate: a shutdown while a session's sandbox is being
// made (a secret's program minting) ends the making, which undoes itself,
// and waits for it; before, it closed an engine that did not exist yet
// and the daemon died of a nil pointer (found by a tester). The control:
// a create that is not interrupted makes its session.
func TestShutdownDuringCreate(t *testing.T) {
	started := make(chan struct{})
	var undone atomic.Bool
	var n atomic.Int32
	m := newManager(t, Config{Engine: func(ctx context.Context, spec *EngineSpec) (Engine, error) {
		if n.Add(1) == 1 {
			return newFake(ctx, spec)
		}
		close(started)
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond) // the undoing, waited for
		undone.Store(true)
		return nil, ctx.Err()
	}})
	if _, err := m.Create(context.Background(), TokenTenant("a"), &CreateRequest{}); err != nil {
		t.Fatalf("control: %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := m.Create(context.Background(), TokenTenant("a"), &CreateRequest{})
		errc <- err
	}()
	<-started
	if err := m.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if !undone.Load() {
		t.Error("shutdown returned before the create undid what it made")
	}
	if err := <-errc; !errors.Is(err, ErrDraining) {
		t.Errorf("the interrupted create: %v, want ErrDraining", err)
	}
}
