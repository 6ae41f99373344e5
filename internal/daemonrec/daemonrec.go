// Package daemonrec says where root's moat daemons record their unix
// sockets for every user's runs to find (package sandbox writes and reads
// the records). It is a variable so that tests keep their daemons'
// records off the machine's.
package daemonrec

// Dir is the directory of the public records: root's, mode 0755, one
// file (mode 0644) per daemon. Only tests change it, before any daemon
// starts.
var Dir = "/run/moat-daemons"
