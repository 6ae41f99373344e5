package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestUploadsBoundedPerTenant: a tenant may have MaxTenantUploads tar
// uploads being spooled at once; the next is refused at once (ErrQuota)
// and writes nothing. Once one has ended, the same upload lands (the
// positive control), and another tenant is never held by the first's.
func TestUploadsBoundedPerTenant(t *testing.T) {
	ws := t.TempDir()
	m, s := ownSession(t, ws)
	ctx := context.Background()
	var small bytes.Buffer
	tw := tar.NewWriter(&small)
	tw.WriteHeader(&tar.Header{Name: "third", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg})
	tw.Write([]byte("third"))
	tw.Close()

	// Uploads that stay open until their writers close.
	var writers []*io.PipeWriter
	errs := make(chan error, MaxTenantUploads)
	for range MaxTenantUploads {
		r, w := io.Pipe()
		writers = append(writers, w)
		go func() {
			_, err := s.Untar(ctx, ".", r)
			errs <- err
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		n := m.uploads[s.Tenant.ID]
		m.mu.Unlock()
		if n == MaxTenantUploads {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d uploads under way, want %d", n, MaxTenantUploads)
		}
	}

	if rep, err := s.Untar(ctx, ".", bytes.NewReader(small.Bytes())); !errors.Is(err, ErrQuota) {
		t.Fatalf("an upload beyond the bound: %+v %v, want ErrQuota", rep, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "third")); !os.IsNotExist(err) {
		t.Errorf("the refused upload wrote its file: %v", err)
	}
	// Another tenant's uploads are its own.
	other, err := m.startUpload(TokenTenant("other").ID)
	if err != nil {
		t.Errorf("another tenant's upload: %v", err)
	} else {
		other()
	}

	writers[0].CloseWithError(errors.New("client went away"))
	if err := <-errs; err == nil {
		t.Error("an upload whose client went away succeeded")
	}
	if rep, err := s.Untar(ctx, ".", bytes.NewReader(small.Bytes())); err != nil || rep.Entries != 1 {
		t.Fatalf("the same upload once one had ended: %+v %v", rep, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "third")); err != nil || string(b) != "third" {
		t.Errorf("third: %q %v", b, err)
	}
	for _, w := range writers[1:] {
		w.CloseWithError(errors.New("client went away"))
	}
	<-errs
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.uploads) != 0 {
		t.Errorf("uploads still counted after they ended: %v", m.uploads)
	}
}
