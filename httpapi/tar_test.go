//go:build linux

package httpapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

func mkTar(t *testing.T, hs ...*tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "content of " + h.Name
			h.Size = int64(len(body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	return &buf
}

func reg(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg} }

// TestTarUpload: an archive lands in the workspace (files, directories,
// links as links, modes), visible to the session's commands; an archive
// with any bad entry is refused whole, writing nothing; a directory that
// leads out of the workspace through a link is refused.
func TestTarUpload(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws, outside := t.TempDir(), t.TempDir()
	os.Symlink(outside, filepath.Join(ws, "out"))
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})

	exe := reg("bin/run")
	exe.Mode = 0o755
	good := mkTar(t, &tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, &tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o750},
		reg("d/f"), &tar.Header{Name: "d/l", Typeflag: tar.TypeSymlink, Linkname: "f"}, exe)
	rep, err := d.c.UploadTar(ctx, s.ID, "up/here", good)
	if err != nil || rep.Entries != 4 {
		t.Fatalf("upload: %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "up/here/d/f")); string(b) != "content of d/f" {
		t.Errorf("d/f: %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(ws, "up/here/d/l")); l != "f" {
		t.Errorf("d/l links to %q", l)
	}
	if fi, err := os.Stat(filepath.Join(ws, "up/here/bin/run")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("bin/run: %v %v", fi, err)
	}
	if out, _, _ := run(t, d.c, s.ID, &client.ExecRequest{Args: []string{"sh", "-c", "cat up/here/d/l && ./up/here/bin/run 2>/dev/null; test -x up/here/bin/run && echo x"}}); out != "content of d/fx\n" {
		t.Errorf("the session sees %q", out)
	}

	for name, tc := range map[string]struct {
		hs   []*tar.Header
		code string
	}{
		"dotdot":         {[]*tar.Header{reg("ok"), reg("../escape")}, client.CodeBadRequest},
		"inner dotdot":   {[]*tar.Header{reg("a/../../escape")}, client.CodeBadRequest},
		"absolute":       {[]*tar.Header{reg("/etc/escape")}, client.CodeBadRequest},
		"absolute link":  {[]*tar.Header{{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, client.CodeBadRequest},
		"link out":       {[]*tar.Header{{Name: "a/l", Typeflag: tar.TypeSymlink, Linkname: "../../../x"}}, client.CodeBadRequest},
		"hard link":      {[]*tar.Header{reg("ok"), {Name: "h", Typeflag: tar.TypeLink, Linkname: "ok"}}, client.CodeBadRequest},
		"device":         {[]*tar.Header{{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, client.CodeBadRequest},
		"fifo":           {[]*tar.Header{{Name: "p", Typeflag: tar.TypeFifo}}, client.CodeBadRequest},
		"setuid":         {[]*tar.Header{{Name: "su", Typeflag: tar.TypeReg, Mode: 0o4755}}, client.CodeBadRequest},
		"protected":      {[]*tar.Header{reg("ok"), reg(".envrc")}, client.CodeProtected},
		"protected hook": {[]*tar.Header{reg(".git/hooks/pre-commit")}, client.CodeProtected},
	} {
		_, err := d.c.UploadTar(ctx, s.ID, ".", mkTar(t, tc.hs...))
		if apiCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
			continue
		}
		if strings.Contains(err.Error(), ws) || strings.Contains(err.Error(), d.state) {
			t.Errorf("%s: the error shows a host path: %v", name, err)
		}
	}
	if _, err := d.c.UploadTar(ctx, s.ID, "bad", strings.NewReader("not a tar archive at all, but long enough to fill a header block...."+strings.Repeat("x", 600))); apiCode(err) != client.CodeBadRequest {
		t.Errorf("garbage: %v", err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 2 {
		t.Errorf("a refused archive wrote the workspace: %v", ents)
	}
	var many bytes.Buffer
	tw := tar.NewWriter(&many)
	for i := 0; i <= daemon.MaxTarEntries; i++ {
		tw.WriteHeader(&tar.Header{Name: "n/" + strings.Repeat("x", i%7) + string(rune('a'+i%26)), Typeflag: tar.TypeReg, Mode: 0o644})
	}
	tw.Close()
	if _, err := d.c.UploadTar(ctx, s.ID, ".", &many); apiCode(err) != client.CodeQuota {
		t.Errorf("an archive of too many entries: %v", err)
	}
	// Through a link that leads out: the directory, or an entry's parent.
	if _, err := d.c.UploadTar(ctx, s.ID, "out", mkTar(t, reg("planted"))); apiCode(err) != client.CodeWorkspace {
		t.Errorf("upload into a link out: %v", err)
	}
	if _, err := d.c.UploadTar(ctx, s.ID, ".", mkTar(t, reg("out/planted"))); apiCode(err) != client.CodeWorkspace {
		t.Errorf("upload of an entry beneath a link out: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("an upload wrote outside the workspace: %v", ents)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 2 {
		t.Errorf("the workspace holds %v, want out and up", ents)
	}

	// Names with doubled slashes after "./" are the workspace's own
	// (found by a tester: .//x read as /x, and the check of its
	// directories recursed until the daemon died of it).
	if rep, err := d.c.UploadTar(ctx, s.ID, ".", mkTar(t, reg(".//x"), reg("././/y/./z"))); err != nil || rep.Entries != 2 {
		t.Fatalf("upload of .//x: %+v %v", rep, err)
	}
	for _, f := range []string{"x", "y/z"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := d.c.Session(ctx, s.ID); err != nil {
		t.Errorf("the daemon after the upload: %v", err)
	}
}

// TestTarDownload: a directory comes back as an archive with links as
// links, never followed out of the workspace.
func TestTarDownload(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ctx := context.Background()
	ws, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644)
	os.Symlink(outside, filepath.Join(ws, "out"))
	os.MkdirAll(filepath.Join(ws, "src/sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "src/sub/a.txt"), []byte("alpha"), 0o600)
	os.Symlink("sub/a.txt", filepath.Join(ws, "src/link"))
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})

	var buf bytes.Buffer
	if err := d.c.DownloadTar(ctx, s.ID, ".", &buf); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(h.Typeflag) + ":" + h.Linkname + string(b)
	}
	want := map[string]string{
		"out":           "2:" + outside,
		"src/":          "5:",
		"src/sub/":      "5:",
		"src/sub/a.txt": "0:alpha",
		"src/link":      "2:sub/a.txt",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries %v", got)
	}
	if err := d.c.DownloadTar(ctx, s.ID, "out", io.Discard); apiCode(err) != client.CodeWorkspace {
		t.Errorf("download through a link out: %v", err)
	}
	if err := d.c.DownloadTar(ctx, s.ID, "../", io.Discard); apiCode(err) != client.CodeBadRequest {
		t.Errorf("download of ..: %v", err)
	}

	// A read-only session's directory comes down, but nothing goes up.
	ro := d.create(t, &client.CreateSessionRequest{Workspace: ws, WorkspaceMode: "readonly"})
	if err := d.c.DownloadTar(ctx, ro.ID, "src", io.Discard); err != nil {
		t.Errorf("download from a read-only session: %v", err)
	}
	if _, err := d.c.UploadTar(ctx, ro.ID, "src", mkTar(t, reg("new"))); apiCode(err) != client.CodeUnsupported {
		t.Errorf("upload into a read-only session: %v", err)
	}
}

// TestTarDownloadLeftOutSaid: a file the daemon cannot read comes down as
// an archive of the rest and a client.LeftOutError naming it, through the
// HTTP trailer; the rest arrives whole (the positive control). The daemon
// run as root reads every mode, and its archive holds the file.
func TestTarDownloadLeftOutSaid(t *testing.T) {
	d := startDaemon(t, daemon.Config{}, nil)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "ok.txt"), []byte("readable"), 0o644)
	os.WriteFile(filepath.Join(ws, "new\nline"), []byte("closed"), 0o000)
	s := d.create(t, &client.CreateSessionRequest{Workspace: ws})
	var buf bytes.Buffer
	err := d.c.DownloadTar(context.Background(), s.ID, ".", &buf)
	got := map[string]string{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if got["ok.txt"] != "readable" {
		t.Errorf("the readable file: %q (entries %v)", got["ok.txt"], got)
	}
	if os.Geteuid() == 0 {
		if err != nil || got["new\nline"] != "closed" {
			t.Errorf("as root: %v, entries %q", err, got)
		}
		return
	}
	var lo *client.LeftOutError
	if !errors.As(err, &lo) || lo.Count != 1 || len(lo.Paths) != 1 || lo.Paths[0] != "new\nline" || lo.Why[0] != "permission denied" {
		t.Fatalf("download with an unreadable file: %v %+v", err, lo)
	}
	if _, ok := got["new\nline"]; ok {
		t.Errorf("the unreadable file has an entry")
	}
}
