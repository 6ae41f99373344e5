package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/moatbox/moat/mcpserver"
)

// batchOutcome serves a bare SDK server over transport (made of the
// server's stdin and stdout), initializes at version, sends line and then
// a ping, and says whether the connection survived the line (the ping
// was answered) and which answers with a null id (the filter's refusals)
// came before the ping's.
func batchOutcome(t *testing.T, version, line string, transport func(io.Reader, io.Writer) mcp.Transport) (alive bool, refused bool) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := mcp.NewServer(&mcp.Implementation{Name: "batch", Version: "1"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ss, err := srv.Connect(ctx, transport(inR, outW), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		ss.Wait()
		// The plain transport closes its writer as the connection ends;
		// the filter's does not, so the reader is told here.
		outW.Close()
		close(done)
	}()
	defer func() {
		inW.Close()
		ss.Close()
		<-done
	}()

	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				// A batch's answer: an array.
				m = map[string]any{"batch": sc.Text()}
			}
			lines <- m
		}
	}()
	// One writer, in order; it gives up when the server stops reading.
	queue := make(chan string, 8)
	defer close(queue)
	go func() {
		for s := range queue {
			if _, err := io.WriteString(inW, s+"\n"); err != nil {
				return
			}
		}
	}()
	send := func(s string) { queue <- s }
	// await reads answers up to the one with id, or the end of the
	// connection; it notes refusals (null ids) on the way.
	await := func(id float64) bool {
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					return false
				}
				if v, has := m["id"]; has && v == nil {
					refused = true
				}
				if m["id"] == id {
					return true
				}
			case <-timeout:
				t.Fatalf("version %s, %s: no answer with id %v", version, line, id)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if !await(1) {
		t.Fatalf("version %s: the connection ended at initialize", version)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(line)
	send(`{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	return await(99), refused
}

// TestStdioBatchesAsSDK holds the filter of NewStdioTransport to the rule
// it restates from the SDK, which exports none of it: a batch line the
// SDK's plain transport would end the connection for is refused by the
// filter (answered with an error, the connection kept), and one the SDK
// serves is passed, but for a batch with a notification in it, which the
// filter refuses: the SDK ends the connection at the next such batch.
// Should the SDK change its rule, this fails.
func TestStdioBatchesAsSDK(t *testing.T) {
	plain := func(r io.Reader, w io.Writer) mcp.Transport {
		return &mcp.IOTransport{Reader: io.NopCloser(r), Writer: w.(io.WriteCloser)}
	}
	versions := append(mcp.SupportedProtocolVersions(), "1999-01-01")
	batches := []string{
		`[{"jsonrpc":"2.0","id":10,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","id":11,"method":"ping"}]`,
		`[]`,
		`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","id":10,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"1.0","id":11,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`,
		`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`,
		`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`,
		// Two lines: the first batch alone is served, the second ends it.
		`[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]` + "\n" + `[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`,
	}
	for _, v := range versions {
		for _, b := range batches {
			sdkAlive, _ := batchOutcome(t, v, b, plain)
			filterAlive, filterRefused := batchOutcome(t, v, b, mcpserver.NewStdioTransport)
			if !filterAlive {
				t.Errorf("version %s, %s: the connection through the filter ended", v, b)
			}
			want := !sdkAlive || strings.Contains(b, `"method":"notifications/`)
			if filterRefused != want {
				t.Errorf("version %s, %s: the SDK's plain transport kept the connection: %v; the filter refused the line: %v", v, b, sdkAlive, filterRefused)
			}
		}
	}
	// The control: a line that is no batch, which neither refuses.
	ping := `{"jsonrpc":"2.0","id":10,"method":"ping"}`
	if alive, _ := batchOutcome(t, "2025-06-18", ping, plain); !alive {
		t.Error("the SDK's plain transport ended at a ping")
	}
	if alive, refused := batchOutcome(t, "2025-06-18", ping, mcpserver.NewStdioTransport); !alive || refused {
		t.Errorf("the filter at a ping: connection kept %v, refused %v", alive, refused)
	}
}
