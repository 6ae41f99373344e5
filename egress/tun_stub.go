//go:build !linux

package egress

import (
	"errors"
	"os"
)

// TUNBuiltIn says this moat serves TUN devices. It does not: transparent
// egress needs a TUN device in the sandbox's network namespace, which only
// Linux has. Allow mode works through the proxy variables.
const TUNBuiltIn = false

// ErrNoTUN is ServeTUN's error where there is no transparent egress.
var ErrNoTUN = errors.New("egress: transparent egress needs Linux")

// ServeTUN closes f and fails: see TUNBuiltIn.
func (p *Proxy) ServeTUN(f *os.File, c TUNConfig) error {
	f.Close()
	return ErrNoTUN
}
