package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no document makes Parse, Validate or Resolve panic,
// that every error is *Errors, and that an accepted policy renders to TOML
// that parses back. Seeds: the fixtures and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	fixtures, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range fixtures {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.toml", data)
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("Parse error %v (%T) is not a non-empty *Errors", err, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Validate error %T is not *Errors", err)
			}
		}
		doc, err := p.TOML()
		if err != nil {
			t.Fatalf("TOML() = %v", err)
		}
		if _, err := Parse("shown.toml", doc); err != nil {
			t.Fatalf("rendered policy does not parse: %v\n%s", err, doc)
		}
		if err := p.Resolve("/cwd", "/home/me"); err != nil {
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Resolve error %T is not *Errors", err)
			}
		}
	})
}

// FuzzParseSize checks that ParseSize never panics, never returns a negative
// size, and that what it accepts prints to a string it parses back the same.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "512M", "1.5GiB", "64kb", "-1", "9223372036854775807", "1.5", "12 parsecs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid size") {
				t.Fatalf("ParseSize(%q) error %q does not say what is invalid", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, n)
		}
		if back, err := ParseSize(n.String()); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d; ParseSize(%q) = %d, %v", s, n, n.String(), back, err)
		}
	})
}
