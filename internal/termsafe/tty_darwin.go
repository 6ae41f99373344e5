package termsafe

import "syscall"

// getTermios is the ioctl that reads a terminal's attributes (for a
// client on macOS of a daemon elsewhere).
const getTermios = syscall.TIOCGETA

// aliasDevice says whether rdev is /dev/tty (2,0), which stands for
// another terminal.
func aliasDevice(rdev uint64) bool { return rdev == 2<<24 }
