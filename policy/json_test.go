package policy

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseJSON(t *testing.T) {
	doc := `{
  "limits": {"memory": "256MiB", "wall": 30, "cpus": 0.5},
  "filesystem": {"read_only": ["/usr", "/opt"]},
  "env": {"set": {"A": "b"}},
  "rules": [{"match": {"command": ["git", "push"]}, "decision": "deny"}]
}`
	p, err := ParseDocument("p.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.Limits.Memory != 256*MiB || p.Limits.CPUs != 0.5 || p.Limits.Wall.String() != "30s" {
		t.Errorf("limits = %+v", p.Limits)
	}
	if len(p.Filesystem.ReadOnly) != 2 || p.Env.Set["A"] != "b" || len(p.Rules) != 1 || p.Rules[0].Decision != "deny" {
		t.Errorf("policy = %+v", p)
	}
	// The same document as TOML gives the same policy.
	q, err := ParseDocument("p.toml", []byte("[limits]\nmemory = \"256MiB\"\nwall = 30\ncpus = 0.5\n"))
	if err != nil || q.Limits != p.Limits {
		t.Errorf("TOML: %+v, %v", q, err)
	}
}

func TestParseJSONErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"{\n  \"limits\": {\n    \"memroy\": 1\n  }\n}", `p.json:3: limits.memroy: unknown key`},
		{"{\n \"limits\": {\"memory\": true}}", `p.json:2: limits.memory: expected a size`},
		{"{\n \"network\": {\"allow\": [1]}}", `p.json:2: network.allow[0]: expected a string`},
		{"{\"limits\": {\"memory\": null}}", `limits.memory: null is not a value`},
		{"{\"a\": 1, \"a\": 2}", `key a is given twice`},
		{"{\"limits\": ", `unexpected end`},
		{"{} {}", `data after`},
		{"{\n\"x\" 1}", `p.json:2: syntax error`},
		{"{\"limits\": {\n\"cpus\": 1e-400}}", `p.json:2: limits.cpus: 1e-400 rounds to zero`},
		{"{\"limits\": {\"wall\": 1E-400}}", `limits.wall: 1E-400 rounds to zero`},
		{"{\"limits\": {\"output\": \"0.0001K\"}}", `limits.output: invalid size "0.0001K": rounds down to 0 bytes`},
	} {
		_, err := ParseDocument("p.json", []byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.doc, err, tc.want)
		}
		if _, ok := err.(*Errors); !ok {
			t.Errorf("%q: %T is not *Errors", tc.doc, err)
		}
	}
}

func FuzzParseJSON(f *testing.F) {
	f.Add(`{"limits": {"memory": "1GiB"}, "rules": [{"match": {"command": ["x"]}, "decision": "ask"}]}`)
	f.Add(`{"env": {"set": {"A": "1"}}, "network": {"tcp_bind": [80]}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		ParseJSON("f.json", []byte(doc))
	})
}

// A small JSON document of deep arrays, or of very many elements, is
// refused quickly with a line and a reason: each level cost a key as long
// as its path, and a 400 KB request took a daemon's memory to gigabytes.
// The control: an ordinary nested policy still parses.
func TestJSONNestingBounded(t *testing.T) {
	for name, doc := range map[string]string{
		"deep arrays":   `{"limits":` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`,
		"deep objects":  `{"limits":` + strings.Repeat(`{"a":`, 2000) + "1" + strings.Repeat("}", 2000) + `}`,
		"many elements": `{"network":{"mode":"allow","allow":[` + strings.Repeat(`"a.test",`, 200000) + `"a.test"]}}`,
	} {
		start := time.Now()
		_, err := ParseJSON("p.json", []byte(doc))
		var es *Errors
		if !errors.As(err, &es) || !strings.Contains(err.Error(), "p.json:") {
			t.Errorf("%s: %v, want a refusal naming the file and line", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
	if _, err := ParseJSON("p.json", []byte(`{"network":{"mode":"allow","allow":["a.test","b.test"]},"rules":[{"name":"r","match":{"command":["git","push"]},"decision":"deny"}]}`)); err != nil {
		t.Errorf("control: %v", err)
	}
}

// A policy file written as JSON loads as the daemon takes it, so that
// one file serves `moat run --policy` and `moat session create
// --policy`; its errors name the file and line. The control: a TOML
// file still loads.
func TestLoadJSONFile(t *testing.T) {
	dir := t.TempDir()
	js := dir + "/p.json"
	if err := os.WriteFile(js, []byte("{\n  \"limits\": {\"memory\": \"256MiB\"}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(js)
	if err != nil || p.Limits.Memory != 256*MiB || p.Source != js {
		t.Fatalf("Load(json) = %+v, %v", p, err)
	}
	bad := dir + "/bad.json"
	if err := os.WriteFile(bad, []byte("{\n  \"limits\": {\"memroy\": 1}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad+":2: limits.memroy: unknown key") {
		t.Errorf("Load(bad json) = %v", err)
	}
	tm := dir + "/p.toml"
	if err := os.WriteFile(tm, []byte("[limits]\nmemory = \"256MiB\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if q, err := Load(tm); err != nil || q.Limits.Memory != 256*MiB {
		t.Errorf("Load(toml) = %+v, %v", q, err)
	}
}
