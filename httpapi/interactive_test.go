//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/httpapi"
)

// syncBuffer is a bytes.Buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitShown waits until out holds want n times, or the command ended.
func waitShown(t *testing.T, x *client.Interactive, out *syncBuffer, want string, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for strings.Count(out.String(), want) < n {
		select {
		case <-x.Done():
			rep, err := x.Wait()
			t.Fatalf("the command ended before showing %q: %q %+v %v", want, out.String(), rep, err)
		case <-deadline:
			t.Fatalf("never shown %q; output %q", want, out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestInteractiveTTY: a command with a terminal sees one of the size asked
// for, and the new size after a resize message; its input is typed as it
// runs, echoed by the terminal. The positive control for the terminal: the
// same probe without tty finds none.
func TestInteractiveTTY(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	s := d.create(t, &client.CreateSessionRequest{})
	script := `if [ -t 0 ]; then echo terminal; else echo none; fi; stty size; read line; echo "got $line"; stty size`

	var out syncBuffer
	x, err := d.c.Interactive(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", script}, Tty: true, Rows: 33, Cols: 101}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitShown(t, x, &out, "33 101", 1)
	if err := x.Resize(40, 120); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Write([]byte("hello\r")); err != nil {
		t.Fatal(err)
	}
	rep, err := x.Wait()
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("tty exec: %v %+v; output %q", err, rep, out.String())
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n")
	for _, want := range []string{"terminal\n", "33 101\n", "hello\n", "got hello\n", "40 120\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("tty output lacks %q: %q", want, got)
		}
	}

	// Without tty: no terminal, and the input is a stream that ends.
	var plain syncBuffer
	x, err = d.c.Interactive(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "if [ -t 0 ]; then echo terminal; else echo none; fi; cat"}}, &plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	x.Write([]byte("one\n"))
	waitShown(t, x, &plain, "one\n", 1)
	x.Write([]byte("two\n"))
	if err := x.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	rep, err = x.Wait()
	if err != nil || rep.ExitCode != 0 || plain.String() != "none\none\ntwo\n" {
		t.Fatalf("exec with streamed input: %v %+v %q", err, rep, plain.String())
	}
	if err := x.Resize(1, 1); err == nil {
		t.Error("a resize after the command ended was accepted")
	}
}

// TestInteractiveCat: an interactive cat on a terminal echoes each line
// typed (the terminal's echo and cat's copy), and ends on ^D.
func TestInteractiveCat(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	var out syncBuffer
	x, err := d.c.Interactive(context.Background(), s.ID, &client.ExecRequest{Args: []string{"cat"}, Tty: true}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	x.Write([]byte("ping\r"))
	waitShown(t, x, &out, "ping\r\n", 2)
	x.Write([]byte("pong\r"))
	waitShown(t, x, &out, "pong\r\n", 2)
	x.Write([]byte{4})
	rep, err := x.Wait()
	if err != nil || rep.ExitCode != 0 {
		t.Fatalf("cat: %v %+v %q", err, rep, out.String())
	}
}

// TestInteractiveBadInput: a malformed input line, a resize without a
// terminal, or an unknown field ends the command with a JSON error; the
// session serves the next command.
func TestInteractiveBadInput(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	hc := rawClient(d.sock)
	for name, body := range map[string]string{
		"resize without tty": `{"args":["sleep","30"]}` + "\n" + `{"resize":{"rows":3,"cols":4}}` + "\n",
		"unknown field":      `{"args":["sleep","30"]}` + "\n" + `{"keys":"x"}` + "\n",
		"not json":           `{"args":["sleep","30"]}` + "\n" + "{\n",
		"zero size":          `{"args":["sleep","30"],"tty":true}` + "\n" + `{"resize":{"rows":0,"cols":4}}` + "\n",
		// Two things in one line: one was dropped before.
		"stdin and signal":       `{"args":["sleep","30"]}` + "\n" + `{"stdin":"x","signal":"TERM"}` + "\n",
		"stdin and stdin_base64": `{"args":["sleep","30"]}` + "\n" + `{"stdin":"x","stdin_base64":"eQ=="}` + "\n",
	} {
		start := time.Now()
		status, e := apiErr(t, hc, "POST", "http://moat/v1/sessions/"+s.ID+"/exec", body, map[string]string{"Content-Type": "application/x-ndjson"})
		if status != 400 || e.Code != client.CodeBadRequest {
			t.Errorf("%s: %d %+v", name, status, e)
		}
		if time.Since(start) > 20*time.Second {
			t.Errorf("%s: the command was not ended by the bad input", name)
		}
	}
	// What the client sent is quoted bounded, and in the API's terms
	// (found by a tester: a signal's name came back whole, 900 KB, and a
	// size named Go's struct field and type). The control: a short bad
	// name is quoted whole.
	huge := strings.Repeat("x", 100000)
	for name, c := range map[string]struct{ line, want string }{
		"long signal":  {`{"signal":"` + huge + `"}`, "bytes more)"},
		"short signal": {`{"signal":"NOPE"}`, `signal "NOPE": want`},
		"size":         {`{"resize":{"rows":70000,"cols":1}}`, "field resize.rows: a JSON number 70000 is not what it takes"},
	} {
		status, e := apiErr(t, hc, "POST", "http://moat/v1/sessions/"+s.ID+"/exec", `{"args":["sleep","30"],"tty":true}`+"\n"+c.line+"\n", map[string]string{"Content-Type": "application/x-ndjson"})
		if status != 400 || !strings.Contains(e.Message, c.want) || len(e.Message) > 5000 || strings.Contains(e.Message, "Go struct") {
			t.Errorf("%s: %d %.300q, want one that says %q, bounded", name, status, e.Message, c.want)
		}
	}
	for name, body := range map[string]string{
		"empty":      "",
		"background": `{"args":["true"],"background":true}` + "\n",
		"bad first":  `{"argv":["true"]}` + "\n",
	} {
		status, e := apiErr(t, hc, "POST", "http://moat/v1/sessions/"+s.ID+"/exec", body, map[string]string{"Content-Type": "application/x-ndjson"})
		if status != 400 || e.Code != client.CodeBadRequest {
			t.Errorf("%s: %d %+v", name, status, e)
		}
	}
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"echo", "still"}}); out != "still\n" || rep.ExitCode != 0 {
		t.Errorf("the session after bad input: %q %+v", out, rep)
	}
	// The last input and its end in one line: both count (the input was
	// dropped before).
	resp, err := hc.Post("http://moat/v1/sessions/"+s.ID+"/exec", "application/x-ndjson",
		strings.NewReader(`{"args":["cat"]}`+"\n"+`{"stdin":"last","close_stdin":true}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"data":"last"`) || !strings.Contains(string(b), `"exit_code":0`) {
		t.Errorf("stdin with close_stdin in one line: %s", b)
	}
}

// TestInteractiveClientGone: a client that goes away ends its command
// (the request's end kills it), and the session serves the next one.
func TestInteractiveClientGone(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	x, err := d.c.Interactive(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "echo started; exec sleep 60"}, Tty: true}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitShown(t, x, &out, "started", 1)
	count := `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $f; echo; done | grep -c '^sleep 60'`
	// The positive control: the probe finds the command while it runs.
	if o, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", count}}); o != "1\n" {
		t.Fatalf("the probe finds %q commands while it runs", o)
	}
	cancel()
	if _, err := x.Wait(); err == nil {
		t.Error("a cancelled interactive exec reported an end")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		o, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", count}})
		if o == "0\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command outlived its client: %q", o)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInteractiveCancelQuiet: a cancelled interactive exec that has
// written nothing yet (so no answer has begun) ends Wait at once; before,
// the transport waited for the request body, which nothing closed, and
// Wait never returned.
func TestInteractiveCancelQuiet(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{})
	ctx, cancel := context.WithCancel(context.Background())
	x, err := d.c.Interactive(ctx, s.ID, &client.ExecRequest{Args: []string{"sleep", "60"}}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case <-x.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after the context was cancelled")
	}
	if _, err := x.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait: %v, want context.Canceled", err)
	}
}

