package client

import (
	"fmt"
	"net"
	"syscall"
)

// peerUID is the uid of the process that serves the unix connection c
// (SO_PEERCRED: whoever made the listening socket). It uses package
// syscall: the client links nothing of the sandbox's (x/sys included).
func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, err
	}
	uid := -1
	var serr error
	if err := raw.Control(func(fd uintptr) {
		var cred *syscall.Ucred
		if cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); serr == nil {
			uid = int(cred.Uid)
		}
	}); err != nil {
		return -1, err
	}
	return uid, serr
}
