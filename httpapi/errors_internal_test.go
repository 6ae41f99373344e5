package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/daemon"
	"github.com/moatbox/moat/workspace"
)

// TestIncompleteChangeSetError: the diff or apply of a change set that is
// incomplete (its session ended before its changes were saved: the daemon
// was killed) is a 409 with the stable code "incomplete", where a diff was
// a 500 and an apply a 400 (found by a tester). The control: a bad request
// of its own stays one.
func TestIncompleteChangeSetError(t *testing.T) {
	s := &Server{}
	inc := fmt.Errorf("change set x: killed before its changes were saved: %w", workspace.ErrIncomplete)
	for _, err := range []error{inc, fmt.Errorf("%w: %w", daemon.ErrBadRequest, inc)} {
		if e := s.apiError(err); e.Status != http.StatusConflict || e.Code != client.CodeIncomplete {
			t.Errorf("%v: %d %s", err, e.Status, e.Code)
		}
	}
	if e := s.apiError(fmt.Errorf("%w: no such path", daemon.ErrBadRequest)); e.Code != client.CodeBadRequest {
		t.Errorf("control: %d %s", e.Status, e.Code)
	}
	if e := s.apiError(errors.New("x")); e.Code != client.CodeInternal {
		t.Errorf("control: %d %s", e.Status, e.Code)
	}
}
