//go:build !linux || !moat_tun

package egress

import (
	"errors"
	"os"
)

// TUNBuiltIn says this moat serves TUN devices. It does not: transparent
// egress (tun_linux.go) is built only with -tags moat_tun, because the
// userspace TCP/IP stack it runs (gVisor's netstack) adds some thirty
// package initialisers to every moat process, network none included:
// measured with GODEBUG=inittrace=1 and bench/abtime, 0.2 to 0.9 ms on
// each `moat run -- /bin/true`, a fifth of a run's start. Go runs the
// initialisers of every package a binary links, so within one binary the
// cost cannot be kept off the paths that never use the stack. Allow mode
// without it works through the proxy variables, as on a host whose TUN
// device the sandbox's user cannot open.
const TUNBuiltIn = false

// ErrNoTUN is ServeTUN's error in a moat built without transparent egress.
var ErrNoTUN = errors.New("egress: transparent egress is not built into this moat (build with -tags moat_tun, Linux only)")

// ServeTUN closes f and fails: see TUNBuiltIn.
func (p *Proxy) ServeTUN(f *os.File, c TUNConfig) error {
	f.Close()
	return ErrNoTUN
}
