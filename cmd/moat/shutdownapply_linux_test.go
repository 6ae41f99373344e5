//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
	"github.com/moatbox/moat/client"
)

// TestServeShutdownFinishesApply: SIGTERM to moat serve while an apply
// of a session's change set writes the tenant's workspace (the daemon
// found the change set's journal there) lets the apply finish before the
// daemon exits, with --drain 0 as with a drain bound: the workspace holds
// every change and nothing of the apply's own, the client gets its
// report, and the daemon's clean stop is the audit stream's last record.
// Before, the daemon ended a second after the signal, the apply cut
// short: the client got EOF, the workspace was left half applied with a
// temporary file of the apply's at its root, and the stop record said the
// daemon had stopped cleanly (the red team's run: 1336 of 2000 files).
func TestServeShutdownFinishesApply(t *testing.T) {
	const n = 1500
	for _, drain := range []string{"0", "30s"} {
		t.Run("drain="+drain, func(t *testing.T) {
			dir := t.TempDir()
			sock, state, stream := filepath.Join(dir, "moat.sock"), filepath.Join(dir, "state"), filepath.Join(dir, "audit.log")
			cmd := exec.Command(os.Args[0], "serve", "--socket", sock, "--drain", drain, "--audit", stream)
			cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+state)
			var logs bytes.Buffer
			cmd.Stderr = &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill()
				<-exited
			}()
			c := client.Unix(sock)
			defer c.Close()
			ctx := context.Background()

			ws := filepath.Join(dir, "ws")
			os.Mkdir(ws, 0o755)
			for i := range n {
				os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%d", i)), []byte(fmt.Sprintf("orig%d\n", i)), 0o644)
			}
			var s *client.Session
			var err error
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				s, err = c.CreateSession(ctx, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
				var ae *client.Error
				if err == nil || errors.As(err, &ae) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("moat serve: %v\n%s", err, logs.String())
				}
			}
			if err != nil && strings.Contains(err.Error(), "overlay") {
				t.Skipf("overlayfs cannot be mounted here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo new$i > f$i; i=$((i+1)); done; mkdir d; i=0; while [ $i -lt %d ]; do echo x > d/n$i; i=$((i+1)); done`, n, n)
			if rep, err := c.Exec(ctx, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", script}}, nil, nil); err != nil || rep.ExitCode != 0 {
				t.Fatalf("the session's writes: %+v %v", rep, err)
			}

			type result struct {
				rep *client.ApplyReport
				err error
			}
			res := make(chan result, 1)
			go func() {
				rep, err := c.Apply(ctx, s.ID, &client.ApplyRequest{})
				res <- result{rep, err}
			}()
			journal := filepath.Join(state, "runs", s.ChangeSet, "journal")
			// Bounded generously: the apply reads the whole change set
			// first, which took over a minute in an emulated guest on a
			// loaded host.
			for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(2 * time.Millisecond) {
				if _, err := os.Lstat(journal); err == nil {
					break
				}
				select {
				case r := <-res:
					t.Fatalf("the apply ended before its journal was seen: %+v %v", r.rep, r.err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("no apply journal")
				}
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if _, err := os.Lstat(journal); err != nil {
				t.Logf("the apply ended as the signal was sent: this run does not test its shutdown")
			}
			select {
			case err := <-exited:
				exited <- err
				if err != nil {
					t.Errorf("moat serve: %v", err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("moat serve did not stop:\n%s", logs.String())
			}
			select {
			case r := <-res:
				if r.err != nil || r.rep == nil || len(r.rep.Applied) != 2*n+1 {
					t.Errorf("the apply's client got: %v (%+v)", r.err, r.rep)
				}
			case <-time.After(10 * time.Second):
				t.Error("the apply's client got no answer")
			}
			var bad []string
			for i := range n {
				if b, _ := os.ReadFile(filepath.Join(ws, fmt.Sprintf("f%d", i))); string(b) != fmt.Sprintf("new%d\n", i) {
					bad = append(bad, fmt.Sprintf("f%d", i))
				}
			}
			if len(bad) > 0 {
				t.Errorf("%d of %d files not applied when the daemon exited (%s, ...)", len(bad), n, bad[0])
			}
			if ents, _ := os.ReadDir(filepath.Join(ws, "d")); len(ents) != n {
				t.Errorf("d/ holds %d entries, want %d", len(ents), n)
			}
			if left, _ := filepath.Glob(filepath.Join(ws, ".moat-*")); len(left) > 0 {
				t.Errorf("left in the workspace: %q", left)
			}
			if _, err := os.Lstat(journal); err == nil {
				t.Error("the apply's journal is left")
			}
			// The stop comes last, once the apply is over.
			f, err := os.Open(stream)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, _, err := audit.Verify(f); err != nil {
				t.Errorf("the audit stream: %v", err)
			}
			f.Seek(0, 0)
			var last struct{ Type, Event string }
			for sc := bufio.NewScanner(f); sc.Scan(); {
				json.Unmarshal(sc.Bytes(), &last)
			}
			if last.Type != audit.TypeDaemon || last.Event != "stop" {
				t.Errorf("the audit stream's last record: %+v, want the daemon's stop", last)
			}
			if !strings.Contains(logs.String(), "waiting for the reviews under way") {
				t.Logf("the daemon did not wait for the apply (it had ended):\n%s", logs.String())
			}
		})
	}
}
