package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
)

func writeTemplates(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, doc := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadTemplates(t *testing.T) {
	dir := writeTemplates(t, map[string]string{
		"py.toml":   "[limits]\nmemory = \"256MiB\"\n",
		"ro.json":   `{"workspace": {"mode": "readonly"}}`,
		"README.md": "not a template",
	})
	tpls, err := LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tpls) != 2 || tpls["py"] == nil || tpls["ro"] == nil {
		t.Fatalf("templates = %v", tpls)
	}

	// Every problem of every file, located.
	bad := writeTemplates(t, map[string]string{
		"a.toml":    "[limits]\nmemroy = 1\n",
		"b.toml":    "[workspace]\npath = \"/srv\"\n",
		"c.json":    "{\n \"limits\": {\"memory\": \"1KiB\"}}",
		"Bad!.toml": "",
		"dup.toml":  "",
		"dup.json":  "{}",
		"fine.toml": "",
	})
	os.Mkdir(filepath.Join(bad, "dir.toml"), 0o700)
	_, err = LoadTemplates(bad)
	for _, want := range []string{
		"a.toml:2: limits.memroy: unknown key",
		"b.toml:2: workspace.path: a template leaves it out",
		"c.json:2: limits.memory:",
		"Bad!.toml: a template's name",
		`template "dup" is defined twice`,
		"dir.toml: not a regular file",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwants %q", err, want)
		}
	}
	if _, err := LoadTemplates(t.TempDir()); err == nil {
		t.Error("an empty directory of templates was accepted")
	}
}

func TestTemplateSessions(t *testing.T) {
	tpls, err := LoadTemplates(writeTemplates(t, map[string]string{"wide.toml": "[filesystem]\nread_only = [\"/srv\"]\n"}))
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, Config{Templates: tpls})
	tenant := TokenTenant("a")
	// The template is the owner's choice: it may read /srv, which a
	// tenant's own policy may not.
	s, err := m.Create(context.Background(), tenant, &CreateRequest{Template: "wide"})
	if err != nil {
		t.Fatal(err)
	}
	if ro := s.Policy().Filesystem.ReadOnly; len(ro) != 1 || ro[0] != "/srv" {
		t.Errorf("read_only = %v", ro)
	}
	if _, err := m.Create(context.Background(), tenant, &CreateRequest{Policy: "[filesystem]\nread_only = [\"/srv\"]\n"}); !errors.Is(err, ErrPolicyRefused) {
		t.Errorf("the same policy inline: %v, want refused", err)
	}
	if _, err := m.Create(context.Background(), tenant, &CreateRequest{Template: "nope"}); !errors.Is(err, ErrNoTemplate) {
		t.Errorf("unknown template: %v", err)
	}
	if _, err := m.Create(context.Background(), tenant, &CreateRequest{Template: "wide", Policy: "[limits]\n"}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("template and policy: %v", err)
	}
	// An inline policy may be JSON, with the same errors.
	s, err = m.Create(context.Background(), tenant, &CreateRequest{Policy: `{"limits": {"memory": "64MiB"}}`})
	if err != nil || s.Policy().Limits.Memory != 64*policy.MiB {
		t.Errorf("JSON policy: %v", err)
	}
	_, err = m.Create(context.Background(), tenant, &CreateRequest{Policy: "{\n\"limits\": {\"memroy\": 1}}"})
	var pe *policy.Errors
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "policy:2: limits.memroy") {
		t.Errorf("bad JSON policy: %v", err)
	}
}

