package native

import (
	"errors"
	"testing"

	"github.com/moatbox/moat/backend"
	"github.com/moatbox/moat/internal/seccomp"
)

// TestBuiltinProfilesAllowTheDirectStart: every built-in seccomp profile
// lets the direct start's init and command process make the calls they
// make after the filters are installed, so that no default run falls
// back to the slower init stage; a profile that refuses one of them
// sends the run to the init stage instead of making init block on its
// own notification.
func TestBuiltinProfilesAllowTheDirectStart(t *testing.T) {
	spec := &backend.Spec{Network: backend.Network{Mode: backend.NetNone}}
	for name, profiles := range map[string][]*seccomp.Profile{
		"default": {seccomp.Default()},
		"strict":  {seccomp.Strict()},
		"floor":   {seccomp.Floor()},
	} {
		var filters [][]seccomp.Instruction
		for _, p := range profiles {
			prog, err := seccomp.Compile(p, seccomp.NativeArch())
			if err != nil {
				t.Fatal(err)
			}
			filters = append(filters, prog)
		}
		for _, share := range []bool{true, false} {
			if err := directSupported(spec, filters, commandFlags(share)); err != nil {
				t.Errorf("%s (sharing memory: %v): %v", name, share, err)
			}
		}
	}

	// Init waits for the host's end with ppoll, after prctl and close_range.
	for _, name := range []string{"ppoll", "prctl", "close_range"} {
		deny := seccomp.Default()
		deny.Rules = append(deny.Rules, seccomp.Rule{Names: []string{name}, Action: seccomp.Errno, Errno: 1})
		prog, err := seccomp.Compile(deny, seccomp.NativeArch())
		if err != nil {
			t.Fatal(err)
		}
		if err := directSupported(spec, [][]seccomp.Instruction{prog}, commandFlags(shareVM)); !errors.Is(err, errNoDirect) {
			t.Errorf("a profile refusing %s: %v, want the init stage", name, err)
		}
	}
}

// TestDiskLimitDirectStart: a disk limit takes the direct start, unless an
// overlay's changes must be merged after the command, or a profile
// refuses the fstatfs init makes at the end.
func TestDiskLimitDirectStart(t *testing.T) {
	spec := &backend.Spec{Network: backend.Network{Mode: backend.NetNone}, Limits: backend.Limits{DiskBytes: 1 << 20},
		Mounts: []backend.Mount{{Kind: backend.MountTmpfs, Target: "/tmp"}}}
	prog, err := seccomp.Compile(seccomp.Default(), seccomp.NativeArch())
	if err != nil {
		t.Fatal(err)
	}
	if err := directSupported(spec, [][]seccomp.Instruction{prog}, commandFlags(shareVM)); err != nil {
		t.Errorf("disk limit: %v", err)
	}
	deny := seccomp.Default()
	deny.Rules = append(deny.Rules, seccomp.Rule{Names: []string{"fstatfs"}, Action: seccomp.Errno, Errno: 1})
	denied, err := seccomp.Compile(deny, seccomp.NativeArch())
	if err != nil {
		t.Fatal(err)
	}
	if err := directSupported(spec, [][]seccomp.Instruction{denied}, commandFlags(shareVM)); !errors.Is(err, errNoDirect) {
		t.Errorf("a profile refusing fstatfs under a disk limit: %v, want the init stage", err)
	}
	spec.Limits.DiskBytes = 0
	if err := directSupported(spec, [][]seccomp.Instruction{denied}, commandFlags(shareVM)); err != nil {
		t.Errorf("a profile refusing fstatfs without a disk limit: %v", err)
	}
	spec.Limits.DiskBytes = 1 << 20
	spec.Mounts = append(spec.Mounts, backend.Mount{Kind: backend.MountOverlay, Target: "/w", Source: "/w", Layers: "/l"})
	if err := directSupported(spec, [][]seccomp.Instruction{prog}, commandFlags(shareVM)); !errors.Is(err, errNoDirect) {
		t.Errorf("overlay under a disk limit: %v, want the init stage", err)
	}
}

// TestLandlockABI1CountsAsNone: moat's rules grant "refer", which ABI 1
// cannot handle, so go-landlock's best effort (and the direct start)
// would restrict nothing there; reporting ABI 1 as in force would let
// filesystem.landlock = "required" run unprotected.
func TestLandlockABI1CountsAsNone(t *testing.T) {
	for abi, want := range map[int]int{-1: 0, 0: 0, 1: 0, 2: 2, 6: 6, landlockMaxABI + 3: landlockMaxABI} {
		if got := usableLandlockABI(abi); got != want {
			t.Errorf("usableLandlockABI(%d) = %d, want %d", abi, got, want)
		}
	}
}

// TestLandlockForABI: the direct start's rights for each ABI, taken from
// go-landlock's presets, are the kernel's (Documentation/userspace-api/
// landlock.rst: 13 file-system rights in ABI 1, then refer, truncate,
// ioctl_dev, resolve_unix; the two scopes from ABI 6), and never more
// than the init stage handles.
func TestLandlockForABI(t *testing.T) {
	for abi, want := range map[int][2]uint64{
		-1: {0, 0}, 0: {0, 0}, 1: {1<<13 - 1, 0}, 2: {1<<14 - 1, 0}, 4: {1<<15 - 1, 0},
		5: {1<<16 - 1, 0}, 6: {1<<16 - 1, 3}, 8: {1<<16 - 1, 3}, 9: {1<<17 - 1, 3}, landlockMaxABI + 2: {1<<17 - 1, 3},
	} {
		fs, scoped := landlockFor(abi)
		if fs != want[0] || scoped != want[1] {
			t.Errorf("ABI %d: fs %#x scoped %#x, want %#x %#x", abi, fs, scoped, want[0], want[1])
		}
	}
}
