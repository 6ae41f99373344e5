package sandbox

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/internal/inputfile"
	"github.com/moatbox/moat/policy"
)

// caBundles are where distributions keep the system's CA bundle: the
// first that exists is the one the sandbox sees with the run's CA added.
var caBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",             // openSUSE
	"/etc/ssl/cert.pem",                  // others
}

// caEnv are the variables programs read their trust store from; each
// names the bundle with the run's CA in it.
var caEnv = []string{
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
	"GIT_SSL_CAINFO", "PIP_CERT", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE",
}

// maxSecret bounds a secret read from a file.
const maxSecret = 64 << 10

// secretCommandTimeout bounds each program a secret's "command:" source
// or its revoke runs: a run must not hang on a credential helper.
const secretCommandTimeout = 10 * time.Second

// runSecrets are a run's secrets: their placeholders for the sandbox and
// the compiled set for the proxy.
type runSecrets struct {
	set  *egress.Secrets
	list []egress.Secret
	// revokes are the programs to run when the run or session ends, with
	// the value they revoke and where to run them.
	revokes []revoke
	// verify checks, before each program runs, that the programs of a
	// trusted policy are still what its trust checked
	// (policy.Policy.VerifyPrograms).
	verify func() error
	// checked is the digest that check took of a program by path
	// (policy.Policy.CheckedDigest): an ELF binary runs from a copy of
	// the bytes that match it (pinnedProgram).
	checked func(path string) (string, bool)
}

type revoke struct {
	name, value, dir, runDir string
	argv                     []string
}

// loadSecrets reads the value of each of the policy's secrets on the host
// and gives it a fresh placeholder. A value that cannot be read fails the
// run: the command would otherwise run without the credential it was
// promised, or with an empty one.
//
// ctx ends the programs that read values (a run interrupted while one
// runs); the programs that revoke them run to their end, as the values
// they revoke were handed out.
func loadSecrets(ctx context.Context, p *policy.Policy, cwd string, roots *x509.CertPool) (*runSecrets, error) {
	if len(p.Secrets) == 0 {
		return nil, nil
	}
	if err := p.CheckSecretDir(cwd); err != nil {
		return nil, err
	}
	// The programs start in the policy's directory, as the paths it
	// gives are relative to it. A policy with none (one sent to the
	// daemon) has them start at /: neither the daemon's working
	// directory, which the policy's author did not choose, nor the
	// workspace, whose files a program there may read as its own
	// configuration (git's, a .npmrc) while it runs on the host.
	dir := p.SecretDir(cwd)
	if dir == "" {
		dir = "/"
	}
	// A directory the sandbox's commands may write (a workspace's own
	// .moat.toml's is the workspace) is not where a program starts: what
	// it reads there unnamed ("python3 -m mint", a script's ./lib.sh, a
	// tool's own config) is not what trust hashed, and a command could
	// have written it for the host to run. It starts at /, its names
	// given by their absolute paths (anchored).
	runDir := dir
	if writableBySandbox(p, dir) {
		runDir = "/"
	}
	rs := &runSecrets{verify: p.VerifyPrograms, checked: p.CheckedDigest}
	// A source that fails is named by the policy's file and line.
	srcErr := func(i int, err error) error {
		field := fmt.Sprintf("secrets[%d].source", i)
		err = fmt.Errorf("%s: %w", p.Secrets[i].Name, err)
		if fe := p.FieldErr(field, err); fe != err {
			return fe
		}
		return fmt.Errorf("%s: %w", field, err)
	}
	for i, s := range p.Secrets {
		var val string
		scheme, rest, _ := strings.Cut(s.Source, ":")
		switch scheme {
		case "env":
			v, ok := os.LookupEnv(rest)
			if !ok || v == "" {
				rs.revokeAll()
				how := "is not set"
				if ok {
					how = "is empty"
				}
				return nil, srcErr(i, fmt.Errorf("the environment variable %s %s in moat's environment", rest, how))
			}
			val = v
		case "command":
			if err := rs.verify(); err != nil {
				rs.revokeAll()
				return nil, srcErr(i, err)
			}
			out, err := secretCommand(ctx, strings.Fields(rest), dir, runDir, "", rs.checked)
			if err != nil {
				// What it printed before it failed (timed out, was
				// interrupted) may be a live token: revoked too (found
				// by a tester).
				if v := strings.TrimSpace(out); v != "" && s.Revoke != "" {
					rs.revokes = append(rs.revokes, revoke{name: s.Name, value: v, dir: dir, runDir: runDir, argv: strings.Fields(s.Revoke)})
				}
				rs.revokeAll()
				return nil, srcErr(i, fmt.Errorf("source %s: %w", rest, err))
			}
			val = strings.TrimSuffix(strings.TrimSuffix(out, "\n"), "\r")
			if val == "" {
				rs.revokeAll()
				return nil, srcErr(i, fmt.Errorf("source %s printed nothing", rest))
			}
			if s.Revoke != "" {
				rs.revokes = append(rs.revokes, revoke{name: s.Name, value: val, dir: dir, runDir: runDir, argv: strings.Fields(s.Revoke)})
			}
		case "file":
			f := p.SecretFile(s, cwd)
			if err := checkSecretFileHidden(p, f); err != nil {
				rs.revokeAll()
				return nil, srcErr(i, err)
			}
			b, err := inputfile.Read(f, "secret file", maxSecret)
			if err != nil {
				rs.revokeAll()
				return nil, srcErr(i, err)
			}
			val = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			if val == "" {
				rs.revokeAll()
				return nil, srcErr(i, fmt.Errorf("%s is empty", f))
			}
		default:
			rs.revokeAll()
			return nil, srcErr(i, fmt.Errorf("unknown source %q", s.Source))
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			rs.revokeAll()
			return nil, srcErr(i, errors.New("the value contains a line break or NUL, which no header can carry"))
		}
		rs.list = append(rs.list, egress.Secret{Name: s.Name, Placeholder: egress.NewPlaceholder(s.Name), Value: val,
			Hosts: s.Hosts, Methods: s.Methods, Paths: s.Paths, Header: s.Header, Query: s.Query})
	}
	set, err := egress.NewSecrets(rs.list, roots)
	if err != nil {
		rs.revokeAll()
		return nil, err
	}
	rs.set = set
	return rs, nil
}

