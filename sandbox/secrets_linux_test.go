//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// apiServer is an HTTPS server for api.test whose certificate only the
// returned pool trusts; it answers with the Authorization header it got,
// which moat's proxy scrubs back to the placeholder on its way to the
// command, and saw returns the headers it got, the positive control that
// the value reached it.
func apiServer(t *testing.T) (port int, roots *x509.CertPool, saw func() []string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "api.test"}, DNSNames: []string{"api.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	var mu sync.Mutex
	var got []string
	saw = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprintf(w, "server-saw[%s]", r.Header.Get("Authorization"))
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	s.StartTLS()
	t.Cleanup(s.Close)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return s.Listener.Addr().(*net.TCPAddr).Port, roots, saw
}

// TestSecretNeverInside: a command uses a token it never holds. The
// server gets the real value (the positive control: the value exists and
// moat has it); inside, the variable holds a placeholder, the server's
// echo of the value reads as the placeholder, and the value is in no
// environment, file or process the command can read.
func TestSecretNeverInside(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port, roots, saw := apiServer(t)
	var b [8]byte
	rand.Read(b[:])
	half1, half2 := "s3cr3t-", hex.EncodeToString(b[:])
	value := half1 + half2
	t.Setenv("MOAT_TEST_API_TOKEN", value)

	p := policy.Default()
	p.Workspace.Path = t.TempDir()
	p.Network.Mode = policy.NetworkAllow
	p.Network.Allow = []string{"api.test"}
	p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
	p.Secrets = []policy.Secret{{Name: "API_TOKEN", Source: "env:MOAT_TEST_API_TOKEN", Hosts: []string{"api.test"}}}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(p.Workspace.Path, home); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`
echo "curl: $(curl -sS -m 10 -H "Authorization: Bearer $API_TOKEN" https://api.test:%d/)"
echo "placeholder: $API_TOKEN"
echo "bundle: $SSL_CERT_FILE"
v="%s""%s"
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f" 2>/dev/null | grep -q -F "$v" && echo "FOUND in $f"; done
for d in /etc /tmp /home /dev/shm /run /var/tmp "$PWD"; do grep -rsl -F "$v" "$d" 2>/dev/null | sed 's/^/FOUND in /'; done
mkdir -p /dev/shm/probe && printf '%%s' "$v" > /dev/shm/probe/x && grep -rsl -F "$v" /dev/shm/probe | sed 's/^/control: /'
`, port, half1, half2)
	req := &sandbox.Request{
		Backend: testBackend(), Policy: p, Args: []string{"/bin/sh", "-c", script}, SecretRoots: roots,
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == "api.test" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, errors.New("no such host (test resolver)")
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a.String())
		},
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	got := out.String()
	if !slices.Contains(saw(), "Bearer "+value) {
		t.Errorf("the server did not get the real token (it got %q):\n%s%s", saw(), got, errb.String())
	}
	if !strings.Contains(got, "curl: server-saw[Bearer moat-secret-api_token-") || strings.Contains(got, value) {
		t.Errorf("the server's echo of the value reached the command as something else than the placeholder:\n%s", got)
	}
	if !strings.Contains(got, "placeholder: moat-secret-api_token-") || !strings.Contains(got, "bundle: /etc/ssl/") && !strings.Contains(got, "bundle: /etc/pki/") {
		t.Errorf("inside, want the placeholder and the bundle:\n%s", got)
	}
	if strings.Contains(got, "FOUND") {
		t.Errorf("the secret's value is readable inside:\n%s", got)
	}
	if !strings.Contains(got, "control: /dev/shm/probe/x") {
		t.Errorf("the search inside finds nothing even where the value is (positive control):\n%s", got)
	}
	var intercepted bool
	for _, e := range rep.Network.Events {
		if e.Proto == "https-intercepted" && len(e.Secrets) == 1 && e.Secrets[0] == "API_TOKEN" {
			intercepted = true
		}
	}
	if !intercepted {
		t.Errorf("no intercepted request with secret API_TOKEN in the report: %+v", rep.Network.Events)
	}
	if strings.Contains(fmt.Sprintf("%+v", rep), value) {
		t.Errorf("the report carries the secret's value")
	}

	// A value moat cannot read refuses the run: nothing runs without it.
	t.Setenv("MOAT_TEST_API_TOKEN", "")
	req.Args = []string{"/bin/true"}
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{}); err == nil || !strings.Contains(err.Error(), "MOAT_TEST_API_TOKEN is empty") {
		t.Errorf("run without the value: %v, want a refusal", err)
	}
}