func waitPool(t *testing.T, m *Manager, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.PoolSizes()[name] != n {
		if time.Now().After(deadline) {
			t.Fatalf("pool %s has %d, want %d", name, m.PoolSizes()[name], n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPool(t *testing.T) {
	tpls, err := LoadTemplates(writeTemplates(t, map[string]string{"py.toml": "[limits]\nmemory = \"64MiB\"\n", "cold.toml": "[limits]\nmemory = \"64MiB\"\n"}))
	if err != nil {
		t.Fatal(err)
	}
	tpls["py"].Pool = 3
	var mu sync.Mutex
	made := 0
	engine := func(ctx context.Context, spec *EngineSpec) (Engine, error) {
		mu.Lock()
		made++
		mu.Unlock()
		return newFake(ctx, spec)
	}
	m := newManager(t, Config{Templates: tpls, Engine: engine, Tick: 10 * time.Millisecond, TenantMemory: 128 << 20, MaxSessions: 4})
	waitPool(t, m, "py", 3)
	if sz := m.PoolSizes(); len(sz) != 1 {
		t.Errorf("pool sizes = %v, want py only", sz)
	}
	// Pooled sessions are nobody's: no list, no quota, no count.
	if m.Count() != 0 || len(m.List(TokenTenant("a"))) != 0 {
		t.Errorf("pooled sessions are visible: %d", m.Count())
	}
	recs, _ := os.ReadDir(filepath.Join(m.dir, "sessions"))
	if len(recs) != 3 {
		t.Errorf("%d records for 3 pooled sessions", len(recs))
	}

	a := TokenTenant("a")
	s, err := m.Create(context.Background(), a, &CreateRequest{Template: "py", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tenant != a || s.template != "py" || time.Until(s.Expires) < 50*time.Second || !s.TempWorkspace {
		t.Errorf("claimed session = %+v", s)
	}
	if got, err := m.Get(a, s.ID); err != nil || got != s {
		t.Errorf("Get of a claimed session: %v", err)
	}
	// Refilled in the background.
	waitPool(t, m, "py", 3)

	// Claims count in the quotas: the memory quota holds two.
	if _, err := m.Create(context.Background(), a, &CreateRequest{Template: "py"}); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m, "py", 3)
	mu.Lock()
	before := made
	mu.Unlock()
	if _, err := m.Create(context.Background(), a, &CreateRequest{Template: "py"}); !errors.Is(err, ErrQuota) {
		t.Errorf("third claim: %v, want the memory quota", err)
	}
	// A refused claim costs no sandbox: the pool keeps its three.
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	if made != before || m.PoolSizes()["py"] != 3 {
		t.Errorf("a refused claim made %d sandboxes; pool %d", made-before, m.PoolSizes()["py"])
	}
	mu.Unlock()

	// A request that differs is made cold.
	b := TokenTenant("b")
	s2, err := m.Create(context.Background(), b, &CreateRequest{Template: "py", WorkspaceMode: "readonly"})
	if err != nil || s2.WorkspaceMode != "readonly" {
		t.Fatalf("readonly from the template: %v", err)
	}
	if m.PoolSizes()["py"] != 3 {
		t.Errorf("a request with another mode took a pooled session")
	}

	// Shutdown ends the pooled sessions too, and leaves no record or workspace.
	dir := m.dir
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"sessions", "workspaces"} {
		if ents, _ := os.ReadDir(filepath.Join(dir, sub)); len(ents) != 0 {
			t.Errorf("%s left after Shutdown: %d", sub, len(ents))
		}
	}
}

func TestPoolReapedAfterCrash(t *testing.T) {
	tpls, _ := LoadTemplates(writeTemplates(t, map[string]string{"x.toml": ""}))
	tpls["x"].Pool = 2
	state := t.TempDir()
	m, err := New(Config{StateDir: state, Templates: tpls, Engine: newFake, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitPool(t, m, "x", 2)
	crash(m)
	m2, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(context.Background())
	if len(m2.Reaped) != 2 {
		t.Errorf("reaped %v, want the 2 pooled sessions", m2.Reaped)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "daemon", "workspaces")); len(ents) != 0 {
		t.Errorf("%d workspaces left", len(ents))
	}
}

// TestPoolMatches: only a request that sets nothing a claim cannot honour
// takes a pooled session.
func TestPoolMatches(t *testing.T) {
	m := &Manager{cfg: Config{Templates: map[string]*Template{"p": {Name: "p", Pool: 1}, "cold": {Name: "cold"}}}}
	tok := TokenTenant("a")
	for _, tc := range []struct {
		req  CreateRequest
		want bool
	}{
		{CreateRequest{Template: "p"}, true},
		{CreateRequest{Template: "p", WorkspaceMode: "overlay", TTL: time.Minute, IdleTimeout: time.Second}, true},
		{CreateRequest{Template: "cold"}, false},
		{CreateRequest{Template: "nope"}, false},
		{CreateRequest{Template: "p", Workspace: "/w"}, false},
		{CreateRequest{Template: "p", Policy: "x"}, false},
		{CreateRequest{Template: "p", NetworkEvents: func(egress.Event) {}}, false},
	} {
		if got := m.poolMatches(tok, &tc.req); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.req, got, tc.want)
		}
	}
	// A local user other than root, served by root, has its workspace given
	// to it: never from the pool.
	if os.Geteuid() == 0 && m.poolMatches(UIDTenant(1000), &CreateRequest{Template: "p"}) {
		t.Error("uid 1000 of a root daemon matched the pool")
	}
}

// TestPoolBackoff: a template that keeps failing is tried later and
// later, up to a bound; the first retry is as soon as before.
func TestPoolBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: poolRetry, 2: 2 * poolRetry, 3: 4 * poolRetry, 100: poolRetryMax} {
		if got := poolBackoff(n); got != want {
			t.Errorf("poolBackoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestTemplateQuotas: under a tenant CPU or memory quota, a template that
// leaves the limit unset could never be used (a request naming it sends
// no policy to set it with): the daemon refuses to start, naming it. The
// control: templates that set the limit start.
func TestTemplateQuotas(t *testing.T) {
	dir := writeTemplates(t, map[string]string{"small.toml": "[limits]\nmemory = \"256MiB\"\n"})
	tpls, err := LoadTemplates(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{StateDir: t.TempDir(), Templates: tpls, TenantCPUs: 2, Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "template small") || !strings.Contains(err.Error(), "limits.cpus") {
		t.Fatalf("a template without limits.cpus under --tenant-cpus: %v", err)
	}
	m, err := New(Config{StateDir: t.TempDir(), Templates: tpls, TenantMemory: 1 << 30, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("a template with limits.memory under --tenant-memory: %v", err)
	}
	m.Shutdown(context.Background())
}

// TestReapedSessionGone: a session a new daemon reaped is ended to its
// tenant (ErrEnded, saying why), as one that ended under the same daemon
// is; it answered not found. Another tenant still learns nothing of it
// (ErrNotFound), nor does anyone of an id never made.
func TestReapedSessionGone(t *testing.T) {
	state := t.TempDir()
	m, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	owner, other := TokenTenant("a"), TokenTenant("b")
	s, err := m.Create(context.Background(), owner, &CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	crash(m)
	m2, err := New(Config{StateDir: state, Engine: newFake})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Shutdown(context.Background())
	if _, err := m2.Get(owner, s.ID); !errors.Is(err, ErrEnded) || !strings.Contains(err.Error(), "reaped") {
		t.Errorf("its tenant's get of the reaped session: %v, want ErrEnded saying it was reaped", err)
	}
	if _, err := m2.Get(other, s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's get: %v, want ErrNotFound", err)
	}
	if _, err := m2.Get(owner, "0123456789ab"); !errors.Is(err, ErrNotFound) {
		t.Errorf("control: an id never made: %v, want ErrNotFound", err)
	}
}

// crash stops m as a daemon that dies does: its records stay, only its
// lock is released.
func crash(m *Manager) {
	close(m.stop)
	m.ticker.Wait()
	m.lock.Close()
}

// TestPoolRecordsRevokes: a pooled session's record names the secrets it
// would revoke, as a created one's does, so that the daemon that reaps it
// after a crash says which tokens stay valid (found by a tester: a
// pooled session's record named none). The control: a template without
// one records none.
func TestPoolRecordsRevokes(t *testing.T) {
	tpls, err := LoadTemplates(writeTemplates(t, map[string]string{
		"sec.toml":   "[network]\nmode = \"allow\"\nallow = [\"example.com\"]\n\n[[secrets]]\nname = \"TOK\"\nsource = \"command:/bin/echo v\"\nhosts = [\"example.com\"]\nrevoke = \"/bin/true\"\n",
		"plain.toml": "",
	}))
	if err != nil {
		t.Fatal(err)
	}
	tpls["sec"].Pool, tpls["plain"].Pool = 1, 1
	m := newManager(t, Config{Templates: tpls, Tick: 10 * time.Millisecond})
	waitPool(t, m, "sec", 1)
	waitPool(t, m, "plain", 1)
	ents, _ := os.ReadDir(filepath.Join(m.cfg.StateDir, "daemon", "sessions"))
	with := 0
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(m.cfg.StateDir, "daemon", "sessions", e.Name()))
		var r record
		if json.Unmarshal(b, &r) == nil && slices.Equal(r.Revoke, []string{"TOK"}) {
			with++
		}
	}
	if len(ents) != 2 || with != 1 {
		t.Errorf("%d records, %d naming TOK; want 2 and 1", len(ents), with)
	}
}
