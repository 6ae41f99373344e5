package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/moatbox/moat/internal/inputfile"
)

func TestTrust(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, ".moat.toml")
	prof := filepath.Join(dir, "profile.json")
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	untrusted := func(err error, file, reason string) {
		t.Helper()
		var ue *UntrustedError
		if !errors.As(err, &ue) || ue.File != file || ue.Policy != pol || ue.Reason != reason {
			t.Fatalf("got %v (%#v), want %s of %s", err, ue, reason, file)
		}
		if !strings.Contains(err.Error(), file) {
			t.Errorf("%q does not name %s", err, file)
		}
	}
	write(pol, "[syscalls]\nprofile = \"profile.json\"\n")
	write(prof, `{"defaultAction": "SCMP_ACT_ERRNO"}`)

	var tr Trust
	_, err := tr.Load(pol, "")
	untrusted(err, pol, TrustNew)
	rec, err := tr.Add(pol, "")
	if err != nil {
		t.Fatal(err)
	}
	if rec.SHA256 == "" || len(rec.Files) != 1 || rec.Files[prof] == "" {
		t.Fatalf("record %+v, want the policy's and the profile's digests", rec)
	}
	p, err := tr.Load(pol, "")
	if err != nil {
		t.Fatal(err)
	}

	// The loaded policy keeps the profile's checked content, whatever
	// happens to the file afterwards.
	write(prof, `{"defaultAction": "SCMP_ACT_ALLOW"}`)
	if b, err := p.ReadFile(prof); err != nil || string(b) != `{"defaultAction": "SCMP_ACT_ERRNO"}` {
		t.Errorf("ReadFile = %q, %v; want the content that was checked", b, err)
	}
	_, err = tr.Load(pol, "")
	untrusted(err, prof, TrustChanged)

	// So does the policy's own: a caller that hands the document on (moat
	// mcp, to its server) sends what was checked, not a rewrite.
	checked, _ := os.ReadFile(pol)
	write(pol, "[network]\nmode = \"host\"\n")
	if b, err := p.ReadFile(pol); err != nil || string(b) != string(checked) {
		t.Errorf("ReadFile(policy) = %q, %v; want the document that was checked", b, err)
	}
	write(pol, string(checked))

	// The trust survives being stored and read back.
	b, err := json.Marshal(&tr)
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "trust.json")
	write(store, string(b))
	back, err := ReadTrust(store)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := back.Record(pol); r.SHA256 != rec.SHA256 || r.Files[prof] != rec.Files[prof] {
		t.Errorf("read back %+v, want %+v", r, rec)
	}

	write(pol, "[syscalls]\nprofile = \"profile.json\"\n\n")
	_, err = tr.Load(pol, "")
	untrusted(err, pol, TrustChanged)

	if _, err := tr.Load("rel/.moat.toml", ""); err == nil {
		t.Error("a relative policy path was accepted")
	}
	write(pol, "[syscalls]\nprofile = \"missing.json\"\n")
	if _, err := tr.Add(pol, ""); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("trusting a policy whose profile is missing: %v", err)
	}
}

// TestTrustEarlierFormat: a record that is only the policy's digest (the
// earlier format) trusts a policy that loads no file, and not one that does.
func TestTrustEarlierFormat(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, ".moat.toml")
	os.WriteFile(filepath.Join(dir, "p.json"), []byte(`{}`), 0o644)
	for _, tc := range []struct {
		doc    string
		reason string
	}{
		{"[limits]\nwall = \"1m\"\n", ""},
		{"[syscalls]\nprofile = \"p.json\"\n", TrustIncomplete},
	} {
		os.WriteFile(pol, []byte(tc.doc), 0o644)
		old, _ := json.Marshal(map[string]string{pol: digestOf([]byte(tc.doc))})
		var tr Trust
		if err := json.Unmarshal(old, &tr); err != nil {
			t.Fatal(err)
		}
		_, err := tr.Load(pol, "")
		var ue *UntrustedError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.reason != "" && (!errors.As(err, &ue) || ue.Reason != tc.reason || ue.Field != "syscalls.profile"):
			t.Errorf("%q: got %v, want %s", tc.doc, err, tc.reason)
		}
	}
}

