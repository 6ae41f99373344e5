package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The ClientHello reader frames the records itself and leaves the parsing
// to crypto/tls. The framing must stay here: the proxy reads exactly the
// records that carry the ClientHello (bounded by maxHelloBytes, and at
// most six bytes when they cannot start one), so that it holds back
// nothing the client sent after them and passes every byte on unchanged.
// The parsing is crypto/tls's server handshake run over those bytes alone
// (helloConn), stopped by GetConfigForClient before it sends anything:
// the parser every Go TLS server applies, tested upstream with random
// messages and BoringSSL's conformance suite, in place of a second one
// written here. Its cost is in the package doc.

const (
	recordTypeChangeCipherSpec = 0x14
	recordTypeAlert            = 0x15
	recordTypeHandshake        = 0x16
	handshakeClientHello       = 0x01
	alertLevelWarning          = 0x01
	maxRecordPayload           = 1 << 14 // RFC 8446 5.1: plaintext fragments
	maxHelloBytes              = 1 << 16 // real ClientHellos are < 2 KiB, < 8 KiB with large key shares
	// maxSkippedRecords bounds the records of skippedRecords read before
	// a ClientHello: crypto/tls skips as many warning alerts
	// (maxUselessRecords); OpenSSL skips more empty records, but no
	// client sends any.
	maxSkippedRecords = 16
)

var errNotHello = errors.New("malformed TLS ClientHello")

// clientHello is what the proxy learns from the client's first bytes.
type clientHello struct {
	isTLS  bool   // the first bytes can start a ClientHello
	sni    string // server_name, lower-cased; "" when absent
	hasSNI bool
}

