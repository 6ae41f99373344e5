//go:build linux

package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// sparseTar is an archive of a few KiB holding one PAX (GNU 1.0) sparse
// file of size bytes, which archive/tar reads as a regular file of that
// size: the writer does not make one, so its extended header is patched
// in by hand.
func sparseTar(t *testing.T, name string, size int64) *bytes.Buffer {
	t.Helper()
	rec := func(k, v string) string {
		s := " " + k + "=" + v + "\n"
		n := len(s)
		for l := len(strconv.Itoa(n)) + len(s); l != n; l = len(strconv.Itoa(n)) + len(s) {
			n = l
		}
		return strconv.Itoa(n) + s
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	recs := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", name) + rec("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	tw.WriteHeader(&tar.Header{Name: "PaxHeaders/" + name, Typeflag: tar.TypeReg, Size: int64(len(recs)), Format: tar.FormatUSTAR})
	tw.Write([]byte(recs))
	tw.Flush()
	b := buf.Bytes()
	b[156] = tar.TypeXHeader
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	// The sparse map: one byte of data, at the end.
	m := []byte(fmt.Sprintf("1\n%d\n1\n", size-1))
	body := append(append(m, make([]byte, 512-len(m))...), 'x')
	tw.WriteHeader(&tar.Header{Name: "GNUSparseFile.0/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatUSTAR})
	tw.Write(body)
	tw.Close()
	return &buf
}

// ownSession starts a Manager and a session of the user running the
// test on the workspace ws.
func ownSession(t *testing.T, ws string) (*Manager, *Session) {
	t.Helper()
	m := newManager(t, Config{})
	s, err := m.Create(context.Background(), UIDTenant(os.Geteuid()), &CreateRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestUntarSparseBounded: an upload writes at most MaxTarBytes of files,
// however small the archive: a sparse entry that would expand past it is
// refused before anything is written. A small one lands (positive
// control).
func TestUntarSparseBounded(t *testing.T) {
	ws := t.TempDir()
	_, s := ownSession(t, ws)
	ctx := context.Background()
	small := sparseTar(t, "small", 4096)
	if rep, err := s.Untar(ctx, ".", small); err != nil || rep.Bytes != 4096 {
		t.Fatalf("a small sparse file: %+v %v", rep, err)
	}
	if fi, err := os.Stat(filepath.Join(ws, "small")); err != nil || fi.Size() != 4096 {
		t.Fatalf("small: %v %v", fi, err)
	}

	big := sparseTar(t, "big", MaxTarBytes+1)
	if big.Len() > 8192 {
		t.Fatalf("the archive is %d bytes", big.Len())
	}
	if rep, err := s.Untar(ctx, ".", big); !errors.Is(err, ErrQuota) {
		t.Errorf("an archive of a few KiB holding a file of %d bytes: %+v %v, want ErrQuota", MaxTarBytes+1, rep, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "big")); !os.IsNotExist(err) {
		t.Errorf("big was written: %v", err)
	}
}