// TestSecretThroughTUN: a program that ignores the proxy variables and
// sends the placeholder to a secret's host through the TUN device gets the
// same interception: the server sees the value, the report the event.
func TestSecretThroughTUN(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	dir := tunDir(t)
	port, roots, saw := apiServer(t)
	value := "s3cr3t-through-tun"
	t.Setenv("MOAT_TEST_API_TOKEN", value)
	p := policy.Default()
	p.Workspace.Path = t.TempDir()
	p.Network.Mode = policy.NetworkAllow
	p.Network.Allow = []string{"api.test"}
	p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
	p.Secrets = []policy.Secret{{Name: "API_TOKEN", Source: "env:MOAT_TEST_API_TOKEN", Hosts: []string{"api.test"}}}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(p.Workspace.Path, home); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`curl --noproxy '*' -sS -m 10 -H "Authorization: Bearer $API_TOKEN" https://api.test:%d/`, port)
	req := &sandbox.Request{
		Backend: testBackend(), Policy: p, Args: []string{"/bin/sh", "-c", script}, SecretRoots: roots, TUNDir: dir,
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if got := saw(); len(got) != 1 || got[0] != "Bearer "+value {
		t.Errorf("the server saw %q, want the real token:\n%s", got, errb.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "server-saw[Bearer moat-secret-api_token-") {
		t.Errorf("the command got %q, want the server's echo with the placeholder", got)
	}
	var viaTUN, intercepted bool
	for _, e := range rep.Network.Events {
		viaTUN = viaTUN || e.Proto == egress.ProtoTCP && e.Host == "api.test" && e.Decision == egress.DecisionAllow
		intercepted = intercepted || e.Proto == "https-intercepted" && len(e.Secrets) == 1 && e.Secrets[0] == "API_TOKEN"
	}
	if !viaTUN || !intercepted {
		t.Errorf("want a TUN connection and an intercepted request in the report: %+v", rep.Network.Events)
	}
}

// TestSecretCommandSource: a token minted by a program on the host for one
// run reaches the server (the positive control), and the revoke program
// gets it on stdin once the run has ended; a source that fails refuses the
// run with its own message, and starts nothing.
func TestSecretCommandSource(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port, roots, saw := apiServer(t)
	dir := t.TempDir()
	mint := dir + "/mint"
	revoked := dir + "/revoked"
	if err := os.WriteFile(mint, []byte("#!/bin/sh\nif [ \"$1\" = fail ]; then echo 'login expired' >&2; exit 3; fi\necho \"minted-$$\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/revoke", []byte("#!/bin/sh\ncat >> revoked\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := policy.Default()
	p.Source = dir + "/policy.toml" // the programs run in the policy's directory
	p.Workspace.Path = t.TempDir()
	p.Network.Mode = policy.NetworkAllow
	p.Network.Allow = []string{"api.test"}
	p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
	p.Secrets = []policy.Secret{{Name: "API_TOKEN", Source: "command:./mint", Revoke: "./revoke", Hosts: []string{"api.test"},
		Header: "Authorization: Bearer {value}"}}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(p.Workspace.Path, home); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	req := &sandbox.Request{
		Backend: testBackend(), Policy: p, SecretRoots: roots,
		Args: []string{"/bin/sh", "-c", fmt.Sprintf(`curl -sS -m 10 https://api.test:%d/; echo; echo "inside: $API_TOKEN"`, port)},
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a.String())
		},
	}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	got := out.String()
	if s := saw(); len(s) != 1 || !strings.HasPrefix(s[0], "Bearer minted-") {
		t.Fatalf("the server did not get the minted token (it got %q):\n%s%s", s, got, errb.String())
	}
	minted := strings.TrimPrefix(saw()[0], "Bearer ")
	if strings.Contains(got, minted) || !strings.Contains(got, "inside: moat-secret-") || !strings.Contains(got, "server-saw[Bearer moat-secret-") {
		t.Errorf("inside, want the placeholder:\n%s", got)
	}
	b, err := os.ReadFile(revoked)
	if err != nil || strings.TrimSpace(string(b)) != minted {
		t.Errorf("revoke got %q (%v), want the minted %q", b, err, minted)
	}
	if w := secretWarnings(rep.Warnings); len(w) > 0 {
		t.Errorf("warnings: %q", w)
	}

	// A source that fails: the run is refused with the program's reason,
	// and nothing runs.
	p.Secrets[0].Source = "command:./mint fail"
	req.Args = []string{"/bin/sh", "-c", "echo ran"}
	out.Reset()
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out}); err == nil || !strings.Contains(err.Error(), "login expired") {
		t.Errorf("a failing source: %v, want a refusal naming its reason", err)
	}
	if out.Len() > 0 {
		t.Errorf("the command ran without its secret: %q", out.String())
	}

	// A revoke that fails is a warning on the report: the token may live.
	// Its stderr's last line is quoted without the value it quotes (it
	// reached the report and the audit log before).
	if err := os.WriteFile(dir+"/badrevoke", []byte("#!/bin/sh\nv=$(cat); echo \"revoke failed for token $v\" >&2; exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.Secrets[0].Source, p.Secrets[0].Revoke = "command:./mint", "./badrevoke"
	rep, err = sandbox.Run(context.Background(), req, backend.Stdio{})
	warned := strings.Join(rep.Warnings, "\n")
	if err != nil || !strings.Contains(warned, "revoking it failed") || !strings.Contains(warned, "revoke failed for token [value withheld]") || strings.Contains(warned, "minted-") {
		t.Errorf("a failing revoke: %v, warnings %q", err, rep.Warnings)
	}

	// A session mints once and revokes when it is closed.
	p.Secrets[0].Revoke = "./revoke"
	os.Remove(revoked)
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, SecretRoots: roots, Resolver: req.Resolver, Dial: req.Dial})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(revoked); err == nil {
		t.Errorf("revoked while the session lives")
	}
	if rep, err := s.Close(context.Background()); err != nil || len(secretWarnings(rep.Warnings)) > 0 {
		t.Errorf("close: %v %q", err, rep.Warnings)
	}
	if b, err := os.ReadFile(revoked); err != nil || !strings.HasPrefix(string(b), "minted-") {
		t.Errorf("the session's token was not revoked at close: %q %v", b, err)
	}
}

