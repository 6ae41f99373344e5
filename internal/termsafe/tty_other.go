//go:build !linux && !darwin

package termsafe

import "os"

// isTerminal is false where moat has no client of its own.
func isTerminal(*os.File) bool { return false }

func terminalID(*os.File) uint64 { return 0 }
