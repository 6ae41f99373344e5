//go:build linux

package httpapi_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

func TestFilesAPI(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644)
	os.Mkdir(filepath.Join(ws, "src"), 0o755)
	os.Symlink(outside, filepath.Join(ws, "abs-out"))
	os.Symlink("../"+filepath.Base(outside), filepath.Join(ws, "rel-out"))
	os.Symlink("src", filepath.Join(ws, "in"))
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.Mkdir(filepath.Join(ws, ".vscode"), 0o755)
	os.Symlink(".vscode", filepath.Join(ws, "cfg")) // a route to a protected path by a link
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	if s.Workspace == "" {
		t.Error("a tenant's own workspace is not shown")
	}

	// Written by the API, read by a command, and back.
	if err := d.c.WriteFile(ctx, s.ID, "src/a.txt", []byte("from the API"), 0o640); err != nil {
		t.Fatal(err)
	}
	// A name too long for the kernel is the request's fault, not the
	// daemon's: bad_request, each way in.
	long := strings.Repeat("a", 300)
	if _, err := d.c.ReadFile(ctx, s.ID, long); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a read of a 300-byte name: %v, want bad_request", err)
	}
	if err := d.c.WriteFile(ctx, s.ID, "src/"+long, []byte("x"), 0o640); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a write of a 300-byte name: %v, want bad_request", err)
	}
	if _, err := d.c.Stat(ctx, s.ID, strings.Repeat(strings.Repeat("b", 200)+"/", 25)+"c"); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a stat of a 5,000-byte path: %v, want bad_request", err)
	}
	// A path naming a directory (a trailing slash) is no file's.
	if err := d.c.WriteFile(ctx, s.ID, "src/", []byte("x"), 0o640); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a write of src/: %v, want bad_request", err)
	}
	if _, err := d.c.ReadFile(ctx, s.ID, "src/a.txt/"); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a read of src/a.txt/: %v, want bad_request", err)
	}
	if _, err := d.c.Stat(ctx, s.ID, "src/a.txt/"); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a stat of src/a.txt/: %v, want bad_request", err)
	}
	if err := d.c.RemoveFile(ctx, s.ID, "src/a.txt/"); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a removal of src/a.txt/: %v, want bad_request", err)
	}
	// So does a last component "." (cleaning it away left the file's name).
	if _, err := d.c.ReadFile(ctx, s.ID, "src/a.txt/."); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a read of src/a.txt/.: %v, want bad_request", err)
	}
	if err := d.c.RemoveFile(ctx, s.ID, "src/a.txt/."); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a removal of src/a.txt/.: %v, want bad_request", err)
	}
	if err := d.c.WriteFile(ctx, s.ID, "src/new/.", []byte("x"), 0o640); apiCode(err) != client.CodeBadRequest {
		t.Errorf("a write of src/new/.: %v, want bad_request", err)
	}
	// Positive control: the same names without the slash, and a
	// directory's with it.
	if data, err := d.c.ReadFile(ctx, s.ID, "src/a.txt"); err != nil || string(data) != "from the API" {
		t.Errorf("a read of src/a.txt: %q, %v", data, err)
	}
	if fi, err := d.c.Stat(ctx, s.ID, "src/"); err != nil || fi.Type != "dir" {
		t.Errorf("a stat of src/: %+v, %v", fi, err)
	}
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "cat src/a.txt; echo from the command > src/b.txt"}}); out != "from the API" {
		t.Errorf("the command reads %q", out)
	}
	if data, err := d.c.ReadFile(ctx, s.ID, "src/b.txt"); err != nil || string(data) != "from the command\n" {
		t.Errorf("read: %q, %v", data, err)
	}
	fi, err := d.c.Stat(ctx, s.ID, "src/a.txt")
	if err != nil || fi.Type != "file" || fi.Size != 12 || fi.Mode != "0640" {
		t.Errorf("stat: %+v, %v", fi, err)
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(ws, "src", "a.txt"), &st)
	wsOwner, _ := os.Stat(ws)
	if st.Uid != wsOwner.Sys().(*syscall.Stat_t).Uid {
		t.Errorf("the file is owned by %d, the workspace by %d", st.Uid, wsOwner.Sys().(*syscall.Stat_t).Uid)
	}
	if fi, err := d.c.Stat(ctx, s.ID, "abs-out"); err != nil || fi.Type != "symlink" {
		t.Errorf("stat of a link: %+v, %v", fi, err)
	}
	list, err := d.c.ListDir(ctx, s.ID, "src")
	if err != nil || len(list) != 2 || list[0].Path != "src/a.txt" || list[1].Path != "src/b.txt" {
		t.Errorf("list: %+v, %v", list, err)
	}
	// Positive control: a link that stays inside is followed.
	if data, err := d.c.ReadFile(ctx, s.ID, "in/a.txt"); err != nil || string(data) != "from the API" {
		t.Errorf("read through an inside link: %q, %v", data, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(ws, "src")); len(entries) != 2 {
		t.Errorf("a temporary file is left: %v", entries)
	}

	for _, p := range []string{"../x", "src/../../x", "/etc/passwd", "abs-out/secret", "rel-out/secret", filepath.Join(outside, "secret")} {
		if data, err := d.c.ReadFile(ctx, s.ID, p); err == nil || bytes.Contains(data, []byte("host secret")) {
			t.Errorf("read %q escaped the workspace: %q", p, data)
		} else if c := apiCode(err); c != client.CodeWorkspace && c != client.CodeBadRequest {
			t.Errorf("read %q: %v", p, err)
		}
		if err := d.c.WriteFile(ctx, s.ID, p, []byte("planted"), 0o644); err == nil {
			t.Errorf("write %q escaped the workspace", p)
		}
		if err := d.c.RemoveFile(ctx, s.ID, p); err == nil {
			t.Errorf("remove %q escaped the workspace", p)
		}
		if _, err := d.c.ListDir(ctx, s.ID, p); err == nil && p != "/etc/passwd" {
			t.Errorf("list %q escaped the workspace", p)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "secret")); string(data) != "host secret" {
		t.Errorf("the outside file was changed: %q", data)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("something was planted outside: %v", entries)
	}

	// Protected paths: host tools run them.
	for _, p := range []string{".git/hooks/pre-commit", ".envrc", ".vscode/settings.json", "cfg/settings.json"} {
		if err := d.c.WriteFile(ctx, s.ID, p, []byte("#!/bin/sh\n"), 0o755); apiCode(err) != client.CodeProtected {
			t.Errorf("write %q: %v", p, err)
		}
	}
	if err := d.c.RemoveFile(ctx, s.ID, ".git"); apiCode(err) != client.CodeProtected {
		t.Errorf("remove .git: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); !os.IsNotExist(err) {
		t.Errorf("a hook was planted: %v", err)
	}

	if err := d.c.RemoveFile(ctx, s.ID, "src/b.txt"); err != nil {
		t.Error(err)
	}
	if _, err := d.c.ReadFile(ctx, s.ID, "src/b.txt"); apiCode(err) != client.CodeNotFound {
		t.Errorf("read after remove: %v", err)
	}
	if err := d.c.RemoveFile(ctx, s.ID, "src"); apiCode(err) != client.CodeBadRequest {
		t.Errorf("remove a non-empty directory: %v", err)
	}
	big := bytes.Repeat([]byte("x"), daemon.MaxFileSize+1)
	if err := d.c.WriteFile(ctx, s.ID, "big", big, 0o644); apiCode(err) != client.CodeBodyTooLarge {
		t.Errorf("a file over the limit: %v", err)
	}

	// An overlay session's files are its change set's.
	o := d.create(t, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "overlay"})
	if _, err := d.c.ReadFile(ctx, o.ID, "src/a.txt"); apiCode(err) != client.CodeUnsupported || !strings.Contains(err.Error(), "overlay") {
		t.Errorf("files of an overlay session: %v", err)
	}

	// As root, a file the API writes belongs to the workspace's owner.
	if os.Geteuid() == 0 {
		other := t.TempDir()
		os.Chown(other, 65534, 65534)
		so := d.create(t, &client.CreateSessionRequest{Workspace: other})
		if err := d.c.WriteFile(ctx, so.ID, "f", []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(other, "f"), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("the file is owned by %d:%d, want 65534:65534 (%v)", st.Uid, st.Gid, err)
		}
	}
}

