package egress

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// HTTP Basic authentication hides a placeholder from a plain search:
// "Authorization: Basic base64(user:password)", as git, curl -u and a
// URL's user information send it, carries the placeholder encoded. So a
// header value of scheme Basic is decoded, and a placeholder in its
// credentials is treated as one in a header: put in the value's place
// (the credentials encoded again) on a request the secret is for, and
// refused on any other. The credentials apply sends are scrubbed from
// responses, in their encoded form, as a value is: see basicForm.

const (
	// maxBasicLen is the length of the longest Basic credentials,
	// decoded and with the secrets' values in, that apply sends: it bounds
	// the bytes a body scrubber holds back.
	maxBasicLen = 4096
	// maxBasicCreds is how many distinct Basic credentials with a
	// secret's value in them a Secrets sends, each a pattern the
	// scrubbers look for from then on. Past it a request with new ones is
	// refused: a command that sends ever new user names cannot make the
	// proxy's memory, or the scrubbers' work, grow without end.
	maxBasicCreds = 64
)

// basicCred is a header value of scheme Basic whose credentials carry a
// placeholder.
type basicCred struct {
	key  string // the header's name
	j    int    // which of its values
	raw  string // the value as sent
	orig string // the credentials, decoded
	dec  string // the same with the values put in so far
}

// basicCreds returns the header values of h of scheme Basic whose
// credentials have a placeholder's prefix in them.
func basicCreds(h http.Header) []basicCred {
	var out []basicCred
	for k, vs := range h {
		for j, v := range vs {
			if d, ok := decodeBasic(v); ok && strings.Contains(d, PlaceholderPrefix) {
				out = append(out, basicCred{key: k, j: j, raw: v, orig: d, dec: d})
			}
		}
	}
	return out
}

// decodeBasic returns the credentials of v if it is "Basic <base64>"
// (the scheme in any case). RFC 7617 asks for padded standard base64,
// and that is what apply sends; but servers differ in what they take
// (Node's and Java's decoders take it unpadded, some take the URL-safe
// alphabet), so each of these is decoded: a placeholder that a server
// could read is one the proxy sees.
func decodeBasic(v string) (string, bool) {
	v = strings.TrimLeft(v, " \t")
	if len(v) < 6 || !strings.EqualFold(v[:5], "basic") || v[5] != ' ' && v[5] != '\t' {
		return "", false
	}
	tok := strings.Trim(v[6:], " \t")
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(tok); err == nil {
			return string(b), true
		}
	}
	return "", false
}

// placeholderIn names where in h, other than in the header except, the
// placeholder ph is: a header's name, or its Basic credentials; or "".
func placeholderIn(h http.Header, basics []basicCred, ph, except string) string {
	if k := headerWith(h, ph, except); k != "" {
		return k
	}
	for _, b := range basics {
		if b.key != except && strings.Contains(b.dec, ph) {
			return "the " + b.key + " header's Basic credentials"
		}
	}
	return ""
}

// basicForm returns the encoded form of the credentials dec, which apply
// is to send in place of orig, those the command sent, and adds it to
// what the scrubbers put the placeholder form (orig encoded) in place of:
// a server that echoes the header would otherwise hand the command
// base64 of the value. It refuses (returns a rule and a reason)
// credentials longer than maxBasicLen, and new ones past maxBasicCreds.
//
// Only the credentials exactly as sent are scrubbed: their base64 inside
// a longer base64 text need not line up with them. The value itself, as
// the server decodes it, is scrubbed as ever.
func (s *Secrets) basicForm(dec, orig, key string) (form, rule, reason string) {
	if len(dec) > maxBasicLen {
		return "", "secret basic credentials", fmt.Sprintf("the %s header's Basic credentials, with the secrets' values in, would be %d bytes long; moat sends at most %d",
			key, len(dec), maxBasicLen)
	}
	form = base64.StdEncoding.EncodeToString([]byte(dec))
	s.basicMu.Lock()
	defer s.basicMu.Unlock()
	if s.basic[form] {
		return form, "", ""
	}
	if len(s.basic) >= s.maxBasic {
		return "", "secret basic credentials", fmt.Sprintf("this run has sent %d different Basic credentials with secrets in them, the most moat sends (each is scrubbed from every response); "+
			"the %s header's are new", len(s.basic), key)
	}
	s.pats.Store(s.pats.Load().with(form, base64.StdEncoding.EncodeToString([]byte(orig))))
	s.basic[form] = true
	return form, "", ""
}
