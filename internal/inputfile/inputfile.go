// Package inputfile reads the files moat takes as input from its user or
// from a workspace (a policy, a seccomp profile, the trust file): each must
// be a regular file of bounded size. Anything else (a named pipe, a device
// such as /dev/zero, a directory, a file too large to be what it claims)
// is refused with an error naming the file, before moat waits on it or
// reads it into memory.
package inputfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"unicode"
)

// Limits of the files moat reads. A policy is a few hundred lines; a
// seccomp profile as large as Docker's default is a small fraction of its
// limit.
const (
	MaxPolicy  = 1 << 20
	MaxProfile = 4 << 20
	MaxTrust   = 4 << 20
	// MaxProgram bounds a program moat hashes before it runs it on the
	// host (a trusted policy's secret command, runsc): above any real one.
	MaxProgram = 512 << 20
)

// ErrTooLarge is wrapped by Read's error for a file above its limit.
var ErrTooLarge = errors.New("file too large")

// ErrDirectory is wrapped in Read's and Digest's refusal of a directory.
var ErrDirectory = errors.New("a directory")

// Read returns the content of the regular file at path, at most max
// bytes; what names the kind of file in errors ("policy file").
//
// The file is opened without blocking, so that a named pipe with no writer
// does not hang the open, and on Linux only once it is known to be a
// regular file (a device acts when opened); its type is checked on the
// open file, so that it cannot be swapped between the check and the read. A file that grows
// past max while it is read is refused too: what is read never exceeds
// max+1 bytes.
func Read(path, what string, max int64) ([]byte, error) {
	b, err := read(path, what, max, false)
	return b, shownErr(err)
}

// ReadNoFollow is Read of a path whose last component is not followed:
// a symbolic link there is refused as not a regular file. It is for a
// file in a directory someone else may write (a workspace read as root),
// where a link could name a file its writer cannot read.
func ReadNoFollow(path, what string, max int64) ([]byte, error) {
	b, err := read(path, what, max, true)
	return b, shownErr(err)
}

func read(path, what string, max int64, noFollow bool) ([]byte, error) {
	f, err := open(path, noFollow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read " + what, Path: path, Err: fmt.Errorf("not a regular file (%s)", kind(st.Mode()))}
	}
	tooLarge := &fs.PathError{Op: "read " + what, Path: path, Err: fmt.Errorf("%w: larger than %s, the most moat reads from a %s", ErrTooLarge, size(max), what)}
	if st.Size() > max {
		return nil, tooLarge
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, tooLarge
	}
	return b, nil
}

// Digest returns the hex SHA-256 of the regular file at path, at most max
// bytes, checked as Read checks it but read as a stream: a program is
// hashed, not kept.
func Digest(path, what string, max int64) (string, error) {
	return DigestCopy(path, what, max, io.Discard)
}

// DigestCopy is Digest that also writes what it hashes to w: a copy made
// this way has exactly the content of the digest returned, whatever
// happens to the file at path meanwhile. w may have been written to when
// it fails.
func DigestCopy(path, what string, max int64, w io.Writer) (string, error) {
	d, err := digestCopy(path, what, max, w)
	return d, shownErr(err)
}

func digestCopy(path, what string, max int64, w io.Writer) (string, error) {
	f, err := open(path, false)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", &fs.PathError{Op: "read " + what, Path: path, Err: fmt.Errorf("not a regular file (%w)", ErrDirectory)}
	}
	if !st.Mode().IsRegular() {
		return "", &fs.PathError{Op: "read " + what, Path: path, Err: fmt.Errorf("not a regular file (%s)", kind(st.Mode()))}
	}
	tooLarge := &fs.PathError{Op: "read " + what, Path: path, Err: fmt.Errorf("%w: larger than %s, the most moat reads from a %s", ErrTooLarge, size(max), what)}
	if st.Size() > max {
		return "", tooLarge
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(h, w), io.LimitReader(f, max+1))
	if err != nil {
		return "", err
	}
	if n > max {
		return "", tooLarge
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

func size(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Shown is path as a message shows it: as it is, or quoted (Go's
// escapes) when it holds a character that is not printable (a control
// character a terminal would act on, a direction override, bytes that are
// not UTF-8), so that a name cannot rewrite the message it is in.
func Shown(path string) string {
	for _, r := range path {
		if r == '\uFFFD' || !unicode.IsPrint(r) {
			return strconv.Quote(path)
		}
	}
	return path
}

// shownErr shows the path of a *fs.PathError as Shown does.
func shownErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = Shown(pe.Path)
	}
	return err
}
