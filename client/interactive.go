package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"unicode/utf8"
)

// Interactive is a command of a session that takes input while it runs
// (Client.Interactive): its standard input, its terminal's size. Its
// methods may be called concurrently.
type Interactive struct {
	mu   sync.Mutex
	body *io.PipeWriter // the request body: one ExecInput per line
	done chan struct{}
	rep  *ExitReport
	err  error
}

// Interactive starts a command in a session whose input is sent while it
// runs: one request whose body is the ExecRequest's line followed by
// ExecInput lines, and whose answer streams the output as Exec's does
// (copied to stdout and stderr). With req.Tty the command has a terminal
// (Resize changes its size). Wait returns how it ended.
func (c *Client) Interactive(ctx context.Context, id string, req *ExecRequest, stdout, stderr io.Writer) (*Interactive, error) {
	if req == nil {
		return nil, errNoRequest
	}
	if err := req.text(); err != nil {
		return nil, err
	}
	if req.Background {
		return nil, errors.New("exec: a background command is started with Start")
	}
	first, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	hreq, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/sessions/"+url.PathEscape(id)+"/exec", pr)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/x-ndjson")
	x := &Interactive{body: pw, done: make(chan struct{})}
	go func() {
		defer close(x.done)
		// The request body ends once the command has: the daemon reads
		// it until then.
		defer pw.Close()
		// The transport does not return while its writer still reads
		// the body: ctx's end must close it, or Wait would wait for the
		// next Write.
		stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
		defer stop()
		// So must the connection's failure (see watchedConn).
		var watched *watchedConn
		gone := func() { pw.CloseWithError(errDaemonGone) }
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			c := info.Conn
			if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
				c = tc.NetConn() // TLS to a proxy in front
			}
			if wc, ok := c.(*watchedConn); ok {
				watched = wc
				wc.onFail.Store(&gone)
			}
		}}
		defer func() {
			if watched != nil {
				watched.onFail.Store(nil)
			}
		}()
		resp, err := c.roundTrip(hreq.WithContext(httptrace.WithClientTrace(hreq.Context(), trace)))
		if err != nil {
			x.err = err
			return
		}
		defer resp.Body.Close()
		x.rep, x.err = c.readEvents(resp.Body, stdout, stderr)
	}()
	if err := x.send(first); err != nil {
		<-x.done
		if x.err != nil {
			return nil, x.err
		}
		return nil, err
	}
	return x, nil
}

// errDaemonGone ends an Interactive's request body when its connection
// fails.
var errDaemonGone = errors.New("exec: the connection to the daemon failed before the command ended")

func (x *Interactive) send(line []byte) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, err := x.body.Write(append(line, '\n'))
	if errors.Is(err, io.ErrClosedPipe) {
		return errors.New("exec: the command has ended")
	}
	return err
}

func (x *Interactive) input(in *ExecInput) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return x.send(b)
}

// Write sends p to the command's standard input.
func (x *Interactive) Write(p []byte) (int, error) {
	in := &ExecInput{Stdin: string(p)}
	if !utf8.Valid(p) {
		in = &ExecInput{StdinBase64: p}
	}
	if err := x.input(in); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseStdin ends the command's standard input (a terminal's input does
// not end: send it ^D instead).
func (x *Interactive) CloseStdin() error { return x.input(&ExecInput{CloseStdin: true}) }

// Resize changes the size of the command's terminal.
func (x *Interactive) Resize(rows, cols uint16) error {
	return x.input(&ExecInput{Resize: &WindowSize{Rows: rows, Cols: cols}})
}

// Signal sends the signal named (INT, TERM, HUP, ...) to the command's
// process group, as a terminal's ^C would.
func (x *Interactive) Signal(name string) error { return x.input(&ExecInput{Signal: name}) }

// Done is closed when the command has ended (or the request failed).
func (x *Interactive) Done() <-chan struct{} { return x.done }

// Wait waits for the command to end and returns how it ended.
func (x *Interactive) Wait() (*ExitReport, error) {
	<-x.done
	return x.rep, x.err
}
