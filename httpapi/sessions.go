package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

func badRequest(format string, args ...any) error {
	return &client.Error{Status: http.StatusBadRequest, Code: client.CodeBadRequest, Message: bounded(fmt.Sprintf(format, args...))}
}

func duration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, perr := policy.ParseDuration(s); errors.Is(perr, policy.ErrDurationTooLong) {
			return 0, badRequest("%s: %v", field, perr) // well formed, past Go's longest duration
		}
		return 0, badRequest("%s: %q is not a duration such as \"30m\"", field, s)
	}
	if d < 0 {
		return 0, badRequest("%s: %q is negative; a duration is 0 or more, such as \"30m\"", field, s)
	}
	return d, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	var req client.CreateSessionRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	ttl, err := duration("ttl", req.TTL)
	if err != nil {
		return err
	}
	idle, err := duration("idle_timeout", req.IdleTimeout)
	if err != nil {
		return err
	}
	sess, err := s.Manager.Create(r.Context(), t, &daemon.CreateRequest{
		Policy: req.Policy, PolicyFile: req.PolicyFile, Workspace: req.Workspace, WorkspaceMode: req.WorkspaceMode, TTL: ttl, IdleTimeout: idle,
		Template: req.Template, Learn: req.Learn,
	})
	if err != nil {
		return err
	}
	s.metrics.sessionsCreated.Add(1)
	return writeJSON(w, http.StatusCreated, sessionJSON(sess))
}

// sessionJSON shows a session; a workspace the daemon made is shown as
// "" (its host path is the daemon's).
func sessionJSON(sess *daemon.Session) *client.Session {
	st := sess.Status()
	out := &client.Session{
		ID: sess.ID, Tenant: sess.Tenant.ID, WorkspaceMode: sess.WorkspaceMode, ChangeSet: sess.ChangeSet(),
		CreatedAt: sess.Created, ExpiresAt: sess.Expires, IdleTimeout: sess.IdleTimeout.String(),
		LastUsedAt: st.LastUsed, Execs: st.Execs, Running: st.Running,
	}
	if !sess.TempWorkspace {
		out.Workspace = sess.Workspace
	}
	return out
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	list := []*client.Session{}
	for _, sess := range s.Manager.List(t) {
		list = append(list, sessionJSON(sess))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"sessions": list})
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sessionJSON(sess))
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.Manager.Delete(r.Context(), t, sess.ID); err != nil {
		return err
	}
	// A revoke that failed leaves a minted value live: the client that
	// ended the session hears of it, not only the daemon's log.
	if warn := sess.EndWarnings(); len(warn) > 0 {
		for i := range warn {
			warn[i] = s.scrub(warn[i])
		}
		return writeJSON(w, http.StatusOK, client.SessionEnd{Warnings: warn})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	if interactiveBody(r) {
		return s.execInteractive(w, r, sess)
	}
	var req client.ExecRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	dreq, err := execRequest(&req)
	if err != nil {
		return err
	}
	if req.StdinOpen && !req.Background {
		return badRequest("stdin_open: only a background command keeps its input open")
	}
	if req.Background {
		p, err := sess.Start(dreq, req.StdinOpen || req.Stdin != "")
		if err != nil {
			return err
		}
		s.metrics.execs.Add(1)
		if req.Stdin != "" {
			if err := p.WriteStdin([]byte(req.Stdin), !req.StdinOpen, time.Now().Add(stdinWait)); err != nil {
				s.Logger.Info("background stdin", "session", sess.ID, "process", p.ID, "err", err)
			}
		}
		return writeJSON(w, http.StatusCreated, s.processJSON(p))
	}

	// The status is sent with the first output: an error before any (the
	// session ended, the command line refused) still gets its own.
	st := &eventStream{w: w}
	defer st.close()
	defer st.keepAlive(s.keepAliveEvery())()
	stdio := backend.Stdio{Stdout: st.writer("stdout"), Stderr: st.writer("stderr")}
	if req.Stdin != "" {
		stdio.Stdin = strings.NewReader(req.Stdin)
	}
	// An ask that waits for a person says so in the stream, with what
	// answers it.
	dreq.OnPending = func(p *daemon.Approval) { st.send(&client.Event{Approval: s.approvalJSON(p)}) }
	start := time.Now()
	rep, err := sess.Exec(r.Context(), dreq, stdio)
	s.metrics.observeExec(time.Since(start), rep)
	if rep == nil {
		if !st.started() {
			return err
		}
		e := s.apiError(err)
		if e.Status == http.StatusInternalServerError {
			s.Logger.Error("exec failed", "session", sess.ID, "err", err)
		}
		return st.send(&client.Event{Error: e})
	}
	return st.send(&client.Event{Exit: s.exitReport(rep)})
}