// secretCommand runs argv on the host (no shell; a relative program with
// a slash is relative to dir) in runDir with stdin, and returns its
// stdout (with an error too, what it printed, unless that was more than a
// value may be). Its program and each argument that names a file in dir (as
// trust hashed them) are given by their absolute paths (anchored). A
// non-zero exit, a timeout or more output than a secret may be fails,
// naming the program's last line of stderr; the output is never part of
// an error. A program whose bytes checked (nil for none) has a digest of
// runs from a sealed copy of them when it can (pinnedProgram), and not at
// all if they no longer match.
//
// The program leads a process group of its own: when ctx ends, its time
// is up, or it fails, the whole group is killed, so what it started in
// the background does not stay on the host (a child that left the group,
// a daemon, is its own).
func secretCommand(ctx context.Context, argv []string, dir, runDir, stdin string, checked func(string) (string, bool)) (string, error) {
	abs, args := anchored(argv, dir)
	prog := argv[0]
	if runDir != dir {
		prog = abs
	} else {
		args = argv
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, secretCommandTimeout)
	defer cancel()
	var pinned *os.File
	if checked != nil && strings.Contains(abs, "/") {
		if d, ok := checked(filepath.Clean(abs)); ok {
			f, err := pinnedProgram(abs, d)
			if err != nil {
				return "", err
			}
			if f != nil {
				defer f.Close()
				pinned = f
			}
		}
	}
	out := &cappedBuffer{max: maxSecret}
	errb := &cappedBuffer{max: 4 << 10}
	newCmd := func(pinned *os.File) *exec.Cmd {
		cmd := exec.CommandContext(ctx, prog, args[1:]...)
		// argv[0] stays as the policy gave it, wherever the program is
		// found.
		cmd.Args[0] = argv[0]
		if pinned != nil {
			// The copy is the child's fd 3.
			cmd.Path = "/proc/self/fd/3"
			cmd.ExtraFiles = []*os.File{pinned}
		}
		cmd.Dir = runDir
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = out, errb
		cmd.WaitDelay = time.Second
		cmd.SysProcAttr = procAttr()
		cmd.Cancel = func() error { return killGroup(cmd) }
		return cmd
	}
	// Pdeathsig is the forking thread's: held by this goroutine until the
	// program is reaped, no other goroutine's exit can end the thread
	// (and the program with it) first.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := newCmd(pinned)
	err := cmd.Start()
	if err != nil && pinned != nil {
		// A host that will not run a program from memory (a security
		// module's rule) runs it by path, checked a moment ago.
		cmd = newCmd(nil)
		err = cmd.Start()
	}
	if err == nil {
		err = cmd.Wait()
		if err != nil || ctx.Err() != nil {
			killGroup(cmd)
		}
	}
	// With an error, what the program printed (a token it minted before
	// it failed, for its revoke), but for more than a value may be.
	printed := out.String()
	if out.over {
		printed = ""
	}
	switch {
	case parent.Err() != nil:
		return printed, fmt.Errorf("%s: %w", argv[0], context.Cause(parent))
	case ctx.Err() != nil:
		return printed, fmt.Errorf("%s did not finish within %v", argv[0], secretCommandTimeout)
	case errors.Is(err, exec.ErrWaitDelay):
		return printed, fmt.Errorf("%s exited, but left a process holding its output open (redirect a background process's output)", argv[0])
	case out.over:
		return "", fmt.Errorf("%s printed more than %d bytes", argv[0], maxSecret)
	case err != nil:
		last := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		// The line may quote the value: the one a revoke program was
		// given, or the one a source printed before it failed. It goes
		// into warnings, the report and the audit log, never the value.
		last = withheld(last, stdin, out.String())
		if last != "" {
			return printed, fmt.Errorf("%w: %s", err, last)
		}
		return printed, err
	}
	return out.String(), nil
}

