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
	recordTypeHandshake  = 0x16
	handshakeClientHello = 0x01
	maxRecordPayload     = 1 << 14 // RFC 8446 5.1: plaintext fragments
	maxHelloBytes        = 1 << 16 // real ClientHellos are < 2 KiB, < 8 KiB with large key shares
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
// byte is a ClientHello's type) it reads the whole ClientHello (possibly
// spread over several records) and parses it; otherwise it reads one byte
// only (six when the first is a handshake record's type), so a protocol
// in which the client sends little and waits is not held up. It returns
// every byte it read, for the caller to pass on, and an error for a
// ClientHello that is malformed or too large.
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
	if raw[0] != recordTypeHandshake {
		return raw, h, nil
	}
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
	var msg []byte // handshake bytes reassembled from the records
	rs := 0        // where the record being read starts in raw
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
				h.sni, h.hasSNI, err = parseClientHello(raw)
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
