package httpapi

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// The files endpoints take the path as a query parameter: the router
// would clean a `..` in the URL's path into something else, and the
// daemon must see, and refuse, what the client sent.

func (s *Server) session(r *http.Request, t daemon.Tenant) (*daemon.Session, string, error) {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return nil, "", err
	}
	q := r.URL.Query()
	if _, ok := q["path"]; !ok {
		return nil, "", badRequest("the path parameter is required")
	}
	return sess, q.Get("path"), nil
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	data, err := sess.ReadFile(p)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
	return nil
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v&^0o777 != 0 {
			return badRequest("mode: %q is not permission bits in octal, such as 0644", m)
		}
		perm = fs.FileMode(v)
	}
	data, err := io.ReadAll(s.body(w, r, daemon.MaxFileSize))
	if err != nil {
		return bodyError(err, fmt.Sprintf("a file is at most %d bytes", daemon.MaxFileSize))
	}
	if err := sess.WriteFile(r.Context(), p, data, perm); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	if err := sess.Remove(r.Context(), p); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func fileJSON(fi *daemon.FileInfo) client.FileInfo {
	return client.FileInfo{Path: fi.Path, PathBase64: rawPath(fi.Path), Type: fi.Type, Size: fi.Size, Mode: fmt.Sprintf("%04o", fi.Mode), ModTime: fi.ModTime}
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	fi, err := sess.Stat(p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, fileJSON(fi))
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, p, err := s.session(r, t)
	if err != nil {
		return err
	}
	entries, truncated, err := sess.List(p)
	if err != nil {
		return err
	}
	out := make([]client.FileInfo, 0, len(entries))
	for _, fi := range entries {
		out = append(out, fileJSON(fi))
	}
	return writeJSON(w, http.StatusOK, map[string]any{"entries": out, "truncated": truncated})
}

// rawPath is p's bytes when JSON cannot carry them (p is not UTF-8), else
// nil.
func rawPath(p string) []byte {
	if utf8.ValidString(p) {
		return nil
	}
	return []byte(p)
}
