package termsafe

import "syscall"

// getTermios is the ioctl that reads a terminal's attributes (for a
// client on macOS of a daemon elsewhere).
const getTermios = syscall.TIOCGETA
