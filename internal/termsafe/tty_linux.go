package termsafe

import "syscall"

// getTermios is the ioctl that reads a terminal's attributes.
const getTermios = syscall.TCGETS
