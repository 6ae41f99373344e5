// Package mcpserver serves one moat session to an agent over the Model
// Context Protocol: a shell (run_command and background processes), the
// workspace's files, the review of an overlay session's changes (diff,
// apply) and a description of the policy in force (session_info).
//
// It owns how a session looks to a model: the tools, their schemas and
// descriptions, and the text of every result. Every failure a tool meets
// (a rule's refusal, a path that leaves the workspace, a limit that
// fired, arguments that do not fit the schema, a tool that does not
// exist) is a tool result with isError set and a sentence the model can
// act on, never a protocol error; the connection keeps serving. So does a
// stdio connection (NewStdioTransport) after a message the SDK cannot
// read (too long, not JSON-RPC), which is answered with a JSON-RPC error.
//
// It refuses to decide anything itself: what a command or a path may do
// is the session's (package daemon: the files API resolved beneath the
// workspace, the tenant's limits) and the sandbox's (package sandbox: the
// policy's rules, the mounts, the network). An ask of the rules reaches a
// person through the client (elicitation) when the client offers it, and
// through Options.Approver otherwise, or the daemon's pending approvals
// (moat approve, the approvals page); with none, the command is
// refused with the rule named. The caller owns the session: it makes it
// before serving and ends it when the connection ends.
package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/harness"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// Options tune a server. The zero value is usable.
type Options struct {
	// Approver answers asks when the client cannot (no elicitation); nil
	// means such an ask refuses the command.
	Approver sandbox.Approver
	// MaxOutput bounds the output a tool returns to the model, in bytes
	// (default 30000); the middle of longer output is left out, with a
	// note saying how much.
	MaxOutput int
	// Version is the server's version in the initialize answer.
	Version string
	// Network, when set, is the session's network log (see NetworkLog):
	// a command's result names the refusals met while it ran.
	Network *NetworkLog
	// Restart, when set, ends the session, calls between, and makes the
	// session again with the same request, returning the new one and
	// between's error. apply needs it: an overlay session's sandbox holds
	// its change set, which can be applied only once it is unmounted. Nil
	// means apply is refused while the session lives.
	Restart func(ctx context.Context, between func() error) (*daemon.Session, error)
	// NoElicit keeps asks from the client: its caller may not answer
	// approvals (a credential of daemon.RoleSessions, an agent's), and a
	// client's elicitation is answered by whoever drives the client. The
	// asks go to Approver or the session's pending approvals instead.
	NoElicit bool
}

// server is the state of one connection's tools.
type server struct {
	opts  Options
	rules *harness.Rules // the session policy's rules

	mu      sync.Mutex
	sess    *daemon.Session  // replaced by a Restart; nil until open made it
	cursors map[string]int64 // background process id -> next chunk to read
	// open makes the session at first use; closed says the connection
	// has ended, and nothing may be made any more.
	open   func(context.Context) (*daemon.Session, error)
	closed bool

	asks asks // the approvals asked of the client, each answerable once
}

func (s *server) session() *daemon.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

// New returns an MCP server whose tools act in sess. Serve it on one
// connection (Server.Run with a transport); the caller closes sess when
// the connection ends.
func New(sess *daemon.Session, opts *Options) *mcp.Server {
	s := newServer(opts)
	s.sess, s.rules = sess, harness.New(sess.Policy())
	return s.mcpServer("Every tool acts inside a moat sandbox session over the workspace "+sess.Workspace+
		" (mode "+sess.WorkspaceMode+"). ", nil)
}

func newServer(opts *Options) *server {
	s := &server{cursors: map[string]int64{}}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MaxOutput <= 0 {
		s.opts.MaxOutput = 30000
	}
	if s.opts.Version == "" {
		s.opts.Version = "dev"
	}
	return s
}

func (s *server) mcpServer(where string, sopts *mcp.ServerOptions) *mcp.Server {
	if sopts == nil {
		sopts = &mcp.ServerOptions{}
	}
	sopts.Instructions = where + "Commands run confined by the session's policy: call session_info to see what is writable, which hosts are reachable and the limits. Paths are relative to the workspace."
	srv := mcp.NewServer(&mcp.Implementation{Name: "moat", Version: s.opts.Version}, sopts)
	s.addTools(srv)
	srv.AddReceivingMiddleware(unknownTool(tools), recoverPanics, askFailed, plainArgErrors)
	return srv
}

