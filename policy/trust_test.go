package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