// withheld returns line with each value in values, whole and each of its
// lines, replaced by "[value withheld]": a program that printed more
// than one line before it failed may quote any of them.
func withheld(line string, values ...string) string {
	var parts []string
	for _, v := range values {
		parts = append(parts, strings.TrimSpace(v))
		parts = append(parts, strings.Split(v, "\n")...)
		// The value as a program's error may quote it: JSON- or
		// Go-escaped, percent-encoded (found by a tester: a revoke
		// that printed the value JSON-escaped showed it).
		v = strings.TrimSpace(v)
		if b, err := json.Marshal(v); err == nil {
			parts = append(parts, strings.Trim(string(b), `"`))
		}
		parts = append(parts, strings.Trim(strconv.Quote(v), `"`), url.QueryEscape(v), url.PathEscape(v))
	}
	// The longest first, so that a line inside a value does not leave
	// the rest of the value shown.
	slices.SortFunc(parts, func(a, b string) int { return len(b) - len(a) })
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			line = strings.ReplaceAll(line, p, "[value withheld]")
		}
	}
	return line
}

// killGroup kills the process group cmd's program leads.
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// cappedBuffer keeps the first max bytes written to it and notes more.
// The buffer is a field, not embedded: an embedded bytes.Buffer's
// ReadFrom, which io.Copy prefers to Write, read a program's whole output
// past the cap (found by a tester: a 300 MB secret was taken whole).
type cappedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.over = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *cappedBuffer) String() string { return c.buf.String() }

// revokeAll runs every revoke program once, each with the value it
// revokes on stdin, and returns a warning for each that failed: the
// token it was for may still be valid, and the person must know.
func (rs *runSecrets) revokeAll() []string {
	if rs == nil {
		return nil
	}
	var warn []string
	for _, r := range rs.revokes {
		if err := rs.verify(); err != nil {
			warn = append(warn, fmt.Sprintf("secret %s: not revoked: %v; the value it minted may still be valid: revoke it by hand", r.name, err))
			continue
		}
		if _, err := secretCommand(context.Background(), r.argv, r.dir, r.runDir, r.value+"\n", rs.checked); err != nil {
			warn = append(warn, fmt.Sprintf("secret %s: revoking it failed (%v): the value it minted may still be valid: revoke it by hand", r.name, err))
		}
	}
	rs.revokes = nil
	return warn
}

