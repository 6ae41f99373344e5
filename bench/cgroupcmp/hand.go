//go:build hand

package main

import (
	"github.com/moatbox/moat/internal/cgroup"
)

var the impl = hand{}

type hand struct{}

func (hand) name() string { return "internal/cgroup" }

func (hand) start(id string, pid int) (func() error, error) {
	c, err := cgroup.New(id, cgroup.Limits{MemoryBytes: memLimit, Pids: pids, CPUs: float64(cpuQuota) / 100000})
	if err != nil {
		return nil, err
	}
	if err := c.Add(pid); err != nil {
		return nil, err
	}
	finish := func() error {
		if _, err := c.Stats(); err != nil {
			return err
		}
		if err := c.Kill(); err != nil {
			return err
		}
		return c.Destroy()
	}
	return finish, nil
}
