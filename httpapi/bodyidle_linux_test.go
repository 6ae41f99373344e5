//go:build linux

package httpapi_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
	"github.com/moatbox/moat/mcpserver"
)

// stallBody sends a request's headers, announcing a body of size bytes,
// and the body's first few bytes, then nothing.
func stallBody(t *testing.T, sock, method, path, ctype, first string, size int) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: moat\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", method, path, ctype, size)
	io.WriteString(c, first)
	return c
}

// spooling counts the uploads this process (the daemon) is spooling in
// its state directory.
func spooling(t *testing.T, state string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); strings.HasPrefix(l, filepath.Join(state, "daemon", "upload-")) {
			n++
		}
	}
	return n
}

// stalledAnswer reads the answer to a stalled request, waiting at most
// within for it.
func stalledAnswer(t *testing.T, c net.Conn, within time.Duration) (int, client.Error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body within %s: %v", within, err)
	}
	defer resp.Body.Close()
	var e struct{ Error client.Error }
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &e); err != nil {
		t.Errorf("not a JSON error: %q", data)
	}
	return resp.StatusCode, e.Error
}

// TestStalledBodyReleased: a client that sends a tar upload's headers and
// a few bytes, then nothing, holds one of its tenant's upload slots only
// until the body has been quiet for the server's BodyIdle: it is answered
// 408 body_timeout and the slot is free again. Two stalled uploads hold
// both slots first (a third is refused): the stall is real. A file write
// and a JSON body that stall end the same way, and a request refused
// before its stalled body is read is answered. The positive controls: an
// upload that trickles in, slower in all than BodyIdle but never quiet
// that long, lands whole; an interactive exec whose input is quiet for
// longer than BodyIdle still gets it.
func TestStalledBodyReleased(t *testing.T) {
	const idle = 3 * time.Second
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) { s.BodyIdle = idle })
	ctx := context.Background()
	ws := t.TempDir()
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	small := func() io.Reader { return mkTar(t, reg("small")) }

	start := time.Now()
	var stalled []net.Conn
	for range daemon.MaxTenantUploads {
		stalled = append(stalled, stallBody(t, d.sock, "PUT", "/v1/sessions/"+s.ID+"/files/tar?path=up", "application/x-tar", strings.Repeat("\x00", 100), 1<<20))
	}
	file := stallBody(t, d.sock, "PUT", "/v1/sessions/"+s.ID+"/files?path=f", "application/octet-stream", "some bytes", 1<<10)
	create := stallBody(t, d.sock, "POST", "/v1/sessions", "application/json", `{"workspace":"`, 1<<10)
	// Refused before its body is read: the server reads the rest of the
	// body before it answers, bounded the same way.
	refused := stallBody(t, d.sock, "PUT", "/v1/sessions/nosuch/files?path=f", "application/octet-stream", "some bytes", 1<<10)
	noRoute := stallBody(t, d.sock, "POST", "/v1/nosuch", "application/json", "{", 1<<10)
	// The stalled uploads hold every slot (each spools into an unlinked
	// file of the daemon's once it has one): another is refused.
	for spooling(t, d.state) < len(stalled) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the stalled uploads never started: %d spooling", spooling(t, d.state))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := d.c.UploadTar(ctx, s.ID, ".", small()); apiCode(err) != client.CodeQuota {
		t.Fatalf("an upload while %d stalled ones hold the slots: %v", len(stalled), err)
	}
	for i, c := range append(stalled, file, create) {
		status, e := stalledAnswer(t, c, idle+10*time.Second)
		if status != http.StatusRequestTimeout || e.Code != client.CodeBodyTimeout {
			t.Errorf("stalled request %d: %d %+v", i, status, e)
		}
	}
	for _, c := range []net.Conn{refused, noRoute} {
		if status, e := stalledAnswer(t, c, idle+10*time.Second); status != http.StatusNotFound {
			t.Errorf("a request refused before its stalled body was read: %d %+v", status, e)
		}
	}
	if el := time.Since(start); el < idle {
		t.Errorf("the stalled bodies were abandoned after %s, before the %s bound", el, idle)
	}
	if _, err := d.c.UploadTar(ctx, s.ID, ".", small()); err != nil {
		t.Fatalf("an upload after the stalled ones ended: %v", err)
	}
	if fileExists(filepath.Join(ws, "f")) || fileExists(filepath.Join(ws, "up")) {
		t.Error("a stalled body wrote something")
	}

	// A trickle: never quiet for idle, longer than idle in all.
	content := strings.Repeat("x", 4096)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "slow", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))})
	io.WriteString(tw, content)
	tw.Close()
	pr, pw := io.Pipe()
	go func() {
		data := buf.Bytes()
		for len(data) > 0 {
			n := min(len(data), len(buf.Bytes())/8+1)
			if _, err := pw.Write(data[:n]); err != nil {
				return
			}
			data = data[n:]
			time.Sleep(idle / 4)
		}
		pw.Close()
	}()
	t0 := time.Now()
	if _, err := d.c.UploadTar(ctx, s.ID, ".", pr); err != nil {
		t.Fatalf("a trickled upload: %v", err)
	}
	if el := time.Since(t0); el < idle {
		t.Errorf("the trickle took %s, not longer than the bound: it proves nothing", el)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "slow")); string(b) != content {
		t.Errorf("the trickled file holds %d bytes", len(b))
	}

	// An interactive exec's input may be quiet for longer.
	var out syncBuffer
	x, err := d.c.Interactive(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", `read line; echo "got $line"`}}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(idle + idle/2)
	if _, err := x.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	rep, err := x.Wait()
	if err != nil || rep.ExitCode != 0 || out.String() != "got late\n" {
		t.Fatalf("an interactive exec quiet for longer than the bound: %v %+v %q", err, rep, out.String())
	}
}

