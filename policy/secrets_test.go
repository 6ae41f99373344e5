package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSecretsValidate(t *testing.T) {
	good := `[network]
mode = "allow"
allow = ["api.github.com", "*.example.com:443"]

[[secrets]]
name = "GITHUB_TOKEN"
source = "env:GITHUB_TOKEN"
hosts = ["api.github.com"]
methods = ["GET"]
paths = ["/repos/acme"]
header = "Authorization: Bearer {value}"

[[secrets]]
name = "KEY"
source = "file:key.txt"
hosts = ["api.example.com:443", "*.example.com:443"]
`
	p, err := Parse("p.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if len(p.Secrets) != 2 || p.Secrets[0].Header != "Authorization: Bearer {value}" || p.Secrets[1].Hosts[1] != "*.example.com:443" {
		t.Fatalf("secrets = %+v", p.Secrets)
	}
	if got := p.SecretFile(p.Secrets[1], "/work"); got != "/work/key.txt" {
		t.Errorf("SecretFile = %q", got)
	}

	bad := `[network]
mode = "none"
allow = ["api.github.com"]

[[secrets]]
name = "1BAD"
source = "vault:x"
hosts = ["evil.com", "https://x", "127.0.0.1:8443"]
methods = ["get"]
paths = ["repos"]
header = "Authorization Bearer"

[[secrets]]
name = "T"
source = "env:T"
hosts = []
header = "Host: {value}"

[[secrets]]
name = "T"
source = "file:"
hosts = ["api.github.com"]
header = "X-Key: static"

[[secrets]]
name = "U"
source = "command: "
revoke = " "
hosts = ["api.github.com"]

[[secrets]]
name = "V"
source = "env:V"
revoke = "y"
hosts = ["api.github.com"]

[[secrets]]
name = "W"
source = "env:W"
hosts = ["api.github.com"]
query = "key=1"

[[secrets]]
name = "X"
source = "env:X"
hosts = ["api.github.com"]
header = "X-Key: {value}"
query = "key"
`
	p, err = Parse("b.toml", []byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	checkErrors(t, p.Validate(), []string{
		`b.toml:3: network.allow: is read only when network.mode is "allow"`,
		`secrets: secrets are added by moat's proxy, which needs network.mode = "allow"`,
		`b.toml:6: secrets[0].name: "1BAD" is not an environment variable name`,
		`b.toml:7: secrets[0].source: "vault:x": want "env:VAR", "file:PATH" or "command:PROGRAM ARG..."`,
		`b.toml:8: secrets[0].hosts[0]: "evil.com" is not reachable under network.allow`,
		`b.toml:8: secrets[0].hosts[1]: "https://x": not a destination`,
		`b.toml:8: secrets[0].hosts[2]: "127.0.0.1:8443": an IP address: a secret is for host names only`,
		`b.toml:9: secrets[0].methods[0]: "get" is not an HTTP method`,
		`b.toml:10: secrets[0].paths[0]: "repos": a request path starts with /`,
		`b.toml:11: secrets[0].header: "Authorization Bearer": want "Header-Name: template"`,
		`b.toml:16: secrets[1].hosts: list the hosts the secret is for`,
		`b.toml:17: secrets[1].header: the Host header names the destination`,
		`b.toml:20: secrets[2].name: "T" is also the name of secrets[1]`,
		`b.toml:21: secrets[2].source: "file:": want`,
		`b.toml:23: secrets[2].header: "X-Key: static": the template must contain {value}`,
		`b.toml:27: secrets[3].source: "command: ": want`,
		`b.toml:28: secrets[3].revoke: name the program that revokes the value`,
		`b.toml:34: secrets[4].revoke: only a secret minted by a "command:" source is revoked`,
		`b.toml:41: secrets[5].query: "key=1": want a query parameter's name`,
		`b.toml:48: secrets[6].query: a secret goes either in its header template or in a query parameter, not both`,
	})
	if _, err := Parse("s.toml", []byte("[[secrets]]\nname = \"A\"\nvalue = \"x\"\n")); err == nil || !strings.Contains(err.Error(), "s.toml:3: secrets[0].value: unknown key") {
		t.Errorf("an inline value: %v, want an unknown-key error", err)
	}
}

// TestSecretNamesAndDeny: a secret named as a variable moat sets itself
// (the proxy's, the trust store's) or one that changes how programs run
// was loaded and then silently lost its placeholder or broke every
// program; one env.set also sets was overwritten; one whose host
// network.deny refuses could never be used. Each is refused on its line.
// The control: the same policy's other secrets, a wildcard deny of
// another domain, and a deny of one name under a wildcard secret pass.
func TestSecretNamesAndDeny(t *testing.T) {
	src := `[network]
mode = "allow"
allow = ["api.test", "*.example.com", "vm:8444"]
deny = ["vm", "*.other.com", "x.example.com"]

[env]
set = { TOK = "x" }

[[secrets]]
name = "https_proxy"
source = "env:A"
hosts = ["api.test"]

[[secrets]]
name = "LD_PRELOAD"
source = "env:A"
hosts = ["api.test"]

[[secrets]]
name = "TOK"
source = "env:A"
hosts = ["api.test"]

[[secrets]]
name = "VM"
source = "env:A"
hosts = ["vm:8444"]

[[secrets]]
name = "OK"
source = "env:A"
hosts = ["api.test", "*.example.com"]
`
	p, err := Parse("n.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	checkErrors(t, p.Validate(), []string{
		`n.toml:10: secrets[0].name: "https_proxy" is set by moat in allow mode`,
		`n.toml:15: secrets[1].name: "LD_PRELOAD" changes how programs run`,
		`n.toml:20: secrets[2].name: "TOK" is also set by env.set`,
		`n.toml:27: secrets[3].hosts[0]: "vm:8444" is refused by network.deny[0] ("vm")`,
	})
}