// TestFilesNonUTF8Names: a name whose bytes are not UTF-8 comes back with
// them in path_base64 (JSON's path has U+FFFD for them, which names no
// file), and those bytes reach the file. The control: a UTF-8 name has
// no path_base64.
func TestFilesNonUTF8Names(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	raw := "caf\xe9.txt" // Latin-1, not UTF-8
	os.WriteFile(filepath.Join(ws, raw), []byte("latin"), 0o644)
	os.WriteFile(filepath.Join(ws, "café.txt"), []byte("utf8"), 0o644)
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	list, err := d.c.ListDir(ctx, s.ID, ".")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, fi := range list {
		want := "utf8"
		if fi.Path != "café.txt" {
			want = "latin"
			if string(fi.PathBase64) != raw {
				t.Errorf("%q: path_base64 %q, want %q", fi.Path, fi.PathBase64, raw)
			}
		} else if fi.PathBase64 != nil {
			t.Errorf("a UTF-8 name has path_base64 %q", fi.PathBase64)
		}
		if data, err := d.c.ReadFile(ctx, s.ID, fi.RawPath()); err != nil || string(data) != want {
			t.Errorf("read %q: %q, %v, want %q", fi.RawPath(), data, err, want)
		}
		if st, err := d.c.Stat(ctx, s.ID, fi.RawPath()); err != nil || st.RawPath() != fi.RawPath() {
			t.Errorf("stat %q: %+v, %v", fi.RawPath(), st, err)
		}
	}
}

// TestFilesBareRepositoryWorkspace: a session whose workspace is a git
// directory (a bare repository) may not have its config or hooks
// written through the files API or a tar upload, which git on the host
// would run (found by a tester: a PUT of config naming core.fsmonitor ran
// at the host's next git status). The control: an ordinary file of it is
// written.
func TestFilesBareRepositoryWorkspace(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws := t.TempDir()
	for _, dir := range []string{"objects", "refs/heads", "hooks"} {
		if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "config"), []byte("[core]\n\tbare = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	for _, p := range []string{"config", "hooks/pre-commit", "HEAD"} {
		if err := d.c.WriteFile(ctx, s.ID, p, []byte("[core]\n\tfsmonitor = touch /tmp/x\n"), 0o755); apiCode(err) != client.CodeProtected {
			t.Errorf("write %q: %v", p, err)
		}
	}
	if _, err := d.c.UploadTar(ctx, s.ID, ".", mkTar(t, reg("hooks/post-update"))); apiCode(err) != client.CodeProtected {
		t.Errorf("upload of a hook: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "config")); string(b) != "[core]\n\tbare = true\n" {
		t.Errorf("the config was written: %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, "hooks")); len(ents) != 0 {
		t.Errorf("a hook was planted: %v", ents)
	}
	if err := d.c.WriteFile(ctx, s.ID, "description", []byte("a repository\n"), 0o644); err != nil {
		t.Errorf("control: write description: %v", err)
	}
}
