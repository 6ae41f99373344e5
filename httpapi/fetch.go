package httpapi

import (
	"encoding/base64"
	"net/http"
	"unicode/utf8"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
)

// fetch is POST /v1/sessions/{id}/fetch: the webhook-style fetch the
// daemon makes for a session (daemon.Session.Fetch, under its host rules).
func (s *Server) fetch(w http.ResponseWriter, r *http.Request, t daemon.Tenant) error {
	sess, err := s.Manager.Get(t, r.PathValue("id"))
	if err != nil {
		return err
	}
	var req client.FetchRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	res, err := sess.Fetch(r.Context(), req.URL)
	if err != nil {
		return err
	}
	out := client.FetchResult{Status: res.Status, Addr: res.Addr, Headers: map[string]string{}}
	for k, vs := range res.Header {
		// By the map's key, not Get's canonical one: a name the secrets'
		// scrubbing rewrote is in lower case, and Get would miss it.
		if len(vs) > 0 {
			out.Headers[k] = vs[0]
		}
	}
	if utf8.Valid(res.Body) {
		out.Body = string(res.Body)
	} else {
		out.BodyBase64 = base64.StdEncoding.EncodeToString(res.Body)
	}
	return writeJSON(w, http.StatusOK, out)
}
