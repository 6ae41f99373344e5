package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/moatbox/moat/client"
	"github.com/moatbox/moat/workspace"
	"golang.org/x/sys/unix"
)

// execTTY is moat exec -t: the command gets a terminal of the size of
// moat's, which is put in raw mode so that every keystroke (Ctrl-C
// among them) reaches the command's terminal; window size changes
// (SIGWINCH) follow. The terminal's mode is restored on every way out.
func execTTY(c *client.Client, id string, req *client.ExecRequest, stdin io.Reader, stdout, stderr io.Writer) int {
	in, ok := stdin.(*os.File)
	var saved *unix.Termios
	if ok {
		saved, _ = unix.IoctlGetTermios(int(in.Fd()), unix.TCGETS)
	}
	if saved == nil {
		fmt.Fprintln(stderr, "moat exec: -t needs a terminal as standard input")
		return exitMoatError
	}
	fd := int(in.Fd())
	req.Tty = true
	if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
		req.Rows, req.Cols = ws.Row, ws.Col
	}
	raw := *saved
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST // the command's terminal has already turned \n into \r\n
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0

	// SIGTERM and SIGHUP end the request (the daemon kills the command);
	// the terminal is restored on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGHUP, os.Interrupt)
	defer stop()
	x, err := c.Interactive(ctx, id, req, stdout, stderr)
	if err != nil {
		return apiFail(stderr, "exec", err, "")
	}
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		fmt.Fprintf(stderr, "moat exec: terminal: raw mode: %v\n", err)
		stop()
		x.Wait()
		return exitMoatError
	}
	restored := false
	restore := func() {
		if !restored {
			unix.IoctlSetTermios(fd, unix.TCSETS, saved)
			restored = true
		}
	}
	defer restore()

	wakeR, wakeW, err := os.Pipe()
	if err != nil {
		restore()
		fmt.Fprintf(stderr, "moat exec: %v\n", err)
		stop()
		x.Wait()
		return exitMoatError
	}
	defer wakeR.Close()
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		relayKeys(fd, int(wakeR.Fd()), x)
	}()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	var rep *client.ExitReport
	for rep == nil && err == nil {
		select {
		case <-winch:
			if ws, werr := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); werr == nil {
				x.Resize(ws.Row, ws.Col)
			}
		case <-x.Done():
			rep, err = x.Wait()
			if rep == nil && err == nil {
				err = errors.New("the daemon ended the command without a report")
			}
		}
	}
	// The relay stops before moat's exit, so that no read of moat's is
	// left to take the next keystroke from the shell.
	wakeW.Close()
	<-relayDone
	restore()
	if err != nil {
		printRulesRefused(stderr, client.ErrorDenials(err))
		if ctx.Err() != nil {
			return 128 + int(syscall.SIGTERM)
		}
		return apiFail(stderr, "exec", err, "")
	}
	if rep.Network != "" {
		fmt.Fprintf(stderr, "moat exec: %s\n", workspace.EscapeText(rep.Network)) // names the command sent
	}
	if rep.Error != "" {
		fmt.Fprintf(stderr, "moat exec: %s\n", workspace.EscapeMessage(rep.Error)) // may quote a person's reason or a name
	}
	printRulesRefused(stderr, rep.Denials)
	return rep.ExitCode
}

// relayKeys sends what is typed on fd to the command until wake is
// readable or the terminal hangs up. It reads only once poll says there
// is something to read: fd's file description is the shell's too.
func relayKeys(fd, wake int, x *client.Interactive) {
	buf := make([]byte, 4096)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if fds[1].Revents != 0 || fds[0].Revents&unix.POLLIN == 0 {
			return
		}
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			return
		}
		if _, err := x.Write(buf[:n]); err != nil {
			return
		}
	}
}
