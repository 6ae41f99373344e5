package httpapi_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// TestNoOracleOnOthersPaths: a root daemon tells a local tenant nothing
// about paths it could not reach itself. As the test user (MOAT_TEST_USER,
// else moatci), through the API, a workspace, and a writable path reached
// through a link in the tenant's own workspace, that are missing, a file
// or a directory in root's closed directory get one and the same error,
// code and message (the path named aside), as do read-only paths in a
// closed directory of root's in the workspace; so do /root/nonexistent and
// /root/.bashrc. Controls: a missing path the tenant can reach is refused
// as missing, a file it can reach as not a directory, and its own
// directory works.
func TestNoOracleOnOthersPaths(t *testing.T) {
	o := rootServingOther(t, "moat-oracle-")
	uid, gid, base := o.uid, o.gid, o.base
	d := startDaemon(t, daemon.Config{}, nil)
	priv := filepath.Join(base, "priv") // root's, closed
	os.Mkdir(priv, 0o700)
	os.WriteFile(filepath.Join(priv, "file"), nil, 0o644)
	os.Mkdir(filepath.Join(priv, "dir"), 0o755)
	os.Mkdir(filepath.Join(priv, "theirs"), 0o755) // the tenant's own, out of its reach
	os.Chown(filepath.Join(priv, "theirs"), uid, gid)
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	os.Chown(ws, uid, gid)
	os.WriteFile(filepath.Join(base, "open-file"), nil, 0o644)
	closed := filepath.Join(ws, "closed") // root's, closed, in the tenant's workspace
	os.Mkdir(closed, 0o700)
	os.WriteFile(filepath.Join(closed, "file"), nil, 0o644)
	os.Mkdir(filepath.Join(closed, "dir"), 0o755)
	for _, n := range []string{"missing", "file", "dir", "theirs"} {
		l := filepath.Join(ws, "l-"+n)
		os.Symlink(filepath.Join(priv, n), l)
		os.Lchown(l, uid, gid)
	}
	create := func(body map[string]any) (code, msg string, ok bool) {
		t.Helper()
		b, _ := json.Marshal(body)
		out := o.curl(t, d.sock, "-d", string(b), "http://moat/v1/sessions")
		var r struct {
			ID    string        `json:"id"`
			Error *client.Error `json:"error"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if r.Error == nil {
			return "", "", r.ID != ""
		}
		return r.Error.Code, r.Error.Message, false
	}
	same := func(what string, paths []string, body func(string) map[string]any) {
		t.Helper()
		var first string
		for _, p := range paths {
			code, msg, ok := create(body(p))
			if ok {
				t.Errorf("%s %s: a session was made", what, p)
				continue
			}
			got := code + ": " + strings.ReplaceAll(msg, p, "PATH")
			if first == "" {
				first = got
				t.Logf("%s: %s", what, got)
			} else if got != first {
				t.Errorf("%s %s: %q, but %s: %q", what, p, got, paths[0], first)
			}
		}
	}
	workspace := func(p string) map[string]any { return map[string]any{"workspace": p} }
	var inPriv, links []string
	for _, n := range []string{"missing", "file", "dir", "theirs"} {
		inPriv = append(inPriv, filepath.Join(priv, n))
		links = append(links, filepath.Join(ws, "l-"+n))
	}
	same("workspace", inPriv, workspace)
	same("workspace in /root", []string{"/root/nonexistent", "/root/.bashrc", "/root/.cache"}, workspace)
	same("read_only", []string{filepath.Join(closed, "missing"), filepath.Join(closed, "file"), filepath.Join(closed, "dir")}, func(p string) map[string]any {
		return map[string]any{"workspace": ws, "policy": "[filesystem]\nread_only = [\"" + p + "\"]\n"}
	})
	same("read_write", links, func(p string) map[string]any {
		return map[string]any{"workspace": ws, "policy": "[filesystem]\nread_write = [\"" + p + "\"]\n"}
	})
	// A missing workspace the tenant can reach gets the same refusal;
	// what it can see is told apart.
	if code, msg, _ := create(workspace(filepath.Join(base, "missing"))); code != client.CodeWorkspace || !strings.Contains(msg, "does not exist") {
		t.Errorf("a missing workspace: %s %s", code, msg)
	}
	if code, msg, _ := create(workspace(filepath.Join(base, "open-file"))); code != client.CodeWorkspace || !strings.Contains(msg, "is not a directory") {
		t.Errorf("a file as the workspace: %s %s", code, msg)
	}
	// Positive control: its own directory works.
	code, msg, ok := create(workspace(ws))
	if strings.Contains(msg, "cannot id-map") {
		t.Skipf("the kernel cannot id-map %s's filesystem: %s", base, msg)
	}
	if !ok {
		t.Errorf("the tenant's own workspace: %s %s", code, msg)
	}
	// A system directory it can read, though it is not its own, is still
	// mounted read-only.
	if code, msg, ok := create(map[string]any{"workspace": ws, "policy": "[filesystem]\nread_only = [\"/usr/share\"]\n"}); !ok {
		t.Errorf("read_only /usr/share: %s %s", code, msg)
	}
}
