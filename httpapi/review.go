package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/workspace"
)

// The review of an overlay or copy session (package daemon's Diff, Apply,
// Discard): each ends the session first if it is live.

func (s *Server) diffSession(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	q := r.URL.Query()
	f := workspace.Format(q.Get("format"))
	ct := "text/plain; charset=utf-8"
	switch f {
	case "":
		f = workspace.Unified
	case workspace.Summary, workspace.Unified, workspace.Patch:
	case workspace.JSON:
		ct = "application/json"
	default:
		return badRequest("format: %q is not one of unified, summary, patch, json", f)
	}
	opts := workspace.DiffOptions{Format: f, Filter: workspace.Filter{Exclude: q["exclude"]}}
	// The diff is made before anything is sent, so that an error has its
	// own status.
	var buf bytesBuffer
	if err := s.Manager.Diff(r.Context(), t, r.PathValue("id"), &buf, opts); err != nil {
		return err
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	// The json format names the workspace, which for one the daemon made
	// is in its state directory.
	_, err := io.WriteString(w, s.scrub(string(buf.b)))
	return err
}

// bytesBuffer bounds a diff held in memory.
type bytesBuffer struct{ b []byte }

const maxDiff = 64 << 20

var errDiffTooLarge = &client.Error{Status: http.StatusRequestEntityTooLarge, Code: client.CodeQuota,
	Message: "the diff is over 64 MiB: ask for format=summary, or exclude paths"}

func (b *bytesBuffer) Write(p []byte) (int, error) {
	if len(b.b)+len(p) > maxDiff {
		return 0, errDiffTooLarge
	}
	b.b = append(b.b, p...)
	return len(p), nil
}

func changesJSON(list []workspace.Change) []client.Change {
	out := []client.Change{}
	for _, c := range list {
		out = append(out, client.Change{Path: c.Path, PathBase64: rawPath(c.Path), Kind: string(c.Kind), Type: string(c.Type)})
	}
	return out
}

func (s *Server) applySession(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	var req client.ApplyRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	rep, err := s.Manager.Apply(r.Context(), t, r.PathValue("id"), req.Paths, req.Force, req.Keep)
	if err != nil {
		e := s.apiError(err)
		switch {
		case errors.Is(err, daemon.ErrProtected):
			e.Details = append(e.Details, rep.Protected...)
		case errors.Is(err, daemon.ErrConflict):
			for _, c := range rep.Conflicts {
				e.Details = append(e.Details, c.Path+": "+c.Reason)
			}
		}
		return e
	}
	out := &client.ApplyReport{Applied: changesJSON(rep.Applied), Skipped: changesJSON(rep.Skipped), Forced: []string{}}
	out.ProtectedForced = rep.ProtectedForced
	out.Recovered = rep.Recovered
	for _, c := range rep.Forced {
		out.Forced = append(out.Forced, c.Path)
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) discardSession(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	if err := s.Manager.Discard(r.Context(), t, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
