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

// endingReader is an upload's body that ends its session when the
// reading reaches byte at, or, when at is the body's length, in the read
// that finds its end (after the daemon's last look at the session).
type endingReader struct {
	r    io.Reader
	n    int
	at   int
	end  func()
	done bool
}

func (e *endingReader) Read(p []byte) (int, error) {
	if !e.done && e.n < e.at && e.n+len(p) > e.at {
		p = p[:e.at-e.n]
	}
	n, err := e.r.Read(p)
	e.n += n
	if !e.done && (e.n > e.at || e.n == e.at && err == io.EOF) {
		e.done = true
		e.end()
	}
	return n, err
}

// TestUploadOfAnEndedSession: a tar upload whose session ends while its
// body is read, or once it has been read, is refused as ended (ErrEnded,
// 410) and writes nothing: its checks resolved paths beneath a closed
// root ("bad file descriptor", a 500) and it read the rest of the body
// (found by a tester). The control: the same upload to a live session
// lands.
func TestUploadOfAnEndedSession(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	data := bytes.Repeat([]byte("x"), 1<<20)
	tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
	tw.Write(data)
	tw.Close()
	archive := buf.Bytes()
	for _, tc := range []struct {
		name string
		at   int // where the session ends; 0: never
	}{{"midway", len(archive) / 2}, {"read whole", len(archive)}, {"control", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			m, s := ownSession(t, ws)
			var r io.Reader = bytes.NewReader(archive)
			er := &endingReader{r: r, at: tc.at, end: func() {
				if err := m.Delete(context.Background(), s.Tenant, s.ID); err != nil {
					t.Error(err)
				}
			}}
			if tc.at > 0 {
				r = er
			}
			_, err := s.Untar(context.Background(), ".", r)
			_, statErr := os.Lstat(filepath.Join(ws, "f"))
			switch {
			case tc.at == 0 && (err != nil || statErr != nil):
				t.Fatalf("a live session's upload: %v, its file: %v", err, statErr)
			case tc.at > 0 && !errors.Is(err, ErrEnded):
				t.Fatalf("an ended session's upload: %v, want ErrEnded", err)
			case tc.at > 0 && statErr == nil:
				t.Errorf("an ended session's upload wrote its file")
			case tc.at > 0 && tc.at < len(archive) && er.n > tc.at+64<<10:
				t.Errorf("read %d bytes of the body after the session ended at %d", er.n, tc.at)
			}
		})
	}
}