// FuzzTrust checks that no stored trust record makes reading it panic, and
// that one read is written back to the same records.
func FuzzTrust(f *testing.F) {
	f.Add([]byte(`{"/w/.moat.toml": "00ff"}`))
	f.Add([]byte(`{"/w/.moat.toml": {"sha256": "00ff", "files": {"/w/p.json": "11"}}}`))
	f.Add([]byte(`{"/w/.moat.toml": 3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var tr Trust
		if json.Unmarshal(data, &tr) != nil {
			return
		}
		b, err := json.Marshal(&tr)
		if err != nil {
			t.Fatal(err)
		}
		var back Trust
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s does not read back: %v", b, err)
		}
		if len(back.records) != len(tr.records) {
			t.Fatalf("%d records became %d", len(tr.records), len(back.records))
		}
	})
}

// TestTrustCoversHostPrograms is the attack of a trusted .moat.toml whose
// secret is minted by a program in the workspace ("command:./mint"): the
// command rewrites ./mint, and the next run would have moat run it on the
// host. The trust covers every program the policy names by path (a
// secret's source and revoke, sandbox.runsc) as it covers a profile; a
// program found on PATH is the host's, not the workspace's.
func TestTrustCoversHostPrograms(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, ".moat.toml")
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runsc := filepath.Join(dir, "bin", "runsc")
	os.Mkdir(filepath.Dir(runsc), 0o755)
	for _, tc := range []struct {
		doc, file, field string
	}{
		{"[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:./mint --for ci\"\nhosts = [\"api.example.com\"]\n",
			filepath.Join(dir, "mint"), "secrets[0].source"},
		{"[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:true\"\nrevoke = \"tools/revoke now\"\nhosts = [\"api.example.com\"]\n",
			filepath.Join(dir, "tools", "revoke"), "secrets[0].revoke"},
		{"[sandbox]\nrunsc = \"" + runsc + "\"\n", runsc, "sandbox.runsc"},
		{"[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:python3 -u mint.py --name ci\"\nhosts = [\"api.example.com\"]\n",
			filepath.Join(dir, "mint.py"), "secrets[0].source"},
	} {
		os.MkdirAll(filepath.Dir(tc.file), 0o755)
		write(tc.file, "#!/bin/sh\necho token\n")
		write(pol, tc.doc)
		var tr Trust
		rec, err := tr.Add(pol, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.field, err)
		}
		if rec.Files[tc.file] == "" {
			t.Errorf("%s: record %+v does not cover %s", tc.field, rec, tc.file)
		}
		// Positive control: as trusted, it loads.
		if _, err := tr.Load(pol, ""); err != nil {
			t.Fatalf("%s: trusted policy refused: %v", tc.field, err)
		}
		write(tc.file, "#!/bin/sh\ntouch /tmp/owned; echo token\n")
		_, err = tr.Load(pol, "")
		var ue *UntrustedError
		if !errors.As(err, &ue) || ue.File != tc.file || ue.Field != tc.field || ue.Reason != TrustChanged {
			t.Errorf("%s: after the program changed got %v, want %s changed", tc.field, err, tc.file)
		}
	}

	// An argument that names no file is a word: nothing to hash; one
	// that appears after the trust is refused.
	write(pol, "[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:sh later.sh\"\nhosts = [\"api.example.com\"]\n")
	var later Trust
	if rec, err := later.Add(pol, ""); err != nil || len(rec.Files) != 0 {
		t.Errorf("command:sh later.sh: record %+v, %v; want no file", rec, err)
	}
	write(filepath.Join(dir, "later.sh"), "touch /tmp/owned\n")
	if _, err := later.Load(pol, ""); err == nil || !strings.Contains(err.Error(), "later.sh") {
		t.Errorf("a script that appeared after the trust: %v", err)
	}

	// A program found on PATH is not the workspace's: nothing to hash.
	write(pol, "[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:gh auth token\"\nhosts = [\"api.example.com\"]\n")
	var tr Trust
	if rec, err := tr.Add(pol, ""); err != nil || len(rec.Files) != 0 {
		t.Errorf("command:gh: record %+v, %v; want no file", rec, err)
	}
	// A named pipe in a program's place is refused, not waited on.
	os.Remove(filepath.Join(dir, "mint"))
	if err := syscall.Mkfifo(filepath.Join(dir, "mint"), 0o600); err != nil {
		t.Skip(err)
	}
	write(pol, "[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:./mint\"\nhosts = [\"api.example.com\"]\n")
	if _, err := tr.Add(pol, ""); err == nil || !strings.Contains(err.Error(), "secrets[0].source") {
		t.Errorf("a FIFO as the program: %v", err)
	}
}

// TestTrustArgumentFileNotEscaped: a file a secret's program was trusted
// with stays covered however it is changed: grown past what moat hashes
// (a sparse file costs nothing) or removed, the policy is refused, where
// before it was taken for a word the program takes and run unchecked.
// Positive control: as trusted, it loads.
func TestTrustArgumentFileNotEscaped(t *testing.T) {
	for _, change := range []string{"grown", "removed"} {
		dir := t.TempDir()
		pol, script := filepath.Join(dir, ".moat.toml"), filepath.Join(dir, "mint.py")
		os.WriteFile(script, []byte("print('token')\n"), 0o644)
		os.WriteFile(pol, []byte("[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n[[secrets]]\nname = \"T\"\nsource = \"command:python3 mint.py\"\nhosts = [\"api.example.com\"]\n"), 0o644)
		var tr Trust
		if _, err := tr.Add(pol, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Load(pol, ""); err != nil {
			t.Fatalf("control: trusted policy refused: %v", err)
		}
		if change == "grown" {
			if err := os.Truncate(script, inputfile.MaxProgram+1); err != nil {
				t.Fatal(err)
			}
		} else {
			os.Remove(script)
		}
		if _, err := tr.Load(pol, ""); err == nil {
			t.Errorf("%s: the policy loads with its program's file %s", change, change)
		}
	}
}

// TestKeepChecks: a policy parsed again from the document Trust.Load
// checked keeps that check's digests (the control), so VerifyPrograms
// sees a program change; it is refused for another document, another
// file, and a policy Load read without a check.
func TestKeepChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".moat.toml")
	mint := filepath.Join(dir, "mint")
	doc := "[network]\nmode = \"allow\"\nallow = [\"api.test\"]\n\n[[secrets]]\nname = \"T\"\nsource = \"command:./mint\"\nhosts = [\"api.test\"]\n"
	os.WriteFile(path, []byte(doc), 0o644)
	os.WriteFile(mint, []byte("#!/bin/sh\necho t\n"), 0o755)
	tr := &Trust{}
	if _, err := tr.Add(path, ""); err != nil {
		t.Fatal(err)
	}
	checked, err := tr.Load(path, "")
	if err != nil {
		t.Fatal(err)
	}
	parse := func(name, doc string) *Policy {
		t.Helper()
		p, err := Parse(name, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := parse(path, doc)
	if err := p.KeepChecks(checked, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.CheckedDigest(mint); !ok {
		t.Fatal("the digest of the checked program is not kept")
	}
	os.WriteFile(mint, []byte("#!/bin/sh\necho changed\n"), 0o755)
	var ue *UntrustedError
	if err := p.VerifyPrograms(); !errors.As(err, &ue) || ue.File != mint {
		t.Errorf("a program changed after the check: %v, want an UntrustedError naming it", err)
	}
	unchecked, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		p, from *Policy
		doc     string
	}{
		{"another document", parse(path, doc+"# more\n"), checked, doc + "# more\n"},
		{"another file", parse(filepath.Join(t.TempDir(), ".moat.toml"), doc), checked, doc},
		{"no check", parse(path, doc), unchecked, doc},
	} {
		if err := c.p.KeepChecks(c.from, []byte(c.doc)); !errors.Is(err, ErrNotChecked) {
			t.Errorf("%s: %v, want ErrNotChecked", c.name, err)
		}
	}
}
