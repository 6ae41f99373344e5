package sandbox

import (
	"context"

	"github.com/moatbox/moat/backend"
)

// ExecStarted is Exec that calls started with the command's Process once
// it runs and before waiting for it: the caller can resize its terminal
// (ExecRequest.Tty) or signal it while Exec waits. started must not block.
func (s *Session) ExecStarted(ctx context.Context, req *ExecRequest, stdio backend.Stdio, started func(*Process)) (*Report, error) {
	p, err := s.start(ctx, req, stdio, ctx)
	if err != nil {
		return p.rep, err
	}
	started(p)
	return p.Wait()
}
