package httpapi

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// DefaultMaxConnsPerCaller is Server.MaxConnsPerCaller's default: far
// more than a platform's clients hold at once (a stream of each of
// hundreds of sessions), and far fewer than the daemon's descriptors.
const DefaultMaxConnsPerCaller = 1024

// callerKey is the caller a TCP peer's address stands for. Every
// loopback address is one caller (127.0.0.2 and on are anyone's to bind),
// and an IPv6 peer is its /64, which one host is usually given whole.
func callerKey(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "addr:loopback"
	case a.Is6():
		p, _ := a.Prefix(64)
		return "addr:" + p.String()
	}
	return "addr:" + a.String()
}

// connCount counts the open connections of each caller, and of all, and
// makes room for a new one by closing the oldest that has shown no valid
// token (still strange): a caller that opens connections and sends
// nothing, or no token, cannot lock out those that share its address, nor
// callers from other addresses take the descriptors the daemon needs for
// its sessions and its unix socket. A connection that showed a token is
// never closed to make room: a tenant past its bound is refused instead.
type connCount struct {
	mu    sync.Mutex
	by    map[string]int
	conns map[net.Conn]*counted
	total int
	// strange holds the connections that showed no token yet, oldest
	// first.
	strange list.List
	// limit bounds all connections together (0: not yet known).
	limit int
}

type counted struct {
	key  string
	elem *list.Element // in strange; nil once known
}

// connLimit is the bound of all connections together: three quarters of
// the descriptors the process may open, the rest left for the sessions'
// files, pipes and sockets.
func connLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 1 << 30
	}
	return max(int(rl.Cur)*3/4, 64)
}

// open counts c for key, making room if need be, and reports whether it
// may be served (else it is counted until closed, as every other). known:
// c is a tenant's from the start (a unix socket peer's).
func (cc *connCount) open(c net.Conn, key string, max int, known bool) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.by == nil {
		cc.by = map[string]int{}
		cc.conns = map[net.Conn]*counted{}
		cc.limit = connLimit()
	}
	e := &counted{key: key}
	cc.conns[c] = e
	cc.by[key]++
	cc.total++
	if !known {
		e.elem = cc.strange.PushBack(c)
	}
	for cc.by[key] > max {
		if !cc.evictLocked(key, c) {
			return false
		}
	}
	for cc.total > cc.limit {
		if !cc.evictLocked("", c) {
			return false
		}
	}
	return true
}

// evictLocked closes the oldest connection that showed no token, of key
// (or of any caller: ""), other than c, and stops counting it; false if
// there is none.
func (cc *connCount) evictLocked(key string, c net.Conn) bool {
	for el := cc.strange.Front(); el != nil; el = el.Next() {
		old := el.Value.(net.Conn)
		if old == c || key != "" && cc.conns[old].key != key {
			continue
		}
		cc.forgetLocked(old)
		old.Close()
		return true
	}
	return false
}

// known marks c as a tenant's: it showed a valid token.
func (cc *connCount) known(c net.Conn) {
	if c == nil {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e := cc.conns[c]; e != nil && e.elem != nil {
		cc.strange.Remove(e.elem)
		e.elem = nil
	}
}

// closed stops counting c.
func (cc *connCount) closed(c net.Conn) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.forgetLocked(c)
}

func (cc *connCount) forgetLocked(c net.Conn) {
	e := cc.conns[c]
	if e == nil {
		return
	}
	delete(cc.conns, c)
	if e.elem != nil {
		cc.strange.Remove(e.elem)
	}
	cc.total--
	if cc.by[e.key]--; cc.by[e.key] <= 0 {
		delete(cc.by, e.key)
	}
}
