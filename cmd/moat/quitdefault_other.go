//go:build !linux

package main

// quitDefault leaves SIGQUIT as it is where moat runs nothing (see the
// Linux version).
func quitDefault() (restore func()) { return func() {} }
