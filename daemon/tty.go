package daemon

import (
	"context"
	"syscall"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// execRelayed runs a command and applies to it, until it ends, the sizes
// of resize (its terminal's) and the signals of signals (either may be
// nil). What comes before the command runs waits for it; what fails (the
// command has just ended) is dropped.
func execRelayed(ctx context.Context, s *sandbox.Session, req *sandbox.ExecRequest, stdio backend.Stdio, resize <-chan WindowSize, signals <-chan syscall.Signal) (*sandbox.Report, error) {
	done := make(chan struct{})
	defer close(done)
	return s.ExecStarted(ctx, req, stdio, func(p *sandbox.Process) {
		go func() {
			for resize != nil || signals != nil {
				select {
				case <-done:
					return
				case ws, ok := <-resize:
					if !ok {
						resize = nil
						continue
					}
					p.Resize(ws.Rows, ws.Cols)
				case sig, ok := <-signals:
					if !ok {
						signals = nil
						continue
					}
					p.Signal(sig)
				}
			}
		}()
	})
}