// readClientHello reads the client's first bytes from r. If they can
// start a ClientHello (a handshake record that is empty or whose first
// byte is a ClientHello's type, or records a server skips before one) it
// reads the whole ClientHello (possibly spread over several records) and
// parses it; otherwise it reads one byte only (up to six when the first
// is the type of a handshake, alert or change_cipher_spec record), so a
// protocol in which the client sends little and waits is not held up.
// It returns every byte it read, for the caller to pass on, and an error
// for a ClientHello that is malformed or too large.
//
// A TLS server acts on nothing before the client's ClientHello, the first
// message of the handshake: a stream whose first handshake message is of
// another type can carry none to any server, and is passed on as another
// protocol's bytes. Taking the record's type alone as TLS refused one in
// 256 streams of other protocols (random bytes start with it as often)
// as malformed ClientHellos. The record's version is no sign: Go's
// servers take any below 0x1000 in the first record. An empty record
// is taken as TLS (OpenSSL skips a few before the ClientHello), and so
// is one cut short.
//
// A stream that starts with a record some TLS server skips before the
// ClientHello (skippedRecords: a warning alert, which crypto/tls skips,
// or an empty change_cipher_spec record, which OpenSSL skips) is TLS
// too: a client could otherwise hide a ClientHello naming another host
// behind one, from the proxy but not from the server. Such records are
// read (and returned, for the caller to pass on with the rest), and must
// be followed by a ClientHello, which is parsed without them. They are
// recognised by the whole record, so another protocol's stream is taken
// for one about once in 2^28, and is read only as far as its bytes keep
// matching. Neither server skips any other record there (application
// data, a heartbeat, another alert: each ends the handshake).
func readClientHello(r io.Reader) (raw []byte, h clientHello, err error) {
	// fill reads from r until raw holds (at least) n bytes.
	fill := func(n int) error {
		k := len(raw)
		if k >= n {
			return nil
		}
		raw = append(raw, make([]byte, n-k)...)
		m, err := io.ReadFull(r, raw[k:])
		raw = raw[:k+m]
		return err
	}
	if err := fill(1); err != nil {
		return nil, h, err
	}
	rs := 0 // where the record being read starts in raw
	switch raw[0] {
	case recordTypeAlert, recordTypeChangeCipherSpec:
		// Read no further than the bytes match a record that servers
		// skip, so that another protocol is not held up.
		for {
			n, ok := matchSkipped(raw)
			if !ok {
				return raw, clientHello{}, nil
			}
			if n > 0 {
				h.isTLS = true
				if rs, err = skipRecords(fill, &raw, n); err != nil {
					return raw, h, err
				}
				break
			}
			if err := fill(len(raw) + 1); err != nil {
				h.isTLS = true
				return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
			}
		}
	case recordTypeHandshake:
		h.isTLS = true
		if err := fill(5); err != nil {
			return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		if raw[3]|raw[4] != 0 {
			if err := fill(6); err != nil {
				return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
			}
			if raw[5] != handshakeClientHello {
				return raw, clientHello{}, nil
			}
		}
	default:
		return raw, h, nil
	}
	var msg []byte // handshake bytes reassembled from the records
	hs := rs       // where they start in raw, after any records skipped
	for {
		if err := fill(rs + 5); err != nil {
			return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		n := int(raw[rs+3])<<8 | int(raw[rs+4])
		if raw[rs+1] != 3 || n == 0 || n > maxRecordPayload || len(raw)+n > maxHelloBytes {
			return raw, h, fmt.Errorf("%w: bad record header", errNotHello)
		}
		if err := fill(rs + 5 + n); err != nil {
			return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		msg = append(msg, raw[rs+5:]...)
		if len(msg) >= 4 { // msg[0] is a ClientHello's type (above)
			total := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			if total > maxHelloBytes {
				return raw, h, fmt.Errorf("%w: too large", errNotHello)
			}
			if len(msg) >= total {
				h.sni, h.hasSNI, err = parseClientHello(raw[hs:])
				return raw, h, err
			}
		}
		// The ClientHello continues in the next record, which must be
		// a handshake record too.
		rs = len(raw)
		if err := fill(rs + 1); err != nil {
			return raw, h, fmt.Errorf("%w: %v", errNotHello, err)
		}
		if raw[rs] != recordTypeHandshake {
			return raw, h, fmt.Errorf("%w: interleaved record", errNotHello)
		}
	}
}

// A skippedRecord is a record some TLS server skips before the
// ClientHello, as a pattern of its bytes: each byte masked must equal the
// value. The record's version is matched as crypto/tls takes it in a
// first record (any below 0x1000; OpenSSL wants 3.x).
type skippedRecord []struct{ mask, val byte }

var skippedRecords = []skippedRecord{
	// A warning alert: crypto/tls skips these (any description, but a
	// close_notify, which ends the handshake when the ClientHello is
	// parsed, so it is taken here too).
	{{0xff, recordTypeAlert}, {0xf0, 0}, {0, 0}, {0xff, 0}, {0xff, 2}, {0xff, alertLevelWarning}, {0, 0}},
	// An empty change_cipher_spec record: OpenSSL skips these, as it
	// does empty handshake records (which start a ClientHello above).
	{{0xff, recordTypeChangeCipherSpec}, {0xf0, 0}, {0, 0}, {0xff, 0}, {0xff, 0}},
}

// matchSkipped reports whether b can start a record of skippedRecords,
// and its length if b holds all of it.
func matchSkipped(b []byte) (n int, ok bool) {
	for _, rec := range skippedRecords {
		if len(b) == 0 || b[0] != rec[0].val {
			continue
		}
		for i, c := range b[:min(len(b), len(rec))] {
			if c&rec[i].mask != rec[i].val {
				return 0, false
			}
		}
		if len(b) >= len(rec) {
			return len(rec), true
		}
		return 0, true
	}
	return 0, false
}

// skipRecords is readClientHello's after a first record of
// skippedRecords, of n bytes, in raw: it reads any more (up to
// maxSkippedRecords in all) and the header and first byte of the
// handshake record that must follow, and returns where that record
// starts. Anything else is a malformed ClientHello.
func skipRecords(fill func(int) error, raw *[]byte, n int) (int, error) {
	rs := n
	for k := 1; ; k++ {
		if err := fill(rs + 1); err != nil {
			return rs, fmt.Errorf("%w: %v", errNotHello, err)
		}
		if _, ok := matchSkipped((*raw)[rs : rs+1]); !ok {
			break
		}
		if k == maxSkippedRecords {
			return rs, fmt.Errorf("%w: more than %d records before the ClientHello", errNotHello, maxSkippedRecords)
		}
		// Read up to the length the record's type implies, and no
		// further than its bytes match.
		for {
			n, ok := matchSkipped((*raw)[rs:])
			if !ok {
				return rs, fmt.Errorf("%w: bad record before the ClientHello", errNotHello)
			}
			if n > 0 {
				rs += n
				break
			}
			if err := fill(len(*raw) + 1); err != nil {
				return rs, fmt.Errorf("%w: %v", errNotHello, err)
			}
		}
	}
	if err := fill(rs + 6); err != nil {
		return rs, fmt.Errorf("%w: %v", errNotHello, err)
	}
	r := (*raw)[rs:]
	if r[0] != recordTypeHandshake || r[3]|r[4] == 0 || r[5] != handshakeClientHello {
		return rs, fmt.Errorf("%w: no ClientHello after the records a server skips", errNotHello)
	}
	return rs, nil
}

// helloConn is the connection crypto/tls's server handshake runs over to
// parse a ClientHello: reads return the records already read from the
// client, then EOF; writes (the alert the aborted handshake sends) fail,
// so nothing reaches the client. GetConfigForClient, called once the
// ClientHello is parsed and before anything is sent, records the server
// name here and stops the handshake.
type helloConn struct {
	r   bytes.Reader
	sni string
}

var errHelloParsed = errors.New("ClientHello parsed")

// helloConfig is shared by every parse: its one callback keeps its state
// in the helloConn, which crypto/tls passes back as ClientHelloInfo.Conn.
var helloConfig = &tls.Config{
	GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		chi.Conn.(*helloConn).sni = chi.ServerName
		return nil, errHelloParsed
	},
}

func (c *helloConn) Read(b []byte) (int, error)       { return c.r.Read(b) }
func (c *helloConn) Write([]byte) (int, error)        { return 0, net.ErrClosed }
func (c *helloConn) Close() error                     { return nil }
func (c *helloConn) LocalAddr() net.Addr              { return nil }
func (c *helloConn) RemoteAddr() net.Addr             { return nil }
func (c *helloConn) SetDeadline(time.Time) error      { return nil }
func (c *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c *helloConn) SetWriteDeadline(time.Time) error { return nil }

// parseClientHello parses records, which hold exactly one ClientHello,
// with crypto/tls's server and returns its server name.
func parseClientHello(records []byte) (sni string, found bool, err error) {
	c := &helloConn{}
	c.r.Reset(records)
	err = tls.Server(c, helloConfig).Handshake()
	if !errors.Is(err, errHelloParsed) {
		return "", false, fmt.Errorf("%w: %v", errNotHello, err)
	}
	if c.sni == "" {
		return "", false, nil
	}
	if !validSNI(c.sni) {
		return "", false, fmt.Errorf("%w: server_name %q is not a host name", errNotHello, c.sni)
	}
	return strings.ToLower(c.sni), true, nil
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
