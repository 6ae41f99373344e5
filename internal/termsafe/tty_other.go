//go:build !linux && !darwin

package termsafe

import "os"

// isTerminal is false where moat has no client of its own.
func isTerminal(*os.File) bool { return false }
