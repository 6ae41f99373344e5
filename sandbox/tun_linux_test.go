package sandbox_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// tunDir is a directory with a TUN clone device the sandbox's user can
// open: MOAT_TEST_TUN_DIR if set (a node made by root for the
// unprivileged runs), the host's /dev/net when its mode allows it, else,
// for root, a node of the test's own (mknod 10 200, mode 0666).
func tunDir(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/sys/class/misc/tun"); err != nil {
		t.Skipf("this kernel has no TUN driver (%v): no transparent egress to test", err)
	}
	if d := os.Getenv("MOAT_TEST_TUN_DIR"); d != "" {
		return d
	}
	if st, err := os.Stat("/dev/net/tun"); err == nil && st.Mode().Perm()&0o006 == 0o006 {
		return ""
	}
	if os.Geteuid() != 0 {
		t.Skip("/dev/net/tun is missing or not mode 0666 here, only root can make a node of its own, and MOAT_TEST_TUN_DIR names none: no transparent egress to test")
	}
	// Not under t.TempDir, whose parent only root may search: the init
	// stage opens the directory as the sandbox's user.
	dir, err := os.MkdirTemp("", "moat-tun-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := unix.Mknod(filepath.Join(dir, "tun"), unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))); err != nil {
		t.Skipf("mknod of a TUN clone device: %v", err)
	}
	os.Chmod(filepath.Join(dir, "tun"), 0o666)
	return dir
}

// TestTransparentEgress runs programs that ignore the proxy variables:
// they resolve through moat's DNS and connect through the TUN device, and
// get what the rules say, with the proxy path's events. Both starts make
// the device: the direct one, and the init stage.
func TestTransparentEgress(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testTransparentEgress(t, false) })
	t.Run("init-stage", func(t *testing.T) { testTransparentEgress(t, true) })
}

