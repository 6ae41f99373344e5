//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/sandbox"
	"golang.org/x/sys/unix"
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
// os/exec does, in a run and in a session, so no output is lost, and the
// lines come in the order the command wrote them: the two streams are
// one pipe, as a shell's 2>&1 makes them.
func TestSameWriterForBothStreams(t *testing.T) {
	const n = 300
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`, n)
	var want strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
	}
	check := func(t *testing.T, w *overlapWriter) {
		t.Helper()
		if k := w.overlaps.Load(); k != 0 {
			t.Errorf("%d writes overlapped", k)
		}
		if out := w.buf.String(); out != want.String() {
			t.Fatalf("the output is not the lines in the order written (%d bytes, %d expected): %.200q", len(out), want.Len(), out)
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

// TestOneFileForBothStreams: stdout and stderr given as two files that
// are one (a shell's 2>&1: a pipe and its dup) keep the order the command
// wrote in, in a run and in a session. The control: two different pipes
// each get their own stream, whole.
func TestOneFileForBothStreams(t *testing.T) {
	const n = 200
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`, n)
	var want, wantOut, wantErr strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
		fmt.Fprintf(&wantOut, "out%d\n", i)
		fmt.Fprintf(&wantErr, "err%d\n", i)
	}
	// pipe returns a pipe's write end and what its read end collects
	// once the write end and its dups are closed.
	pipe := func(t *testing.T) (*os.File, <-chan string) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(r)
			r.Close()
			got <- string(b)
		}()
		return w, got
	}
	dup := func(t *testing.T, f *os.File) *os.File {
		fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fd), "dup")
	}
	ws := t.TempDir()
	p := workspacePolicy(t, ws)
	runs := map[string]func(t *testing.T, stdio backend.Stdio){
		"run": func(t *testing.T, stdio backend.Stdio) {
			rep, err := sandbox.Run(context.Background(), &sandbox.Request{Backend: testBackend(), Policy: p, Args: []string{"/bin/sh", "-c", script}}, stdio)
			if err != nil || rep.ExitCode != 0 {
				t.Fatalf("run: %v, report %+v", err, rep)
			}
		},
		"session": func(t *testing.T, stdio backend.Stdio) {
			s, err := sandbox.Create(context.Background(), &sandbox.SessionRequest{Policy: p, Backend: testBackend()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			rep, err := s.Exec(context.Background(), &sandbox.ExecRequest{Args: []string{"/bin/sh", "-c", script}}, stdio)
			if err != nil || rep.ExitCode != 0 {
				t.Fatalf("exec: %v, report %+v", err, rep)
			}
		},
	}
	for name, do := range runs {
		t.Run(name, func(t *testing.T) {
			w, got := pipe(t)
			w2 := dup(t, w)
			do(t, backend.Stdio{Stdout: w, Stderr: w2})
			w.Close()
			w2.Close()
			if out := <-got; out != want.String() {
				t.Errorf("stdout and stderr as one pipe: not the lines in the order written (%d bytes, %d expected): %.200q", len(out), want.Len(), out)
			}

			// The control: two pipes, each with its own stream.
			wo, gotOut := pipe(t)
			we, gotErr := pipe(t)
			do(t, backend.Stdio{Stdout: wo, Stderr: we})
			wo.Close()
			we.Close()
			if out, errs := <-gotOut, <-gotErr; out != wantOut.String() || errs != wantErr.String() {
				t.Errorf("control: two pipes: stdout %.100q, stderr %.100q", out, errs)
			}
		})
	}
}
