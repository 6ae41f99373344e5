package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"syscall"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// An interactive exec is one request in both directions at once (HTTP/1.1
// full duplex; the daemon serves no HTTP/2): its body is NDJSON, the ExecRequest's line then
// client.ExecInput lines (input, a terminal's new size, the end of input)
// sent while the command runs; its answer is the exec's event stream. The
// body's end is the end of the input.

func interactiveBody(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/x-ndjson"
}

// readLine reads one line of at most max bytes.
func readLine(br *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if int64(len(line)) > max {
			return nil, &client.Error{Status: http.StatusRequestEntityTooLarge, Code: client.CodeBodyTooLarge,
				Message: fmt.Sprintf("a line of the request body is over %d bytes", max)}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
		return line, err
	}
}

// strictLine decodes one JSON line into v, unknown fields refused.
func strictLine(line []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON value")
	}
	if err == nil {
		err = strictKeys(line, reflect.TypeOf(v))
	}
	if err != nil {
		return badRequest("malformed %s: %s", what, jsonProblem(err, what))
	}
	return nil
}

// execRequest checks a client's command and turns it into the daemon's.
func execRequest(req *client.ExecRequest) (*daemon.ExecRequest, error) {
	wall, err := duration("wall", req.Wall)
	if err != nil {
		return nil, err
	}
	if req.Output < 0 {
		return nil, badRequest("output: %d is negative", req.Output)
	}
	if req.Tty && req.Background {
		return nil, badRequest("tty: a background command has no terminal")
	}
	d := &daemon.ExecRequest{Args: req.Args, Env: req.Env, Dir: req.Dir, Wall: wall, Output: req.Output, Tty: req.Tty, Rows: req.Rows, Cols: req.Cols,
		StderrToStdout: req.StderrToStdout}
	if d.Tty && d.Rows == 0 {
		d.Rows = 24
	}
	if d.Tty && d.Cols == 0 {
		d.Cols = 80
	}
	return d, nil
}

func (s *Server) execInteractive(w http.ResponseWriter, r *http.Request, sess *daemon.Session) error {
	// The connection ends with the answer (ServeHTTP says so for every
	// request with such a body). Its body is read on a goroutine of the
	// handler's own, which can still be at the body's end (where net/http
	// starts its own read of the connection) when the handler returns and
	// the server reads the next request: two reads of one connection,
	// which net/http refuses with a panic. An interactive exec lives as
	// long as its command; a new connection costs nothing beside it.
	// The request line is bounded in time as any body is; the input
	// after it is not: a terminal may rightly be quiet for as long as
	// its command runs, which the exec's own limits bound.
	body := s.body(w, r, 1<<62)
	br := bufio.NewReaderSize(body, 64<<10)
	line, err := readLine(br, s.MaxBody)
	body.stop()
	if err != nil && err != io.EOF {
		return bodyError(err, "")
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return badRequest("the request body is empty: an exec request line is required")
	}
	var req client.ExecRequest
	if err := strictLine(line, &req, "exec request"); err != nil {
		return err
	}
	if req.Background || req.StdinOpen {
		return badRequest("background, stdin_open: an interactive exec runs in the foreground")
	}
	dreq, err := execRequest(&req)
	if err != nil {
		return err
	}
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		return fmt.Errorf("full duplex: %w", err)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stdinR, stdinW := io.Pipe()
	defer stdinR.Close() // unblocks a write the command never read
	var resize chan daemon.WindowSize
	if dreq.Tty {
		resize = make(chan daemon.WindowSize, 8)
		dreq.Resize = resize
	}
	signals := make(chan syscall.Signal, 8)
	dreq.Signals = signals
	// bad is the input's first error: it ends the command. relayed is
	// closed once the input is read to its end (or failed).
	bad := make(chan error, 1)
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		err := s.relayInput(ctx, br, stdinW, resize, signals, []byte(req.Stdin))
		if err != nil {
			bad <- err
			cancel()
		}
	}()

	st := &eventStream{w: w}
	defer st.close()
	defer st.keepAlive(s.keepAliveEvery())()
	// An ask that waits for a person says so in the stream, as exec's
	// does (moat exec, which sends every exec here over a unix socket,
	// said nothing while its command waited).
	dreq.OnPending = func(p *daemon.Approval) { st.send(&client.Event{Approval: s.approvalJSON(p)}) }
	stdio := backend.Stdio{Stdin: stdinR, Stdout: st.writer("stdout"), Stderr: st.writer("stderr")}
	start := time.Now()
	rep, err := sess.Exec(ctx, dreq, stdio)
	s.metrics.observeExec(time.Since(start), rep)
	select {
	case berr := <-bad:
		rep, err = nil, berr
	default:
	}
	// The answer is written here, then the connection is held open
	// (linger): the client may still be writing its input, and a close
	// under that write made its transport report "broken pipe" instead of
	// the answer it had been sent.
	defer linger(stdinR, relayed)
	if rep == nil {
		if !st.started() {
			s.fail(w, r, err)
			http.NewResponseController(w).Flush()
			return nil
		}
		e := s.apiError(err)
		if e.Status == http.StatusInternalServerError {
			s.Logger.Error("exec failed", "session", sess.ID, "err", err)
		}
		return st.send(&client.Event{Error: e})
	}
	return st.send(&client.Event{Exit: s.exitReport(rep)})
}

