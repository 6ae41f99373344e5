// Command egressbench is the loopback server and the connection-latency
// client of bench/egress.sh.
//
//	egressbench serve [-tls] [-cert FILE] [-addr IP]
//	    listens on IP:0 (plain HTTP; IP is 127.0.0.1 unless -addr says
//	    otherwise) and, with -tls, on a second IP:0 port with a self-signed
//	    certificate made at start-up (for IP, and for the name localhost
//	    when IP is a loopback address), written to FILE in PEM with -cert
//	    (a file of roots that trusts the server); prints "PORT" or
//	    "PORT TLSPORT" on one line, then serves until killed:
//	      /1g     1 GiB (2^30 bytes, Content-Length set) written from one
//	              reusable in-memory buffer
//	      /small  a 3-byte body
//	      /auth   the request's Authorization header, as the body
//	egressbench relay HOST:PORT
//	    a bare TCP relay, the reference for what one extra user-space hop
//	    costs on this machine: listens on 127.0.0.1:0, prints the port,
//	    and relays every connection to HOST:PORT with io.Copy both ways
//	    (splice(2) between the two sockets), no parsing, no checks.
//	egressbench conns [-n N] [-warmup W] [-raw] [-proxy ADDR | -proxy env] [-connect] [-insecure] URL
//	    makes W untimed, then N timed requests for URL (http:// or
//	    https://HOST:PORT/PATH),
//	    each on a new TCP connection that is closed afterwards, one after
//	    the other, and prints "MEDIAN P90 MEAN MIN" in ms, as bench/timeit
//	    does (with -raw: each request's time on a line of its own, to be
//	    pooled over several runs with timeit -stats). A request is timed from just before the connect to the last
//	    byte of its body. Without -proxy it connects to the server itself;
//	    with -proxy it connects to the HTTP proxy at ADDR (host:port, or
//	    "env": $HTTP_PROXY or $http_proxy, whose user:password, if any,
//	    is sent as Proxy-Authorization: Basic) and sends an
//	    absolute-URI request, or with -connect first a CONNECT to the
//	    server and then an ordinary request through the tunnel. An https
//	    URL is a TLS connection (a full handshake each time, no session
//	    resumption), through the proxy with -connect only; -insecure skips
//	    the verification of the server's certificate. A HOST that is a name
//	    is resolved once, before the first request, and each connection goes
//	    to its first address (or to the proxy, which is given the name); the
//	    name is what CONNECT, Host and SNI say. The first connection to the
//	    proxy is retried for up to 5 s (a sandbox's in-namespace listener may
//	    come up after the command starts).
//
// Everything is plain net and net/http; the client writes its requests by
// hand so that nothing but the connection and one request is measured
// (no keep-alive, no proxy discovery, no DNS while timing).
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moatbox/moat/bench/internal/stats"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "relay":
		err = relay(os.Args[2:])
	case "conns":
		err = conns(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "egressbench:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: egressbench serve [-tls] [-addr IP]\n       egressbench relay HOST:PORT\n       egressbench conns [-n N] [-warmup W] [-raw] [-proxy ADDR|env] [-connect] URL")
	os.Exit(2)
}

// --- server -------------------------------------------------------------------

const bigSize = 1 << 30

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	withTLS := fs.Bool("tls", false, "also serve HTTPS on a second port")
	certOut := fs.String("cert", "", "write the HTTPS server's certificate (PEM) to `file`")
	addrFlag := fs.String("addr", "127.0.0.1", "the IPv4 `address` to listen on (one address: never all of them)")
	fs.Parse(args)
	if fs.NArg() != 0 {
		usage()
	}
	addr, err := netip.ParseAddr(*addrFlag)
	if err != nil || !addr.Is4() || addr.IsUnspecified() {
		return fmt.Errorf("-addr %q: want one IPv4 address, not 0.0.0.0", *addrFlag)
	}

	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/1g", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(bigSize))
		for left := bigSize; left > 0; {
			n := min(left, len(buf))
			if _, err := w.Write(buf[:n]); err != nil {
				return
			}
			left -= n
		}
	})
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, r.Header.Get("Authorization"))
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "3")
		io.WriteString(w, "ok\n")
	})

	l, err := listenOn(addr)
	if err != nil {
		return err
	}
	ports := []string{port(l)}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(l) }()

	if *withTLS {
		cert, err := selfSigned(addr)
		if err != nil {
			return err
		}
		if *certOut != "" {
			pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
			if err := os.WriteFile(*certOut, pemCert, 0o644); err != nil {
				return err
			}
		}
		tl, err := listenOn(addr)
		if err != nil {
			return err
		}
		ports = append(ports, port(tl))
		tsrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}}
		go func() { errc <- tsrv.ServeTLS(tl, "", "") }()
	}
	fmt.Println(strings.Join(ports, " "))
	return <-errc
}

// listen opens a plain-TCP listener on 127.0.0.1:0.
func listen() (net.Listener, error) {
	return listenOn(netip.AddrFrom4([4]byte{127, 0, 0, 1}))
}

// listenOn opens a plain-TCP listener on addr, port 0: Go's listeners are
// MPTCP by default, and the clients here speak plain TCP.
func listenOn(addr netip.Addr) (net.Listener, error) {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	return lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(addr, 0).String())
}

