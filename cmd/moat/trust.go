package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/moatbox/moat/workspace"
)

// A workspace's .moat.toml is policy that the sandboxed command itself may
// have written (in direct mode it can create one where there was none), and
// the next `moat run` there would obey it. So, like direnv's `allow`, moat
// uses a .moat.toml only once the person has trusted that exact content:
// `moat trust` records its SHA-256 in the state directory, and a new or
// changed file is refused until trusted again. A policy named with
// --policy is the person's own choice and needs no trust.

const trustFile = "trusted-policies.json"

func trustPath() (string, error) {
	dir, err := workspace.StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, trustFile), nil
}

func loadTrust() (map[string]string, error) {
	p, err := trustPath()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

func fileDigest(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// checkTrusted refuses a workspace policy file whose content was not
// trusted with `moat trust`.
func checkTrusted(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	digest, err := fileDigest(abs)
	if err != nil {
		return err
	}
	trusted, err := loadTrust()
	if err != nil {
		return fmt.Errorf("read trusted policies: %w", err)
	}
	switch trusted[abs] {
	case digest:
		return nil
	case "":
		return fmt.Errorf("%s is not trusted yet: a command run in this workspace could have written it; review it, then run `moat trust` (or pass --policy)", abs)
	}
	return fmt.Errorf("%s changed since you trusted it (a command run in this workspace could have changed it); review it, then run `moat trust` again", abs)
}

func cmdTrust(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintln(stderr, "usage: moat trust [POLICY-FILE]   (default: ./.moat.toml)")
		return 2
	}
	path := ".moat.toml"
	if len(args) == 1 {
		path = args[0]
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = loadPolicyFile(abs)
	}
	if err != nil {
		fmt.Fprintf(stderr, "moat trust: %v\n", err)
		return exitMoatError
	}
	digest, err := fileDigest(abs)
	if err != nil {
		fmt.Fprintf(stderr, "moat trust: %v\n", err)
		return exitMoatError
	}
	trusted, err := loadTrust()
	if err != nil {
		fmt.Fprintf(stderr, "moat trust: %v\n", err)
		return exitMoatError
	}
	trusted[abs] = digest
	p, err := trustPath()
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o700)
	}
	if err == nil {
		var b []byte
		b, _ = json.MarshalIndent(trusted, "", "  ")
		tmp := p + ".tmp"
		if err = os.WriteFile(tmp, append(b, '\n'), 0o600); err == nil {
			err = os.Rename(tmp, p)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "moat trust: %v\n", err)
		return exitMoatError
	}
	fmt.Fprintf(stdout, "trusted %s (sha256 %s)\n", abs, digest[:16])
	return 0
}