// lingerFor bounds how long an interactive exec's connection stays open
// after its answer, for a client that does not end its input on it.
const lingerFor = time.Second

// linger waits, once an interactive exec is answered, for the client to
// end its request body (the Go client does as it reads the answer's last
// event), or lingerFor: the input read meanwhile is dropped (stdinR is
// closed, and relayInput reads on past a closed input).
func linger(stdinR *io.PipeReader, relayed <-chan struct{}) {
	stdinR.Close()
	t := time.NewTimer(lingerFor)
	defer t.Stop()
	select {
	case <-relayed:
	case <-t.C:
	}
}

// relayInput reads the input lines of an interactive exec until its body
// ends, writing input to stdin and sizes to resize (nil: no terminal).
func (s *Server) relayInput(ctx context.Context, br *bufio.Reader, stdin *io.PipeWriter, resize chan<- daemon.WindowSize, signals chan<- syscall.Signal, first []byte) error {
	if len(first) > 0 {
		if _, err := stdin.Write(first); err != nil {
			return nil // the command has ended
		}
	}
	for {
		line, err := readLine(br, s.MaxBody)
		if err == io.EOF && len(bytes.TrimSpace(line)) == 0 {
			stdin.Close()
			return nil
		}
		if err != nil && err != io.EOF {
			stdin.Close()
			if ctx.Err() != nil {
				return nil // the request ended
			}
			if _, ok := err.(*client.Error); ok {
				return err
			}
			return nil // the client went away: the request's end kills the command
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var in client.ExecInput
		if err := strictLine(line, &in, "input line"); err != nil {
			stdin.Close()
			return err
		}
		// One thing a line: a signal, a resize, or input (stdin or
		// stdin_base64), which close_stdin may end in the same line.
		// Another mix would lose what the switch below does not take.
		hasData := in.Stdin != "" || in.StdinBase64 != nil
		switch {
		case in.Stdin != "" && in.StdinBase64 != nil,
			in.Signal != "" && (in.Resize != nil || hasData || in.CloseStdin),
			in.Resize != nil && (hasData || in.CloseStdin):
			stdin.Close()
			return badRequest("an input line carries one of stdin, stdin_base64, signal or resize (close_stdin may end a line of stdin); send each on its own line")
		}
		switch {
		case in.Signal != "":
			sig, ok := signalNamed(in.Signal)
			if !ok {
				return badRequest("signal %q: want INT, TERM, HUP, QUIT, USR1, USR2, KILL, CONT, STOP or WINCH", in.Signal)
			}
			select {
			case signals <- sig:
			case <-ctx.Done():
				return nil
			}
		case in.Resize != nil:
			if resize == nil {
				return badRequest("resize: the command has no terminal (tty)")
			}
			if in.Resize.Rows == 0 || in.Resize.Cols == 0 {
				return badRequest("resize: rows and cols must be positive")
			}
			select {
			case resize <- daemon.WindowSize{Rows: in.Resize.Rows, Cols: in.Resize.Cols}:
			case <-ctx.Done():
				return nil
			}
		default:
			data := in.StdinBase64
			if data == nil {
				data = []byte(in.Stdin)
			}
			if len(data) > 0 {
				if _, err := stdin.Write(data); err != nil {
					// The input was closed, or the command ended: the rest
					// of the body is read and dropped until it ends.
					if errors.Is(err, io.ErrClosedPipe) && ctx.Err() == nil {
						continue
					}
					return nil
				}
			}
			if in.CloseStdin {
				stdin.Close()
			}
		}
	}
}
