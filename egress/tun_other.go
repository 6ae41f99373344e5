//go:build !linux

package egress

import (
	"errors"
	"os"
)

// ServeTUN is Linux's only (a TUN device in a network namespace): here it
// closes f and fails.
func (p *Proxy) ServeTUN(f *os.File, c TUNConfig) error {
	f.Close()
	return errors.New("egress: a TUN device is served on Linux only")
}
