// Package pty makes the pseudo-terminals moat gives a command: the master
// for the host, the peer opened through it (TIOCGPTPEER) rather than by a
// path under /dev/pts, which another process could replace between the
// lookup and the open. It owns nothing else: what runs on the terminal,
// its mode and its relays are the backends'. Linux only.
package pty
