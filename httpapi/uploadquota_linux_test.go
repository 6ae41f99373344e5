package httpapi_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// tarOf is an archive of one file, name, of size bytes, all zero.
func tarOf(t *testing.T, name string, size int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(make([]byte, size))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestUploadSpoolInDiskQuota: under a disk quota, a tar upload is held
// until checked in the workspace's own tmpfs, which the quota counts, not
// in the daemon's state directory: an archive larger than the session's
// limits.disk is refused while it is being held, as a quota error that
// names the limit and the quota, and leaves nothing behind. Controls: an
// archive that fits lands, before the refusal and after it (the refused
// one's spool freed its space).
func TestUploadSpoolInDiskQuota(t *testing.T) {
	if os.Geteuid() != 0 {
		// Without root the daemon cannot bound a workspace with a tmpfs,
		// and under a disk quota refuses every session whose files API
		// writes (TestDiskQuota in package daemon).
		t.Skip("needs root: the daemon mounts the workspace's tmpfs")
	}
	tokens := aliceAndBob(t, "tok-a", "tok-b")
	d := startDaemon(t, daemon.Config{TenantDisk: 64 << 20}, tokens)
	ctx := context.Background()
	alice := client.TCP(d.tcp, "tok-a")
	defer alice.Close()
	s, err := alice.CreateSession(ctx, &client.CreateSessionRequest{Policy: "[limits]\ndisk = \"8MiB\"\n"})
	if err != nil && strings.Contains(err.Error(), "cannot id-map") {
		// The workspace's tmpfs is shown to the command through an
		// idmapped mount, which kernels before 6.3 cannot make of a tmpfs.
		t.Skip("this kernel cannot id-map a tmpfs:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	fits := tarOf(t, "fits", 3<<20)
	if rep, err := alice.UploadTar(ctx, s.ID, ".", bytes.NewReader(fits)); err != nil || rep.Entries != 1 {
		t.Fatalf("positive control: 3MiB into a workspace of 8MiB: %+v %v", rep, err)
	}
	if err := alice.RemoveFile(ctx, s.ID, "fits"); err != nil {
		t.Fatal(err)
	}

	_, err = alice.UploadTar(ctx, s.ID, ".", bytes.NewReader(tarOf(t, "big", 12<<20)))
	if apiCode(err) != client.CodeQuota || !strings.Contains(err.Error(), "limits.disk (8MiB)") || !strings.Contains(err.Error(), "--tenant-disk") {
		t.Errorf("12MiB into a workspace of 8MiB: %v, want a quota error naming limits.disk and --tenant-disk", err)
	}
	if entries, err := alice.ListDir(ctx, s.ID, "."); err != nil || len(entries) != 0 {
		t.Errorf("the refused upload left %+v (%v)", entries, err)
	}
	if rep, err := alice.UploadTar(ctx, s.ID, ".", bytes.NewReader(fits)); err != nil || rep.Entries != 1 {
		t.Fatalf("positive control after the refusal: %+v %v", rep, err)
	}
	if fi, err := alice.Stat(ctx, s.ID, "fits"); err != nil || fi.Size != 3<<20 {
		t.Errorf("fits: %+v %v", fi, err)
	}
}
