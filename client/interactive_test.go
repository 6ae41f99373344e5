package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// fakeDaemon answers each exec request on a unix socket with answer
// (nothing: it closes the connection once it has read the request's
// header, as a daemon that died would).
func fakeDaemon(t *testing.T, answer string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if answer != "" {
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer)
				}
			}()
		}
	}()
	return sock
}

// An interactive exec whose daemon goes away before the first byte of
// its answer ends with an error, not a wait for ever (net/http's
// transport waited for the request body, open until the command ends).
// The control: an answer that ends the command ends it.
func TestInteractiveDaemonGone(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		ok           bool
	}{{"gone", "", false}, {"answered", `{"exit":{"exit_code":0,"reason":"exit"}}` + "\n", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := Unix(fakeDaemon(t, tc.answer))
			defer c.Close()
			x, err := c.Interactive(context.Background(), "s1", &ExecRequest{Args: []string{"sleep", "100"}}, nil, nil)
			if err != nil {
				if tc.ok {
					t.Fatal(err)
				}
				return
			}
			done := make(chan error, 1)
			go func() { _, err := x.Wait(); done <- err }()
			select {
			case err := <-done:
				if (err == nil) != tc.ok {
					t.Errorf("Wait: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Wait did not return after the daemon went away")
			}
		})
	}
}
