// Package client talks to a moat daemon (`moat serve`) over its HTTP API:
// sessions, exec with streamed output (interactive, with a terminal, too),
// background processes, files and tar archives, the review of overlay
// sessions, their audit records. It is what
// the CLI, the tests and the MCP server use, and it defines the API's wire
// types, which the server (package httpapi) shares.
//
// It uses the standard library only, so that a program embedding it links
// nothing of the sandbox. It decides nothing: the daemon checks every
// request, and every refusal comes back as an *Error with a stable Code.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/moatbox/moat/internal/termsafe"
)

// Client is a connection to one daemon. Its methods may be called
// concurrently.
type Client struct {
	base  string
	token string
	http  *http.Client
	unix  bool
	// OnApproval, when set, is told of each pending approval a command
	// run by Exec or Interactive waits for (Event.Approval). Set it
	// before the first call.
	OnApproval func(Approval)
}

// DefaultSocket is where `moat serve` listens when not told: $MOAT_SOCKET,
// else /run/moat/moat.sock for root, else $XDG_RUNTIME_DIR/moat.sock, else
// moat-UID/moat.sock in the temporary directory (moat serve refuses a
// directory others can write). It is the first of DefaultSockets.
func DefaultSocket() string { return DefaultSockets(os.Geteuid(), os.Getenv)[0] }

// DefaultSockets are the places where a moat daemon that user uid may
// reach listens when not told otherwise, given the environment getenv.
// The first is where uid's own daemon listens (DefaultSocket):
// $MOAT_SOCKET if set, else /run/moat/moat.sock for root, else
// $XDG_RUNTIME_DIR/moat.sock when that is absolute, else
// moat-UID/moat.sock in $TMPDIR when that is absolute, else in /tmp.
// Then come the others of that list, and the places uid's daemon would
// have picked in another environment: root's /run/moat/moat.sock, and
// /run/user/UID/moat.sock (a login session's $XDG_RUNTIME_DIR). A
// $MOAT_SOCKET that is not absolute is listed as it is.
func DefaultSockets(uid int, getenv func(string) string) []string {
	const root = "/run/moat/moat.sock"
	var socks []string
	if s := getenv("MOAT_SOCKET"); s != "" {
		socks = append(socks, s)
	}
	if uid == 0 {
		socks = append(socks, root)
	}
	if x := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		socks = append(socks, filepath.Join(x, "moat.sock"))
	}
	tmp := getenv("TMPDIR")
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	socks = append(socks, filepath.Join(tmp, "moat-"+strconv.Itoa(uid), "moat.sock"))
	if uid != 0 {
		socks = append(socks, root)
	}
	return append(socks, filepath.Join("/run/user", strconv.Itoa(uid), "moat.sock"))
}

// Unix returns a client of the daemon listening on the unix socket path.
// The daemon knows the caller by its uid.
func Unix(path string) *Client {
	tr := &http.Transport{
		DialContext:         dialWatched(path, false),
		MaxIdleConnsPerHost: 16,
	}
	return &Client{base: "http://moat", http: &http.Client{Transport: tr}, unix: true}
}

// UnixOwn is Unix for a socket the caller did not name, a default one
// (DefaultSocket), whose directory another local user may have made
// first where the temporary directory is shared: it talks only to a
// daemon run by the caller or by root, and refuses any other before a
// request is sent (ErrForeignDaemon), so that a socket another user
// planted there learns nothing of the caller's policies and commands.
func UnixOwn(path string) *Client {
	c := Unix(path)
	c.http.Transport.(*http.Transport).DialContext = dialWatched(path, true)
	return c
}

// ErrForeignDaemon: the daemon at a default socket runs as another user,
// not root (UnixOwn).
var ErrForeignDaemon = errors.New("the daemon at the socket is another user's")

// ServingUID is the uid of the process listening on the unix socket
// path (Linux; errors.ErrUnsupported elsewhere).
func ServingUID(path string) (int, error) {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	return peerUID(c)
}

// Direct reports whether the client talks to the daemon on its unix
// socket, with no proxy between them that could hold back a request's
// body until it ends (nginx does by default), as an Interactive exec's
// stays open while its command runs.
func (c *Client) Direct() bool { return c.unix }

