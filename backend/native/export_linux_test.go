//go:build linux

package native

// ForceHoldersForTesting makes a root direct start id-map its trees with
// holders, as on a host whose AppArmor restricts the user namespaces of
// unprivileged processes (see nestable), until undo is called.
func ForceHoldersForTesting() (undo func()) {
	old := usernsRestricted
	usernsRestricted = func() bool { return true }
	return func() { usernsRestricted = old }
}

// UsernsRestricted reports whether this host's AppArmor restricts
// unprivileged user namespaces, where root's direct starts take holders.
func UsernsRestricted() bool { return usernsRestricted() }
