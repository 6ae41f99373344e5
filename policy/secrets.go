package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/moatbox/moat/internal/netrule"
)

// Secret is one [[secrets]] entry: a credential the command may use but
// never hold. Inside the sandbox the environment variable Name holds a
// placeholder; moat's proxy puts the real value in its place, in request
// headers, only on HTTPS requests to Hosts (whose TLS it then terminates
// with a certificate authority made for the run and trusted inside the
// sandbox), and refuses a request that carries the placeholder anywhere
// else. Needs network mode "allow".
type Secret struct {
	// Name is the environment variable that holds the placeholder inside
	// the sandbox. Required.
	Name string `toml:"name" json:"name"`
	// Source is where moat reads the value on the host, at the start of
	// each run or session: "env:VAR" (moat's own environment), "file:PATH"
	// (the file's content, without a final newline; a relative path is
	// relative to the policy file's directory) or "command:PROGRAM ARG..."
	// (what the program prints on stdout, for a token minted per run or
	// session: run on the host as moat's user, without a shell — the words
	// are split at spaces —, in the policy file's directory, with a
	// timeout). Required.
	Source string `toml:"source" json:"source"`
	// Revoke, with a "command:" source, is a program run on the host when
	// the run or session ends, with the value on its stdin, so that a
	// minted token dies with the sandbox ("PROGRAM ARG...", split as the
	// source's words). Default "": nothing is run.
	Revoke string `toml:"revoke,omitempty" json:"revoke,omitempty"`
	// Hosts are the destinations the value is for, in the grammar of
	// network.allow entries ("host", "*.domain", either with ":port").
	// Each must also be reachable under network.allow. Required.
	Hosts []string `toml:"hosts" json:"hosts"`
	// Methods narrow the requests the value goes on to these HTTP methods
	// (upper case). Default []: any method.
	Methods []string `toml:"methods,omitempty" json:"methods,omitempty"`
	// Paths narrow them to request paths equal to or below one of these
	// prefixes ("/repos/acme"). Default []: any path.
	Paths []string `toml:"paths,omitempty" json:"paths,omitempty"`
	// Header, when set ("Authorization: Bearer {value}"), is a header the
	// proxy sets on every request the secret is for, so the command need
	// not send the placeholder at all. Default "": the placeholder is
	// replaced wherever the command puts it in the headers.
	Header string `toml:"header,omitempty" json:"header,omitempty"`
	// Query, when set ("key"), is a query parameter the placeholder may
	// be sent as, for an API that takes its key in the URL (?key=...):
	// on a request the secret is for, the proxy puts the value in place of
	// a placeholder that is the whole value of that parameter. Default "":
	// a placeholder in a URL is refused. Not with Header.
	Query string `toml:"query,omitempty" json:"query,omitempty"`
}

var secretsType = reflect.TypeFor[[]Secret]()

