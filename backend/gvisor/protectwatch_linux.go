package gvisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A protection is a bind runsc's gofer makes onto the file the host has at
// the protected path, inside the host's directory the sandbox writes; when
// the host renames another file over it or removes it (git config, sed
// -i), the kernel detaches that bind, and the sandbox sees the new file,
// unprotected (tried). The gofer's mount table is not moat's to watch, so
// moat watches the host's directories instead: inotify on the directory of
// each protected path, from before runsc starts. An entry of that name
// created, moved or removed there, or the directory itself moved or
// removed, ends the sandbox (backend.CauseProtection), naming the path:
// nothing in the sandbox can do either (the bind holds the name: a rename
// or unlink of a mount point fails). The native backend watches its
// sandbox's mount table instead (backend/native/mountwatch_linux.go).
//
// The watch waits in the runtime's poller, holding no thread.

// watchEvents are what ends the sandbox: on a name watched, or on the
// directory itself. IN_Q_OVERFLOW (events lost) does too: one of them may
// have been of a name watched.
const watchEvents = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_DONT_FOLLOW | unix.IN_ONLYDIR

// watchProtections starts watching paths; lost is called once, with the
// path, when one may have gone. It returns a stop function (nil when
// there is nothing to watch), or an error when a directory cannot be
// watched: the protection would then go unwatched.
func watchProtections(paths []string, lost func(path string)) (stop func(), err error) {
	if len(paths) == 0 {
		return nil, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch the protected paths: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	// The poller must hold it: a watch that cannot wait would never see
	// a protection go.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil, fmt.Errorf("watch the protected paths: %w", err)
	}
	dirs := map[int32]string{}             // watch descriptor: its directory
	names := map[int32]map[string]string{} // watch descriptor: name: path
	for _, p := range paths {
		dir, name := filepath.Dir(p), filepath.Base(p)
		w, err := unix.InotifyAddWatch(fd, dir, watchEvents)
		wd := int32(w)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("watch %s, the directory of the protected path %s: %w", dir, p, err)
		}
		dirs[wd] = p
		if names[wd] == nil {
			names[wd] = map[string]string{}
		}
		names[wd][name] = p
	}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrClosed) {
					lost(paths[0]) // the watch failed: nothing is known
				}
				return
			}
			if path := firstGone(buf[:n], dirs, names); path != "" {
				lost(path)
				return
			}
		}
	}()
	return func() { f.Close() }, nil
}

// firstGone reads inotify events from b and returns the path of the first
// that ends the sandbox, or "".
func firstGone(b []byte, dirs map[int32]string, names map[int32]map[string]string) string {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		size := unix.SizeofInotifyEvent + int(ev.Len)
		if size > len(b) {
			break
		}
		name := ""
		if ev.Len > 0 {
			raw := b[unix.SizeofInotifyEvent:size]
			for i, c := range raw {
				if c == 0 {
					raw = raw[:i]
					break
				}
			}
			name = string(raw)
		}
		b = b[size:]
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			for _, p := range dirs {
				return p
			}
		case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED|unix.IN_UNMOUNT) != 0:
			if p, ok := dirs[ev.Wd]; ok {
				return p
			}
		case name != "":
			if p, ok := names[ev.Wd][name]; ok {
				return p
			}
		}
	}
	return ""
}
