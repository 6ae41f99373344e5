package httpapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moatbox/moat/client"
)

// TestOthersChangeSetsSurviveRestart: the change set of a local user's
// overlay session in its own workspace, which a root daemon keeps in
// root's store where the user cannot reach it on the host, stays the
// user's after the daemon restarts: counted in its disk quota, and
// discarded by the user through the API, which frees the quota. The same
// holds when the daemon was killed while the session was live. Controls:
// the session fits before the first one is kept and after its discard; a
// session that never was is not found.
func TestOthersChangeSetsSurviveRestart(t *testing.T) {
	o := rootServingOther(t, "moat-csrestart-")
	uid, gid, base := o.uid, o.gid, o.base
	own := filepath.Join(base, "own")
	os.Mkdir(own, 0o755)
	os.Chown(own, uid, gid)
	state, sock := filepath.Join(base, "state"), filepath.Join(base, "moat.sock")
	start := func() *exec.Cmd {
		cmd, _ := daemonProcess(t, state, sock, "MOAT_TEST_TENANT_DISK="+strconv.Itoa(12<<20), "MOAT_TEST_SOCKET_OPEN=1")
		return cmd
	}
	curl := func(args ...string) string { return string(o.curl(t, sock, args...)) }
	// up waits for the daemon's socket to answer the user.
	up := func() {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			cmd := exec.Command("curl", "-s", "-f", "--unix-socket", sock, "http://moat/v1/sessions")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
			if cmd.Run() == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the daemon does not answer")
			}
		}
	}
	create := func() string {
		return curl("-d", `{"workspace":"`+own+`","workspace_mode":"overlay","policy":"[limits]\ndisk = \"8MiB\"\n"}`, "http://moat/v1/sessions")
	}
	idOf := func(out string) string {
		id, _, _ := strings.Cut(strings.TrimPrefix(out, `{"id":"`), `"`)
		if !strings.Contains(out, `"tenant":"uid:`) || len(id) != 16 {
			return ""
		}
		return id
	}

	daemon1 := start()
	up()
	out := create()
	if strings.Contains(out, "cannot id-map") {
		// /run is a tmpfs, which kernels before 6.3 cannot id-map.
		t.Skipf("the kernel cannot id-map %s's filesystem: %s", base, out)
	}
	id := idOf(out)
	if id == "" {
		t.Fatalf("positive control: %s's overlay session in its own workspace: %s", o.name, out)
	}
	if out := curl("-d", `{"args":["dd","if=/dev/zero","of=big","bs=1M","count=6"]}`, "http://moat/v1/sessions/"+id+"/exec"); !strings.Contains(out, `"exit_code":0`) {
		t.Fatalf("6MiB in the session: %s", out)
	}
	curl("-X", "DELETE", "http://moat/v1/sessions/"+id)

	// A clean restart.
	daemon1.Process.Signal(syscall.SIGTERM)
	daemon1.Wait()
	daemon2 := start()
	up()
	if out := create(); !strings.Contains(out, client.CodeQuota) {
		t.Errorf("after a restart, 8MiB more with 6MiB kept in root's store under 12MiB: %s", out)
		if over := idOf(out); over != "" {
			curl("-X", "DELETE", "http://moat/v1/sessions/"+over)
		}
	} else if !strings.Contains(out, id) {
		t.Errorf("the refusal does not name the session whose change set holds the disk: %s", out)
	}
	if out := curl("http://moat/v1/sessions/" + id + "/diff"); !strings.Contains(out, client.CodeUnsupported) {
		t.Errorf("after a restart, the diff of the change set is not refused as before: %s", out)
	}
	if out := curl("-X", "POST", "http://moat/v1/sessions/0123456789abcdef/discard"); !strings.Contains(out, client.CodeNotFound) {
		t.Errorf("control: a session that never was: %s", out)
	}
	if out := curl("-X", "POST", "http://moat/v1/sessions/"+id+"/discard"); out != "" {
		t.Errorf("after a restart, %s discards its change set: %s", o.name, out)
	}
	live := idOf(create())
	if live == "" {
		t.Fatal("positive control: the quota freed by the discard")
	}
	if out := curl("-d", `{"args":["sh","-c","echo x > small"]}`, "http://moat/v1/sessions/"+live+"/exec"); !strings.Contains(out, `"exit_code":0`) {
		t.Fatalf("a write in the session: %s", out)
	}

	// The daemon killed while the session is live.
	daemon2.Process.Kill()
	daemon2.Wait()
	os.Remove(sock) // a killed daemon leaves its socket
	start()
	up()
	sets := func() []string {
		all, _ := filepath.Glob(filepath.Join(state, "runs", "[^.]*"))
		return all
	}
	if len(sets()) != 1 {
		t.Errorf("control: the killed session's change set in root's store: %q", sets())
	}
	if out := curl("-X", "POST", "http://moat/v1/sessions/"+live+"/discard"); out != "" {
		t.Errorf("after the daemon was killed, %s discards its live session's change set: %s", o.name, out)
	}
	if out := curl("-X", "POST", "http://moat/v1/sessions/"+live+"/discard"); !strings.Contains(out, client.CodeEnded) {
		t.Errorf("a change set discarded twice: %s", out)
	}
	if len(sets()) != 0 {
		t.Errorf("change sets left in root's store: %q", sets())
	}
}
