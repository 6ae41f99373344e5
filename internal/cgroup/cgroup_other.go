//go:build !linux

package cgroup

import (
	"errors"
	"fmt"
)

var errUnsupported = fmt.Errorf("cgroup: %w: cgroups exist only on Linux", errors.ErrUnsupported)

// Probe reports that no controller is usable.
func Probe() Info {
	why := errUnsupported.Error()
	return Info{
		Version: "none",
		Usable:  map[string]bool{"memory": false, "pids": false, "cpu": false},
		Why:     map[string]string{"memory": why, "pids": why, "cpu": why},
	}
}

// Cgroup is unavailable on this platform.
type Cgroup struct{}

// New returns an error wrapping errors.ErrUnsupported.
func New(name string, lim Limits) (*Cgroup, error) { return nil, errUnsupported }

// NewBare returns nil: a run without limits needs no cgroup.
func NewBare(name string) (*Cgroup, error) { return nil, nil }

func (c *Cgroup) Add(pid int) error              { return errUnsupported }
func (c *Cgroup) SetPids(n int64) error          { return errUnsupported }
func (c *Cgroup) UnifiedFD() (int, bool)         { return -1, false }
func (c *Cgroup) Stats() (Stats, error)          { return Stats{}, errUnsupported }
func (c *Cgroup) Kill() error                    { return errUnsupported }
func (c *Cgroup) Destroy() error                 { return errUnsupported }
func Sweep(prefix string) error                  { return errUnsupported }
func (c *Cgroup) Dirs() []string                 { return nil }
func Reclaim(prefix string, dirs []string) error { return errUnsupported }
