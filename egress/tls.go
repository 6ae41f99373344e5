package egress

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// The TLS ClientHello reader is hand-written: crypto/tls cannot read a
// ClientHello without taking over the connection, and the proxy must only
// look at the bytes (then pass them on unchanged). It reads just the
// records that carry the ClientHello, bounded by maxHelloBytes, and parses
// only as far as the server_name extension (RFC 8446 4.1.2, RFC 6066 3).

const (
	recordTypeHandshake  = 0x16
	handshakeClientHello = 0x01
	maxRecordPayload     = 1 << 14 // RFC 8446 5.1: plaintext fragments
	maxHelloBytes        = 1 << 16 // real ClientHellos are < 2 KiB, < 8 KiB with large key shares
	extServerName        = 0
	serverNameHostName   = 0
)

var errNotHello = errors.New("malformed TLS ClientHello")

// clientHello is what the proxy learns from the client's first bytes.
type clientHello struct {
	isTLS  bool   // the first byte is a TLS handshake record
	sni    string // server_name, lower-cased; "" when absent
	hasSNI bool
}

// readClientHello reads the client's first bytes from r. If they start a
// TLS handshake record it reads the whole ClientHello (possibly spread over
// several records) and parses it; otherwise it reads one byte only, so a
// protocol in which the client sends little and waits is not held up. It
// returns every byte it read, for the caller to pass on, and an error for
// a ClientHello that is malformed or too large.
func readClientHello(r io.Reader) (raw []byte, h clientHello, err error) {
	var first [1]byte
	if _, err := io.ReadFull(r, first[:]); err != nil {
		return nil, h, err
	}
	raw = append(raw, first[0])
	if first[0] != recordTypeHandshake {
		return raw, h, nil
	}
	h.isTLS = true
	var msg []byte // handshake bytes reassembled from the records
	for {
		var hdr [4]byte
		if k, err := io.ReadFull(r, hdr[:]); err != nil {
			return append(raw, hdr[:k]...), h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		raw = append(raw, hdr[:]...)
		n := int(hdr[2])<<8 | int(hdr[3])
		if hdr[0] != 3 || n == 0 || n > maxRecordPayload || len(raw)+n > maxHelloBytes {
			return raw, h, fmt.Errorf("%w: bad record header", errNotHello)
		}
		start := len(raw)
		raw = append(raw, make([]byte, n)...)
		if k, err := io.ReadFull(r, raw[start:]); err != nil {
			return raw[:start+k], h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		msg = append(msg, raw[start:]...)
		if len(msg) >= 4 {
			if msg[0] != handshakeClientHello {
				return raw, h, fmt.Errorf("%w: first handshake message is not a ClientHello", errNotHello)
			}
			total := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			if total > maxHelloBytes {
				return raw, h, fmt.Errorf("%w: too large", errNotHello)
			}
			if len(msg) >= total {
				h.sni, h.hasSNI, err = parseClientHello(msg[4:total])
				return raw, h, err
			}
		}
		// The ClientHello continues in the next record, which must be
		// a handshake record too.
		var next [1]byte
		if _, err := io.ReadFull(r, next[:]); err != nil {
			return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		raw = append(raw, next[0])
		if next[0] != recordTypeHandshake {
			return raw, h, fmt.Errorf("%w: interleaved record", errNotHello)
		}
	}
}

// cursor reads big-endian fields from a byte slice; any read past the end
// marks it failed and returns zero values.
type cursor struct {
	b   []byte
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n > len(c.b) {
		c.bad = true
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) u8() int {
	v := c.take(1)
	if v == nil {
		return 0
	}
	return int(v[0])
}

func (c *cursor) u16() int {
	v := c.take(2)
	if v == nil {
		return 0
	}
	return int(v[0])<<8 | int(v[1])
}

// vec reads a vector with a length prefix of the given size in bytes.
func (c *cursor) vec(lenBytes int) cursor {
	n := c.u8()
	if lenBytes == 2 {
		n = n<<8 | c.u8()
	}
	return cursor{b: c.take(n), bad: c.bad}
}

// parseClientHello parses a ClientHello body and returns its server name.
func parseClientHello(body []byte) (sni string, found bool, err error) {
	c := cursor{b: body}
	c.take(2)  // legacy_version
	c.take(32) // random
	c.vec(1)   // legacy_session_id
	c.vec(2)   // cipher_suites
	c.vec(1)   // legacy_compression_methods
	if c.bad {
		return "", false, fmt.Errorf("%w: truncated", errNotHello)
	}
	if len(c.b) == 0 {
		return "", false, nil // no extensions at all (TLS 1.2 allows it)
	}
	exts := c.vec(2)
	if c.bad || len(c.b) != 0 {
		return "", false, fmt.Errorf("%w: bad extensions block", errNotHello)
	}
	for len(exts.b) > 0 {
		typ := exts.u16()
		data := exts.vec(2)
		if exts.bad {
			return "", false, fmt.Errorf("%w: truncated extension", errNotHello)
		}
		if typ != extServerName {
			continue
		}
		if found {
			return "", false, fmt.Errorf("%w: two server_name extensions", errNotHello)
		}
		found = true
		list := data.vec(2)
		if data.bad || len(data.b) != 0 {
			return "", false, fmt.Errorf("%w: bad server_name", errNotHello)
		}
		for len(list.b) > 0 {
			nameType := list.u8()
			name := list.vec(2)
			if list.bad || name.bad {
				return "", false, fmt.Errorf("%w: bad server_name", errNotHello)
			}
			if nameType != serverNameHostName {
				continue
			}
			if sni != "" {
				return "", false, fmt.Errorf("%w: two host names in server_name", errNotHello)
			}
			sni = string(name.b)
			if !validSNI(sni) {
				return "", false, fmt.Errorf("%w: server_name %q is not a host name", errNotHello, sni)
			}
		}
	}
	return strings.ToLower(sni), found && sni != "", nil
}

// validSNI accepts the characters of an ASCII host name (RFC 6066 forbids
// a trailing dot and IP addresses, but clients differ; the comparison with
// the CONNECT target normalises both).
func validSNI(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}
