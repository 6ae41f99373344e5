//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// netWorld is a small internet on loopback: an HTTP and an HTTPS server
// and a git smart-HTTP server, and names pointing at them (or at private
// addresses) through the proxy's resolver hook. The dial hook refuses
// anything but loopback, so nothing leaves the machine whatever happens.
type netWorld struct {
	httpPort, httpsPort, gitPort int
	names                        map[string]netip.Addr

	mu     sync.Mutex
	events []egress.Event
	dialed []netip.AddrPort
}

func newNetWorld(t *testing.T) *netWorld {
	t.Helper()
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "PAGE-FROM-"+r.Host) })
	hs := httptest.NewServer(page)
	t.Cleanup(hs.Close)
	tls := httptest.NewTLSServer(page)
	t.Cleanup(tls.Close)
	w := &netWorld{
		httpPort:  hs.Listener.Addr().(*net.TCPAddr).Port,
		httpsPort: tls.Listener.Addr().(*net.TCPAddr).Port,
		names: map[string]netip.Addr{
			"allowed.test": netip.MustParseAddr("127.0.0.1"),
			"denied.test":  netip.MustParseAddr("127.0.0.1"),
			"ten.test":     netip.MustParseAddr("10.0.0.1"),
			"meta.test":    netip.MustParseAddr("169.254.169.254"),
		},
	}
	if git, err := exec.LookPath("git"); err == nil {
		root := t.TempDir()
		repo := filepath.Join(root, "repo")
		for _, args := range [][]string{
			{"init", "-q", repo},
			{"-C", repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "hello from the server"},
			{"clone", "-q", "--bare", repo, filepath.Join(root, "repo.git")},
		} {
			if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		gs := httptest.NewServer(&cgi.Handler{Path: git, Args: []string{"http-backend"},
			Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
		t.Cleanup(gs.Close)
		w.gitPort = gs.Listener.Addr().(*net.TCPAddr).Port
	}
	return w
}

func (w *netWorld) request(pol func(*policy.Policy)) *sandbox.Request {
	p := policy.Default()
	p.Network.Mode = policy.NetworkAllow
	p.Network.Allow = []string{"allowed.test", "ten.test", "meta.test"}
	if pol != nil {
		pol(p)
	}
	return &sandbox.Request{
		Backend: testBackend(),
		Policy:  p,
		Resolver: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if a, ok := w.names[host]; ok {
				return []netip.Addr{a}, nil
			}
			return nil, fmt.Errorf("no such host %s (test resolver)", host)
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			w.mu.Lock()
			w.dialed = append(w.dialed, a)
			w.mu.Unlock()
			if !a.Addr().IsLoopback() {
				return nil, fmt.Errorf("test dialer: %v is not on this machine", a)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a.String())
		},
		Audit: func(e egress.Event) {
			w.mu.Lock()
			w.events = append(w.events, e)
			w.mu.Unlock()
		},
	}
}

func (w *netWorld) run(t *testing.T, req *sandbox.Request, script string) (string, *sandbox.Report) {
	t.Helper()
	ws := t.TempDir()
	req.Policy.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := req.Policy.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	if err := req.Policy.Validate(); err != nil {
		t.Fatal(err)
	}
	req.Args = []string{"/bin/sh", "-c", script}
	var out, errb bytes.Buffer
	rep, err := sandbox.Run(context.Background(), req, backend.Stdio{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	return out.String() + errb.String(), rep
}

func TestAllowListThroughProxy(t *testing.T) {
	w := newNetWorld(t)
	req := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	// No TUN clone device where the run looks for one: the proxy alone,
	// with a warning (TestTransparentEgress has the device).
	req.TUNDir = t.TempDir()
	script := fmt.Sprintf(`
echo "curl-allowed: $(curl -sS -m 10 http://allowed.test:%[1]d/)"
echo "curl-denied: $(curl -sS -m 10 -D - -o /dev/null http://denied.test:%[1]d/ | tr -d '\r' | grep -i -e '^HTTP' -e '^X-Moat-Denied')"
echo "curl-https: $(curl -sS -m 10 -k https://allowed.test:%[2]d/)"
python3 -c '
import urllib.request
print("python-allowed:", urllib.request.urlopen("http://allowed.test:%[1]d/", timeout=10).read().decode())
try:
    urllib.request.urlopen("http://denied.test:%[1]d/", timeout=10)
except Exception as e:
    print("python-denied:", e)
import socket
try:
    socket.create_connection(("127.0.0.1", %[1]d), timeout=2)
    print("DIRECT-CONNECTED")
except OSError as e:
    print("direct-refused", e.errno)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    print("UDP-ANSWER", s.recvfrom(512))
except OSError as e:
    print("udp-refused", e.errno)
'
if getent hosts allowed.test >/dev/null 2>&1; then echo RESOLVED-INSIDE; else echo no-resolver; fi
`, w.httpPort, w.httpsPort)
	if w.gitPort != 0 {
		script += fmt.Sprintf(`git clone -q http://allowed.test:%d/repo.git cloned && echo "git: $(git -C cloned log --format=%%s)"`+"\n", w.gitPort)
	}
	out, rep := w.run(t, req, script)
	if egress.TUNBuiltIn && !slices.ContainsFunc(rep.Warnings, func(s string) bool { return strings.Contains(s, "no transparent egress") }) {
		t.Errorf("no warning that the run has the proxy only: %q", rep.Warnings)
	}
	for _, want := range []string{
		"curl-allowed: PAGE-FROM-allowed.test",
		"curl-denied: HTTP/1.1 403",
		"X-Moat-Denied: default deny",
		"curl-https: PAGE-FROM-allowed.test",
		"python-allowed: PAGE-FROM-allowed.test",
		"python-denied: HTTP Error 403",
		"direct-refused",
		"udp-refused",
		"no-resolver",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if w.gitPort != 0 && !strings.Contains(out, "git: hello from the server") {
		t.Errorf("git clone through the proxy failed:\n%s", out)
	}
	for _, bad := range []string{"DIRECT-CONNECTED", "UDP-ANSWER", "RESOLVED-INSIDE"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s:\n%s", bad, out)
		}
	}
	// The report and the audit stream hold the same events, with the
	// right decisions.
	if len(rep.Network.Events) != len(w.events) || len(w.events) == 0 {
		t.Fatalf("report has %d events, audit stream %d", len(rep.Network.Events), len(w.events))
	}
	allowed, denied := 0, 0
	for _, e := range w.events {
		switch {
		case e.Host == "allowed.test" && e.Decision == "allow":
			allowed++
		case e.Host == "denied.test" && e.Decision == "deny" && e.Rule == "default deny":
			denied++
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	wantAllowed := 4
	if w.gitPort != 0 {
		wantAllowed = 5 // git may use one or more requests on a kept-alive connection
	}
	if allowed < wantAllowed || denied != 2 {
		t.Errorf("%d allowed and %d denied events, want at least %d and 2: %+v", allowed, denied, wantAllowed, w.events)
	}
}

// TestPrivateDestinationsRefused: names resolving to loopback, private or
// metadata addresses, and IP literals in every spelling, are refused
// unless allow_cidrs lists them, and nothing is dialled.
func TestPrivateDestinationsRefused(t *testing.T) {
	w := newNetWorld(t)
	req := w.request(nil)
	var script strings.Builder
	for _, u := range []string{
		fmt.Sprintf("http://allowed.test:%d/", w.httpPort),
		"http://ten.test/", "http://meta.test/latest/meta-data/",
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", w.httpPort),
		fmt.Sprintf("http://2130706433:%d/", w.httpPort),
		fmt.Sprintf("http://0177.0.0.1:%d/", w.httpPort),
		fmt.Sprintf("http://127.1:%d/", w.httpPort),
	} {
		// --noproxy '': curl would otherwise connect to a loopback literal
		// itself (NO_PROXY), which inside the sandbox reaches nothing.
		fmt.Fprintf(&script, "echo \"%s => $(curl --noproxy '' -sS -m 10 -o /dev/null -w '%%{http_code}' '%s')\"\n", u, u)
	}
	out, rep := w.run(t, req, script.String())
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasSuffix(line, "=> 403") {
			t.Errorf("not refused: %s", line)
		}
	}
	if len(w.dialed) != 0 {
		t.Errorf("the proxy dialled %v", w.dialed)
	}
	if len(rep.Network.Refused) == 0 {
		t.Error("report lists no refusals")
	}
}

// TestSNIMismatchRefused: a tunnel to allowed.test whose TLS ClientHello
// names denied.test (domain fronting) is refused.
func TestSNIMismatchRefused(t *testing.T) {
	w := newNetWorld(t)
	req := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	// The positive control runs the same client with the CONNECT target's
	// own name, which must get through.
	out, _ := w.run(t, req, fmt.Sprintf(`python3 -c '
import socket, ssl
for name in ["denied.test", "allowed.test"]:
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n")
    print(s.recv(200).split(b"\r\n")[0].decode())
    ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    try:
        t = ctx.wrap_socket(s, server_hostname=name)
        print("TLS-ESTABLISHED", name)
    except Exception as e:
        print("tls-refused", name, type(e).__name__)
'`, w.httpsPort, w.httpsPort))
	if strings.Contains(out, "TLS-ESTABLISHED denied.test") || !strings.Contains(out, "tls-refused denied.test") {
		t.Errorf("fronted TLS was not refused:\n%s", out)
	}
	if !strings.Contains(out, "TLS-ESTABLISHED allowed.test") {
		t.Errorf("TLS naming the CONNECT target did not get through, so the refusal above proves nothing:\n%s", out)
	}
	found := false
	for _, e := range w.events {
		found = found || (e.Decision == "deny" && strings.Contains(e.Rule, "sni"))
	}
	if !found {
		t.Errorf("no SNI refusal in the audit events: %+v", w.events)
	}
}

func TestBadNetworkRulesNamed(t *testing.T) {
	p := policy.Default()
	p.Network.Mode = policy.NetworkAllow
	p.Network.Allow = []string{"ok.example.com", "*.co.uk"}
	p.MarkFlag("network.allow", "--net")
	ws := t.TempDir()
	p.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"true"}}, backend.Stdio{})
	if err == nil || rep.ExitCode != 125 || !strings.Contains(err.Error(), "network.allow[1]") || !strings.Contains(err.Error(), "--net") {
		t.Fatalf("err %v: want the bad entry named", err)
	}
}

// TestHostNetworkWarns: host mode shares the host's network and says so.
func TestHostNetworkWarns(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, func(p *policy.Policy) { p.Network.Mode = policy.NetworkHost }, "ls /sys/class/net 2>/dev/null || cat /proc/net/dev")
	mustExit(t, r, 0)
	if len(r.rep.Warnings) == 0 || !strings.Contains(r.rep.Warnings[0], "host") {
		t.Errorf("no warning for host networking: %v", r.rep.Warnings)
	}
	ifaces, _ := net.Interfaces()
	if len(ifaces) > 1 && strings.Count(r.stdout, "\n") < 3 {
		t.Errorf("host interfaces not visible in host mode:\n%s", r.stdout)
	}
}

