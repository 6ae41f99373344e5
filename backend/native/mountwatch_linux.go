package native

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/moatbox/moat/backend"
)

// A protection inside a tree the host shares with the sandbox (a
// read-only protected path or a deny mask in the workspace, a mask on a
// system file) is a mount on the file or directory the host had there.
// When the host renames another file over it or removes it (git config,
// sed -i and editors save by renaming a new file in place; useradd
// rewrites /etc/shadow so), the kernel detaches that mount in every other
// mount namespace, and the sandbox sees the new file through the writable
// tree: unprotected. Nothing in the sandbox can mount it again (it has no
// capabilities), and moat cannot from outside without entering the
// sandbox's namespaces. So the host watches: /proc/PID/mountinfo of the
// sandbox's init wakes a poller whenever its mount table changes, which
// nothing inside can change, and a protection gone from it ends the
// sandbox, naming the path (backend.CauseProtection). The watch waits in
// the runtime's poller, holding no thread.
//
// The watch starts once the sandbox is ready, from the table as it is
// then: a protection the Spec must have that is missing from it (the host
// replaced the file in the moment before) fails the start; one an
// optional mount skipped is not watched.

// mountWatch watches one sandbox's protections.
type mountWatch struct {
	f     *os.File
	paths map[uint64]string // the protections' mount ids: their paths
	buf   []byte
}

// watchMounts starts watching the protections of spec in the mount
// namespace of pid; lost is called once, with the path, when one goes.
// It returns a stop function, or nil when there is nothing to watch.
func watchMounts(pid int, spec *backend.Spec, lost func(path string)) (stop func(), err error) {
	targets := map[string]bool{} // each protection's path: whether it must be there
	for _, m := range spec.Mounts {
		switch m.Kind {
		case backend.MountMask, backend.MountReadOnly, backend.MountPin:
			targets[m.Target] = targets[m.Target] || !m.Optional
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/mountinfo", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if ended(pid) {
			return nil, nil // the sandbox is over: nothing runs to use a protection
		}
		return nil, err
	}
	w := &mountWatch{f: os.NewFile(uintptr(fd), "mountinfo"), paths: map[uint64]string{}}
	ids, err := w.read()
	if err != nil {
		w.f.Close()
		if ended(pid) {
			return nil, nil
		}
		return nil, err
	}
	found := map[string]bool{}
	for id, path := range ids {
		if _, ok := targets[path]; ok {
			w.paths[id], found[path] = path, true
		}
	}
	// One that must be there and is not (gone before the watch began, or
	// named otherwise in the table) would go unwatched.
	for path, must := range targets {
		if must && !found[path] {
			w.f.Close()
			return nil, fmt.Errorf("the protection of %s is not in the sandbox's mount table (the host replaced or removed the file while the sandbox was set up?): run again", path)
		}
	}
	if len(w.paths) == 0 {
		w.f.Close()
		return nil, nil
	}
	// The poller must hold it: a watch that cannot wait would never
	// see a protection go.
	if err := w.f.SetReadDeadline(time.Time{}); err != nil {
		w.f.Close()
		return nil, fmt.Errorf("wait on the sandbox's mount table: %w", err)
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		w.f.Close()
		return nil, err
	}
	go func() {
		// Each call of the function follows a wake-up of the poller (the
		// first, at once): it reads the table again, and asks to wait on
		// while every protection is there.
		var gone string
		rc.Read(func(uintptr) bool {
			ids, err := w.read()
			if err != nil {
				return true // the namespace ended with its processes
			}
			for id, path := range w.paths {
				if _, ok := ids[id]; !ok {
					gone = path
					return true
				}
			}
			return false
		})
		if gone != "" {
			lost(gone)
		}
	}()
	return func() { w.f.Close() }, nil
}

// ended says whether process pid is exiting or has exited: its mount
// namespace goes early in its exit, before it is a zombie, and its table
// then reads as EINVAL. A command that ends at once can take init with it
// before the host has read the message that it started.
func ended(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
	}
	return endedStat(b)
}

// pfExiting is the kernel's PF_EXITING task flag, set as do_exit begins
// (a stable ABI value: /proc/PID/stat has shown it since Linux 2.6).
const pfExiting = 0x4

// endedStat reads /proc/PID/stat's state and flags: a zombie or dead
// task, or one whose exit has begun.
func endedStat(b []byte) bool {
	// pid (comm) state ppid pgrp session tty_nr tpgid flags ...: comm may
	// hold anything, the fields follow its last ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return false
	}
	if f[0][0] == 'Z' || f[0][0] == 'X' {
		return true
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfExiting != 0
}

// read returns the mount ids in the table, with their mount points.
func (w *mountWatch) read() (map[uint64]string, error) {
	w.buf = w.buf[:0]
	for off := int64(0); ; {
		if len(w.buf) == cap(w.buf) {
			w.buf = append(w.buf, make([]byte, 16<<10)...)[:len(w.buf)]
		}
		n, err := w.f.ReadAt(w.buf[len(w.buf):cap(w.buf)], off)
		w.buf = w.buf[:len(w.buf)+n]
		off += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	ids := map[uint64]string{}
	for line := range bytes.Lines(w.buf) {
		// id parent major:minor root mountpoint ...
		f := bytes.Fields(line)
		if len(f) < 5 {
			continue
		}
		id, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			continue
		}
		ids[id] = unescapeMountinfo(string(f[4]))
	}
	return ids, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space,
// \011, \012, \134).
func unescapeMountinfo(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out = append(out, byte(n))
				i += 3
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}

// watchMounts watches the run's protections from init's mount table: a
// protection that goes ends the run (CauseProtection).
func (r *run) watchMounts() (stop func(), err error) {
	return watchMounts(r.pid, r.spec, func(path string) {
		r.lost.CompareAndSwap(nil, path)
		r.kill(backend.CauseProtection)
	})
}