func testTransparentEgress(t *testing.T, initStage bool) {
	dir := tunDir(t)
	w := newNetWorld(t)

	echo := serveTCP(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "echo:%s", line)
	})
	// A server that speaks first, as sshd does.
	banner := serveTCP(t, func(c net.Conn) {
		fmt.Fprintf(c, "SSH-2.0-moattest\r\n")
		c.Read(make([]byte, 4096))
	})
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var udpGot atomic.Int32
	go func() {
		buf := make([]byte, 100)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			udpGot.Add(1)
		}
	}()

	client := goClient(t)
	req := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, client)
	})
	if initStage {
		req.Backend = &native.Backend{InitStage: true}
	}
	req.TUNDir = dir
	script := fmt.Sprintf(`
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
getent hosts allowed.test >/dev/null && echo getent-allowed-ok
getent hosts denied.test >/dev/null || echo getent-denied-nxdomain
python3 -c '
import socket, urllib.request
print("py-http:", urllib.request.urlopen("http://allowed.test:%[1]d/", timeout=10).read().decode())
for i in range(200):
    socket.getaddrinfo("allowed.test", 80)  # each a query of its own, from a new port
print("200-lookups-ok")
try:
    socket.getaddrinfo("denied.test", 80)
    print("DENIED-RESOLVED")
except socket.gaierror as e:
    print("denied-nxdomain")
try:
    socket.create_connection(("ten.test", 80), timeout=5)
    print("TEN-CONNECTED")
except OSError as e:
    print("ten-refused")
s = socket.create_connection(("allowed.test", %[2]d), timeout=5)
s.sendall(b"ping\n")
print("raw:", s.recv(100).decode().strip())
b = socket.create_connection(("allowed.test", %[4]d), timeout=5)
print("banner:", b.recv(100).decode().strip())
import ssl
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(socket.create_connection(("allowed.test", %[5]d), timeout=5), server_hostname="denied.test").close()
    print("FRONTED")
except (OSError, ssl.SSLError) as e:
    print("sni-mismatch-refused")
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"x", ("allowed.test", %[3]d))
print("udp-sent")
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    print("RAW-OPENED")
except OSError as e:
    print("raw-refused")
'
MOAT_TEST_GODIAL=allowed.test:%[2]d %[6]s/client
MOAT_TEST_GODIAL=denied.test:%[2]d %[6]s/client
MOAT_TEST_GODIAL=ten.test:%[2]d %[6]s/client
echo "tun-fds: $(for f in /proc/[0-9]*/fd/*; do readlink "$f"; done 2>/dev/null | grep -c tun)"
echo "fds-seen: $(for f in /proc/self/fd/*; do readlink "$f"; done 2>/dev/null | grep -c .)"
echo "curl-https: $(curl -sS -m 10 -k https://allowed.test:%[5]d/)"
ssh -v -p %[4]d -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=no x@allowed.test true 2>&1 | grep -o 'remote software version moattest' | head -1
`, w.httpPort, echo.Addr().(*net.TCPAddr).Port, udp.LocalAddr().(*net.UDPAddr).Port,
		banner.Addr().(*net.TCPAddr).Port, w.httpsPort, client)
	out, rep := w.run(t, req, script)
	for _, warn := range rep.Warnings {
		if strings.Contains(warn, "transparent") {
			t.Fatalf("the run had no TUN device: %s", warn)
		}
	}
	for _, want := range []string{
		"getent-allowed-ok", "getent-denied-nxdomain", // DNS: the positive control and the refusal
		"py-http: PAGE-FROM-allowed.test", "raw: echo:ping", // TCP by name, HTTP and a raw port
		"200-lookups-ok", "denied-nxdomain", "ten-refused", "udp-sent", "raw-refused",
		"banner: SSH-2.0-moattest", "remote software version moattest", // a server that speaks first; ssh
		"curl-https: PAGE-FROM-allowed.test", "sni-mismatch-refused",
		"tun-fds: 0",        // the device's fd stays out of the command's processes
		"godial: echo:ping", // Go's own resolver and dialer
		"godial-error: dial tcp4: lookup denied.test", "godial-error: dial tcp4 198.19.", // NXDOMAIN; ten.test's connection reset
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"DENIED-RESOLVED", "TEN-CONNECTED", "RAW-OPENED", "FRONTED",
		"fds-seen: 0", // the positive control of "tun-fds: 0": the listing sees fds
	} {
		if strings.Contains(out, bad) {
			t.Errorf("%s:\n%s", bad, out)
		}
	}
	if n := udpGot.Load(); n != 0 {
		t.Errorf("the UDP server received %d datagrams from the sandbox", n)
	}
	var dnsAllow, dnsDeny, tcpAllow, tcpDeny, udpDeny, sni int
	for _, e := range rep.Network.Events {
		switch {
		case e.Proto == "dns" && e.Host == "allowed.test" && e.Decision == "allow":
			dnsAllow++
		case e.Proto == "dns" && e.Host == "denied.test" && e.Decision == "deny" && e.Rule == "default deny":
			dnsDeny++
		case e.Proto == "tcp" && e.Host == "allowed.test" && e.Decision == "allow":
			tcpAllow++
		case e.Proto == "tcp" && e.Host == "ten.test" && e.Decision == "deny":
			tcpDeny++
		case e.Proto == "udp" && e.Decision == "deny":
			udpDeny++
		case e.Proto == "tcp" && e.Decision == "deny" && e.Rule == "sni mismatch" && e.SNI == "denied.test":
			sni++
		}
	}
	if dnsAllow == 0 || dnsDeny == 0 || tcpAllow < 5 || tcpDeny == 0 || udpDeny == 0 || sni == 0 {
		t.Errorf("events: dns allow %d deny %d, tcp allow %d deny %d, udp deny %d, sni mismatch %d:\n%+v\n%s",
			dnsAllow, dnsDeny, tcpAllow, tcpDeny, udpDeny, sni, rep.Network.Events, out)
	}
}

// BenchmarkAllowStart is the start-up of `/bin/true` in network mode
// allow, with the TUN device and without it (the proxy alone).
func BenchmarkAllowStart(b *testing.B) {
	for _, withTUN := range []bool{false, true} {
		name := "proxy"
		if withTUN {
			name = "tun"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir() // no device: the proxy alone
			if withTUN {
				dir = benchTUNDir(b)
			}
			ws := b.TempDir()
			p := policy.Default()
			p.Network.Mode = policy.NetworkAllow
			p.Network.Allow = []string{"allowed.test"}
			p.Workspace.Path = ws
			home, _ := os.UserHomeDir()
			if err := p.Resolve(ws, home); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := &sandbox.Request{Policy: p, Args: []string{"/bin/true"}, TUNDir: dir}
				rep, err := sandbox.Run(context.Background(), req, backend.Stdio{})
				if err != nil || rep.ExitCode != 0 {
					b.Fatalf("%v %+v", err, rep)
				}
				if withTUN && len(rep.Warnings) > 0 {
					b.Fatalf("warnings: %q", rep.Warnings)
				}
			}
		})
	}
}