// TestNoNetworkByDefault: with the default policy, curl to anything
// fails at once, and no proxy variables are set.
func TestNoNetworkByDefault(t *testing.T) {
	ws := t.TempDir()
	r := sh(t, ws, nil, `env | grep -i _proxy
for u in http://1.1.1.1/ http://example.com/; do curl -sS -m 5 $u >/dev/null 2>&1; echo "curl $u $?"; done`)
	mustExit(t, r, 0)
	// curl's exit status tells why it failed: 6, the name did not resolve;
	// 7, the connection was refused or unreachable. Anything else (127:
	// no curl; 28: a timeout, so a packet left) is not the closed
	// network this test is about.
	if want := "curl http://1.1.1.1/ 7\ncurl http://example.com/ 6\n"; r.stdout != want {
		t.Errorf("default network not closed: got\n%swant\n%s", r.stdout, want)
	}
}

// TestNetworkRuleErrorsArePolicyErrors: an entry only the public suffix
// list refuses passes Validate and is refused before the run, as
// *policy.Errors located at its file line, like every other policy error.
func TestNetworkRuleErrorsArePolicyErrors(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "p.toml")
	os.WriteFile(file, []byte("[network]\nmode = \"allow\"\nallow = [\n  \"ok.example.com\",\n  \"*.co.uk\",\n]\n"), 0o644)
	p, err := policy.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if err := p.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v (the public suffix list is the sandbox's check)", err)
	}
	_, runErr := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"true"}}, backend.Stdio{})
	for name, err := range map[string]error{"Run": runErr, "CheckPolicy": sandbox.CheckPolicy(p)} {
		var pe *policy.Errors
		if !errors.As(err, &pe) || len(*pe) != 1 {
			t.Errorf("%s: %v (%T), want *policy.Errors with one entry", name, err, err)
			continue
		}
		fe := (*pe)[0]
		if fe.File != file || fe.Line != 5 || fe.Field != "network.allow[1]" || !strings.Contains(fe.Msg, "public suffix") {
			t.Errorf("%s: %+v, want %s:5: network.allow[1]", name, fe, file)
		}
	}
	p.Network.Allow = p.Network.Allow[:1]
	if err := sandbox.CheckPolicy(p); err != nil {
		t.Errorf("CheckPolicy(ok.example.com): %v", err)
	}
}

