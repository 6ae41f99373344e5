//go:build oc

package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/fs"
	"github.com/opencontainers/cgroups/fs2"
)

var the impl = oc{}

type oc struct{}

func (oc) name() string { return "opencontainers/cgroups" }

func (oc) start(id string, pid int) (func() error, error) {
	pidsMax := int64(pids)
	res := &cgroups.Resources{
		Memory: memLimit, MemorySwap: memLimit, PidsLimit: &pidsMax,
		CpuQuota: cpuQuota, CpuPeriod: 100000, SkipDevices: true,
	}
	var m cgroups.Manager
	var err error
	if cgroups.IsCgroup2UnifiedMode() {
		var own map[string]string
		if own, err = cgroups.ParseCgroupFile("/proc/self/cgroup"); err != nil {
			return nil, err
		}
		dir := filepath.Join("/sys/fs/cgroup", own[""], id)
		m, err = fs2.NewManager(&cgroups.Cgroup{Path: dir, Resources: res}, dir)
	} else {
		// A relative path: beneath the caller's own cgroup on each
		// hierarchy.
		m, err = fs.NewManager(&cgroups.Cgroup{Path: id, Resources: res}, nil)
	}
	if err != nil {
		return nil, err
	}
	// The limits before the process, as moat sets them: Apply(-1) makes
	// the directories only.
	if err := m.Apply(-1); err != nil {
		return nil, err
	}
	if err := m.Set(res); err != nil {
		m.Destroy()
		return nil, err
	}
	if err := m.Apply(pid); err != nil {
		m.Destroy()
		return nil, err
	}
	finish := func() error {
		if _, err := m.GetStats(); err != nil {
			return err
		}
		// The library has no kill: write cgroup.kill where the unified
		// hierarchy has the run's directory, as moat does.
		if p := m.Path(""); p != "" {
			if err := os.WriteFile(filepath.Join(p, "cgroup.kill"), []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return m.Destroy()
	}
	return finish, nil
}