// TCP returns a client of the daemon at addr (host:port, or a URL's
// http://host:port or https://host:port, a TLS proxy's, before it),
// authenticating with the bearer token.
func TCP(addr, token string) *Client {
	base := "http://" + addr
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		base = strings.TrimRight(addr, "/")
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 16, DialContext: dialWatched("", false)}
	return &Client{base: base, token: token, http: &http.Client{Transport: tr}}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// do sends a JSON request and decodes a JSON answer into out (if not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// send sends the request and returns a 2xx response; any other status is
// returned as *Error.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		if string(b) == "null" {
			// A nil request (CreateSession(ctx, nil)) sets nothing: the
			// daemon takes an object, and refuses null.
			b = []byte("{}")
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.roundTrip(req)
}

// roundTrip sends req and returns a 2xx response; any other status is
// returned as *Error.
func (c *Client) roundTrip(req *http.Request) (*http.Response, error) {
	// Every id is one segment of the path: an empty one leaves two
	// slashes, or one at the end, which the daemon would answer about
	// the path rather than the id.
	if p := req.URL.Path; strings.Contains(p, "//") || strings.HasSuffix(p, "/") {
		return nil, fmt.Errorf("%s %s: an empty id (of a session, process or approval)", req.Method, p)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("moat daemon: %w", err)
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct {
		Error *Error `json:"error"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(data, &e) != nil || e.Error == nil {
		return nil, &Error{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("%s %s: HTTP %d", req.Method, req.URL.Path, resp.StatusCode)}
	}
	e.Error.Status = resp.StatusCode
	return nil, e.Error
}

// CreateSession creates a session and returns it.
func (c *Client) CreateSession(ctx context.Context, req *CreateSessionRequest) (*Session, error) {
	var s Session
	if err := c.do(ctx, "POST", "/v1/sessions", req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Sessions lists the caller's sessions.
func (c *Client) Sessions(ctx context.Context) ([]Session, error) {
	var out struct {
		Sessions []Session `json:"sessions"`
	}
	err := c.do(ctx, "GET", "/v1/sessions", nil, &out)
	return out.Sessions, err
}

// Session returns one session.
func (c *Client) Session(ctx context.Context, id string) (*Session, error) {
	var s Session
	if err := c.do(ctx, "GET", "/v1/sessions/"+url.PathEscape(id), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSession ends a session: its processes are killed and a workspace
// the daemon made is removed. What its end warns of is dropped: EndSession
// returns it.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.EndSession(ctx, id)
	return err
}

// EndSession is DeleteSession, returning what the session's end warns of
// (a secret's revoke that failed).
func (c *Client) EndSession(ctx context.Context, id string) (*SessionEnd, error) {
	resp, err := c.send(ctx, "DELETE", "/v1/sessions/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	end := &SessionEnd{}
	if resp.StatusCode == http.StatusNoContent {
		return end, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(end); err != nil {
		return nil, fmt.Errorf("DELETE session %s: decode answer: %w", id, err)
	}
	return end, nil
}

// Exec runs a command in a session to completion, copying its output to
// stdout and stderr as it is written, and returns how it ended. A nil
// writer discards that stream. req.Background must be false (see Start).
func (c *Client) Exec(ctx context.Context, id string, req *ExecRequest, stdout, stderr io.Writer) (*ExitReport, error) {
	if req == nil {
		return nil, errNoRequest
	}
	if err := req.text(); err != nil {
		return nil, err
	}
	if req.Background {
		return nil, errors.New("exec: a background command is started with Start")
	}
	resp, err := c.send(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/exec", req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return c.readEvents(resp.Body, stdout, stderr)
}

// text refuses an ExecRequest whose words are not UTF-8: the API carries
// them as JSON strings, and a byte that is not UTF-8 would reach the
// command as U+FFFD, another argument than the one given (a file name
// rm or mv would miss), without a word.
func (r *ExecRequest) text() error {
	for i, a := range r.Args {
		if !utf8.ValidString(a) {
			return fmt.Errorf("exec: argument %d (%q) is not UTF-8 text, which the API carries arguments as; pass such a name through a script, or a glob the command expands", i, a)
		}
	}
	for _, e := range r.Env {
		if !utf8.ValidString(e) {
			return fmt.Errorf("exec: environment entry %q is not UTF-8 text, which the API carries the environment as", e)
		}
	}
	if !utf8.ValidString(r.Dir) {
		return fmt.Errorf("exec: directory %q is not UTF-8 text", r.Dir)
	}
	if !utf8.ValidString(r.Stdin) {
		return errors.New("exec: the standard input given with the request is not UTF-8 text, which the request carries it as; give binary input to an interactive command (moat exec -i without -d)")
	}
	return nil
}

// errNoRequest: a command is an ExecRequest's Args; nil names none.
var errNoRequest = errors.New("exec: no ExecRequest (its Args name the command)")

// LayerTerminal is the Layer of the Denials an ExitReport gets for the
// control sequences the client dropped from a command's output to a
// terminal.
const LayerTerminal = "terminal"

// LayerMount is the Layer of the Denial that names a protection that went
// while the session ran (Reason "protection"): the host replaced or
// removed the file under it.
const LayerMount = "mount"

// readEvents copies an exec's output events to stdout and stderr, tells
// c.OnApproval of its approvals, and returns its last event's report or
// error.
//
// Output to a terminal (a file that is one, or a writer whose Unwrap
// method leads to one) is filtered as a run's is (see backend.Stdio): the
// sequences that reach beyond the screen, a clipboard write or a title
// report, are dropped, each kind a Denial of LayerTerminal in the report.
func (c *Client) readEvents(body io.Reader, stdout, stderr io.Writer) (*ExitReport, error) {
	stdout, stderr, done := TerminalOutput(stdout, stderr)
	rep, err := c.copyEvents(body, stdout, stderr)
	dropped := done()
	if rep != nil {
		rep.Denials = append(rep.Denials, dropped...)
	}
	if err != nil && len(dropped) > 0 {
		err = &OutputError{Err: err, Denials: dropped}
	}
	return rep, err
}

// OutputError is the error of an exec that failed after some of its
// output was written to a terminal (the stream was cut, the daemon went
// away): Denials are what the client dropped from that output, as an
// ExitReport would have had them. errors.As finds the error it wraps.
type OutputError struct {
	Err     error
	Denials []Denial
}

func (e *OutputError) Error() string { return e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// ErrorDenials returns the Denials of an OutputError in err's chain, or
// none.
func ErrorDenials(err error) []Denial {
	var oe *OutputError
	if errors.As(err, &oe) {
		return oe.Denials
	}
	return nil
}

// TerminalOutput returns stdout and stderr filtered where they are a
// terminal (a file that is one, or a writer whose Unwrap method leads to
// one), as Exec filters a command's output, for a caller that writes a
// session's output itself (Output's, a background command's). done ends
// the filter once the output is written and returns what it dropped, a
// Denial of LayerTerminal for each kind.
func TerminalOutput(stdout, stderr io.Writer) (o, e io.Writer, done func() []Denial) {
	term := new(termsafe.Set)
	return term.Wrap(stdout), term.Wrap(stderr), func() []Denial {
		var out []Denial
		for _, d := range term.Close() {
			out = append(out, Denial{Layer: LayerTerminal, What: d.What, Count: d.Count,
				Rule: termsafe.Rule, Hint: termsafe.Hint})
		}
		return out
	}
}

func (c *Client) copyEvents(body io.Reader, stdout, stderr io.Writer) (*ExitReport, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("exec: bad stream line: %w", err)
		}
		switch {
		case ev.Exit != nil:
			return ev.Exit, nil
		case ev.Error != nil:
			ev.Error.Status = http.StatusOK
			return nil, ev.Error
		case ev.Approval != nil:
			if c.OnApproval != nil {
				c.OnApproval(*ev.Approval)
			}
			continue
		case ev.KeepAlive:
			continue
		}
		w := stdout
		if ev.Stream == "stderr" {
			w = stderr
		}
		if w == nil {
			continue
		}
		data := ev.DataBase64
		if data == nil {
			data = []byte(ev.Data)
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("exec: stream: %w", err)
	}
	return nil, errors.New("exec: the daemon closed the stream before the command ended")
}

// Start starts a background command in a session.
func (c *Client) Start(ctx context.Context, id string, req *ExecRequest) (*Process, error) {
	if req == nil {
		return nil, errNoRequest
	}
	if err := req.text(); err != nil {
		return nil, err
	}
	r := *req
	r.Background = true
	var p Process
	if err := c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/exec", &r, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Processes lists a session's background commands, running or ended.
func (c *Client) Processes(ctx context.Context, id string) ([]Process, error) {
	var out struct {
		Processes []Process `json:"processes"`
	}
	err := c.do(ctx, "GET", "/v1/sessions/"+url.PathEscape(id)+"/processes", nil, &out)
	return out.Processes, err
}

// Signal sends a signal ("TERM", "KILL", …) to a background command.
func (c *Client) Signal(ctx context.Context, id, pid, sig string) error {
	return c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/processes/"+url.PathEscape(pid)+"/signal", &SignalRequest{Signal: sig}, nil)
}

// Output reads what a background command wrote after sequence number
// after (0: from the start). When wait is positive and nothing new is
// there, the daemon waits up to that long for output or the end.
func (c *Client) Output(ctx context.Context, id, pid string, after int64, wait time.Duration) (*Output, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var o Output
	if err := c.do(ctx, "GET", "/v1/sessions/"+url.PathEscape(id)+"/processes/"+url.PathEscape(pid)+"/output?"+q.Encode(), nil, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

func filesPath(id, suffix, path string, extra url.Values) string {
	q := url.Values{"path": {path}}
	for k, v := range extra {
		q[k] = v
	}
	return "/v1/sessions/" + url.PathEscape(id) + "/files" + suffix + "?" + q.Encode()
}

// ReadFile returns the content of a file of the session's workspace
// (path relative to it).
func (c *Client) ReadFile(ctx context.Context, id, path string) ([]byte, error) {
	resp, err := c.send(ctx, "GET", filesPath(id, "", path, nil), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// WriteFile replaces a file of the session's workspace atomically with
// data, with permission bits perm.
func (c *Client) WriteFile(ctx context.Context, id, path string, data []byte, perm os.FileMode) error {
	req, err := http.NewRequestWithContext(ctx, "PUT", c.base+filesPath(id, "", path, url.Values{"mode": {fmt.Sprintf("%04o", perm.Perm())}}), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return c.raw(req)
}

// raw sends a request built by the caller, discarding a 2xx answer.
func (c *Client) raw(req *http.Request) error {
	resp, err := c.roundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// RemoveFile removes a file, link or empty directory of the workspace.
func (c *Client) RemoveFile(ctx context.Context, id, path string) error {
	return c.do(ctx, "DELETE", filesPath(id, "", path, nil), nil, nil)
}

// Stat describes a workspace entry (a link itself, not its target).
func (c *Client) Stat(ctx context.Context, id, path string) (*FileInfo, error) {
	var fi FileInfo
	if err := c.do(ctx, "GET", filesPath(id, "/stat", path, nil), nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// ListDir describes the entries of a workspace directory, sorted by name.
func (c *Client) ListDir(ctx context.Context, id, path string) ([]FileInfo, error) {
	var out struct {
		Entries []FileInfo `json:"entries"`
	}
	err := c.do(ctx, "GET", filesPath(id, "/list", path, nil), nil, &out)
	return out.Entries, err
}

// WriteStdin writes data to the standard input of a background command
// started with StdinOpen, and closes it after with close.
func (c *Client) WriteStdin(ctx context.Context, id, pid string, data []byte, close bool) error {
	q := ""
	if close {
		q = "?close=true"
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/sessions/"+url.PathEscape(id)+"/processes/"+url.PathEscape(pid)+"/stdin"+q, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return c.raw(req)
}

// Fetch has the daemon fetch rawURL for session id: a GET of a public
// https:// URL, no redirects, 5 s, 1 MiB, under the session's host rules
// (an ask waits for a pending approval). A refusal is an *Error with code
// CodeDenied (the rules) or CodeFetchRefused (the fetch itself).
func (c *Client) Fetch(ctx context.Context, id, rawURL string) (*FetchResult, error) {
	var out FetchResult
	if err := c.do(ctx, "POST", "/v1/sessions/"+url.PathEscape(id)+"/fetch", &FetchRequest{URL: rawURL}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
