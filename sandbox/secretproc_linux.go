package sandbox

import "syscall"

// procAttr starts a secret's program as the leader of a process group of
// its own (secretCommand), killed with moat's thread if moat dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
