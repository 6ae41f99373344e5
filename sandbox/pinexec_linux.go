package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/moatbox/moat/internal/inputfile"
	"golang.org/x/sys/unix"
)

// maxPinned bounds a program run from a sealed copy (pinnedProgram):
// the copy is held in memory while it runs.
const maxPinned = 64 << 20

// errChanged: a program's bytes are not those its policy's trust checked.
var errChanged = errors.New("changed since its policy was trusted")

// pinnedProgram returns a sealed in-memory copy of the program at path,
// read once and checked against digest, for the caller to run in the
// file's place: what runs is what was checked, whatever happens to the
// file after. Only an ELF binary is copied; for anything else (a script,
// whose interpreter would read it by path and see its $0 changed) and
// where the copy cannot be made it returns nil, and the program runs by
// path. The copy is the program's own executable (/proc/self/exe); its
// argv[0], working directory and the files it opens are unchanged.
func pinnedProgram(path, digest string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() > maxPinned {
		return nil, nil
	}
	b, err := inputfile.Read(path, "program", maxPinned)
	if err != nil {
		return nil, nil
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("%s %w", path, errChanged)
	}
	if !bytes.HasPrefix(b, []byte("\x7fELF")) {
		return nil, nil
	}
	// MFD_EXEC asks for an executable memfd where the kernel defaults
	// them to not (vm.memfd_noexec); older kernels know no such flag.
	const mfdExec = 0x10
	fd, err := unix.MemfdCreate("moat-program", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|mfdExec)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate("moat-program", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, nil
	}
	f := os.NewFile(uintptr(fd), path)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, nil
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, nil
	}
	return f, nil
}
