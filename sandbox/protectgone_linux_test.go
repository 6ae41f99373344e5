package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/sandbox"
)

// raceBackend removes paths on the host once the run is compiled and
// just before the backend builds the sandbox: what a process racing moat
// can do after Compile has checked that the paths exist, done every time.
type raceBackend struct {
	backend.Backend
	remove []string
}

func (r *raceBackend) Run(ctx context.Context, spec *backend.Spec, stdio backend.Stdio) (*backend.ExitStatus, error) {
	for _, p := range r.remove {
		if err := os.RemoveAll(p); err != nil {
			return nil, err
		}
	}
	return r.Backend.Run(ctx, spec, stdio)
}

// TestProtectionGoneBeforeMount: a filesystem.deny path (a file, a
// directory) or a filesystem.read_only path in a tree the command may
// write (the workspace, a read_write path) that exists when the run is
// compiled and is removed on the host before the sandbox is built fails
// the run, in every start and under gvisor: exit 125, an error naming the
// path and saying it disappeared, and the command does not run (before,
// the mount was skipped and the command could create the path and use
// it). The controls: with the paths there, the same run hides them and
// keeps the directory read-only, and without the rules the same probe
// reads and writes them; a deny and a read-only path outside every
// writable tree, removed the same way, are skipped and the run goes on.
func TestProtectionGoneBeforeMount(t *testing.T) {
	starts := []struct {
		name string
		be   backend.Backend
	}{
		{"direct", &native.Backend{}},
		{"forked direct", &native.Backend{ForkStart: true}},
		{"init stage", &native.Backend{InitStage: true}},
	}
	gv := ""
	if os.Geteuid() != 0 {
		gv = "runsc runs sandboxes for root only here; the run as root tests it"
	} else if _, err := gvisor.Find(""); err != nil {
		gv = err.Error()
	} else {
		starts = append(starts, struct {
			name string
			be   backend.Backend
		}{"gvisor", &gvisor.Backend{}})
	}

	// world is a fresh workspace, read_write path and directory outside
	// both, with every path the rules name there.
	type world struct{ ws, rw, outside string }
	newWorld := func(t *testing.T, isGVisor bool) world {
		w := world{t.TempDir(), t.TempDir(), t.TempDir()}
		for _, d := range []string{"secretdir", "conf"} {
			if err := os.Mkdir(filepath.Join(w.ws, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(w.outside, "ro"), 0o755); err != nil {
			t.Fatal(err)
		}
		for p, data := range map[string]string{
			filepath.Join(w.ws, "secret"):             "TOKEN\n",
			filepath.Join(w.ws, "secretdir", "inner"): "INNER\n",
			filepath.Join(w.rw, "x"):                  "RWTOKEN\n",
			filepath.Join(w.outside, "ro", "f"):       "F\n",
		} {
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if isGVisor {
			// runsc has no id-mapped mounts: the sandbox user owns what
			// it writes (as TestGVisorRuns).
			for _, d := range []string{w.ws, w.rw, filepath.Join(w.ws, "conf")} {
				os.Chown(d, 1000, 1000)
			}
		}
		return w
	}
	run := func(t *testing.T, be backend.Backend, w world, rules bool, remove ...string) (*sandbox.Report, string, error) {
		t.Helper()
		p := workspacePolicy(t, w.ws)
		p.Harness.Builtin = []string{} // no exec checks, which gvisor cannot make
		p.Filesystem.ReadWrite = append(p.Filesystem.ReadWrite, w.rw)
		if rules {
			p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(w.ws, "secret"), filepath.Join(w.ws, "secretdir"),
				filepath.Join(w.rw, "x"), filepath.Join(w.outside, "ro", "f"), "/nonexistent/x")
			p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, filepath.Join(w.ws, "conf"), filepath.Join(w.outside, "ro"))
		}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		probe := `cd ` + w.ws + ` && touch ran
cat secret 2>/dev/null || echo HIDDEN-FILE
cat secretdir/inner 2>/dev/null || echo HIDDEN-DIR
touch conf/new 2>/dev/null && echo WROTE-CONF || echo READONLY-CONF
cat ` + w.rw + `/x 2>/dev/null || echo HIDDEN-RW
echo done
# What a command that finds a protected path missing can do: make it.
{ echo planted > secret; echo planted > ` + w.rw + `/x; mkdir secretdir conf; } 2>/dev/null
true`
		var out, errb bytes.Buffer
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: &raceBackend{be, remove}, Policy: p,
			Args: []string{"/bin/sh", "-c", probe}}, backend.Stdio{Stdout: &out, Stderr: &errb})
		if rep == nil {
			t.Fatalf("nil report (err %v)", err)
		}
		return rep, out.String() + errb.String(), err
	}

	for _, s := range starts {
		t.Run(s.name, func(t *testing.T) {
			isGVisor := s.name == "gvisor"
			for _, c := range []struct{ what, rel string }{
				{"denied file", "secret"},
				{"denied directory", "secretdir"},
				{"read-only directory", "conf"},
				{"denied file in a read_write path", ""},
			} {
				w := newWorld(t, isGVisor)
				gone := filepath.Join(w.ws, c.rel)
				if c.rel == "" {
					gone = filepath.Join(w.rw, "x")
				}
				rep, out, err := run(t, s.be, w, true, gone)
				var ge *backend.GoneError
				if !errors.As(err, &ge) || ge.Path != gone || !strings.Contains(err.Error(), gone+" disappeared") {
					t.Errorf("%s removed before the mount: %v (output %q), want a GoneError naming %s", c.what, err, out, gone)
				}
				if rep.ExitCode != 125 || rep.Reason != "error" {
					t.Errorf("%s removed before the mount: exit %d, reason %q, want 125 error", c.what, rep.ExitCode, rep.Reason)
				}
				if _, err := os.Lstat(filepath.Join(w.ws, "ran")); err == nil {
					t.Errorf("%s removed before the mount: the command ran", c.what)
				}
				if _, err := os.Lstat(gone); err == nil {
					t.Errorf("%s removed before the mount: %s was created", c.what, gone)
				}
			}

			// The paths there: hidden and read-only.
			w := newWorld(t, isGVisor)
			rep, out, err := run(t, s.be, w, true)
			if err != nil || rep.ExitCode != 0 || out != "HIDDEN-FILE\nHIDDEN-DIR\nREADONLY-CONF\nHIDDEN-RW\ndone\n" {
				t.Errorf("the paths there: %v, exit %d, output %q, want them hidden and read-only", err, rep.ExitCode, out)
			}
			// Without the rules the probe reads and writes them.
			rep, out, err = run(t, s.be, w, false)
			if err != nil || rep.ExitCode != 0 || out != "TOKEN\nINNER\nWROTE-CONF\nRWTOKEN\ndone\n" {
				t.Errorf("without the rules: %v, exit %d, output %q, want the probe to read and write", err, rep.ExitCode, out)
			}
			// Outside every writable tree, a path gone since is no hole.
			w = newWorld(t, isGVisor)
			rep, out, err = run(t, s.be, w, true, filepath.Join(w.outside, "ro"))
			if err != nil || rep.ExitCode != 0 || !strings.HasSuffix(out, "done\n") {
				t.Errorf("a read-only and a denied path outside the writable trees removed: %v, exit %d, output %q, want the run to go on", err, rep.ExitCode, out)
			}
		})
	}
	if gv != "" {
		t.Logf("gvisor not tested: %s", gv)
	}
}