// apply gives the sandbox the placeholders and the run's CA: each
// secret's variable holds its placeholder, the system's CA bundle is
// shown with the CA added, and the variables programs read a trust store
// from name it. It refuses a Spec whose environment would carry a
// secret's value under another name ([env] pass of a variable that holds
// it): the value must never be inside.
func (rs *runSecrets) apply(spec *backend.Spec) error {
	if rs == nil {
		return nil
	}
	bundle := ""
	var system []byte
	for _, b := range caBundles {
		data, err := inputfile.Read(b, "CA bundle", 16<<20)
		if err == nil {
			bundle, system = b, data
			break
		}
	}
	if bundle == "" {
		return fmt.Errorf("%w: secrets need the system's CA bundle (one of %s) to add the run's CA to; install ca-certificates", ErrRefused, strings.Join(caBundles, ", "))
	}
	data := string(system)
	if !strings.HasSuffix(data, "\n") && data != "" {
		data += "\n"
	}
	data += string(rs.set.CACertPEM())
	spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountFile, Target: bundle, Data: data})

	set := map[string]string{}
	for _, s := range rs.list {
		set[s.Name] = s.Placeholder
	}
	for _, v := range caEnv {
		set[v] = bundle
	}
	env := spec.Env[:0:0]
	for _, kv := range spec.Env {
		name, val, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; ok {
			continue
		}
		for _, s := range rs.list {
			if strings.Contains(val, s.Value) {
				return fmt.Errorf("%w: the environment variable %s, which [env] passes into the sandbox, holds the value of secret %s; remove it from env.pass or env.set", ErrRefused, name, s.Name)
			}
		}
		env = append(env, kv)
	}
	for _, s := range rs.list {
		env = append(env, s.Name+"="+s.Placeholder)
	}
	for _, v := range caEnv {
		env = append(env, v+"="+bundle)
	}
	spec.Env = env
	return nil
}

// CheckFetchURL refuses a fetch of u the caller would make for the
// session on the host that carries one of its secrets' placeholders
// (egress.Secrets.CheckFetchURL); nil without secrets.
func (s *Session) CheckFetchURL(u *url.URL) error {
	if s.secrets == nil || s.secrets.set == nil {
		return nil
	}
	return s.secrets.set.CheckFetchURL(u)
}

// ScrubFetched puts each of the session's secrets' placeholder in place of
// its value in r, a fetch the caller made for the session on the host
// (egress.Secrets.ScrubFetched); nothing to do without secrets.
func (s *Session) ScrubFetched(r *egress.FetchResult) error {
	if s.secrets == nil || s.secrets.set == nil {
		return nil
	}
	return s.secrets.set.ScrubFetched(r)
}

// ScrubText puts each of the session's secrets' placeholder in place of
// its value in v, a text a server chose that a fetch's refusal quotes
// (egress.Fetcher.Scrub); v as it is without secrets.
func (s *Session) ScrubText(v string) string {
	if s.secrets == nil || s.secrets.set == nil {
		return v
	}
	return s.secrets.set.ScrubText(v)
}

// anchored is argv's program, absolute when named by a relative path
// (relative to dir), and argv with each argument that names a file in
// dir (as trust hashes them: not an option) made absolute: the program
// may run elsewhere than dir.
func anchored(argv []string, dir string) (string, []string) {
	if dir == "" || len(argv) == 0 {
		return argv[0], argv
	}
	prog := argv[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(dir, prog)
	}
	out := slices.Clone(argv)
	for i, a := range out[1:] {
		if strings.HasPrefix(a, "-") || filepath.IsAbs(a) {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, a)); err == nil {
			out[i+1] = filepath.Join(dir, a)
		}
	}
	return prog, out
}

// writableBySandbox says whether dir is in a tree the policy's commands
// may write: the workspace (unless read-only) or a read_write path, as
// written or with links resolved.
func writableBySandbox(p *policy.Policy, dir string) bool {
	var trees []string
	if p.Workspace.Mode != policy.WorkspaceReadOnly {
		trees = append(trees, p.Workspace.Path)
	}
	trees = append(trees, p.Filesystem.ReadWrite...)
	for _, t := range trees {
		if t != "" && (within(t, dir) || within(realPath(t), realPath(dir))) {
			return true
		}
	}
	return false
}
