//go:build !linux

package daemon

import (
	"context"
	"fmt"
	"io"
	"io/fs"
)

// The files API resolves paths with openat2, which only Linux has.

func (s *Session) ReadFile(string) ([]byte, error) { return nil, errNoFiles }

func (s *Session) WriteFile(context.Context, string, []byte, fs.FileMode) error { return errNoFiles }

func (s *Session) Remove(context.Context, string) error { return errNoFiles }

func (s *Session) Mkdir(context.Context, string) error { return errNoFiles }

func (s *Session) Stat(string) (*FileInfo, error) { return nil, errNoFiles }

func (s *Session) Resolve(string) (string, error) { return "", errNoFiles }

func (s *Session) List(string) ([]*FileInfo, bool, error) { return nil, false, errNoFiles }

var errNoFiles = fmt.Errorf("%w: the files API needs Linux's openat2", ErrUnsupportedMode)

func (s *Session) Untar(context.Context, string, io.Reader) (*TarReport, error) {
	return nil, errNoFiles
}

func (s *Session) Tar(string, io.Writer) (*LeftOut, error) { return nil, errNoFiles }

// reapWrites has nothing to remove: no write of the files API was made.
func reapWrites(string) (int, error) { return 0, nil }
