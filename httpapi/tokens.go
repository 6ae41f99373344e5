package httpapi

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/moatbox/moat/daemon"
)

// Tokens are the bearer tokens TCP clients authenticate with, each naming
// a tenant. Only their SHA-256 is kept, in memory and in the file.
type Tokens struct {
	hashes map[[sha256.Size]byte]tokenEntry
}

type tokenEntry struct {
	tenant string
	role   daemon.Role
}

// LoadTokens reads a tokens file: one "TENANT sha256:HEX [ROLE]" a line,
// HEX the SHA-256 of the token (`printf %s "$TOKEN" | sha256sum`) and ROLE
// all (the default), sessions or approvals (daemon.Role); blank lines and
// lines starting with # are skipped. A token listed twice is refused: the
// file would say two things of it. The file must belong to root or the
// daemon's own user and not be writable by group or others: whoever
// writes it chooses who gets in, and its owner can always write it.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("tokens file %s is writable by group or others (mode %v)", path, fi.Mode().Perm())
	} else if uid, ok := fileOwner(fi); ok && uid != 0 && uid != os.Geteuid() {
		return nil, fmt.Errorf("tokens file %s is owned by uid %d, neither root nor the daemon's user (uid %d), who could rewrite it", path, uid, os.Geteuid())
	}
	t := &Tokens{hashes: map[[sha256.Size]byte]tokenEntry{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		var h [sha256.Size]byte
		hx, ok := "", len(f) == 2 || len(f) == 3
		if ok {
			hx, ok = strings.CutPrefix(f[1], "sha256:")
		}
		if ok {
			b, err := hex.DecodeString(hx)
			ok = err == nil && len(b) == len(h)
			copy(h[:], b)
		}
		if !ok || !validTenant(f[0]) {
			return nil, fmt.Errorf("%s:%d: want \"TENANT sha256:HEX [ROLE]\" (TENANT of letters, digits, '-', '_', '.'; ROLE all, sessions or approvals)", path, n)
		}
		e := tokenEntry{tenant: f[0]}
		if len(f) == 3 {
			if e.role, err = daemon.ParseRole(f[2]); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, n, err)
			}
		}
		if _, dup := t.hashes[h]; dup {
			return nil, fmt.Errorf("%s:%d: this token's hash is listed twice", path, n)
		}
		t.hashes[h] = e
	}
	return t, sc.Err()
}

func validTenant(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// HashToken returns the line of a tokens file for tenant and token.
func HashToken(tenant, token string) string {
	h := sha256.Sum256([]byte(token))
	return tenant + " sha256:" + hex.EncodeToString(h[:])
}

// Lookup returns the tenant of token and what the token may do. The token
// is hashed first, so the lookup's timing says nothing about a stored
// token.
func (t *Tokens) Lookup(token string) (tenant string, role daemon.Role, ok bool) {
	if token == "" {
		return "", "", false
	}
	h := sha256.Sum256([]byte(token))
	for k, e := range t.hashes {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			return e.tenant, e.role, true
		}
	}
	return "", "", false
}