// TestStalledMCPBody: a request to /mcp whose body stalls is answered
// once the body has been quiet for BodyIdle. The positive control: an
// initialize request sent whole is answered as MCP.
func TestStalledMCPBody(t *testing.T) {
	const idle = 2 * time.Second
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) {
		s.BodyIdle = idle
		s.MCP = mcpserver.NewHTTPHandler(mcpserver.HTTPConfig{Manager: s.Manager, Tenant: s.Tenant})
	})
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	hdr := "Accept: application/json, text/event-stream\r\n"
	whole, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	fmt.Fprintf(whole, "POST /mcp HTTP/1.1\r\nHost: moat\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", hdr, len(init), init)
	whole.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(whole), nil)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("positive control: a whole initialize request: %v %+v", err, resp)
	}
	resp.Body.Close()

	stalled, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	start := time.Now()
	fmt.Fprintf(stalled, "POST /mcp HTTP/1.1\r\nHost: moat\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", hdr, len(init), init[:20])
	stalled.SetReadDeadline(time.Now().Add(idle + 10*time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(stalled), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled MCP body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 == 2 || time.Since(start) < idle {
		t.Errorf("a stalled MCP body: %d after %s", resp.StatusCode, time.Since(start))
	}
}

// TestBodiesInFlightBounded: a tenant that trickles request bodies (never
// quiet for BodyIdle) holds at most MaxBodiesInFlight of them: the next
// is refused, quota_exceeded, and one ended frees its slot. The control:
// a write before the bodies stall lands.
func TestBodiesInFlightBounded(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	if err := d.c.WriteFile(ctx, s.ID, "before", []byte("x"), 0o644); err != nil {
		t.Fatalf("control: a write: %v", err)
	}
	var stalled []net.Conn
	for i := range httpapi.MaxBodiesInFlight {
		stalled = append(stalled, stallBody(t, d.sock, "PUT", fmt.Sprintf("/v1/sessions/%s/files?path=f%d", s.ID, i), "application/octet-stream", "x", 1<<10))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := d.c.WriteFile(ctx, s.ID, "more", []byte("x"), 0o644)
		if apiCode(err) == client.CodeQuota {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write while %d bodies trickle: %v", len(stalled), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// One more trickling body is answered at once, not once net/http has
	// read that body to its end (it waited before).
	extra := stallBody(t, d.sock, "PUT", fmt.Sprintf("/v1/sessions/%s/files?path=extra", s.ID), "application/octet-stream", "x", 1<<10)
	if code, e := stalledAnswer(t, extra, 3*time.Second); code != http.StatusTooManyRequests || e.Code != client.CodeQuota {
		t.Errorf("a trickling body past the bound: %d %+v, want 429 quota_exceeded", code, e)
	}
	stalled[0].Close()
	for {
		err := d.c.WriteFile(ctx, s.ID, "more", []byte("x"), 0o644)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write after one trickling body ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeclaredTooLargeRefusedAtOnce: a body whose Content-Length is over
// its bound is refused with 413 before a byte of it is read (it was
// waited for until the idle bound, found by a tester); the control, a
// body within the bound that stalls the same way, is still waited for.
func TestDeclaredTooLargeRefusedAtOnce(t *testing.T) {
	const idle = 5 * time.Second
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) { s.BodyIdle = idle })
	s := d.create(t, &client.CreateSessionRequest{Workspace: t.TempDir()})
	start := time.Now()
	for _, c := range []net.Conn{
		stallBody(t, d.sock, "PUT", "/v1/sessions/"+s.ID+"/files?path=f", "application/octet-stream", "some bytes", daemon.MaxFileSize+1),
		stallBody(t, d.sock, "PUT", "/v1/sessions/"+s.ID+"/files/tar?path=up", "application/x-tar", "x", 1<<40),
	} {
		if status, e := stalledAnswer(t, c, idle-time.Second); status != http.StatusRequestEntityTooLarge || e.Code != client.CodeBodyTooLarge {
			t.Errorf("a body declared over its bound: %d %+v", status, e)
		}
	}
	if el := time.Since(start); el >= idle {
		t.Errorf("refused after %s", el)
	}
	within := stallBody(t, d.sock, "PUT", "/v1/sessions/"+s.ID+"/files?path=f", "application/octet-stream", "some bytes", 1<<10)
	if status, e := stalledAnswer(t, within, idle+10*time.Second); status != http.StatusRequestTimeout {
		t.Errorf("control: a stalled body within its bound: %d %+v", status, e)
	}
}
