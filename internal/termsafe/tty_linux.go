package termsafe

import "syscall"

// getTermios is the ioctl that reads a terminal's attributes.
const getTermios = syscall.TCGETS

// aliasDevice says whether rdev is /dev/tty (5,0) or /dev/console (5,1),
// which stand for another terminal.
func aliasDevice(rdev uint64) bool { return rdev == 5<<8 || rdev == 5<<8|1 }
