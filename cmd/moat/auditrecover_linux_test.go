package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/audit"
)

// serveAudit starts `moat serve --audit stream` in dir (its socket and
// state there) and returns, once it listens, a function that sends it a
// signal and returns how it exited; or nil and its log once it exits
// without listening.
func serveAudit(t *testing.T, dir, stream string) (func(os.Signal) error, *bytes.Buffer) {
	t.Helper()
	sock := filepath.Join(dir, "moat.sock")
	cmd := exec.Command(os.Args[0], "serve", "--socket", sock, "--drain", "1s", "--audit", stream)
	cmd.Env = append(os.Environ(), "MOAT_TEST_AS_MOAT=1", "MOAT_STATE_DIR="+filepath.Join(dir, "state"))
	logs := &bytes.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var werr error
	go func() { werr = cmd.Wait(); close(exited) }()
	stop := func(sig os.Signal) error {
		cmd.Process.Signal(sig)
		<-exited
		return werr
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-exited:
			return nil, logs
		default:
		}
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return stop, logs
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("moat serve did not listen:\n%s", logs)
		}
	}
}

// TestServeRecoversACutAuditStream: a daemon killed (SIGKILL) leaves its
// stream; a record cut short at its end (written by hand, as a kill in
// the middle of a write leaves it) does not keep the next daemon from
// starting: the cut bytes are set aside in a file beside the stream, a
// cut record says so, the chain goes on, and moat audit verify takes the
// stream. A record edited in the middle of the same stream makes the next
// daemon refuse it, naming the file and the line; the control is the
// unedited stream, which the daemon before it took.
func TestServeRecoversACutAuditStream(t *testing.T) {
	dir := t.TempDir()
	stream := filepath.Join(dir, "audit.jsonl")
	stop, logs := serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("moat serve exited:\n%s", logs)
	}
	stop(syscall.SIGKILL)
	whole, err := os.ReadFile(stream)
	if err != nil || !bytes.HasSuffix(whole, []byte("\n")) {
		t.Fatalf("the first daemon's stream: %q %v", whole, err)
	}
	cutShort := `{"prev":"` + strings.Repeat("0", 64) + `","type":"session","ti`
	os.WriteFile(stream, append(append([]byte{}, whole...), cutShort...), 0o600)
	if code, out, _ := moat(t, dir, "audit", "verify", stream); code == 0 {
		t.Fatalf("the cut stream verified: %s", out)
	}

	stop, logs = serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("moat serve refused the cut stream:\n%s", logs)
	}
	if err := stop(syscall.SIGTERM); err != nil {
		t.Errorf("moat serve: %v\n%s", err, logs)
	}
	if !strings.Contains(logs.String(), "cut short") {
		t.Errorf("no warning of the cut record:\n%s", logs)
	}
	got, _ := os.ReadFile(stream)
	if !bytes.HasPrefix(got, whole) {
		t.Fatalf("the whole records were changed:\n%s", got)
	}
	if code, out, errs := moat(t, dir, "audit", "verify", stream); code != 0 {
		t.Fatalf("the recovered stream: code %d %s %s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(string(got[len(whole):])), "\n")
	var cut audit.Cut
	if err := json.Unmarshal([]byte(lines[0]), &cut); err != nil || cut.Type != audit.TypeCut || cut.Bytes != int64(len(cutShort)) {
		t.Fatalf("the record after the whole ones: %s", lines[0])
	}
	if b, err := os.ReadFile(filepath.Join(dir, cut.Saved)); err != nil || string(b) != cutShort {
		t.Errorf("the cut bytes set aside: %q %v", b, err)
	}
	var start audit.DaemonEvent
	if err := json.Unmarshal([]byte(lines[1]), &start); err != nil || start.Event != "start" || !start.Unclean {
		t.Errorf("the daemon's start after the cut record: %s", lines[1])
	}

	// An edit in the middle: the first daemon's start says it was
	// another pid.
	edited := bytes.Replace(got, []byte(`"pid":`), []byte(`"pid":1`), 1)
	os.WriteFile(stream, edited, 0o600)
	stop, logs = serveAudit(t, dir, stream)
	if stop != nil {
		stop(syscall.SIGTERM)
		t.Fatalf("moat serve took an edited stream:\n%s", logs)
	}
	if !strings.Contains(logs.String(), stream) || !strings.Contains(logs.String(), "line 2") || strings.Contains(logs.String(), "goroutine") {
		t.Errorf("the refusal does not name the file and the line:\n%s", logs)
	}
	if after, _ := os.ReadFile(stream); !bytes.Equal(after, edited) {
		t.Error("the refused stream was changed")
	}
	if code, _, _ := moat(t, dir, "audit", "verify", stream); code == 0 {
		t.Error("moat audit verify took the edited stream")
	}
}

// TestServeDrainsOnHangup: SIGHUP (the terminal of a `moat serve &`
// closed) stops the daemon as SIGTERM does: it exits 0, removes its
// socket and records its stop. Without it the daemon died at once,
// leaving its socket and its sessions to the next start.
func TestServeDrainsOnHangup(t *testing.T) {
	dir := t.TempDir()
	stream := filepath.Join(dir, "audit.jsonl")
	stop, logs := serveAudit(t, dir, stream)
	if stop == nil {
		t.Fatalf("moat serve exited:\n%s", logs)
	}
	if err := stop(syscall.SIGHUP); err != nil {
		t.Fatalf("moat serve on SIGHUP: %v\n%s", err, logs)
	}
	if _, err := os.Lstat(filepath.Join(dir, "moat.sock")); err == nil {
		t.Error("the socket was left")
	}
	got, _ := os.ReadFile(stream)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	var last audit.DaemonEvent
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Event != "stop" {
		t.Errorf("the stream's last record is not the daemon's stop: %s", lines[len(lines)-1])
	}
}
