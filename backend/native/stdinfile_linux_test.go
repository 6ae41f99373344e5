package native_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/backend/native"
)

// TestStdinFileStaysOnTheHost gives the command a host file and a host
// directory, both owned by the command's host identity, as its stdin. An
// open file is its inode, not a stream: handed over as it is, it let the
// command change the file's mode (fchmod, chmod /proc/self/fd/0, which
// Landlock does not cover), and a directory let it list the directory
// and, without Landlock, open, create and climb ("..") to anything on the
// host from it. The command must get the contents through a pipe.
//
// The positive control is the same chmod through /proc/self/fd on a file
// the command opened in its workspace, which must take effect.
func TestStdinFileStaysOnTheHost(t *testing.T) {
	ws := t.TempDir()
	s0 := spec(t, ws, "true")
	outside := t.TempDir()
	os.Chmod(outside, 0o755)
	file, dir := filepath.Join(outside, "data"), filepath.Join(outside, "dir")
	if err := os.WriteFile(file, []byte("the data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, dir} {
		if err := os.Chown(p, int(s0.User.HostUID), int(s0.User.HostGID)); err != nil {
			t.Fatal(err)
		}
	}
	// The control first: a file of the workspace, opened as fd 3.
	const probe = `echo x > ctl; exec 3<ctl; chmod 0751 /proc/self/fd/3; stat -c %a ctl; ` +
		`chmod 0777 /proc/self/fd/0 2>/dev/null; stat -L -c %F /proc/self/fd/0; cat`
	check := func(t *testing.T, name string, run func(stdin *os.File, out *bytes.Buffer) error) {
		t.Helper()
		for _, in := range []struct {
			path, data string
			mode       os.FileMode
		}{{file, "the data\n", 0o600}, {dir, "", 0o700 | os.ModeDir}} {
			f, err := os.Open(in.path)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err = run(f, &out)
			f.Close()
			if err != nil {
				t.Fatalf("%s, stdin %s: %v", name, in.path, err)
			}
			lines := strings.SplitN(out.String(), "\n", 3)
			if len(lines) < 3 || lines[0] != "751" {
				t.Fatalf("%s: the control chmod did not take effect: %q", name, out.String())
			}
			if fi, err := os.Stat(in.path); err != nil || fi.Mode() != in.mode {
				t.Errorf("%s: the command changed %s's mode to %v (%v)", name, in.path, fi.Mode(), err)
				os.Chmod(in.path, in.mode.Perm())
			}
			if lines[1] != "fifo" {
				t.Errorf("%s: stdin %s reached the command as a %s, not through a pipe", name, in.path, lines[1])
			}
			if lines[2] != in.data {
				t.Errorf("%s: stdin %s: the command read %q, want %q", name, in.path, lines[2], in.data)
			}
		}
	}
	for _, b := range []*native.Backend{{}, {ForkStart: true}, {InitStage: true}} {
		check(t, "Run "+backendName(b), func(stdin *os.File, out *bytes.Buffer) error {
			var errb bytes.Buffer
			st, err := b.Run(context.Background(), spec(t, ws, "/bin/sh", "-c", probe), backend.Stdio{Stdin: stdin, Stdout: out, Stderr: &errb})
			if err == nil && st.ExitCode != 0 {
				t.Errorf("exit %d: %s", st.ExitCode, errb.String())
			}
			return err
		})
	}
	s := spec(t, ws, "true")
	inst, err := (&native.Backend{}).Create(context.Background(), s, backend.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Destroy(context.Background())
	check(t, "session", func(stdin *os.File, out *bytes.Buffer) error {
		p, err := inst.Exec(context.Background(), &backend.ProcessSpec{Args: []string{"/bin/sh", "-c", probe}, Env: s.Env, Dir: s.Dir}, backend.Stdio{Stdin: stdin, Stdout: out})
		if err != nil {
			return err
		}
		_, err = p.Wait()
		return err
	})
}

func backendName(b *native.Backend) string {
	switch {
	case b.InitStage:
		return "init stage"
	case b.ForkStart:
		return "forked direct start"
	}
	return "direct start"
}
