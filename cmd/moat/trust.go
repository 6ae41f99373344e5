package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/moatbox/moat/policy"
	"github.com/moatbox/moat/workspace"
)

// The rule (a workspace's .moat.toml, and every file it loads, is used only
// with the content a person trusted) is policy.Trust's; this file only keeps
// the record in the state directory and words the refusal for a person.

const trustFile = "trusted-policies.json"

func trustPath() (string, error) {
	dir, err := workspace.StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, trustFile), nil
}

func readTrust() (*policy.Trust, error) {
	p, err := trustPath()
	if err != nil {
		return nil, err
	}
	t, err := policy.ReadTrust(p)
	if err != nil {
		return nil, fmt.Errorf("read trusted policies: %w", err)
	}
	return t, nil
}

// loadTrusted loads the workspace policy file at path (absolute) if it and
// the files it loads are trusted; a refusal says how to trust it.
func loadTrusted(path string) (*policy.Policy, error) {
	t, err := readTrust()
	if err != nil {
		return nil, err
	}
	home, _ := os.UserHomeDir()
	p, err := t.Load(path, home)
	var ue *policy.UntrustedError
	if errors.As(err, &ue) {
		if ue.Reason == policy.TrustNew {
			return nil, fmt.Errorf("%w; review it, then run `moat trust` (or pass --policy)", err)
		}
		return nil, fmt.Errorf("%w; review it, then run `moat trust` again", err)
	}
	return p, err
}

func cmdTrust(args []string, stdout, stderr io.Writer) int {
	args, ok, code := operands("trust", "usage: moat trust [POLICY-FILE]   (default: ./.moat.toml)", args, 0, 1, stderr)
	if !ok {
		return code
	}
	path := ".moat.toml"
	if len(args) == 1 {
		path = args[0]
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "moat trust: %v\n", err)
		return exitMoatError
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fail(err)
	}
	t, err := readTrust()
	if err != nil {
		return fail(err)
	}
	home, _ := os.UserHomeDir()
	rec, err := t.Add(abs, home)
	if err != nil {
		return fail(err)
	}
	if err := writeTrust(t); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "trusted %s (sha256 %s)\n", abs, rec.SHA256)
	files := make([]string, 0, len(rec.Files))
	for f := range rec.Files {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintf(stdout, "  and the file it loads %s (sha256 %s)\n", f, rec.Files[f])
	}
	return 0
}

// writeTrust replaces the trust record atomically, so a run reading it
// never sees half of it.
func writeTrust(t *policy.Trust) error {
	p, err := trustPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// localPolicy reports whether a workspace names a policy of its own at
// local (its .moat.toml): a file there, or a symbolic link there even when
// it leads nowhere, which is an error, as is a .moat.toml moat cannot look
// at. Either way the built-in policy would run the command instead of the
// one the workspace names, unsaid.
func localPolicy(local string) (bool, error) {
	fi, err := os.Lstat(local)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look for the workspace's policy: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if _, err := os.Stat(local); err != nil {
			return false, fmt.Errorf("%s is a symbolic link that leads nowhere moat can read (%v): fix or remove it (moat does not fall back to the built-in policy when a workspace names its own)", workspace.EscapeText(local), err)
		}
	}
	return true, nil
}
