package client

import (
	"context"
	"net"
	"sync/atomic"
)

// watchedConn is a connection to the daemon that tells whoever is
// watching it (an Interactive exec) when reading from it fails: the
// daemon closed it, or died. net/http's transport, whose reader sees that
// first, waits before it returns for its writer, which is reading the
// Interactive's request body, open until the command ends: without this,
// a daemon gone before the answer's first byte left the exec waiting for
// ever.
type watchedConn struct {
	net.Conn
	onFail atomic.Pointer[func()]
}

func (c *watchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		if f := c.onFail.Load(); f != nil {
			(*f)()
		}
	}
	return n, err
}

// dialWatched is a transport's DialContext: it dials the unix socket
// path, or, with path "", the address the transport asks for.
func dialWatched(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if path != "" {
			network, addr = "unix", path
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &watchedConn{Conn: c}, nil
	}
}