// TestClientMisuse: a nil request and an empty id are the client's own
// clear errors, not a panic or an answer about a path.
func TestClientMisuse(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	if _, err := d.c.Exec(ctx, "x", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "no ExecRequest") {
		t.Errorf("Exec with a nil request: %v", err)
	}
	if _, err := d.c.Start(ctx, "x", nil); err == nil || !strings.Contains(err.Error(), "no ExecRequest") {
		t.Errorf("Start with a nil request: %v", err)
	}
	if _, err := d.c.Exec(ctx, "", &client.ExecRequest{Args: []string{"true"}}, nil, nil); err == nil || !strings.Contains(err.Error(), "empty id") {
		t.Errorf("Exec with an empty session id: %v", err)
	}
	if _, err := d.c.Session(ctx, ""); err == nil || !strings.Contains(err.Error(), "empty id") {
		t.Errorf("Session with an empty id: %v", err)
	}
	// The control: the same calls with a session answer.
	s := d.create(t, &client.CreateSessionRequest{})
	if rep, err := d.c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"true"}}, nil, nil); err != nil || rep.ExitCode != 0 {
		t.Errorf("Exec: %v %+v", err, rep)
	}
}

// TestInteractiveBadLineNoPanic: a malformed input line, sent as a stream
// (chunked, the body's end a moment later), ends the exec with a
// bad_request and the connection with it: net/http's read of the next
// request must not meet the handler's read of the body, which it
// answers with a panic (logged, with its stack). Several rounds, as it
// is a race; the answer is the control.
func TestInteractiveBadLineNoPanic(t *testing.T) {
	var log syncBuffer
	d := startDaemonWith(t, daemon.Config{}, nil, func(s *httpapi.Server) {
		s.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	s := d.create(t, &client.CreateSessionRequest{})
	hc := rawClient(d.sock)
	for range 20 {
		pr, pw := io.Pipe()
		go func() {
			io.WriteString(pw, `{"args":["cat"]}`+"\n")
			time.Sleep(time.Millisecond)
			io.WriteString(pw, "garbage\n")
			time.Sleep(time.Millisecond)
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", "http://moat/v1/sessions/"+s.ID+"/exec", pr)
		req.Header.Set("Content-Type", "application/x-ndjson")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "bad_request") {
			t.Fatalf("answer %d %q, want bad_request", resp.StatusCode, b)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(log.String(), "panic") {
		t.Errorf("the server panicked:\n%s", log.String())
	}
}

// TestInteractiveRefusedAtOnce: an interactive exec refused before its
// body is read (an unknown session) is answered at once, though the
// client holds its body open for the command it meant to run: before,
// net/http read that body to its end first, until the idle bound.
func TestInteractiveRefusedAtOnce(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	x, err := d.c.Interactive(ctx, "nosuchsession", &client.ExecRequest{Args: []string{"cat"}}, io.Discard, io.Discard)
	if err == nil {
		_, err = x.Wait()
	}
	if apiCode(err) != client.CodeNotFound || time.Since(start) > 5*time.Second {
		t.Errorf("after %v: %v, want not_found at once", time.Since(start), err)
	}
}

// TestInteractiveRefusalNotLost: an interactive exec the session refuses
// at once (its runs budget spent) gets the refusal, though the client is
// writing its input as the answer comes and the connection closes after
// it: the client's transport must not report its write's "broken pipe"
// instead. The control: the first exec runs.
func TestInteractiveRefusalNotLost(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	s := d.create(t, &client.CreateSessionRequest{Policy: "[budgets]\nruns = 1\n"})
	if rep, err := d.c.Exec(context.Background(), s.ID, &client.ExecRequest{Args: []string{"true"}}, io.Discard, io.Discard); err != nil || rep.ExitCode != 0 {
		t.Fatalf("control: %v %+v", err, rep)
	}
	for i := range 20 {
		x, err := d.c.Interactive(context.Background(), s.ID, &client.ExecRequest{Args: []string{"cat"}}, io.Discard, io.Discard)
		if err == nil {
			// Input goes on being written, as a terminal's would.
			go func() {
				line := bytes.Repeat([]byte("x"), 4096)
				for {
					if _, err := x.Write(line); err != nil {
						return
					}
				}
			}()
			var rep *client.ExitReport
			if rep, err = x.Wait(); err == nil && (rep.Reason != "budget" || rep.Budget != "runs") {
				t.Fatalf("try %d: %+v, want the refusal naming the runs budget", i+1, rep)
			}
		}
		if err != nil {
			t.Fatalf("try %d: %v, want the refusal naming the runs budget", i+1, err)
		}
	}
}
