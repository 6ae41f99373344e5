//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
)

// overlapWriter records whether two Writes were ever in it at once: a
// bytes.Buffer written so loses output.
type overlapWriter struct {
	in, overlaps atomic.Int32
	buf          bytes.Buffer
}

func (w *overlapWriter) Write(p []byte) (int, error) {
	if w.in.Add(1) > 1 {
		w.overlaps.Add(1)
	}
	defer w.in.Add(-1)
	time.Sleep(100 * time.Microsecond) // widen the window two writers would share
	return w.buf.Write(p)
}

// TestSameWriterForBothStreams: a caller that gives one writer for
// stdout and stderr (a bytes.Buffer, say) gets one Write at a time, as
// os/exec does, in a run and in a session, so no output is lost. The
// control: every line of both streams arrives.
func TestSameWriterForBothStreams(t *testing.T) {
	const n = 300
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`, n)
	check := func(t *testing.T, w *overlapWriter) {
		t.Helper()
		if k := w.overlaps.Load(); k != 0 {
			t.Errorf("%d writes overlapped", k)
		}
		out := w.buf.String()
		for i := 0; i < n; i++ {
			for _, s := range []string{"out", "err"} {
				if !strings.Contains(out, fmt.Sprintf("%s%d\n", s, i)) {
					t.Fatalf("%s%d is missing from the output (%d bytes)", s, i, len(out))
				}
			}
		}
	}
	t.Run("run", func(t *testing.T) {
		w := &overlapWriter{}
		ws := t.TempDir()
		p := workspacePolicy(t, ws)
		rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"/bin/sh", "-c", script}},
			backend.Stdio{Stdout: w, Stderr: w})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("run: %v, report %+v", err, rep)
		}
		check(t, w)
	})
	t.Run("session", func(t *testing.T) {
		ws := t.TempDir()
		s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: workspacePolicy(t, ws), Backend: testBackend()})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		w := &overlapWriter{}
		rep, err := s.Exec(context.Background(), &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}}, backend.Stdio{Stdout: w, Stderr: w})
		if err != nil || rep.ExitCode != 0 {
			t.Fatalf("exec: %v, report %+v", err, rep)
		}
		check(t, w)
	})
}
