package httpapi_test

import (
	"os"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/internal/hostinfo"
)

// TestGVisorSession: a daemon running as root keeps a session whose
// policy asks for isolation = "gvisor" in one gVisor sandbox: its
// commands run on gVisor's kernel and share its /tmp; a default session
// beside it (the control) runs on the host's kernel.
func TestGVisorSession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("gvisor: runsc runs sandboxes for root only here (uid %d): rootless runsc has no network isolation; the run as root tests it", os.Geteuid())
	}
	if _, err := gvisor.Find(""); err != nil {
		t.Skipf("gvisor: %v", err)
	}
	d := startDaemon(t, daemon.Config{}, nil)
	// runsc has no id-mapped mounts: the workspace is the sandbox user's.
	ws := t.TempDir()
	os.Chown(ws, 1000, 1000)
	s := d.create(t, &client.CreateSessionRequest{Policy: "[sandbox]\nisolation = \"gvisor\"\n[harness]\nbuiltin = []\n", Workspace: ws})
	host := hostinfo.Kernel()
	out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "uname -r; echo kept > /tmp/state"}})
	if rep.ExitCode != 0 || strings.Contains(out, host) {
		t.Fatalf("a gvisor session's command saw %q (host kernel %s): %+v", out, host, rep)
	}
	if out, _, rep := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"cat", "/tmp/state"}}); rep.ExitCode != 0 || out != "kept\n" {
		t.Errorf("the next command read %q: %+v", out, rep)
	}
	native := d.create(t, &client.CreateSessionRequest{})
	if out, _, _ := run(t, d.c, native.ID, &client.ExecRequest{Args: []string{"uname", "-r"}}); !strings.Contains(out, host) {
		t.Errorf("positive control: a native session saw %q, want the host's %s", out, host)
	}
}

// TestGVisorSessionOfAnotherUser: a local user other than root gets a
// gvisor session in a workspace the daemon makes, and its commands write
// there. Before, the daemon's own workspace was refused as "a path
// another user named", after a first refusal that sent the user to set
// the sandbox's uid (tried). The control: a native session of the same
// user.
func TestGVisorSessionOfAnotherUser(t *testing.T) {
	o := rootServingOther(t, "moat-gvtenant-")
	if _, err := gvisor.Find(""); err != nil {
		t.Skipf("gvisor: %v", err)
	}
	d := startDaemon(t, daemon.Config{}, nil)
	for _, iso := range []string{"native", "gvisor"} {
		out := string(o.curl(t, d.sock, "-d", `{"policy":"[sandbox]\nisolation = \"`+iso+`\"\n[harness]\nbuiltin = []\n"}`, "http://moat/v1/sessions"))
		id, _, _ := strings.Cut(strings.TrimPrefix(out, `{"id":"`), `"`)
		if len(id) != 16 {
			t.Errorf("%s: %s's session: %s", iso, o.name, out)
			continue
		}
		if out := string(o.curl(t, d.sock, "-d", `{"args":["sh","-c","echo written > f && cat f"]}`, "http://moat/v1/sessions/"+id+"/exec")); !strings.Contains(out, "written") || !strings.Contains(out, `"exit_code":0`) {
			t.Errorf("%s: a command writing the workspace: %s", iso, out)
		}
		o.curl(t, d.sock, "-X", "DELETE", "http://moat/v1/sessions/"+id)
	}
}
