package daemon

import (
	"fmt"

	"github.com/moatbox/moat/policy"
)

// reserveLimits counts s's memory, CPU and disk limits against its
// tenant's quotas (Config.TenantMemory, TenantCPUs, TenantDisk), with
// those of the tenant's other sessions.
//
// A disk quota counts limits.disk, which the sandbox enforces with one
// size-bounded tmpfs for /tmp, home, /dev/shm and an overlay workspace's
// changes. What a command writes in place on the host (a direct or copy
// workspace, filesystem.read_write) no tmpfs holds: under a disk quota
// such a session is refused by name, as the sandbox itself refuses a disk
// limit it cannot enforce.
func (m *Manager) reserveLimits(s *Session) error {
	p := s.policy
	disk := int64(p.Limits.Disk)
	if q := m.cfg.TenantDisk; q > 0 {
		if disk == 0 {
			return fmt.Errorf("%w: this daemon bounds each tenant's disk: set limits.disk", ErrQuota)
		}
		if w := inPlaceWrites(p); w != "" {
			return fmt.Errorf("%w: this daemon bounds each tenant's disk, and %s is written in place on the host's filesystem, where moat cannot bound it; use workspace_mode \"overlay\" (its changes are kept under limits.disk) or \"readonly\"", ErrQuota, w)
		}
	}
	if err := m.reserveResources(s, int64(p.Limits.Memory), p.Limits.CPUs); err != nil {
		return err
	}
	if q := m.cfg.TenantDisk; q > 0 {
		m.mu.Lock()
		defer m.mu.Unlock()
		var used int64
		for _, o := range m.sessions {
			if o != s && o.Tenant.ID == s.Tenant.ID {
				used += o.disk
			}
		}
		if used+disk > q {
			s.memory, s.cpus = 0, 0
			return fmt.Errorf("%w: limits.disk %s with the tenant's other sessions' %s is over its %s", ErrQuota,
				policy.Size(disk), policy.Size(used), policy.Size(q))
		}
	}
	s.disk = disk
	return nil
}

// inPlaceWrites names what p lets a command write in place on the host,
// or "".
func inPlaceWrites(p *policy.Policy) string {
	switch p.Workspace.Mode {
	case policy.WorkspaceDirect, policy.WorkspaceCopy:
		return fmt.Sprintf("the workspace (workspace_mode %q)", p.Workspace.Mode)
	}
	if len(p.Filesystem.ReadWrite) > 0 {
		return "filesystem.read_write"
	}
	return ""
}
