//go:build hand || oc

package main

// The limits of each run, as a moat policy would ask them.
const (
	memLimit = 256 << 20
	pids     = 64
	cpuQuota = 100000 // one CPU per 100 ms period
)
