package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"syscall"

	"github.com/moatbox/moat/backend/gvisor"
	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
	"github.com/moatbox/moat/workspace"
)

// fail answers r with err as a JSON error. The daemon's errors carry text
// safe to show the tenant; anything else is logged and answered as an
// internal error that says nothing of it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	gone := errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
	if sw, ok := w.(*statusWriter); ok && sw.wrote {
		// The answer was under way (a stream): it cannot become an error
		// now, and a client that went is no failure of the daemon's.
		if !gone {
			s.Logger.Warn("request failed after its answer began", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		return
	}
	e := s.apiError(err)
	if e.Status == http.StatusInternalServerError && !gone {
		s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if e.Status == http.StatusUnauthorized {
		// A caller without a credential keeps no connection of the
		// daemon's open.
		w.Header().Set("Connection", "close")
	}
	writeError(w, e)
}

func (s *Server) apiError(err error) *client.Error {
	var ae *client.Error
	if errors.As(err, &ae) {
		return ae
	}
	var perrs *policy.Errors
	if errors.As(err, &perrs) {
		e := &client.Error{Status: http.StatusBadRequest, Code: client.CodeInvalidPolicy, Message: "the policy is not valid"}
		for _, fe := range *perrs {
			e.Details = append(e.Details, s.scrub(fe.Error()))
		}
		return e
	}
	if errors.Is(err, gvisor.ErrNoRunsc) || strings.Contains(err.Error(), gvisor.ErrNoRunsc.Error()) {
		// Its own message says where the daemon's user keeps and builds
		// runsc: the host's business, not the tenant's. (The sandbox's
		// refusal carries it as text, among what the host cannot
		// enforce, so the text is looked for too.)
		return &client.Error{Status: http.StatusUnprocessableEntity, Code: client.CodeSandboxRefused,
			Message: "this daemon's host has no runsc, which isolation \"gvisor\" needs: its owner can install it (moat doctor says how); or use isolation \"native\""}
	}
	if errors.Is(err, syscall.ENAMETOOLONG) {
		// The tenant's path, not the daemon: its own words, no host path.
		return &client.Error{Status: http.StatusBadRequest, Code: client.CodeBadRequest,
			Message: "a path is too long: a name is at most 255 bytes, and a whole path at most 4095"}
	}
	for _, m := range []struct {
		err    error
		status int
		code   string
	}{
		{daemon.ErrNotFound, http.StatusNotFound, client.CodeNotFound},
		{daemon.ErrForbidden, http.StatusForbidden, client.CodeForbidden},
		{daemon.ErrEnded, http.StatusGone, client.CodeEnded},
		{sandbox.ErrSessionEnded, http.StatusGone, client.CodeEnded},
		{sandbox.ErrDenied, http.StatusForbidden, client.CodeDenied},
		{daemon.ErrQuota, http.StatusTooManyRequests, client.CodeQuota},
		{daemon.ErrWorkspace, http.StatusForbidden, client.CodeWorkspace},
		{daemon.ErrPolicyRefused, http.StatusForbidden, client.CodePolicyRefused},
		{daemon.ErrDraining, http.StatusServiceUnavailable, client.CodeDraining},
		// Before ErrBadRequest, which an apply's wraps it in.
		{workspace.ErrIncomplete, http.StatusConflict, client.CodeIncomplete},
		{daemon.ErrBadRequest, http.StatusBadRequest, client.CodeBadRequest},
		{daemon.ErrNotRunning, http.StatusConflict, client.CodeNotRunning},
		{daemon.ErrNoStdin, http.StatusConflict, client.CodeNoStdin},
		{daemon.ErrStdinBlocked, http.StatusServiceUnavailable, client.CodeStdinBlocked},
		{daemon.ErrNoFile, http.StatusNotFound, client.CodeNotFound},
		{daemon.ErrProtected, http.StatusForbidden, client.CodeProtected},
		{daemon.ErrUnsupportedMode, http.StatusConflict, client.CodeUnsupported},
		{sandbox.ErrRefused, http.StatusUnprocessableEntity, client.CodeSandboxRefused},
		{daemon.ErrConflict, http.StatusConflict, client.CodeConflict},
		{workspace.ErrTooLarge, http.StatusConflict, client.CodeUnsupported},
		{workspace.ErrTooDeep, http.StatusConflict, client.CodeUnsupported},
		{daemon.ErrNoTemplate, http.StatusNotFound, client.CodeNotFound},
		{daemon.ErrApprovalRefused, http.StatusUnprocessableEntity, client.CodeApprovalRefused},
		{daemon.ErrFetchRefused, http.StatusUnprocessableEntity, client.CodeFetchRefused},
	} {
		if errors.Is(err, m.err) {
			return &client.Error{Status: m.status, Code: m.code, Message: s.scrub(err.Error())}
		}
	}
	return &client.Error{Status: http.StatusInternalServerError, Code: client.CodeInternal, Message: "internal error (the daemon's log has the cause)"}
}

// scrub takes the daemon's state directory out of a text shown to a
// tenant: where the daemon keeps things is not the tenant's business.
func (s *Server) scrub(msg string) string {
	if s.StateDir != "" {
		msg = strings.ReplaceAll(msg, s.StateDir, "<state>")
	}
	return msg
}