// recoverPanics turns a panic while handling a request into an answer:
// an error result for a tool call, an error otherwise. The SDK does not
// recover, and a panic would end the server, and every command of its
// session, with a stack trace for the user.
func recoverPanics(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		defer func() {
			if v := recover(); v != nil {
				if method == "tools/call" {
					res, err = errorResult(fmt.Sprintf("internal error in moat (a bug; please report it): %v", v)), nil
					return
				}
				res, err = nil, fmt.Errorf("internal error in moat: %v", v)
			}
		}()
		return next(ctx, method, req)
	}
}

// askFailed turns a failure of the SDK's asking a client's user for this
// server (elicitation, for a client on a protocol version without
// multi-round-trip results: the client answered with an error or with
// content the form does not take) into a tool result, as every other
// failure of a tool is. Nothing was run: the tool runs only with an
// answer.
func askFailed(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method == "tools/call" && err != nil && ctx.Err() == nil && strings.HasPrefix(err.Error(), "multi-round-trip") {
			return errorResult(fmt.Sprintf("moat asked the user to approve this and the client's answer failed (%v); nothing was run or written. Ask the user to approve it, or to run it themselves.", err)), nil
		}
		return res, err
	}
}

// goField finds, in a decoding error of the SDK's, the Go field and type
// it names.
var goField = regexp.MustCompile(`Go struct field \S*?\.(\w+) of type (\S+)`)

// goValue finds, in the SDK's decoding error for arguments that are no
// JSON object, the value given.
var goValue = regexp.MustCompile(`cannot unmarshal "?(.*?)"? into Go value of type map\[string\]`)

// schemaType finds, in the SDK's schema validation error for a tool's argument
// of the wrong JSON type, the argument, the type given and the type
// wanted (its text quotes Go's reflection for a null: "<invalid
// reflect.Value>").
var schemaType = regexp.MustCompile(`^validating "arguments": validating root: validating /properties/(\w+): type: .* has type "(\w+)", want (.*)$`)

// schemaKind names a JSON schema type as plainArgErrors says kinds.
func schemaKind(t string) string {
	switch t {
	case "null":
		return "null"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "array":
		return "a list"
	case "object":
		return "an object"
	}
	return "another kind of value"
}

// jsonKind names the kind of the JSON value v begins (as the SDK's error
// quotes it).
func jsonKind(v string) string {
	v = strings.TrimSpace(strings.ReplaceAll(v, `\"`, `"`))
	switch {
	case v == "":
		return "another kind of value"
	case v[0] == '"':
		return "a string"
	case v[0] == '[':
		return "a list"
	case v == "true" || v == "false":
		return "true or false"
	case v == "null":
		return "null"
	case strings.ContainsAny(v[:1], "-0123456789"):
		return "a number"
	}
	return "another kind of value"
}

// plainArgErrors says an argument of the wrong type or out of range in
// the tool's terms, where the SDK's decoding error names Go's struct,
// field and type (mcpserver.readIn.offset of type int).
func plainArgErrors(next mcp.MethodHandler) mcp.MethodHandler {
	plain := func(msg string) (string, bool) {
		if m := schemaType.FindStringSubmatch(msg); m != nil {
			var want []string
			for _, w := range strings.Split(strings.TrimPrefix(m[3], "one of "), ",") {
				want = append(want, schemaKind(strings.Trim(strings.TrimSpace(w), `"`)))
			}
			return fmt.Sprintf("invalid arguments: %s takes %s, not %s", m[1], strings.Join(want, " or "), schemaKind(m[2])), true
		}
		if m := goValue.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("invalid arguments: they are an object of named arguments, not %s", jsonKind(m[1])), true
		}
		m := goField.FindStringSubmatch(msg)
		if m == nil {
			return msg, false
		}
		kind := map[string]string{"int": "an integer", "int64": "an integer", "uint16": "an integer", "float64": "a number",
			"string": "a string", "bool": "true or false", "[]string": "a list of strings"}[m[2]]
		if kind == "" {
			kind = "another kind of value"
		}
		return fmt.Sprintf("invalid arguments: %s takes %s, in range: the value given is not one", m[1], kind), true
	}
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" {
			return res, err
		}
		if err != nil {
			if msg, ok := plain(err.Error()); ok {
				return errorResult(msg), nil
			}
			return res, err
		}
		if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			for _, c := range r.Content {
				if tc, ok := c.(*mcp.TextContent); ok {
					tc.Text, _ = plain(tc.Text)
				}
			}
		}
		return res, err
	}
}