func port(l net.Listener) string {
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func selfSigned(addr netip.Addr) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "egressbench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{addr.AsSlice()},
	}
	if addr.IsLoopback() {
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// --- relay --------------------------------------------------------------------

func relay(args []string) error {
	if len(args) != 1 {
		usage()
	}
	target := args[0]
	l, err := listen()
	if err != nil {
		return err
	}
	fmt.Println(port(l))
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(up, c)
				up.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			io.Copy(c, up)
			c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// --- client -------------------------------------------------------------------

func conns(args []string) error {
	fs := flag.NewFlagSet("conns", flag.ExitOnError)
	n := fs.Int("n", 200, "timed requests")
	warmup := fs.Int("warmup", 10, "untimed requests first")
	proxy := fs.String("proxy", "", "HTTP proxy `host:port`, or \"env\" for $HTTP_PROXY")
	connect := fs.Bool("connect", false, "tunnel through the proxy with CONNECT")
	insecure := fs.Bool("insecure", false, "https: do not verify the server's certificate")
	raw := fs.Bool("raw", false, "print each request's time (ms) instead of the summary")
	fs.Parse(args)
	if fs.NArg() != 1 || *n < 1 || *warmup < 0 {
		usage()
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
		return fmt.Errorf("%q: want http:// or https://HOST:PORT/PATH", fs.Arg(0))
	}
	if *connect && *proxy == "" {
		return errors.New("-connect needs -proxy")
	}
	if u.Scheme == "https" && *proxy != "" && !*connect {
		return errors.New("https through a proxy needs -connect")
	}
	pa, auth := *proxy, ""
	if pa == "env" {
		pa, auth, err = proxyFromEnv()
		if err != nil {
			return err
		}
	}
	c := &client{target: u, proxy: pa, auth: auth, connect: *connect, dial: u.Host}
	if u.Scheme == "https" {
		c.tls = &tls.Config{ServerName: u.Hostname(), InsecureSkipVerify: *insecure, NextProtos: []string{"http/1.1"}}
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil && pa == "" {
		ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip4", u.Hostname())
		if err != nil || len(ips) == 0 {
			return fmt.Errorf("%s: %v", u.Hostname(), err)
		}
		c.dial = net.JoinHostPort(ips[0].String(), u.Port())
	}

	// The first request may meet a proxy listener that is not up yet.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := c.once()
		if err == nil {
			break
		}
		if pa == "" || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 1; i < *warmup; i++ {
		if _, err := c.once(); err != nil {
			return err
		}
	}
	d := make([]float64, 0, *n)
	for i := 0; i < *n; i++ {
		t, err := c.once()
		if err != nil {
			return fmt.Errorf("request %d: %w", i+1, err)
		}
		d = append(d, float64(t.Nanoseconds())/1e6)
	}
	if *raw {
		for _, v := range d {
			fmt.Printf("%.4f\n", v)
		}
		return nil
	}
	fmt.Println(stats.Summary(d))
	return nil
}

// proxyFromEnv returns the proxy's host:port and the Proxy-Authorization
// header line ("" without credentials) from $HTTP_PROXY or $http_proxy.
func proxyFromEnv() (addr, auth string, err error) {
	for _, name := range []string{"HTTP_PROXY", "http_proxy"} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		if !strings.Contains(v, "://") {
			v = "http://" + v
		}
		pu, perr := url.Parse(v)
		if perr != nil || pu.Host == "" {
			return "", "", fmt.Errorf("$%s: not a proxy URL", name)
		}
		addr = pu.Host
		if pu.Port() == "" {
			addr = net.JoinHostPort(pu.Hostname(), "80")
		}
		if pu.User != nil {
			pw, _ := pu.User.Password()
			auth = "Proxy-Authorization: Basic " +
				base64.StdEncoding.EncodeToString([]byte(pu.User.Username()+":"+pw)) + "\r\n"
		}
		return addr, auth, nil
	}
	return "", "", errors.New("-proxy env: neither $HTTP_PROXY nor $http_proxy is set")
}

type client struct {
	target  *url.URL
	proxy   string
	auth    string // Proxy-Authorization header line, or ""
	connect bool
	dial    string      // IP:PORT of the server, without a proxy
	tls     *tls.Config // for an https URL
}

// once makes one request on a new connection and returns its time.
func (c *client) once() (time.Duration, error) {
	addr := c.dial
	if c.proxy != "" {
		addr = c.proxy
	}
	start := time.Now()
	var conn net.Conn
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer func() { conn.Close() }()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	target, auth := c.target.RequestURI(), ""
	if c.proxy != "" && !c.connect {
		target, auth = c.target.String(), c.auth
	}
	if c.connect {
		if _, err := fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", c.target.Host, c.target.Host, c.auth); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			return 0, fmt.Errorf("CONNECT: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("CONNECT: %s", resp.Status)
		}
	}
	if c.tls != nil {
		if br.Buffered() > 0 {
			return 0, errors.New("bytes from the server before the TLS handshake")
		}
		tc := tls.Client(conn, c.tls)
		if err := tc.Handshake(); err != nil {
			return 0, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
		br = bufio.NewReader(conn)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: egressbench\r\n%sConnection: close\r\n\r\n", target, c.target.Host, auth); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	el := time.Since(start)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s (%s)", c.target, resp.Status, resp.Header.Get("X-Moat-Denied"))
	}
	return el, nil
}
