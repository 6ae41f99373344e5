//go:build linux

package httpapi_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// listSessionsOn sends GET /v1/sessions on the connection c, with the
// bearer token auth unless it is "", and reads the answer.
func listSessionsOn(c net.Conn, auth string) (*http.Response, error) {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req, _ := http.NewRequest("GET", "http://moat/v1/sessions", nil)
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if err := req.Write(c); err != nil {
		return nil, err
	}
	return http.ReadResponse(bufio.NewReader(c), req)
}

// TestConnectionsPerCallerBounded: a caller (a TCP address) that holds
// the most connections it may gets 429 on the next, which the daemon
// closes, while another caller (the unix socket's) is served; once the
// first closes one, it is served again (found by a tester: one tenant
// took every descriptor of the daemon's). A 401 closes its connection.
func TestConnectionsPerCallerBounded(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemonWith(t, daemon.Config{}, tokens, func(s *httpapi.Server) { s.MaxConnsPerCaller = 3 })
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	get := listSessionsOn
	for i := range 3 {
		c, err := net.Dial("tcp", d.tcp)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		resp, err := get(c, "tok-a")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	c, err := net.Dial("tcp", d.tcp)
	if err != nil {
		t.Fatal(err)
	}
	// The answer is written as the connection is accepted, before the
	// request: over TCP the request may meet the closed socket's reset.
	resp, err := get(c, "tok-a")
	if err == nil && (resp.StatusCode != http.StatusTooManyRequests || !resp.Close) {
		t.Errorf("the fourth connection: %v, want 429 and closed", resp)
	} else if err == nil {
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		if !strings.Contains(b.String(), client.CodeQuota) {
			t.Errorf("the fourth connection's answer: %s", b.String())
		}
	}
	c.Close()
	// Connections past the bound that send nothing hold no descriptor
	// of the daemon's (which runs in this process): each is closed as
	// it is accepted.
	before := openFDs(t)
	var idle []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", d.tcp)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	time.Sleep(300 * time.Millisecond)
	if n := openFDs(t) - before; n > 50+5 {
		t.Errorf("50 idle connections past the bound: the process holds %d more descriptors, want about 50 (the test's own)", n)
	}
	for _, c := range idle {
		c.Close()
	}
	// Another caller is served meanwhile.
	if _, err := d.c.Sessions(context.Background()); err != nil {
		t.Errorf("the unix socket's caller: %v", err)
	}
	// Once one of the three goes, a new one is served.
	held[0].Close()
	held = held[1:]
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", d.tcp)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := get(c, "tok-a")
		if err == nil && resp.StatusCode == 200 {
			held = append(held, c)
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("after a connection closed: %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A 401 does not keep its connection (it is counted until closed).
	held[0].Close()
	held = held[1:]
	time.Sleep(100 * time.Millisecond)
	c, err = net.Dial("tcp", d.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp, err := get(c, "wrong"); err != nil || resp.StatusCode != 401 || !resp.Close {
		t.Errorf("a wrong token: %v %v, want 401 and closed", resp, err)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestStrangeConnectionsMakeRoom: connections that show no token (here
// half a request each, from 127.0.0.1 and 127.0.0.2, one caller) do not
// lock out a tenant that shares their address, as a flood of them did
// (found by a tester): the oldest is closed for each new one, while a
// connection that showed a token stays and is served again. The control:
// the tenant's request is answered 200 throughout.
func TestStrangeConnectionsMakeRoom(t *testing.T) {
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemonWith(t, daemon.Config{}, tokens, func(s *httpapi.Server) { s.MaxConnsPerCaller = 3 })
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	flood := func() {
		t.Helper()
		for i := range 10 {
			dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%2))}}
			c, err := dl.Dial("tcp", d.tcp)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
			c.Write([]byte("GET /v1/sessions HTTP/1.1\r\nHost: moat\r\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	get := func(c net.Conn) (int, error) {
		resp, err := listSessionsOn(c, "tok-a")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	flood()
	c, err := net.Dial("tcp", d.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if code, err := get(c); code != 200 {
		t.Fatalf("the tenant's request after a flood of strange connections: %d %v", code, err)
	}
	flood()
	if code, err := get(c); code != 200 {
		t.Errorf("the tenant's connection after another flood: %d %v", code, err)
	}
	var closed int
	for _, h := range held {
		h.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := h.Read(make([]byte, 1)); err != nil && !os.IsTimeout(err) {
			closed++
		}
	}
	if closed < len(held)-3 {
		t.Errorf("%d of %d strange connections closed, want all but the newest few", closed, len(held))
	}
}