// eventStream writes an exec's NDJSON events, flushing each, from the
// command's two output streams at once.
type eventStream struct {
	w   http.ResponseWriter
	mu  sync.Mutex
	hdr bool
	// last is when the last event was sent (or keepalives began).
	last time.Time
	// ended: the stream's last event (its exit or error) is sent.
	ended bool
	// closed: the handler has returned, and w with it; nothing more is
	// written.
	closed bool
}

// close ends the stream: a send after it (a callback that outlived the
// request) writes nothing.
func (st *eventStream) close() {
	st.mu.Lock()
	st.closed = true
	st.mu.Unlock()
}

// keepAlive sends a keepalive event whenever the stream has been silent
// for every, until the returned function is called. A command that runs
// quietly for minutes would otherwise leave its client with neither the
// answer's headers nor a byte of its body, which clients with a header or
// read timeout (Node's fetch, Python's requests) give up on; the first
// one also commits the 200, so an error after it is an error event.
func (st *eventStream) keepAlive(every time.Duration) (stop func()) {
	st.mu.Lock()
	st.last = time.Now()
	st.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			wait, err := st.ping(every)
			if err != nil {
				return
			}
			t.Reset(wait)
		}
	}()
	return func() { close(done) }
}

// ping sends a keepalive event if nothing was sent for every, and says
// how long to wait before the next check. After the last event (an exit
// or an error) it sends nothing.
func (st *eventStream) ping(every time.Duration) (time.Duration, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return 0, errStreamClosed
	}
	if wait := every - time.Since(st.last); wait > 0 {
		return wait, nil
	}
	return every, st.sendLocked(&client.Event{KeepAlive: true})
}

func (st *eventStream) started() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hdr
}

func (st *eventStream) send(ev *client.Event) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.sendLocked(ev)
}

