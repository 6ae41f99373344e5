package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// Tar upload and download of a workspace directory (package daemon's
// Untar and Tar decide what is refused).

func (s *Server) uploadTar(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	rep, err := sess.Untar(r.Context(), p, s.body(w, r, daemon.MaxTarBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &client.Error{Status: http.StatusRequestEntityTooLarge, Code: client.CodeBodyTooLarge,
			Message: fmt.Sprintf("an archive is at most %d bytes", daemon.MaxTarBytes)}
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, &client.TarReport{Entries: rep.Entries, Bytes: rep.Bytes})
}

// tarStart sends the status with the archive's first bytes, so that an
// error before any has its own.
type tarStart struct {
	w       http.ResponseWriter
	started bool
}

func (t *tarStart) Write(p []byte) (int, error) {
	if !t.started {
		t.started = true
		t.w.Header().Set("Content-Type", "application/x-tar")
		t.w.Header().Set("Trailer", client.LeftOutTrailer)
		t.w.WriteHeader(http.StatusOK)
	}
	return t.w.Write(p)
}

func (s *Server) downloadTar(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	ts := &tarStart{w: w}
	bw := bufio.NewWriterSize(ts, 64<<10)
	left, err := sess.Tar(p, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && left.Count > 0 {
		// After the archive, which is whole but for them: the client
		// says what it lacks (client.LeftOutError).
		w.Header().Set(client.LeftOutTrailer, client.FormatLeftOut(left.Count, left.Paths, left.Why))
	}
	if err != nil && ts.started {
		// An archive cut short must not read as a whole one: the
		// connection is broken instead of ending the answer.
		s.Logger.Info("tar download cut", "session", sess.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
	return err
}