// ensure makes the session of a server whose session is made at first
// use (see NewHTTPHandler).
func (s *server) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return nil
	}
	if s.open == nil || s.closed {
		return errors.New("the session has ended")
	}
	sess, err := s.open(ctx)
	if err != nil {
		return err
	}
	s.sess, s.rules = sess, harness.New(sess.Policy())
	return nil
}

// tool makes h a tool handler that first makes the session, if it is
// made at first use.
func tool[In any](s *server, h mcp.ToolHandlerFor[In, any]) mcp.ToolHandlerFor[In, any] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if err := s.ensure(ctx); err != nil {
			return errorResult("no sandbox session: " + err.Error()), nil, nil
		}
		return h(ctx, req, in)
	}
}

// unknownTool answers a call of a tool that does not exist with an error
// result listing the tools, where the SDK would answer with a protocol
// error a model cannot read.
func unknownTool(names []string) mcp.Middleware {
	known := map[string]bool{}
	for _, n := range names {
		known[n] = true
	}
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && !known[p.Name] {
					return errorResult(fmt.Sprintf("unknown tool %q; the tools are: %s", p.Name, strings.Join(names, ", "))), nil
				}
			}
			return next(ctx, method, req)
		}
	}
}

// errorResult is a tool result that tells the model what went wrong.
func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// truncate keeps the head and the tail of b within max bytes, with a note
// in the middle saying how much was left out.
func truncate(b []byte, max int) (string, bool) {
	if len(b) <= max {
		return string(b), false
	}
	head, tail := max*2/5, max*3/5
	left := len(b) - head - tail
	return fmt.Sprintf("%s\n[... %d bytes of output left out (%d in all); redirect the output to a file and read_file or search_files it to see more ...]\n%s",
		b[:head], left, len(b), b[len(b)-tail:]), true
}

// canElicit says whether the client can put a question to its user.
func canElicit(req *mcp.CallToolRequest) bool {
	ss := req.Session
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// The approval of an ask goes through the protocol's own round trip: the
// tool call answers with an input request (an elicitation form) and
// ends; the client asks its user and calls the tool again with the
// answer. The SDK carries it as the negotiated version allows: an
// input-required result the client fulfils, or, for older clients, an
// elicitation request the server sends while the call waits. Either way
// the handler runs again with the answer, and the answer approves only
// the action it was shown, once: the request state is a random value the
// server issued for that action and takes back at the answer (asks), so
// a call replayed with the same answer, or one made up, asks again.

const approveInput = "approve"

// fallback answers the asks the client cannot: Options.Approver, else
// the session's pending approvals (a daemon's: moat approve, the
// approvals page), else nobody.
func (s *server) fallback() sandbox.Approver {
	if s.opts.Approver != nil {
		return s.opts.Approver
	}
	return s.session().Approver()
}

// gate decides who answers the asks about action a, whose decision is d:
// nil and an approver (or none) to run it with, or an input-required
// result that asks the client's user first.
func (s *server) gate(req *mcp.CallToolRequest, a harness.Action, d harness.Decision) (sandbox.Approver, *mcp.CallToolResult) {
	if d.Verdict != harness.Ask || s.opts.NoElicit || !canElicit(req) {
		return s.fallback(), nil
	}
	key := actionKey(a)
	if resp, ok := req.Params.InputResponses[approveInput]; ok {
		if s.asks.take(req.Params.RequestState, key) {
			return &answered{key: key, resp: resp}, nil
		}
		// An answer to another question (what apply would write changed
		// while it waited, or the state is stale): said as a refusal the
		// model can act on. A second question in its place would reach a
		// client of an older protocol raw, which the SDK's middleware
		// turns into a question only once per call, and read as an empty
		// success (found by a tester).
		return nil, errorResult("the person answered a question about something else (what this call would do changed while the question waited, or the answer is stale); nothing was done. Call the tool again to be asked about it as it is now.")
	}
	state, err := s.asks.issue(key)
	if err != nil {
		return nil, &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "moat: " + err.Error()}}}
	}
	rule := "the command line"
	if d.Rule != nil {
		rule = "rule `" + d.Rule.String() + "`"
	}
	msg := fmt.Sprintf("moat: the agent wants to run\n\n    %s\n\nin %s. %s asks first: %s\n\nApprove it, this once?", shellQuote(a.Argv), shellQuote([]string{a.Dir}), rule, d.Reason)
	if a.Write != "" {
		msg = fmt.Sprintf("moat: the agent wants to write\n\n    %s\n\nin the workspace. %s asks first: %s\n\nApprove it, this once?", shellQuote([]string{a.Write}), rule, d.Reason)
	}
	return nil, &mcp.CallToolResult{RequestState: state, InputRequests: mcp.InputRequestMap{approveInput: &mcp.ElicitParams{
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Run this once"},
			},
			"required": []string{"approve"},
		},
	}}}
}