func (st *eventStream) sendLocked(ev *client.Event) error {
	if st.closed {
		return errStreamClosed
	}
	if !st.hdr {
		st.hdr = true
		st.w.Header().Set("Content-Type", "application/x-ndjson")
		st.w.WriteHeader(http.StatusOK)
	}
	if err := writeLine(st.w, ev); err != nil {
		return err
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
	st.last = time.Now()
	st.ended = ev.Exit != nil || ev.Error != nil
	return nil
}

// errStreamClosed: an event for a request that has been answered.
var errStreamClosed = errors.New("the exec's answer has ended")

type eventWriter struct {
	st     *eventStream
	stream string
}

func (st *eventStream) writer(stream string) *eventWriter { return &eventWriter{st, stream} }

// Write sends p as one event. An error (the client went away) makes the
// backend stop copying; the request's context ends the command.
func (e *eventWriter) Write(p []byte) (int, error) {
	if err := e.st.send(dataEvent(e.stream, p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func dataEvent(stream string, p []byte) *client.Event {
	ev := &client.Event{Stream: stream}
	if utf8.Valid(p) {
		ev.Data = string(p)
	} else {
		ev.DataBase64 = append([]byte(nil), p...)
	}
	return ev
}

// exitReport is the part of a run's Report a tenant sees: not the policy
// (it names host paths) nor where the daemon keeps change sets.
func (s *Server) exitReport(rep *sandbox.Report) *client.ExitReport {
	out := &client.ExitReport{
		ExitCode: rep.ExitCode, Reason: rep.Reason, Budget: rep.Budget, SessionEnded: rep.SessionEnded, LimitsHit: rep.LimitsHit,
		WallSeconds: rep.WallSeconds, CPUSeconds: rep.CPUSeconds, OutputBytes: rep.OutputBytes,
		Warnings: rep.Warnings, Error: s.scrub(rep.Error), Stage: s.scrub(rep.Stage),
		Denials: []client.Denial{},
	}
	if rep.Signal != nil {
		out.Signal = *rep.Signal
	}
	if rep.Network != nil {
		out.Network = rep.Network.Summary
	}
	for _, d := range rep.Denials {
		out.Denials = append(out.Denials, client.Denial{Layer: d.Layer, What: d.What, Errno: d.Errno, Count: d.Count, Rule: d.Rule, Hint: d.Hint})
	}
	if out.LimitsHit == nil {
		out.LimitsHit = []string{}
	}
	for i, wmsg := range out.Warnings {
		out.Warnings[i] = s.scrub(wmsg)
	}
	return out
}

func (s *Server) processJSON(p *daemon.Process) *client.Process {
	out := &client.Process{ID: p.ID, Args: p.Args, StartedAt: p.Started, Running: p.Running()}
	if rep, _ := p.Result(); rep != nil {
		out.Exit = s.exitReport(rep)
	}
	return out
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	list := []*client.Process{}
	for _, p := range sess.Processes() {
		list = append(list, s.processJSON(p))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"processes": list})
}

func (s *Server) process(r *http.Request, t daemon.Tenant) (*daemon.Process, error) {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return sess.Process(r.PathValue("pid"))
}

// signalNamed returns the signal a client names (a switch, not a map: no
// work at the start of every moat process).
func signalNamed(name string) (syscall.Signal, bool) {
	switch strings.TrimPrefix(strings.ToUpper(name), "SIG") {
	case "HUP":
		return syscall.SIGHUP, true
	case "INT":
		return syscall.SIGINT, true
	case "QUIT":
		return syscall.SIGQUIT, true
	case "KILL":
		return syscall.SIGKILL, true
	case "USR1":
		return syscall.SIGUSR1, true
	case "USR2":
		return syscall.SIGUSR2, true
	case "TERM":
		return syscall.SIGTERM, true
	case "CONT":
		return syscall.SIGCONT, true
	case "STOP":
		return syscall.SIGSTOP, true
	case "WINCH":
		return syscall.SIGWINCH, true
	}
	return 0, false
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	p, err := s.process(r, t)
	if err != nil {
		return err
	}
	var req client.SignalRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	sig, ok := signalNamed(req.Signal)
	if !ok {
		return badRequest("signal: %q is not one of HUP, INT, QUIT, KILL, USR1, USR2, TERM, CONT, STOP, WINCH", req.Signal)
	}
	if err := p.Signal(sig); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stdinWait bounds how long a write to a background command's input
// waits for the command to read it.
const stdinWait = 10 * time.Second

func (s *Server) writeStdin(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	p, err := s.process(r, t)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(s.body(w, r, s.MaxBody))
	if err != nil {
		return bodyError(err, fmt.Sprintf("a write to stdin is at most %d bytes", s.MaxBody))
	}
	ctxDeadline, ok := r.Context().Deadline()
	deadline := time.Now().Add(stdinWait)
	if ok && ctxDeadline.Before(deadline) {
		deadline = ctxDeadline
	}
	var closeIn bool
	switch v := r.URL.Query().Get("close"); v {
	case "1", "true":
		closeIn = true
	case "", "0", "false":
	default:
		return fmt.Errorf("%w: close=%q: want true or 1 (close the input after this write), or false", daemon.ErrBadRequest, v)
	}
	if err := p.WriteStdin(data, closeIn, deadline); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxWait bounds how long an output read waits for something new.
const maxWait = 30 * time.Second

func (s *Server) output(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	p, err := s.process(r, t)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var after int64
	if a := q.Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			return badRequest("after: %q is not a sequence number", a)
		}
	}
	wait, err := duration("wait", q.Get("wait"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), min(wait, maxWait)+time.Second)
	defer cancel()
	// Whether it runs is read first: once it has ended, every chunk it
	// wrote is in the buffer, so a reader told "ended" has missed nothing.
	running := p.Running()
	chunks, next, dropped := p.Read(ctx, after, min(wait, maxWait))
	out := &client.Output{Chunks: []client.Chunk{}, Next: next, Dropped: dropped, Running: running}
	for _, c := range chunks {
		ev := dataEvent(c.Stream, c.Data)
		out.Chunks = append(out.Chunks, client.Chunk{Seq: c.Seq, Stream: c.Stream, Data: ev.Data, DataBase64: ev.DataBase64})
	}
	if rep, _ := p.Result(); rep != nil && !out.Running {
		out.Exit = s.exitReport(rep)
	}
	return writeJSON(w, http.StatusOK, out)
}
