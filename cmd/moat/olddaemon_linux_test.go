package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionCreateOlderDaemon: a daemon started from an older moat
// refuses the policy's file, a field it does not know; session create
// says to restart it rather than print the daemon's decoding error or
// go on without the file's protection. The positive control: the same
// daemon's refusal of anything else is shown as it is.
func TestSessionCreateOlderDaemon(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "old.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		if strings.Contains(r.URL.Path, "sessions") {
			body := make([]byte, 1<<16)
			n, _ := r.Body.Read(body)
			if strings.Contains(string(body[:n]), "policy_file") {
				w.Write([]byte(`{"error":{"code":"bad_request","message":"malformed request body: json: unknown field \"policy_file\""}}`))
				return
			}
		}
		w.Write([]byte(`{"error":{"code":"bad_request","message":"something else"}}`))
	})}
	go srv.Serve(l)
	defer srv.Close()

	pol := filepath.Join(dir, "p.toml")
	if err := os.WriteFile(pol, []byte("[limits]\nwall = \"1m\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := moat(t, dir, "session", "create", "--socket", sock, "--temp", "--policy", pol)
	if code == 0 || !strings.Contains(errs, "older than this moat") || !strings.Contains(errs, "restart it") {
		t.Errorf("session create against an older daemon: %d %q", code, errs)
	}
	code, _, errs = moat(t, dir, "session", "create", "--socket", sock, "--temp")
	if code == 0 || !strings.Contains(errs, "something else") || strings.Contains(errs, "older") {
		t.Errorf("control: another refusal: %d %q", code, errs)
	}
}