// secretWarnings keeps the warnings about secrets: a host without Landlock
// adds its own, which is not what these tests look at.
func secretWarnings(ws []string) []string {
	var out []string
	for _, w := range ws {
		if strings.Contains(w, "secret") || strings.Contains(w, "revok") || strings.Contains(w, "token") {
			out = append(out, w)
		}
	}
	return out
}

// TestSecretFileInView: a secret whose file the command would see (the
// workspace holds it: a relative source beside .moat.toml) is refused
// before anything runs; hidden by filesystem.deny, or kept outside every
// visible path, the same secret runs (the positive controls), and inside
// the file is gone.
func TestSecretFileInView(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(ws+"/tok.txt", []byte("WSSECRET-abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.WriteFile(outside+"/tok.txt", []byte("OUTSECRET-abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(ws+"/tok.txt", outside+"/link.txt")
	// A hard link in view of a file outside it: the other name is the
	// same file.
	if err := os.WriteFile(outside+"/hard.txt", []byte("HARDSECRET-abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside+"/hard.txt", ws+"/innocent.txt"); err != nil {
		t.Fatal(err)
	}
	run := func(source string, deny ...string) (string, error) {
		t.Helper()
		p := policy.Default()
		p.Source = ws + "/.moat.toml"
		p.Workspace.Path = ws
		p.Network.Mode = policy.NetworkAllow
		p.Network.Allow = []string{"api.test"}
		p.Filesystem.Deny = append(p.Filesystem.Deny, deny...)
		p.Secrets = []policy.Secret{{Name: "T", Source: source, Hosts: []string{"api.test"}, Header: "Authorization: Bearer {value}"}}
		home, _ := os.UserHomeDir()
		if err := p.Resolve(ws, home); err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		_, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p,
			Args: []string{"/bin/sh", "-c", "echo ran; cat " + ws + "/tok.txt 2>&1"}}, backend.Stdio{Stdout: &out, Stderr: &out})
		return out.String(), err
	}
	for _, tc := range []struct{ source, deny string }{{"file:tok.txt", ""}, {"file:" + outside + "/link.txt", ""}} {
		out, err := run(tc.source)
		if !errors.Is(err, sandbox.ErrRefused) || !strings.Contains(err.Error(), "filesystem.deny") {
			t.Errorf("%s: %v, want a refusal naming filesystem.deny", tc.source, err)
		}
		if out != "" {
			t.Errorf("%s: the command ran: %q", tc.source, out)
		}
	}
	if out, err := run("file:" + outside + "/hard.txt"); !errors.Is(err, sandbox.ErrRefused) || !strings.Contains(err.Error(), "hard links") || out != "" {
		t.Errorf("a file with a hard link in the workspace: %v %q, want a refusal naming its hard links", err, out)
	}
	out, err := run("file:tok.txt", ws+"/tok.txt")
	if err != nil || !strings.HasPrefix(out, "ran\n") || strings.Contains(out, "WSSECRET") {
		t.Errorf("denied: %v %q, want a run that cannot read the file", err, out)
	}
	out, err = run("file:" + outside + "/tok.txt")
	if err != nil || !strings.HasPrefix(out, "ran\n") {
		t.Errorf("outside: %v %q, want a run", err, out)
	}
}

// TestRulesInsideInterceptedTunnel: on a secret's host the proxy reads
// each request, so the host rules narrowed by method or path decide each
// request, not the tunnel: a deny of POST refused the whole tunnel before,
// GETs too, and an allow of GET never matched. Now GET reaches the server
// (the control), POST and a path the rule denies are refused with the
// rule named, each an audit decision, and a requests budget counts the
// requests, not the tunnel as well. A rule on the host alone is decided
// with the tunnel, once: its ask is not asked again for each request.
func TestRulesInsideInterceptedTunnel(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("needs curl")
	}
	port, roots, saw := apiServer(t)
	t.Setenv("MOAT_TEST_API_TOKEN", "s3cr3t-rules")
	p, err := policy.Parse("rules.toml", []byte(`
[network]
mode = "allow"
allow = ["api.test"]
allow_cidrs = ["127.0.0.0/8"]

[harness]
builtin = []

[budgets]
requests = { "api.test" = 3 }

[[rules]]
name = "ask-api"
match = { host = "api.test" }
decision = "ask"

[[rules]]
name = "no-writes"
match = { host = "api.test", method = "POST" }
decision = "deny"

[[rules]]
name = "no-admin"
match = { host = "api.test", path = "/admin/**" }
decision = "deny"

[[secrets]]
name = "API_TOKEN"
source = "env:MOAT_TEST_API_TOKEN"
hosts = ["api.test"]
`))
	if err != nil {
		t.Fatal(err)
	}
	p.Workspace.Path = t.TempDir()
	home, _ := os.UserHomeDir()
	if err := p.Resolve(p.Workspace.Path, home); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("https://api.test:%d", port)
	script := fmt.Sprintf(`c() { curl -sS -m 10 -o /dev/null -w '%%{http_code} ' -H "Authorization: Bearer $API_TOKEN" "$@"; }
c %[1]s/a; c -X POST %[1]s/a; c %[1]s/admin/x; c %[1]s/b; c %[1]s/c; c %[1]s/d`, u)
	var decisions []string
	ap := &syncApprover{yes: true}
	req := &sandbox.Request{
		Backend: testBackend(), Policy: p, Args: []string{"/bin/sh", "-c", script}, SecretRoots: roots,
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		AuditDecision: func(d audit.Decision) error {
			decisions = append(decisions, d.Verdict+" "+strings.Join(d.Command, " "))
			return nil
		},
		Approver: ap,
	}
	var out, errb bytes.Buffer
	if _, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	// GET /a, /b and /c pass; POST and /admin are refused by their
	// rules; GET /d is the fourth request the rules let through, past the
	// budget of 3 (the refused ones, and the tunnels, are not counted).
	if got, want := out.String(), "200 403 403 200 200 403 "; got != want {
		t.Errorf("statuses %q, want %q\n%s", got, want, errb.String())
	}
	if n := len(saw()); n != 3 {
		t.Errorf("the server got %d requests, want 3 (GET /a, /b, /c)", n)
	}
	// The host's own ask is asked once per tunnel (a curl each), not
	// again for the request inside it.
	if n := len(ap.asked); n != 6 {
		t.Errorf("asked %d times, want 6 (one per tunnel): %q", n, ap.asked)
	}
	joined := strings.Join(decisions, "\n")
	if !strings.Contains(joined, "deny POST api.test:") || !strings.Contains(joined, "deny GET api.test:") {
		t.Errorf("audit decisions:\n%s\nwant the POST and the /admin GET denied", joined)
	}
}
