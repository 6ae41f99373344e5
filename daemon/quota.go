package daemon

import (
	"fmt"
	"os"
	"strings"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/sandbox"
)

// reserveLimits counts s's memory, CPU and disk limits against its
// tenant's quotas (Config.TenantMemory, TenantCPUs, TenantDisk), with
// those of the tenant's other sessions; the disk quota also with what
// the change sets the tenant keeps for review hold (review.disk), which
// are on the daemon's disk, no longer under any session's limit.
//
// A disk quota counts limits.disk, which the sandbox enforces with one
// size-bounded tmpfs for /tmp, home, /dev/shm and an overlay workspace's
// changes. What a command writes in place on the host (a direct or copy
// workspace, filesystem.read_write) no such tmpfs holds: under a disk
// quota such a session is refused by name, as the sandbox itself refuses
// a disk limit it cannot enforce; except a direct workspace the daemon
// made, which a daemon running as root bounds with a tmpfs of its own
// (boundWorkspace), counted as a second limits.disk. A copy workspace is
// not bounded so: its copy is the session's change set, kept after the
// session for review (and over a tenant's own workspace, across the
// daemon's restarts), which a tmpfs would hold only until the host's next
// boot, while the change set's record outlives it.
func (m *Manager) reserveLimits(s *Session) error {
	p := s.policy
	disk := int64(p.Limits.Disk)
	if q := m.cfg.TenantDisk; q > 0 {
		if disk == 0 {
			return fmt.Errorf("%w: this daemon bounds each tenant's disk: set limits.disk", ErrQuota)
		}
		if w := inPlaceWrites(s); w != "" {
			return fmt.Errorf("%w: this daemon bounds each tenant's disk, and %s is written in place on the host's filesystem, where moat cannot bound it; use workspace_mode \"overlay\" (its changes are kept under limits.disk) or \"readonly\"", ErrQuota, w)
		}
		if s.wsTmpfs {
			disk *= 2
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
		// The change sets kept for review hold what ended sessions wrote.
		kept, reviews := m.reviewDiskLocked(s.Tenant)
		kept += m.endingDisk[s.Tenant.ID]
		if used+kept+disk > q {
			s.memory, s.cpus = 0, 0
			if kept > 0 {
				// The tenant's own session ids: it may have lost them,
				// and nothing else lists a review.
				return fmt.Errorf("%w: limits.disk %s with the tenant's other sessions' %s and the %s of its change sets kept for review is over its %s; discard or apply them (moat session discard SESSION; sessions %s)", ErrQuota,
					policy.Size(disk), policy.Size(used), policy.Size(kept), policy.Size(q), strings.Join(reviews, ", "))
			}
			return fmt.Errorf("%w: limits.disk %s with the tenant's other sessions' %s is over its %s", ErrQuota,
				policy.Size(disk), policy.Size(used), policy.Size(q))
		}
	}
	s.disk = disk
	return nil
}

// refuseUnboundedCopy refuses a copy workspace under limits.disk before
// its sandbox is made, as the sandbox would refuse it only once the whole
// workspace had been copied: its commands write the copy in place on the
// daemon's disk, where the limit's tmpfs does not hold it. A daemon's
// tenant cannot run degraded, so the way out is another mode or no limit
// (under a disk quota, reserveLimits refuses it first).
func refuseUnboundedCopy(p *policy.Policy) error {
	if p.Workspace.Mode != policy.WorkspaceCopy || p.Limits.Disk == 0 {
		return nil
	}
	return fmt.Errorf("%w: limits.disk cannot bound a copy workspace: its commands write the copy in place on the daemon's disk, beyond the tmpfs that holds the limit; use workspace_mode \"overlay\" (its changes are kept under limits.disk) or \"readonly\", or leave limits.disk out", sandbox.ErrRefused)
}

// inPlaceWrites names what s's policy lets a command write in place on
// the host, beyond any tmpfs, or "".
func inPlaceWrites(s *Session) string {
	p := s.policy
	switch {
	case p.Workspace.Mode == policy.WorkspaceDirect && s.wsTmpfs:
	case p.Workspace.Mode == policy.WorkspaceDirect && s.TempWorkspace:
		return "the workspace (workspace_mode \"direct\"; a daemon running as root would bound this empty one with a tmpfs)"
	case p.Workspace.Mode == policy.WorkspaceCopy:
		return "the workspace's copy (workspace_mode \"copy\": made on the daemon's disk when the session starts, and written there by its commands)"
	case p.Workspace.Mode == policy.WorkspaceDirect:
		return fmt.Sprintf("the workspace (workspace_mode %q)", p.Workspace.Mode)
	}
	if len(p.Filesystem.ReadWrite) > 0 {
		return "filesystem.read_write"
	}
	return ""
}

// boundWorkspace mounts a tmpfs of limits.disk on the empty direct
// workspace the daemon made for s, under a disk quota and where the
// daemon may mount (as root): the sandbox then finds the workspace's
// writes bounded (package sandbox, unboundedWrites), and the files API
// serves the tmpfs. Elsewhere it does nothing, and reserveLimits refuses
// the session by name.
func (m *Manager) boundWorkspace(s *Session) error {
	p := s.policy
	if m.cfg.TenantDisk == 0 || !s.TempWorkspace || p.Limits.Disk == 0 || p.Workspace.Mode != policy.WorkspaceDirect ||
		len(p.Filesystem.ReadWrite) > 0 || os.Geteuid() != 0 {
		return nil
	}
	if err := mountTmpfs(s.Workspace, int64(p.Limits.Disk)); err != nil {
		return err
	}
	// The files API resolves beneath the directory it opened: the tmpfs
	// now, not the directory under it.
	root, err := os.Open(s.Workspace)
	if err != nil {
		return fmt.Errorf("make workspace: %w", err)
	}
	s.root.Close()
	s.root, s.wsTmpfs = root, true
	return nil
}

// counts are how many of something (pending approvals, uploads under
// way) each key, a session or a tenant, holds; a key whose count falls
// to zero is dropped. The caller holds the lock that guards it.
type counts map[string]int

// full says whether key holds max or more.
func (c counts) full(key string, max int) bool { return c[key] >= max }

// add counts one more for key.
func (c *counts) add(key string) {
	if *c == nil {
		*c = counts{}
	}
	(*c)[key]++
}

// sub gives back one that add counted for key.
func (c counts) sub(key string) {
	if c[key]--; c[key] <= 0 {
		delete(c, key)
	}
}
