package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMessage bounds a message a client sends on a stdio connection, in
// bytes: the SDK's own bound.
const MaxMessage = mcp.DefaultMaxLineLength

// errTooLarge is the message of the answer to a line over MaxMessage,
// its newline included.
var errTooLarge = fmt.Sprintf("message too large: a line of more than %d bytes was discarded unread (send large content in parts); the server goes on serving", MaxMessage)

// NewStdioTransport is the transport of a server on a byte stream, one
// JSON-RPC message a line (moat mcp on stdin and stdout): the SDK's
// IOTransport, over a reader that passes it only the lines it can take.
// The SDK ends the connection, and with it the session and every command
// of it, at the first line it cannot read: one over its bound, one that
// is not JSON, one that is not a JSON-RPC message. Such a line is
// answered here instead with a JSON-RPC error (its id when it can be
// read, else null), and the next line is served; a line over MaxMessage
// is discarded as it is read, never held whole.
func NewStdioTransport(r io.Reader, w io.Writer) mcp.Transport {
	out := &lockedWriter{w: w}
	return &mcp.IOTransport{
		Reader: io.NopCloser(&lineFilter{r: bufio.NewReaderSize(r, 64<<10), max: MaxMessage, out: out}),
		Writer: out,
		// Every line the filter passes is one whole message within
		// MaxMessage; the SDK's decoder may read the next line's first
		// bytes with it, so its own bound, which ends the connection, is
		// kept out of reach.
		MaxLineLength: 2*MaxMessage + 2,
	}
}

// lockedWriter keeps the filter's answers and the SDK's messages whole:
// the SDK writes each message in one call.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lockedWriter) Close() error { return nil }

// lineFilter reads lines of r, answers those the SDK could not read on
// out, and passes on the others, each trimmed of its surrounding blanks
// (which the SDK would take for data after the message).
type lineFilter struct {
	r       *bufio.Reader
	max     int
	out     io.Writer
	pending []byte // what of a passed line the SDK has not read yet
	err     error  // r's error, returned once the lines before it are read
	// noBatch: the protocol version the client asked for at initialize
	// has no batches, which the SDK would end the connection for.
	noBatch bool
}

func (f *lineFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// next reads one line, and sets pending to it if the SDK can read it.
func (f *lineFilter) next() {
	// The line in the pieces it was read in: a long one is not copied
	// again and again as it grows, which would leave the process several
	// times its size.
	var parts [][]byte
	n, over := 0, false
	var head []byte // the start of a line over the bound, where its id may be
	for {
		chunk, err := f.r.ReadSlice('\n')
		if !over && n+len(chunk) > f.max {
			over = true
			for _, p := range parts {
				if len(head) >= 64<<10 {
					break
				}
				head = append(head, p...)
			}
			parts = nil
		}
		if !over && len(chunk) > 0 {
			parts = append(parts, bytes.Clone(chunk))
			n += len(chunk)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			f.err = err
			if err != io.EOF {
				// A line cut short by an error is not known whole; one
				// without a newline at the end of the input is.
				parts = nil
			}
		}
		break
	}
	if over {
		f.answer(headID(head), jsonrpc.CodeInvalidRequest, errTooLarge)
		return
	}
	var whole []byte
	switch len(parts) {
	case 0:
		return
	case 1:
		whole = parts[0]
	default:
		whole = bytes.Join(parts, nil)
	}
	line := bytes.TrimSpace(whole)
	if len(line) == 0 {
		return
	}
	if code, msg := f.check(line); code != 0 {
		var id any
		if code != jsonrpc.CodeParseError {
			id = headID(line)
		}
		f.answer(id, code, msg)
		return
	}
	f.pending = append(line, '\n')
}

// check says whether the SDK can read line, a whole JSON value: 0, or
// the JSON-RPC error code and message of why not.
func (f *lineFilter) check(line []byte) (int64, string) {
	if !json.Valid(line) {
		return jsonrpc.CodeParseError, "parse error: the line is not one JSON value (each message is one line of JSON)"
	}
	if line[0] != '[' {
		m, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: %v", err)
		}
		if r, ok := m.(*jsonrpc.Request); ok && r.Method == "initialize" {
			// The SDK's negotiation: the versions before 2025-06-18
			// it knows are kept, and they alone have batches.
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			json.Unmarshal(r.Params, &p)
			f.noBatch = p.ProtocolVersion != "2024-11-05" && p.ProtocolVersion != "2025-03-26"
		}
		return 0, ""
	}
	if f.noBatch {
		return jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported in protocol version 2025-06-18 and later"
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(line, &batch); err != nil {
		return jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: %v", err)
	}
	if len(batch) == 0 {
		return jsonrpc.CodeInvalidRequest, "invalid request: an empty batch"
	}
	seen := map[jsonrpc.ID]bool{}
	for _, raw := range batch {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request in a batch: %v", err)
		}
		if r, ok := m.(*jsonrpc.Request); ok {
			if !r.ID.IsValid() {
				// The SDK waits for an answer to every request of a
				// batch, notifications too, under the one id they
				// share, and none ever comes: a second batch with a
				// notification, or two in one, would end the connection.
				return jsonrpc.CodeInvalidRequest, "invalid request: a batch with a notification in it (send notifications alone)"
			}
			if seen[r.ID] {
				return jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: the batch repeats the id %v", r.ID.Raw())
			}
			seen[r.ID] = true
		}
	}
	return 0, ""
}

// headID is the id of the JSON-RPC message that b begins, if b shows it:
// a string or a number member "id" of the top-level object, before
// anything b cuts short. Nil otherwise.
func headID(b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			return nil
		}
		if k == "id" {
			switch v, _ := d.Token(); v.(type) {
			case string, json.Number:
				return v
			}
			return nil
		}
		// Skip the member's value, however deep.
		depth := 0
		for {
			t, err := d.Token()
			if err != nil {
				return nil
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
			if depth == 0 {
				break
			}
		}
	}
	return nil
}

// answer writes a JSON-RPC error to the client. A failed write is left
// to the SDK, whose next write meets it.
func (f *lineFilter) answer(id any, code int64, msg string) {
	b, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	if err != nil {
		return
	}
	f.out.Write(append(b, '\n'))
}