// decide is the rules' decision about running argv in dir (relative to
// the workspace): the sandbox decides again, and alone, when it runs it;
// this one only says whether a person must be asked first.
func (s *server) decide(argv []string, dir string) (harness.Action, harness.Decision) {
	a := harness.Action{Argv: argv, Dir: filepath.Join(s.session().Workspace, dir)}
	return a, s.rules.Decide(a)
}

func actionKey(a harness.Action) string {
	h := sha256.New()
	h.Write([]byte(a.Dir))
	for _, w := range a.Argv {
		h.Write([]byte{0})
		h.Write([]byte(w))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// answered is the user's answer to one ask: it approves the action it
// was shown, once, and nothing else.
type answered struct {
	key  string
	resp mcp.InputResponse
	mu   sync.Mutex
	used bool
}

func (an *answered) Name() string { return "mcp-elicitation" }

func (an *answered) Approve(_ context.Context, a harness.Action, _ harness.Decision) (bool, error) {
	an.mu.Lock()
	defer an.mu.Unlock()
	if an.used || actionKey(a) != an.key {
		return false, fmt.Errorf("the user approved another command, not %s", shellQuote(a.Argv))
	}
	an.used = true
	res, ok := an.resp.(*mcp.ElicitResult)
	if !ok {
		return false, fmt.Errorf("the client answered with %T, not a form", an.resp)
	}
	if res.Action != "accept" {
		return false, fmt.Errorf("the user chose %s", res.Action)
	}
	if ok, _ := res.Content["approve"].(bool); !ok {
		return false, errors.New("the user did not tick approve")
	}
	return true, nil
}

// shellQuote shows argv as a person would type it, on one line: a word
// with a control character (a newline, an escape sequence that would
// move a terminal's cursor) or a byte that is not UTF-8 is written
// $'...', each such character escaped, so that no word can make the
// question a client shows its user read as something else.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '-' || r == '_' || r == '.' || r == '/' || r == '=' || r == ':' || r == ',' || r == '+' || r == '@' ||
				r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) < 0:
			out[i] = a
		case !utf8.ValidString(a) || strings.IndexFunc(a, unprintable) >= 0:
			out[i] = ansiQuote(a)
		default:
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// unprintable is workspace.MustEscape (controls, bidirectional
// controls, the replacement character), and the line and paragraph
// separators, which a client may show as a line break.
func unprintable(r rune) bool {
	return workspace.MustEscape(r)
}

// ansiQuote writes s as bash's $'...': printable characters as they are,
// the others (and bytes that are not UTF-8) as \xHH or \uHHHH.
func ansiQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x80 && unprintable(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unprintable(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case unprintable(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	b.WriteString("'")
	return b.String()
}

func jsonText(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
