package egress

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inNetnsEnv marks the copy of the test binary that runs inside the
// network namespace TestHostAddressOnInterface makes.
const inNetnsEnv = "MOAT_EGRESS_IN_NETNS"

// The host's own addresses, as its interfaces hold them, are refused like
// loopback: a server listening on all addresses answers on them. The test
// runs in a network namespace of its own (new user and network
// namespaces, so it needs no root) with a veth interface holding public
// addresses, so it does not depend on what this machine's interfaces
// hold, and no packet can leave the namespace.
func TestHostAddressOnInterface(t *testing.T) {
	if os.Getenv(inNetnsEnv) == "" {
		runInNetns(t)
		return
	}
	const own4, own6 = "93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"
	ipCmd(t, "link", "set", "lo", "up")
	ipCmd(t, "link", "add", "moat0", "type", "veth", "peer", "name", "moat1")
	ipCmd(t, "addr", "add", own4+"/32", "dev", "moat0")
	ipCmd(t, "addr", "add", own6+"/128", "dev", "moat0", "nodad")
	ipCmd(t, "link", "set", "moat0", "up")
	// The kernel installs the IPv6 address's local route from work it
	// queues when the link comes up; on a loaded machine a connection
	// made before then finds no route.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("udp", "["+own6+"]:9"); err == nil {
			ok := c.LocalAddr().(*net.UDPAddr).IP.Equal(net.ParseIP(own6))
			c.Close()
			if ok {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no local route 10 s after its link came up", own6)
		}
	}

	l, err := net.Listen("tcp", ":0") // 0.0.0.0 and [::]
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(helloHandler)
	srv.Listener.Close()
	srv.Listener = l
	conns := &connCounter{}
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.mu.Lock()
			conns.n++
			conns.mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	port := l.Addr().(*net.TCPAddr).Port
	// The proxy dials for real: inside this namespace every address
	// leads back into it.
	inNamespace := func(tp *testProxy) {
		names(map[string][]string{"own4.test": {own4}, "own6.test": {own6}, "mapped.test": {"::ffff:" + own4}})(tp)
		tp.Dial = nil
	}

	tp := newProxy(t, mustRules(t, []string{"own4.test", "own6.test", "mapped.test"}, nil, nil), inNamespace)
	for host, addr := range map[string]string{"own4.test": own4, "own6.test": own6, "mapped.test": own4} {
		rule := "the host's own address " + addr
		url := fmt.Sprintf("http://%s:%d/", host, port)
		resp, body := tp.get(t, url, fmt.Sprintf("%s:%d", host, port))
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != rule {
			t.Errorf("GET %s: %d %q %s, want 403 %q", url, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body, rule)
		}
		contains(t, body, "allow_cidrs")
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, rule)

		if c, resp := tp.connect(t, fmt.Sprintf("%s:%d", host, port)); c != nil || resp.Header.Get("X-Moat-Denied") != rule {
			t.Errorf("CONNECT %s: %d %q, want 403 %q", host, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), rule)
			if c != nil {
				c.Close()
			}
		}
		wantEvent(t, tp.event(t), ProtoConnect, DecisionDeny, rule)

		if _, rep := tp.socks(t, socksAtypDomain, []byte(host), port); rep != socksNotAllowed {
			t.Errorf("SOCKS5 %s: reply %d, want 2", host, rep)
		}
		wantEvent(t, tp.event(t), ProtoSOCKS5, DecisionDeny, rule)
	}
	if n := conns.count(); n != 0 {
		t.Fatalf("the server on all addresses saw %d connections", n)
	}

	// allow_cidrs lets them through, and the server is reached.
	open := newProxy(t, mustRules(t, []string{"own4.test", "own6.test"}, nil, []string{own4, own6 + "/128"}), inNamespace)
	for host, cidr := range map[string]string{"own4.test": own4, "own6.test": own6 + "/128"} {
		resp, body := open.get(t, fmt.Sprintf("http://%s:%d/x", host, port), fmt.Sprintf("%s:%d", host, port))
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "hello "+host) {
			t.Errorf("%s with allow_cidrs: %d %s", host, resp.StatusCode, body)
		}
		if e := open.event(t); e.Decision != DecisionAllow || e.Rule != host {
			t.Errorf("%s with allow_cidrs %s: event %+v", host, cidr, e)
		}
	}
	if n := conns.count(); n != 2 {
		t.Errorf("the server saw %d connections, want 2", n)
	}
}

// runInNetns runs the calling test again in a child process in new user
// and network namespaces, and reports its outcome as this test's.
func runInNetns(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), inNetnsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("cannot start a process in new user and network namespaces: %v", err)
	}
	if err != nil {
		t.Fatalf("in a new network namespace: %v\n%s", err, out)
	}
	if i := bytes.Index(out, []byte("--- SKIP")); i >= 0 {
		t.Skipf("in a new network namespace: %s", out[i:])
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("in a new network namespace, the test did not run:\n%s", out)
	}
}

// ipCmd runs ip(8) in the test's namespace; a system without it, or
// without veth, skips the test, saying which.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("ip")
	if err != nil {
		for _, p := range []string{"/usr/sbin/ip", "/sbin/ip"} {
			if _, serr := os.Stat(p); serr == nil {
				path, err = p, nil
			}
		}
	}
	if err != nil {
		t.Skipf("no ip(8) to set up the network namespace: %v", err)
	}
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		t.Skipf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// TestHostLocalRoutes: an address on no interface that the host still
// answers on itself, by a local route (an address given to the loopback
// device with a prefix, an AnyIP route), is the host's own too: both
// reached a service listening on all addresses (found by a tester). The
// control: an address just outside the prefix is no such address (the
// dial goes on, and fails, no route leading anywhere).
func TestHostLocalRoutes(t *testing.T) {
	if os.Getenv(inNetnsEnv) == "" {
		runInNetns(t)
		return
	}
	ipCmd(t, "link", "set", "lo", "up")
	ipCmd(t, "addr", "add", "45.45.46.1/24", "dev", "lo")
	ipCmd(t, "route", "add", "local", "45.45.48.0/24", "dev", "lo")
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(helloHandler)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	port := l.Addr().(*net.TCPAddr).Port
	tp := newProxy(t, mustRules(t, []string{"prefix.test", "anyip.test", "outside.test"}, nil, nil), func(tp *testProxy) {
		names(map[string][]string{"prefix.test": {"45.45.46.77"}, "anyip.test": {"45.45.48.9"}, "outside.test": {"45.45.47.1"}})(tp)
		tp.Dial = nil
	})
	for host, addr := range map[string]string{"prefix.test": "45.45.46.77", "anyip.test": "45.45.48.9"} {
		rule := "the host's own address " + addr
		resp, body := tp.get(t, fmt.Sprintf("http://%s:%d/", host, port), fmt.Sprintf("%s:%d", host, port))
		if resp.StatusCode != 403 || resp.Header.Get("X-Moat-Denied") != rule {
			t.Errorf("GET %s (%s): %d %q %s, want 403 %q", host, addr, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body, rule)
		}
		wantEvent(t, tp.event(t), ProtoHTTP, DecisionDeny, rule)
	}
	resp, body := tp.get(t, fmt.Sprintf("http://outside.test:%d/", port), fmt.Sprintf("outside.test:%d", port))
	if resp.Header.Get("X-Moat-Denied") != "" || strings.HasPrefix(body, "hello") {
		t.Errorf("control: outside the prefix: %d %q %s", resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
	}
}