// FuzzDestinationGrammarAgrees: policy.Validate and the egress proxy read
// allow and deny entries with one grammar, so an entry Validate accepts
// is one a run accepts, short of the public suffix list (which only the
// run's check, CheckPolicy, has), and the other way round.
func FuzzDestinationGrammarAgrees(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.pythonhosted.org", "db", "db:5432", "*.com", "*.co.uk", "*", "10.0.0.1",
		"[::1]:443", "https://x.org", "a..b", "example.123", "Bücher.example", "x.org:0", " pypi.org "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		for _, allow := range []bool{true, false} {
			p := policy.Default()
			p.Network.Mode = policy.NetworkAllow
			var rerr error
			if allow {
				p.Network.Allow = []string{entry}
				_, rerr = egress.ParseRules([]string{entry}, nil, nil)
			} else {
				p.Network.Deny = []string{entry}
				_, rerr = egress.ParseRules(nil, []string{entry}, nil)
			}
			verr := p.Validate()
			suffixOnly := rerr != nil && strings.Contains(rerr.Error(), "public suffix")
			if (verr == nil) != (rerr == nil || suffixOnly) {
				t.Fatalf("entry %q (allow %v): Validate %v, egress %v", entry, allow, verr, rerr)
			}
			if suffixOnly && sandbox.CheckPolicy(p) == nil {
				t.Fatalf("entry %q: CheckPolicy accepts what egress refuses: %v", entry, rerr)
			}
		}
	})
}

// TestEmptyAllowListWarns: allow mode with nothing listed refuses every
// connection, which a `--net allow` without hosts ran silently; the
// report now says so. The control: a list with a host draws no warning.
func TestEmptyAllowListWarns(t *testing.T) {
	for _, allow := range [][]string{nil, {"example.com"}} {
		r := sh(t, t.TempDir(), func(p *policy.Policy) { p.Network.Mode = policy.NetworkAllow; p.Network.Allow = allow }, "true")
		mustExit(t, r, 0)
		warned := slices.ContainsFunc(r.rep.Warnings, func(w string) bool { return strings.Contains(w, "lists no destination") })
		if warned != (len(allow) == 0) {
			t.Errorf("allow %v: warnings %q, want the empty list's warning: %v", allow, r.rep.Warnings, len(allow) == 0)
		}
	}
}