func benchTUNDir(b *testing.B) string {
	if _, err := os.Stat("/sys/class/misc/tun"); err != nil {
		b.Skipf("this kernel has no TUN driver: %v", err)
	}
	if d := os.Getenv("MOAT_TEST_TUN_DIR"); d != "" {
		return d
	}
	if os.Geteuid() != 0 {
		b.Skip("no TUN clone device (set MOAT_TEST_TUN_DIR)")
	}
	dir, err := os.MkdirTemp("", "moat-tun-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := unix.Mknod(filepath.Join(dir, "tun"), unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))); err != nil {
		b.Skipf("mknod: %v", err)
	}
	os.Chmod(filepath.Join(dir, "tun"), 0o666)
	return dir
}

// TestTransparentLatency (MOAT_BENCH_TUN=1) prints the time a new
// connection takes to an echo server on loopback, opened by a program
// inside the sandbox through the TUN device and through the proxy
// (CONNECT), each followed by one round trip: medians of 300; and the
// throughput of a 256 MiB download through each.
func TestTransparentLatency(t *testing.T) {
	if os.Getenv("MOAT_BENCH_TUN") != "1" {
		t.Skip("a measurement: set MOAT_BENCH_TUN=1")
	}
	dir := tunDir(t)
	w := newNetWorld(t)
	echo := serveTCP(t, func(c net.Conn) {
		b := make([]byte, 1)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
			c.Write(b)
		}
	})
	// A server that sends 256 MiB to each connection.
	chunk := make([]byte, 1<<20)
	bulk := serveTCP(t, func(c net.Conn) {
		for i := 0; i < 256; i++ {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	req := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	req.Audit = nil
	req.TUNDir = dir
	port := echo.Addr().(*net.TCPAddr).Port
	out, _ := w.run(t, req, fmt.Sprintf(`python3 -c '
import socket, time, statistics
addr = socket.gethostbyname("allowed.test")
ct=[]; rt=[]
def tun():
    t0=time.perf_counter()
    s = socket.create_connection((addr, %[1]d))
    t1=time.perf_counter()
    s.sendall(b"x"); s.recv(1)
    t2=time.perf_counter()
    ct.append(t1-t0); rt.append(t2-t1)
    s.close()
def proxy():
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT allowed.test:%[1]d HTTP/1.1\r\n\r\n")
    r = b""
    while not r.endswith(b"\r\n\r\n"):
        r += s.recv(1)
    s.sendall(b"x"); s.recv(1); s.close()
for name, f in (("tun", tun), ("proxy", proxy), ("tun", tun), ("proxy", proxy)):
    ts = []
    for i in range(300):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    print(name, "median %%.3f ms" %% (1000 * statistics.median(ts)))
print("tun connect %%.3f ms, round trip %%.3f ms" %% (1000*statistics.median(ct), 1000*statistics.median(rt)))
def drain(s):
    n = 0
    t0 = time.perf_counter()
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        n += len(b)
    return n / (time.perf_counter() - t0) / 1e6
for i in range(2):
    print("tun 256 MiB: %%.0f MB/s" %% drain(socket.create_connection(("allowed.test", %[2]d))))
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT allowed.test:%[2]d HTTP/1.1\r\n\r\n")
    r = b""
    while not r.endswith(b"\r\n\r\n"):
        r += s.recv(1)
    print("proxy 256 MiB: %%.0f MB/s" %% drain(s))
'`, port, bulk.Addr().(*net.TCPAddr).Port))
	t.Logf("\n%s", out)
}

// TestTUNFailureStopsRun: a clone device that is there but cannot make a
// TUN device (here a node of /dev/null's numbers) stops the run before
// the command, naming the step, in both starts; it is not run without it.
func TestTUNFailureStopsRun(t *testing.T) {
	if _, err := os.Stat("/sys/class/misc/tun"); err != nil {
		t.Skipf("this kernel has no TUN driver (%v)", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a device node")
	}
	dir, err := os.MkdirTemp("", "moat-tun-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	if err := unix.Mknod(filepath.Join(dir, "tun"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod: %v", err)
	}
	os.Chmod(filepath.Join(dir, "tun"), 0o666)
	for _, initStage := range []bool{false, true} {
		w := newNetWorld(t)
		req := w.request(nil)
		req.TUNDir = dir
		if initStage {
			req.Backend = &native.Backend{InitStage: true}
		}
		ws := t.TempDir()
		req.Policy.Workspace.Path = ws
		home, _ := os.UserHomeDir()
		if err := req.Policy.Resolve(ws, home); err != nil {
			t.Fatal(err)
		}
		req.Args = []string{"/bin/sh", "-c", "echo RAN > ran"}
		_, err := sandbox.Run(context.Background(), req, backend.Stdio{})
		if err == nil || !strings.Contains(err.Error(), "TUN device moat0") || !strings.Contains(err.Error(), "inappropriate ioctl") {
			t.Errorf("init stage %v: %v, want an error naming the TUN device and ENOTTY", initStage, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			t.Errorf("init stage %v: the command ran", initStage)
		}
	}
}

// goDial is this test binary run inside a sandbox as a Go program with
// Go's own resolver, which ignores the proxy variables: it connects to
// target, sends a line and prints the answer.
func goDial(target string) int {
	d := net.Dialer{Resolver: &net.Resolver{PreferGo: true}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp4", target)
	if err != nil {
		fmt.Println("godial-error:", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(c, "ping\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	fmt.Println("godial:", strings.TrimSpace(line))
	return 0
}

// goTLSAlert is this test binary run inside a sandbox as a Go TLS client:
// spec is "target server-name prefix label"; with prefix "alert" or
// "ccs" it sends a warning alert record (which crypto/tls's servers skip)
// or an empty change_cipher_spec record (which OpenSSL's skip) in front
// of its ClientHello. It sends a GET and prints the answer (the server name the
// server saw), or why it got none.
func goTLSAlert(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 4 {
		fmt.Println("tlsalert: bad spec", spec)
		return 2
	}
	c, err := net.DialTimeout("tcp4", f[0], 5*time.Second)
	if err != nil {
		fmt.Printf("tlsalert %s: dial: %v\n", f[3], err)
		return 1
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	switch f[2] {
	case "alert":
		c = &prefixFirst{Conn: c, prefix: "\x15\x03\x01\x00\x02\x01\x70"}
	case "ccs":
		c = &prefixFirst{Conn: c, prefix: "\x14\x03\x01\x00\x00"}
	}
	tc := tls.Client(c, &tls.Config{ServerName: f[1], InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		fmt.Printf("tlsalert %s: refused: %v\n", f[3], err)
		return 1
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", f[1])
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		fmt.Printf("tlsalert %s: response: %v\n", f[3], err)
		return 1
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("tlsalert %s: %s\n", f[3], body)
	return 0
}

// prefixFirst writes prefix in front of the first bytes written to it.
type prefixFirst struct {
	net.Conn
	prefix string
	sent   bool
}

func (c *prefixFirst) Write(b []byte) (int, error) {
	if c.sent {
		return c.Conn.Write(b)
	}
	c.sent = true
	if _, err := c.Conn.Write(append([]byte(c.prefix), b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// TestTransparentAlertBeforeClientHello: through the TUN device, a
// ClientHello behind a warning alert record (which a TLS server skips)
// is checked as one: naming another host than the connection's, it is
// refused, and the server never sees it; so is one behind an empty
// change_cipher_spec record (which OpenSSL skips; this Go server would
// not, so the proxy's TestTunnelEmptyCCSBeforeClientHello has the
// control with OpenSSL). The controls: a crypto/tls
// server behind the device answers the plain ClientHello, and the
// alert-prefixed one, for the connection's own name, so the alert is
// passed on and skipped by the server (the probe is one it acts on).
func TestTransparentAlertBeforeClientHello(t *testing.T) {
	dir := tunDir(t)
	w := newNetWorld(t)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "server name %s", r.TLS.ServerName)
	}))
	srv.TLS = &tls.Config{GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		seen = append(seen, chi.ServerName)
		mu.Unlock()
		return nil, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	target := fmt.Sprintf("allowed.test:%d", srv.Listener.Addr().(*net.TCPAddr).Port)

	client := goClient(t)
	req := w.request(func(p *policy.Policy) {
		p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
		p.Filesystem.ReadOnly = append(p.Filesystem.ReadOnly, client)
	})
	req.TUNDir = dir
	var script strings.Builder
	script.WriteString("unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy\n")
	for _, c := range []string{"allowed.test none plain", "allowed.test alert alert",
		"denied.test alert fronted", "denied.test ccs ccs-fronted"} {
		fmt.Fprintf(&script, "MOAT_TEST_TLSALERT=%q %s/client\n", target+" "+c, client)
	}
	out, rep := w.run(t, req, script.String())
	for _, want := range []string{
		"tlsalert plain: server name allowed.test",
		"tlsalert alert: server name allowed.test",
		"tlsalert fronted: refused", "tlsalert ccs-fronted: refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	mu.Lock()
	if !slices.Equal(seen, []string{"allowed.test", "allowed.test"}) {
		t.Errorf("server names the server saw: %q, want allowed.test twice", seen)
	}
	mu.Unlock()
	var refused int
	for _, e := range rep.Network.Events {
		if e.Proto == egress.ProtoTCP && e.Decision == egress.DecisionDeny && e.Rule == "sni mismatch" && e.SNI == "denied.test" {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d connections refused for the server name denied.test, want 2: %+v", refused, rep.Network.Events)
	}
}

// goClient copies this test binary where the sandbox's user can run it,
// for goDial.
func goClient(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "moat-goclient-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "client"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSessionTransparentEgress: a session's commands, the first and a
// later one, reach an allowed name through the session's TUN device with
// the proxy variables unset, and a refused name does not resolve.
func TestSessionTransparentEgress(t *testing.T) {
	dir := tunDir(t)
	w := newNetWorld(t)
	r := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	ws := t.TempDir()
	r.Policy.Workspace.Path = ws
	home, _ := os.UserHomeDir()
	if err := r.Policy.Resolve(ws, home); err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: r.Policy, Resolver: r.Resolver, Dial: r.Dial, TUNDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	for i := range 2 {
		out, _, _ := sessionSh(t, s, sandbox.ExecRequest{}, fmt.Sprintf(`curl --noproxy '*' -sS -m 10 http://allowed.test:%d/; echo; getent hosts denied.test || echo denied-nxdomain`, w.httpPort))
		if !strings.Contains(out, "PAGE-FROM-allowed.test") || !strings.Contains(out, "denied-nxdomain") {
			t.Errorf("command %d: %s", i, out)
		}
	}
	rep, err := s.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tcp := 0
	for _, e := range rep.Network.Events {
		if e.Proto == "tcp" && e.Host == "allowed.test" && e.Decision == "allow" {
			tcp++
		}
	}
	if tcp != 2 {
		t.Errorf("Close reported %d connections through the TUN device, want 2: %+v", tcp, rep.Network.Events)
	}
}

// TestNetworkAskThroughTUN: a host rule with decision ask holds a
// connection through the TUN device as it holds one through the proxy:
// approved, it goes through; refused, it is reset. Positive control: a
// host no rule names is reached without asking.
func TestNetworkAskThroughTUN(t *testing.T) {
	dir := tunDir(t)
	for _, yes := range []bool{true, false} {
		w := newNetWorld(t)
		w.names["other.test"] = netip.MustParseAddr("127.0.0.1")
		req := w.request(func(p *policy.Policy) {
			p.Network.Allow = []string{"allowed.test", "other.test"}
			p.Network.AllowCIDRs = []string{"127.0.0.0/8"}
			p.Rules = []policy.Rule{{Name: "ask-allowed", Match: policy.Match{Host: "allowed.test"}, Decision: policy.DecisionAsk, Reason: "the test wants to be asked"}}
		})
		req.TUNDir = dir
		ap := &syncApprover{yes: yes}
		req.Approver = ap
		out, rep := w.run(t, req, fmt.Sprintf(`
echo "tun: $(curl --noproxy '*' -sS -m 10 http://allowed.test:%[1]d/ 2>&1)"
echo "control: $(curl --noproxy '*' -sS -m 10 http://other.test:%[1]d/)"
`, w.httpPort))
		if !strings.Contains(out, "control: PAGE-FROM-other.test") {
			t.Errorf("approve %v: the host no rule names was not reached:\n%s", yes, out)
		}
		if got := strings.Contains(out, "tun: PAGE-FROM-allowed.test"); got != yes {
			t.Errorf("approve %v: reached %v:\n%s", yes, got, out)
		}
		if len(ap.asked) != 1 {
			t.Errorf("approve %v: asked %d times, want 1", yes, len(ap.asked))
		}
		if !yes && !slices.ContainsFunc(rep.Network.Events, func(e egress.Event) bool {
			return e.Proto == egress.ProtoTCP && e.Host == "allowed.test" && e.Decision == egress.DecisionDeny && e.Rule == "ask-allowed"
		}) {
			t.Errorf("no refused TUN connection naming the rule: %+v", rep.Network.Events)
		}
	}
}

// TestTransparentOff: network.transparent = false gives allow mode no
// TUN device (the proxy alone, without the warning a missing device
// gets); the default gives it one (the control).
func TestTransparentOff(t *testing.T) {
	dir := tunDir(t)
	w := newNetWorld(t)
	for _, on := range []bool{true, false} {
		req := w.request(func(p *policy.Policy) { p.Network.Transparent = on })
		req.TUNDir = dir
		out, rep := w.run(t, req, "cat /proc/net/dev")
		if got := strings.Contains(out, "moat0:"); got != on {
			t.Errorf("transparent = %v: a TUN device %v, want %v\n%s", on, got, on, out)
		}
		if len(rep.Warnings) > 0 {
			t.Errorf("transparent = %v: warnings %q", on, rep.Warnings)
		}
	}
}

// TestHostsFileIsMoats: in allow mode the sandbox's /etc/hosts names
// loopback alone, so that every other name goes to moat's resolver or
// proxy (a name the host's /etc/hosts gave resolved inside to its real
// address, which the TUN device saw without the name: its TLS was
// refused as an SNI mismatch; found by a tester). The control: without
// the network the host's file is shown as it is.
func TestHostsFileIsMoats(t *testing.T) {
	dir := tunDir(t)
	w := newNetWorld(t)
	req := w.request(nil)
	req.TUNDir = dir
	out, _ := w.run(t, req, "cat /etc/hosts")
	if !strings.Contains(out, "# moat: other names are answered by moat") || !strings.Contains(out, "\tmoat\n") || strings.Count(out, "\n") != 4 {
		t.Errorf("allow mode's /etc/hosts:\n%s", out)
	}
	host, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Skip("the host has no /etc/hosts")
	}
	if r := run(t, t.TempDir(), nil, "/bin/cat", "/etc/hosts"); r.stdout != string(host) {
		t.Errorf("control, no network: %q, want the host's %q", r.stdout, host)
	}
}

// TestTransparentNotTLS: a stream through the TUN device that starts
// with a TLS handshake record whose first message is no ClientHello is
// another protocol's, and reaches the host whole, as a stream of any
// other first byte does (the control of the probe); one that can start a
// ClientHello and is no valid one is still refused, with a reset and an
// event naming the check (the control that the check still applies).
// Random bytes start with the handshake record's type one time in 256:
// TestTransparentBulk's random stream was refused so, as a malformed
// ClientHello.
func TestTransparentNotTLS(t *testing.T) {
	dir := tunDir(t)
	w := newNetWorld(t)
	ln := serveTCP(t, func(c net.Conn) {
		h := sha256.New()
		io.Copy(h, c)
		fmt.Fprintf(c, "%x", h.Sum(nil))
	})
	req := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	req.TUNDir = dir
	cases := []struct {
		name, start string // start: the stream's first bytes, in Python
		reach       bool
	}{
		{"other", `b"\x00"`, true},
		{"handshake-record", `b"\x16\x00\xff\xff\x07\x5a"`, true},
		{"tls-garbage", `b"\x16\x03\x01\x00\x04\x01\x00\x00\x00"`, false},
	}
	var script strings.Builder
	script.WriteString(`
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
python3 -c '
import hashlib, os, socket
def send(name, data):
    try:
        s = socket.create_connection(("allowed.test", ` + fmt.Sprint(ln.Addr().(*net.TCPAddr).Port) + `), timeout=30)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
        ok = got.decode() == hashlib.sha256(data).hexdigest()
        print(name + ":", "reached" if ok else "replied %r" % got)
    except OSError as e:
        print(name + ":", "refused", type(e).__name__)
`)
	for _, c := range cases {
		fmt.Fprintf(&script, "send(%q, %s + os.urandom(1 << 16))\n", c.name, c.start)
	}
	script.WriteString("'\n")
	out, rep := w.run(t, req, script.String())
	for _, c := range cases {
		reached := strings.Contains(out, c.name+": reached")
		if reached != c.reach || !reached && !strings.Contains(out, c.name+": refused") {
			t.Errorf("%s: reached %v, want %v:\n%s", c.name, reached, c.reach, out)
		}
	}
	var allowed, refused int
	for _, e := range rep.Network.Events {
		switch {
		case e.Proto != egress.ProtoTCP || e.Host != "allowed.test":
		case e.Decision == egress.DecisionAllow && e.BytesUp == 6+1<<16:
			allowed++
		case e.Decision == egress.DecisionDeny && e.Rule == "malformed tls" && strings.Contains(e.Reason, "ClientHello"):
			refused++
		}
	}
	if allowed != 1 || refused != 1 {
		t.Errorf("%d allowed connections of the handshake record's stream and %d refused as malformed TLS, want 1 and 1: %+v", allowed, refused, rep.Network.Events)
	}
}

// TestTransparentBulk sends 32 MiB each way through the TUN device, whose
// checksums are offloaded (the sandbox's kernel leaves them partial one
// way, moat's stack the other): what each end receives hashes as what the
// other sent. The device's transmit checksum offload, as the sandbox's
// kernel reports it (ETHTOOL_GTXCSUM), shows the offload is in effect:
// the positive control of this test's subject, since without it the bytes
// would arrive just the same. Both starts make the device. The stream
// starts with a byte no TLS record starts with: one that can start a
// ClientHello is checked as one, and random bytes that do would be
// refused, rightly, as a malformed one (TestTransparentNotTLS).
func TestTransparentBulk(t *testing.T) {
	t.Run("direct", func(t *testing.T) { testTransparentBulk(t, false) })
	t.Run("init-stage", func(t *testing.T) { testTransparentBulk(t, true) })
}

func testTransparentBulk(t *testing.T, initStage bool) {
	dir := tunDir(t)
	w := newNetWorld(t)
	const size = 32 << 20
	back := make([]byte, size)
	for i := range back {
		back[i] = byte(i*7 + i>>11)
	}
	backSum := sha256.Sum256(back)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		h := sha256.New()
		_, err = io.CopyN(h, c, size)
		got <- fmt.Sprintf("%x %v", h.Sum(nil), err)
		c.Write(back)
	}()
	req := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	if initStage {
		req.Backend = &native.Backend{InitStage: true}
	}
	req.TUNDir = dir
	script := fmt.Sprintf(`
unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy
python3 -c '
import array, fcntl, hashlib, os, socket, struct
v = array.array("I", [0x16, 7])  # ETHTOOL_GTXCSUM
q = socket.socket()
fcntl.ioctl(q.fileno(), 0x8946, struct.pack("16sP16x", b"%[1]s", v.buffer_info()[0]))  # SIOCETHTOOL
print("txcsum:", v[1])
data = b"\x00" + os.urandom(%[2]d - 1)
print("sent:", hashlib.sha256(data).hexdigest())
s = socket.create_connection(("allowed.test", %[3]d), timeout=30)
s.sendall(data)
h, n = hashlib.sha256(), 0
while n < %[2]d:
    b = s.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
print("got:", h.hexdigest(), n)
'
`, "moat0", size, ln.Addr().(*net.TCPAddr).Port)
	out, rep := w.run(t, req, script)
	defer func() {
		if t.Failed() {
			t.Logf("the run's events: %+v", rep.Network.Events)
		}
	}()
	if !strings.Contains(out, "txcsum: 1") {
		t.Errorf("the device does not offload transmit checksums:\n%s", out)
	}
	var sent string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "sent: "); ok {
			sent = s
		}
	}
	select {
	case g := <-got:
		if sent == "" || g != sent+" <nil>" {
			t.Errorf("the host received %s, the sandbox sent %q:\n%s", g, sent, out)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the host received nothing:\n%s", out)
	}
	if want := fmt.Sprintf("got: %x %d", backSum, size); !strings.Contains(out, want) {
		t.Errorf("the sandbox did not receive what the host sent (%s):\n%s", want, out)
	}
}

// serveTCP listens on a loopback port and hands each connection to
// handle, in a goroutine of its own, closing it after; the listener
// closes when the test ends.
func serveTCP(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln
}
