package daemon

import (
	"context"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// execResized runs a command with a terminal and applies the sizes of
// resize to it until it ends. A size that comes before the command runs
// waits for it; one that fails (the command has just ended) is dropped.
func execResized(ctx context.Context, s *sandbox.Session, req *sandbox.ExecRequest, stdio backend.Stdio, resize <-chan WindowSize) (*sandbox.Report, error) {
	done := make(chan struct{})
	defer close(done)
	return s.ExecStarted(ctx, req, stdio, func(p *sandbox.Process) {
		go func() {
			for {
				select {
				case <-done:
					return
				case ws, ok := <-resize:
					if !ok {
						return
					}
					p.Resize(ws.Rows, ws.Cols)
				}
			}
		}()
	})
}