// raceLifecycle is raceBackend for a session: it removes the paths just
// before the backend builds the session's sandbox.
type raceLifecycle struct {
	*native.Backend
	remove []string
}

func (r *raceLifecycle) Create(ctx context.Context, spec *backend.Spec, stdio backend.Stdio) (backend.Instance, error) {
	for _, p := range r.remove {
		if err := os.RemoveAll(p); err != nil {
			return nil, err
		}
	}
	return r.Backend.Create(ctx, spec, stdio)
}

// TestOptionalBindGoneUnreachable: as root, a filesystem.read_only path
// outside every writable tree (an optional bind) removed on the host
// after the run was compiled is skipped, even where a directory above it
// is closed to the sandbox's user: root found it missing when it opened
// the trees, and nothing looks for it again with the user's rights (which
// failed the run with "permission denied"). A read_only path the command
// could create (a required bind) removed the same way fails naming the
// path, as missing (ENOENT), not as refused. The controls: with the paths
// there, the run sees the optional one and keeps the other read-only.
func TestOptionalBindGoneUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the trees are opened on the host by root only")
	}
	starts := []struct {
		name string
		be   backend.Backend
	}{
		{"direct", &native.Backend{}},
		{"forked direct", &native.Backend{ForkStart: true}},
		{"init stage", &native.Backend{InitStage: true}},
	}
	if _, err := gvisor.Find(""); err == nil {
		starts = append(starts, struct {
			name string
			be   backend.Backend
		}{"gvisor", &gvisor.Backend{}})
	} else {
		t.Logf("gvisor not tested: %v", err)
	}
	for _, s := range starts {
		t.Run(s.name, func(t *testing.T) {
			// closed is private to root (t.TempDir makes it 0700): the
			// sandbox's user cannot look inside.
			closed := t.TempDir()
			ro := filepath.Join(closed, "ro")
			ws := t.TempDir()
			conf := filepath.Join(ws, "conf")
			mk := func() {
				for _, d := range []string{ro, conf} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(ro, "f"), []byte("F\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if s.name == "gvisor" {
					// runsc has no id-mapped mounts: the sandbox user owns
					// what it writes (as TestGVisorRuns).
					for _, d := range []string{ws, conf} {
						os.Chown(d, 1000, 1000)
					}
				}
			}
			run := func(remove ...string) (*sandbox.Report, string, error) {
				t.Helper()
				p := workspacePolicy(t, ws)
				p.Harness.Builtin = []string{}
				p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, ro, conf)
				if err := p.Validate(); err != nil {
					t.Fatal(err)
				}
				probe := `cat ` + ro + `/f 2>/dev/null || echo NO-RO
touch ` + conf + `/new 2>/dev/null && echo WROTE-CONF || echo READONLY-CONF
echo done`
				var out, errb bytes.Buffer
				rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: &raceBackend{s.be, remove}, Policy: p,
					Args: []string{"/bin/sh", "-c", probe}}, backend.Stdio{Stdout: &out, Stderr: &errb})
				if rep == nil {
					t.Fatalf("nil report (err %v)", err)
				}
				return rep, out.String() + errb.String(), err
			}

			mk()
			if rep, out, err := run(); err != nil || rep.ExitCode != 0 || out != "F\nREADONLY-CONF\ndone\n" {
				t.Fatalf("control, the paths there: %v, exit %d, output %q", err, rep.ExitCode, out)
			}
			// The optional bind's source gone: skipped, the run goes on.
			if rep, out, err := run(ro); err != nil || rep.ExitCode != 0 || out != "NO-RO\nREADONLY-CONF\ndone\n" {
				t.Errorf("the optional bind's source removed: %v, exit %d, output %q, want it skipped", err, rep.ExitCode, out)
			}
			if nb, ok := s.be.(*native.Backend); ok && !nb.ForkStart && !nb.InitStage {
				// A session's sandbox, made the same way.
				p := workspacePolicy(t, ws)
				p.Harness.Builtin = []string{}
				p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, ro)
				if err := p.Validate(); err != nil {
					t.Fatal(err)
				}
				mk()
				sess, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Backend: &raceLifecycle{nb, []string{ro}}})
				if err != nil {
					t.Errorf("a session, the optional bind's source removed: %v, want it skipped", err)
				} else {
					if out, rep, err := sessionSh(t, sess, sandbox.ExecRequest{}, "ls "+ro+" 2>/dev/null || echo NO-RO"); err != nil || rep.ExitCode != 0 || out != "NO-RO\n" {
						t.Errorf("a session, the optional bind's source removed: %v, exit %d, output %q", err, rep.ExitCode, out)
					}
					sess.Close(context.Background())
				}
			}

			// The required bind's source gone: refused, naming it, missing.
			mk()
			rep, out, err := run(conf)
			var ge *backend.GoneError
			if !errors.As(err, &ge) || ge.Path != conf || !errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EACCES) {
				t.Errorf("the required bind's source removed: %v (output %q), want a GoneError naming %s", err, out, conf)
			}
			if rep.ExitCode != 125 {
				t.Errorf("the required bind's source removed: exit %d, want 125", rep.ExitCode)
			}
		})
	}
}