// TestSentPolicyHasNoDirectory: a policy sent to the daemon (parsed from
// a document named "policy", resolved with no working directory of its
// own) has no directory for its secrets: a relative program or file is
// refused by field, where one read from a file (the control) is found
// beside it. What it names by absolute path is still among its host
// files, for the sandbox to keep read-only.
func TestSentPolicyHasNoDirectory(t *testing.T) {
	ws := t.TempDir()
	doc := func(prog string) string {
		return `[network]
mode = "allow"
allow = ["api.test"]

[syscalls]
profile = "` + ws + `/profile.json"

[[secrets]]
name = "TOKEN"
source = "command:` + prog + ` ` + ws + `/arg.txt"
revoke = "` + prog + ` --revoke"
hosts = ["api.test"]

[[secrets]]
name = "KEY"
source = "file:key.txt"
hosts = ["api.test"]
`
	}
	for _, f := range []string{"mint.sh", "arg.txt", "profile.json"} {
		os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o755)
	}
	sent, err := ParseDocument("policy", []byte(doc("./mint.sh")))
	if err != nil {
		t.Fatal(err)
	}
	if d := sent.SecretDir(""); d != "" {
		t.Errorf("SecretDir of a sent policy: %q, want none", d)
	}
	err = sent.CheckSecretDir("")
	var es *Errors
	if !errors.As(err, &es) {
		t.Fatalf("CheckSecretDir: %v, want *Errors", err)
	}
	msg := err.Error()
	for _, field := range []string{"secrets[0].source", "secrets[0].revoke", "secrets[1].source"} {
		if !strings.Contains(msg, field) {
			t.Errorf("no refusal of %s in %q", field, msg)
		}
	}

	// Absolute, or on PATH: nothing to resolve.
	abs, _ := ParseDocument("policy", []byte(doc(ws+"/mint.sh")))
	abs.Secrets = abs.Secrets[:1]
	if err := abs.CheckSecretDir(""); err != nil {
		t.Errorf("an absolute program refused: %v", err)
	}
	onPath, _ := ParseDocument("policy", []byte(doc("mint")))
	onPath.Secrets = onPath.Secrets[:1]
	if err := onPath.CheckSecretDir(""); err != nil {
		t.Errorf("a program on PATH refused: %v", err)
	}
	got := abs.HostFiles("", "")
	for _, f := range []string{"mint.sh", "arg.txt", "profile.json"} {
		if !slices.Contains(got, filepath.Join(ws, f)) {
			t.Errorf("HostFiles of a sent policy %q: no %s", got, f)
		}
	}
	for _, f := range got {
		if !filepath.IsAbs(f) {
			t.Errorf("HostFiles of a sent policy names %q, which is relative", f)
		}
	}

	// The control: the same policy read from a file in ws finds them
	// there.
	file, _ := ParseDocument(filepath.Join(ws, "moat.toml"), []byte(doc("./mint.sh")))
	if err := file.CheckSecretDir(""); err != nil {
		t.Errorf("a policy file's relative program refused: %v", err)
	}
	if d := file.SecretDir(""); d != ws {
		t.Errorf("SecretDir of a policy file: %q, want %q", d, ws)
	}
	if got := file.HostFiles("", ""); !slices.Contains(got, filepath.Join(ws, "mint.sh")) {
		t.Errorf("HostFiles of a policy file %q: no mint.sh", got)
	}
}

// TestNetFlagOverSecrets: --net none or host over a file with secrets is
// the flag's conflict, and the error names the flag, not the file's
// [[secrets]] line. The control: the same file as written validates.
func TestNetFlagOverSecrets(t *testing.T) {
	doc := "[network]\nmode = \"allow\"\nallow = [\"api.example.com\"]\n\n[[secrets]]\nname = \"T\"\nsource = \"env:T\"\nhosts = [\"api.example.com\"]\n"
	p, err := Parse("s.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("control: %v", err)
	}
	for _, mode := range []string{"none", "host"} {
		p, _ := Parse("s.toml", []byte(doc))
		if err := (&Overrides{Dir: "/", Net: mode}).Apply(p); err != nil {
			t.Fatal(err)
		}
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), `flag --net: network.mode: "`+mode+`": the policy's secrets are added by moat's proxy`) || strings.Contains(err.Error(), "s.toml:5") {
			t.Errorf("--net %s: %v", mode, err)
		}
	}
}
