//go:build linux

package daemon

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// deepTree makes a chain of n directories "d" under dir, with a file
// "f" at the bottom, holding at most two descriptors at a time.
func deepTree(t *testing.T, dir string, n int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		sub, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = sub
	}
	f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err == nil {
		unix.Close(f)
	}
	unix.Close(fd)
}

// fdCounter is a writer that notes the most descriptors the process had
// open while it was written to.
type fdCounter struct {
	writes, most int
}

func (c *fdCounter) Write(p []byte) (int, error) {
	if c.writes++; c.writes%32 == 1 {
		if ents, err := os.ReadDir("/proc/self/fd"); err == nil && len(ents) > c.most {
			c.most = len(ents)
		}
	}
	return len(p), nil
}

// TestTarDepthBounded: a download of a chain of directories a command
// made deeper than MaxTarDepth stops with ErrQuota instead of holding one
// of the daemon's descriptors per level. A chain within the bound comes
// whole (positive control).
func TestTarDepthBounded(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(ws+"/ok", 0o755)
	os.Mkdir(ws+"/deep", 0o755)
	deepTree(t, ws+"/ok", MaxTarDepth-1)
	deepTree(t, ws+"/deep", 4*MaxTarDepth)
	_, s := ownSession(t, ws)

	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() { err := s.tar("ok", pw, &LeftOut{}); pw.CloseWithError(err); errc <- err }()
	tr := tar.NewReader(pr)
	dirs, file := 0, false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			dirs++
		} else if strings.HasSuffix(h.Name, "/f") {
			file = true
		}
	}
	if err := <-errc; err != nil || dirs != MaxTarDepth-1 || !file {
		t.Fatalf("control: %d directories, file %v, %v", dirs, file, err)
	}

	before := 0
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		before = len(ents)
	}
	c := &fdCounter{}
	err := s.tar("deep", c, &LeftOut{})
	if !errors.Is(err, ErrQuota) {
		t.Errorf("a download %d levels deep: %v, want ErrQuota", 4*MaxTarDepth, err)
	}
	if c.most-before > MaxTarDepth+16 {
		t.Errorf("the download held %d more descriptors at once, want at most about %d", c.most-before, MaxTarDepth)
	}
}

// TestUntarDepthBounded: an upload refuses an entry more than MaxTarDepth
// levels below the workspace's top (ErrQuota, writing nothing), so that
// what an upload writes a download serves back; it accepted any depth.
// The positive control: an entry at MaxTarDepth levels is written, and
// the workspace's top then downloads whole.
func TestUntarDepthBounded(t *testing.T) {
	ws := t.TempDir()
	_, s := ownSession(t, ws)
	ctx := t.Context()
	deep := strings.Repeat("d/", MaxTarDepth) + "f"
	if _, err := s.Untar(ctx, ".", linkTar(t, &tar.Header{Name: deep, Typeflag: tar.TypeReg, Mode: 0o644})); !errors.Is(err, ErrQuota) {
		t.Errorf("an entry %d levels deep: %v, want ErrQuota", MaxTarDepth+1, err)
	}
	if _, err := os.Stat(ws + "/d"); err == nil {
		t.Error("the refused upload wrote something")
	}
	ok := strings.Repeat("d/", MaxTarDepth-1) + "f"
	if _, err := s.Untar(ctx, ".", linkTar(t, &tar.Header{Name: ok, Typeflag: tar.TypeReg, Mode: 0o644})); err != nil {
		t.Fatalf("control: an entry %d levels deep: %v", MaxTarDepth, err)
	}
	if err := s.tar(".", io.Discard, &LeftOut{}); err != nil {
		t.Errorf("control: the download of what was uploaded: %v", err)
	}
}