// isEnvName reports whether s is an environment variable name: letters,
// digits and _, not starting with a digit. (A function, not a regular
// expression compiled at every moat process's start.)
func isEnvName(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// isHeaderName reports whether s is an HTTP field name (a token, RFC 9110
// 5.6.2).
func isHeaderName(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return s != ""
}

// isMethod reports whether s is an HTTP method in upper case.
func isMethod(s string) bool {
	for _, c := range s {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return s != ""
}

func (p *Policy) validateSecrets(l *errorList) {
	if len(p.Secrets) > 0 && p.Network.Mode != NetworkAllow {
		if _, ok := p.flagFor("network.mode"); ok {
			// The flag made the conflict: say so under its name, not
			// the file's [[secrets]] line.
			l.add("network.mode", fmt.Sprintf("%q: the policy's secrets are added by moat's proxy, which needs %q", p.Network.Mode, NetworkAllow))
		} else {
			l.add("secrets", fmt.Sprintf("secrets are added by moat's proxy, which needs network.mode = %q (it is %q)", NetworkAllow, p.Network.Mode))
		}
	}
	names := map[string]int{}
	for i, s := range p.Secrets {
		key := indexKey("secrets", i)
		switch {
		case s.Name == "":
			l.add(key+".name", "must not be empty: it is the environment variable that holds the placeholder")
		case !isEnvName(s.Name):
			l.add(key+".name", fmt.Sprintf("%q is not an environment variable name (letters, digits and _, not starting with a digit)", s.Name))
		case reservedSecretName(s.Name) != "":
			l.add(key+".name", fmt.Sprintf("%q %s: name the variable for the secret alone (GITHUB_TOKEN, say)", s.Name, reservedSecretName(s.Name)))
		default:
			if j, dup := names[s.Name]; dup {
				l.add(key+".name", fmt.Sprintf("%q is also the name of secrets[%d]", s.Name, j))
			}
			names[s.Name] = i
			if _, set := p.Env.Set[s.Name]; set {
				l.add(key+".name", fmt.Sprintf("%q is also set by env.set: the variable holds the secret's placeholder or that value, not both", s.Name))
			}
		}
		scheme, rest, _ := strings.Cut(s.Source, ":")
		switch {
		case scheme == "env" && isEnvName(rest):
		case scheme == "file" && rest != "":
		case scheme == "command" && len(strings.Fields(rest)) > 0:
		default:
			l.add(key+".source", fmt.Sprintf("%q: want \"env:VAR\", \"file:PATH\" or \"command:PROGRAM ARG...\"", s.Source))
		}
		switch {
		case s.Revoke == "":
		case scheme != "command":
			l.add(key+".revoke", "only a secret minted by a \"command:\" source is revoked")
		case len(strings.Fields(s.Revoke)) == 0:
			l.add(key+".revoke", "name the program that revokes the value, or remove revoke")
		}
		if len(s.Hosts) == 0 {
			l.add(key+".hosts", "list the hosts the secret is for")
		}
		for j, h := range s.Hosts {
			f := indexKey(key+".hosts", j)
			if _, err := netrule.ParseHost(h, true); errors.Is(err, netrule.ErrAddress) {
				l.add(f, fmt.Sprintf("%q: an IP address: a secret is for host names only, the name the client connects to (moat's certificate for it names it)", h))
			} else if err != nil {
				l.add(f, fmt.Sprintf("%q: %v", h, err))
			} else if !p.allowsHost(h) {
				l.add(f, fmt.Sprintf("%q is not reachable under network.allow; add it there too", h))
			} else if j := p.deniedHost(h); j >= 0 {
				l.add(f, fmt.Sprintf("%q is refused by network.deny[%d] (%q), which beats allow: the secret could never be used", h, j, p.Network.Deny[j]))
			}
		}
		for j, m := range s.Methods {
			if !isMethod(m) {
				l.add(indexKey(key+".methods", j), fmt.Sprintf("%q is not an HTTP method in upper case (GET, POST, ...)", m))
			}
		}
		for j, pth := range s.Paths {
			if !strings.HasPrefix(pth, "/") {
				l.add(indexKey(key+".paths", j), fmt.Sprintf("%q: a request path starts with /", pth))
			}
		}
		if s.Header != "" {
			name, val, ok := strings.Cut(s.Header, ":")
			name = strings.TrimSpace(name)
			switch {
			case !ok || !isHeaderName(name):
				l.add(key+".header", fmt.Sprintf("%q: want \"Header-Name: template\", e.g. \"Authorization: Bearer {value}\"", s.Header))
			case !strings.Contains(val, "{value}"):
				l.add(key+".header", fmt.Sprintf("%q: the template must contain {value}", s.Header))
			case strings.ContainsAny(val, "\r\n\x00"):
				l.add(key+".header", "must not contain line breaks")
			case strings.EqualFold(name, "Host"):
				l.add(key+".header", "the Host header names the destination; it cannot carry a secret")
			}
		}
		switch {
		case s.Query == "":
		case s.Header != "":
			l.add(key+".query", "a secret goes either in its header template or in a query parameter, not both")
		case strings.ContainsAny(s.Query, "&=#?%+ ") || !isPrintable(s.Query):
			l.add(key+".query", fmt.Sprintf("%q: want a query parameter's name, e.g. \"key\" (no &, =, #, ?, %%, + or spaces)", s.Query))
		}
	}
}

// reservedSecretName says why name cannot hold a secret's placeholder, or
// "": moat sets the variable itself in allow mode (the proxy's and the
// trust store's variables, in either case), or it changes how every
// program runs or is found, which a placeholder in it would break.
func reservedSecretName(name string) string {
	u := strings.ToUpper(name)
	switch u {
	case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
		"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
		"GIT_SSL_CAINFO", "PIP_CERT", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE":
		return "is set by moat in allow mode (the proxy, the trust store)"
	}
	switch {
	case strings.HasPrefix(u, "LD_"), u == "PATH", u == "HOME", u == "SHELL", u == "IFS", u == "ENV", u == "BASH_ENV", u == "TMPDIR":
		return "changes how programs run or are found"
	}
	return ""
}

// allowsHost reports whether every name the secret host entry h covers is
// covered by a network.allow entry: h itself, or a wildcard above it.
func (p *Policy) allowsHost(h string) bool {
	sh, err := netrule.ParseHost(h, true)
	if err != nil {
		return false
	}
	for _, a := range p.Network.Allow {
		ah, err := netrule.ParseHost(a, true)
		if err != nil || ah.Port != 0 && ah.Port != sh.Port {
			continue
		}
		switch {
		case !ah.Wildcard && !sh.Wildcard && ah.Domain == sh.Domain,
			ah.Wildcard && ah.Domain == sh.Domain && sh.Wildcard,
			ah.Wildcard && strings.HasSuffix(sh.Domain, "."+ah.Domain):
			return true
		}
	}
	return false
}

// deniedHost returns the index of a network.deny entry that refuses every
// name the secret host entry h covers, or -1.
func (p *Policy) deniedHost(h string) int {
	sh, err := netrule.ParseHost(h, true)
	if err != nil {
		return -1
	}
	for j, d := range p.Network.Deny {
		dh, err := netrule.ParseHost(d, true)
		if err != nil || dh.Port != 0 && sh.Port != 0 && dh.Port != sh.Port {
			continue
		}
		switch {
		case !dh.Wildcard && !sh.Wildcard && dh.Domain == sh.Domain,
			dh.Wildcard && sh.Wildcard && dh.Domain == sh.Domain,
			dh.Wildcard && strings.HasSuffix(sh.Domain, "."+dh.Domain):
			return j
		}
	}
	return -1
}

// SecretFile returns the file a "file:" source names, made absolute
// against the policy file's directory (or cwd for a policy without one).
func (p *Policy) SecretFile(s Secret, cwd string) string {
	f := strings.TrimPrefix(s.Source, "file:")
	if filepath.IsAbs(f) {
		return f
	}
	return filepath.Join(p.SecretDir(cwd), f)
}

// SecretDir is the directory a secret's relative file and its commands
// start from: the policy file's (or cwd for a policy without one). It is
// "" when there is none: a policy sent to the daemon came from no file it
// knows, and the daemon's own working directory is nothing the policy's
// author chose.
func (p *Policy) SecretDir(cwd string) string {
	dir := cwd
	if p.Source != "" {
		dir = filepath.Dir(p.Source)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
	}
	if !filepath.IsAbs(dir) {
		return ""
	}
	return filepath.Clean(dir)
}

// CheckSecretDir refuses, when the policy has no directory (SecretDir is
// ""), the secrets that name a file or program by a relative path: there
// is nothing it could be relative to. A program named without a slash is
// looked up on PATH and needs none.
func (p *Policy) CheckSecretDir(cwd string) error {
	if p.SecretDir(cwd) != "" {
		return nil
	}
	l := &errorList{p: p}
	const why = "is relative, and this policy was read from no file whose directory it could be relative to (it was sent, not named); give an absolute path"
	for i, s := range p.Secrets {
		key := indexKey("secrets", i)
		scheme, rest, _ := strings.Cut(s.Source, ":")
		switch scheme {
		case "file":
			if !filepath.IsAbs(rest) {
				l.add(key+".source", fmt.Sprintf("%q %s", rest, why))
			}
		case "command":
			for _, c := range []struct{ field, words string }{{key + ".source", rest}, {key + ".revoke", s.Revoke}} {
				if argv := strings.Fields(c.words); len(argv) > 0 && strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
					l.add(c.field, fmt.Sprintf("program %q %s, or a name found on PATH", argv[0], why))
				}
			}
		}
	}
	return l.err()
}

// isPrintable reports whether s is printable ASCII.
func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
