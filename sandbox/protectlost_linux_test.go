package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// TestProtectionReplacedOnHost: a protected file the host replaces while
// a run goes on (git config saves by renaming a new file over .git/config;
// the kernel then detaches the sandbox's read-only mount of the old one,
// and the command could write the new one, found by a tester: a
// core.fsmonitor line ran on the host at the next git status) ends the
// run, reason "protection", with a denial naming the path; so does a
// denied file's mask. The control: the same run, the file left alone,
// cannot write it and ends by itself.
func TestProtectionReplacedOnHost(t *testing.T) {
	for _, tc := range []struct {
		name, file, probe string
		deny              bool
	}{
		{"protected", ".git/config", `echo evil >> .git/config 2>/dev/null && echo WROTE`, false},
		{"denied", "secret.env", `cat secret.env 2>/dev/null`, true},
	} {
		for _, replace := range []bool{false, true} {
			ws := t.TempDir()
			os.MkdirAll(filepath.Join(ws, ".git/hooks"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "secret.env"), []byte("OLD-SECRET\n"), 0o644)
			target := filepath.Join(ws, tc.file)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range 200 {
					if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
						break
					}
					time.Sleep(25 * time.Millisecond)
				}
				if replace {
					os.WriteFile(target+".new", []byte("[core]\nNEW-SECRET\n"), 0o644)
					os.Rename(target+".new", target)
				}
			}()
			script := `touch started; i=0; while [ $i -lt 15 ]; do ` + tc.probe + `; sleep 0.2; i=$((i+1)); done`
			r := sh(t, ws, func(p *policy.Policy) {
				if tc.deny {
					p.Filesystem.Deny = append(p.Filesystem.Deny, filepath.Join(ws, "secret.env"))
				}
			}, script)
			<-done
			if r.err != nil {
				t.Fatalf("%s, replaced %v: %v\n%s", tc.name, replace, r.err, r.stderr)
			}
			if !replace {
				if r.rep.Reason != "exit" || strings.Contains(r.stdout, "WROTE") || strings.Contains(r.stdout, "SECRET") {
					t.Errorf("control %s: reason %q, stdout %q", tc.name, r.rep.Reason, r.stdout)
				}
				continue
			}
			if r.rep.Reason != "protection" {
				t.Errorf("%s replaced on the host: reason %q, want protection; stdout %q", tc.name, r.rep.Reason, r.stdout)
			}
			named := false
			for _, d := range r.rep.Denials {
				named = named || (d.Layer == "mount" && d.What == target)
			}
			if !named {
				t.Errorf("%s: no denial names %s: %+v", tc.name, target, r.rep.Denials)
			}
			if r.rep.WallSeconds > 2 {
				t.Errorf("%s: the run went on for %.1fs after the protection went", tc.name, r.rep.WallSeconds)
			}
			// A write in the moment between the host's rename and the
			// kill can land (docs/security.md); it is logged, not failed.
			if strings.Contains(r.stdout, "WROTE") || strings.Contains(r.stdout, "NEW-SECRET") {
				t.Logf("%s: the command reached the new file before the kill: %q", tc.name, r.stdout)
			}
		}
	}
}

// TestSessionProtectionReplacedOnHost: in a session, which lives across
// the host's edits, .git/config replaced on the host (git config) ends the
// session's sandbox: the command running then is killed with reason
// "protection" and a denial naming the path, the session says why it
// ended, and a later command cannot start. The control: a command before
// the replace cannot write the file, and the session goes on.
func TestSessionProtectionReplacedOnHost(t *testing.T) {
	ws := newRepo(t)
	config := filepath.Join(ws, ".git/config")
	s := newSession(t, ws, nil)
	out, rep, err := sessionSh(t, s, sandbox.ExecRequest{}, `echo evil >> .git/config 2>/dev/null && echo WROTE; echo went-on`)
	if err != nil || rep.Reason != "exit" || strings.Contains(out, "WROTE") || !strings.Contains(out, "went-on") {
		t.Fatalf("control: %v %+v %q", err, rep, out)
	}
	go func() {
		for range 200 {
			if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		b, _ := os.ReadFile(config)
		os.WriteFile(config+".lock", append(b, "[user]\n\tname = host\n"...), 0o644)
		os.Rename(config+".lock", config)
	}()
	out, rep, err = sessionSh(t, s, sandbox.ExecRequest{}, `touch started; sleep 5; echo evil >> .git/config && echo WROTE`)
	if err != nil || rep.Reason != "protection" || strings.Contains(out, "WROTE") {
		t.Fatalf("replaced on the host: %v reason %q %q", err, rep.Reason, out)
	}
	named := false
	for _, d := range rep.Denials {
		named = named || (d.Layer == "mount" && d.What == config)
	}
	if !named {
		t.Errorf("no denial names %s: %+v", config, rep.Denials)
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the session's sandbox did not end")
	}
	if why := s.EndReason(); !strings.Contains(why, config) {
		t.Errorf("EndReason %q, want it to name %s", why, config)
	}
	if _, _, err := sessionSh(t, s, sandbox.ExecRequest{}, "true"); err == nil {
		t.Error("a command started after the sandbox ended")
	}
	if b, _ := os.ReadFile(config); strings.Contains(string(b), "evil") {
		t.Errorf(".git/config was written: %q", b)
	}
}
