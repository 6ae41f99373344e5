package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The benchmarks compare the proxy with a direct connection on loopback,
// the way the sandbox uses it: the client reaches the proxy through a unix
// socket. Run with
//
//	CGO_ENABLED=0 go test -run XXX -bench Egress -benchtime 3x ./egress
//
// and read the ratio and added-us/conn metrics.

const benchDownload = 1 << 30

// benchProxy starts a proxy on a unix socket that allows bench.test
// (resolving to 127.0.0.1) and returns the socket's path.
func benchProxy(b *testing.B) string {
	b.Helper()
	sock := filepath.Join(b.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{
		Rules: mustRules(b, []string{"bench.test"}, nil, []string{"127.0.0.0/8"}),
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
	}
	go p.Serve(l)
	b.Cleanup(func() { p.Close() })
	return sock
}

// sourceServer sends size bytes to every connection after reading one
// byte, then closes it.
func sourceServer(b *testing.B, size int64) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	chunk := make([]byte, 1<<20)
	serveEach(l, func(c net.Conn) {
		var one [1]byte
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return
		}
		for left := size; left > 0; {
			n := min(left, int64(len(chunk)))
			if _, err := c.Write(chunk[:n]); err != nil {
				return
			}
			left -= n
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// viaProxy opens a CONNECT tunnel to bench.test:port through the socket.
func viaProxy(b *testing.B, sock string, port int) net.Conn {
	c, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT bench.test:%d HTTP/1.1\r\nHost: bench.test:%d\r\n\r\n", port, port)
	// Read the reply byte by byte, so no byte of the tunnel is buffered.
	var reply []byte
	var one [1]byte
	for !endsHeader(reply) {
		if _, err := c.Read(one[:]); err != nil {
			b.Fatalf("CONNECT reply: %v", err)
		}
		reply = append(reply, one[0])
	}
	if string(reply[:12]) != "HTTP/1.1 200" {
		b.Fatalf("CONNECT reply %q", reply)
	}
	return c
}

func endsHeader(b []byte) bool {
	return len(b) >= 4 && string(b[len(b)-4:]) == "\r\n\r\n"
}

func download(b *testing.B, c net.Conn, buf []byte) int64 {
	defer c.Close()
	if _, err := c.Write([]byte{'x'}); err != nil {
		b.Fatal(err)
	}
	var total int64
	for {
		n, err := c.Read(buf)
		total += int64(n)
		if err != nil {
			return total
		}
	}
}

// BenchmarkEgressThroughput downloads 1 GiB from a loopback server,
// directly and through a CONNECT tunnel, and through a forwarded plain
// HTTP request; the goal is a ratio of at least 0.8.
func BenchmarkEgressThroughput(b *testing.B) {
	sock := benchProxy(b)
	port := sourceServer(b, benchDownload)
	buf := make([]byte, 256<<10)
	var direct, tunnel time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			b.Fatal(err)
		}
		if n := download(b, c, buf); n != benchDownload {
			b.Fatalf("direct: %d bytes", n)
		}
		t1 := time.Now()
		if n := download(b, viaProxy(b, sock, port), buf); n != benchDownload {
			b.Fatalf("proxy: %d bytes", n)
		}
		direct += t1.Sub(t0)
		tunnel += time.Since(t1)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * benchDownload / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(direct), "direct-MB/s")
	b.ReportMetric(mbps(tunnel), "connect-MB/s")
	b.ReportMetric(mbps(tunnel)/mbps(direct), "connect-ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkEgressForwardThroughput is the same for a forwarded plain-HTTP
// GET, whose body passes through net/http's response writer.
func BenchmarkEgressForwardThroughput(b *testing.B) {
	sock := benchProxy(b)
	chunk := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(benchDownload))
		for left := benchDownload; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	buf := make([]byte, 256<<10)
	get := func(c net.Conn, target string) {
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: bench.test:%d\r\nConnection: close\r\n\r\n", target, port)
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 64<<10), nil)
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for {
			k, err := resp.Body.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		if n != benchDownload {
			b.Fatalf("%d bytes", n)
		}
	}
	var direct, fwd time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		get(c, "/")
		t1 := time.Now()
		pc, err := net.Dial("unix", sock)
		if err != nil {
			b.Fatal(err)
		}
		get(pc, fmt.Sprintf("http://bench.test:%d/", port))
		direct += t1.Sub(t0)
		fwd += time.Since(t1)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * benchDownload / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(direct), "direct-MB/s")
	b.ReportMetric(mbps(fwd), "forward-MB/s")
	b.ReportMetric(mbps(fwd)/mbps(direct), "forward-ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkEgressLatency opens a new connection, sends a byte and reads
// a byte, directly and through a CONNECT tunnel; it reports the medians
// and the latency the proxy adds per connection (goal: at most 1 ms).
func BenchmarkEgressLatency(b *testing.B) {
	sock := benchProxy(b)
	port := sourceServer(b, 1)
	buf := make([]byte, 16)
	var direct, proxied []time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			b.Fatal(err)
		}
		download(b, c, buf)
		t1 := time.Now()
		download(b, viaProxy(b, sock, port), buf)
		direct = append(direct, t1.Sub(t0))
		proxied = append(proxied, time.Since(t1))
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / 1e3
	}
	b.ReportMetric(median(direct), "direct-us/conn")
	b.ReportMetric(median(proxied), "proxy-us/conn")
	b.ReportMetric(median(proxied)-median(direct), "added-us/conn")
}

// BenchmarkClientHello is the cost of reading and parsing one ClientHello
// (crypto/tls's own first flight, about 1.8 KiB with its post-quantum key
// share) from memory, with and without a server name, and split over two
// records. Run with
//
//	CGO_ENABLED=0 go test -run '^$' -bench ClientHello -benchmem ./egress
func BenchmarkClientHello(b *testing.B) {
	h := captureClientHello(b, "allowed.test")
	n := len(h) - 7
	split := slices.Concat(h[:3], []byte{0, 2}, h[5:7], h[:3], []byte{byte(n >> 8), byte(n)}, h[7:])
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"sni", h},
		{"no-sni", captureClientHello(b, "")},
		{"split", split},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := readClientHello(bytes.NewReader(c.in)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEgressInterceptedThroughput downloads a 256 MiB body over
// HTTPS from a loopback server, through a CONNECT tunnel to a host
// without a secret (relayed as it is) and to a secret's host (the proxy
// terminates TLS on both sides and relays the response, its body
// scrubbed of secrets' values); the body is random bytes (an archive, an
// image) or text (JSON, logs: the first byte of the value is frequent,
// the search slower). Run with
//
//	CGO_ENABLED=0 go test -run '^$' -bench InterceptedThroughput -benchtime 5x ./egress
func BenchmarkEgressInterceptedThroughput(b *testing.B) {
	const size = 256 << 20
	random := randomBytes(1 << 20)
	text := bytes.Repeat([]byte("0123456789abcdef ordinary download bytes\n"), 1<<20/41)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := random
		if r.URL.Path == "/text" {
			chunk = text
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for left := size; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	srv.StartTLS()
	b.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	secs, err := NewSecrets([]Secret{{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: "real-token-1",
		Hosts: []string{"allowed.test"}, Header: "Authorization: Bearer {value}"}}, testRoots())
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	p := &Proxy{
		Rules: mustRules(b, []string{"allowed.test", "other.test"}, nil, []string{"127.0.0.0/8"}),
		Resolver: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		Secrets: secs,
	}
	go p.Serve(l)
	b.Cleanup(func() { p.Close() })
	roots := testRoots()
	roots.AppendCertsFromPEM(secs.CACertPEM())
	c := &http.Client{Transport: &http.Transport{
		Proxy:           func(*http.Request) (*url.URL, error) { return url.Parse("http://" + l.Addr().String()) },
		TLSClientConfig: &tls.Config{RootCAs: roots}, DisableCompression: true,
	}}
	buf := make([]byte, 256<<10)
	for _, kind := range []string{"binary", "text"} {
		for _, host := range []string{"other.test", "allowed.test"} {
			name := kind + "/tunnel"
			if host == "allowed.test" {
				name = kind + "/intercepted"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(size)
				cpu0 := cpuTime()
				for b.Loop() {
					resp, err := c.Get(fmt.Sprintf("https://%s:%d/%s", host, port, kind))
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
					resp.Body.Close()
					if err != nil || n != size {
						b.Fatalf("%d bytes, %v", n, err)
					}
				}
				// The CPU time of the whole process (server, proxy and
				// client) per MB: steadier than the wall time on a
				// busy machine.
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/(size/1e6), "cpu-ns/MB")
			})
		}
	}
}

// BenchmarkBodyScrubber is the cost of the scrubbing alone: a 16 MiB body
// in memory read through it (and, as the baseline, read as it is), in
// 32 KiB reads as net/http's response writer makes them: random bytes,
// and text with no value in it and with one every 64 KiB; two secrets.
//
//	CGO_ENABLED=0 go test -run '^$' -bench BodyScrubber -benchmem ./egress
func BenchmarkBodyScrubber(b *testing.B) {
	secs, err := NewSecrets([]Secret{
		{Name: "TOKEN", Placeholder: NewPlaceholder("TOKEN"), Value: "real-token-1", Hosts: []string{"allowed.test"}},
		{Name: "KEY", Placeholder: NewPlaceholder("KEY"), Value: "sk-0123456789abcdef0123456789abcdef", Hosts: []string{"other.test"}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	clean := bytes.Repeat([]byte("0123456789abcdef ordinary download bytes\n"), 16<<20/41)
	values := slices.Clone(clean)
	for i := 1000; i+12 < len(values); i += 64 << 10 {
		copy(values[i:], "real-token-1")
	}
	random := randomBytes(16 << 20)
	buf := make([]byte, 32<<10)
	for _, c := range []struct {
		name  string
		body  []byte
		scrub bool
	}{{"copy", clean, false}, {"scrub-binary", random, true}, {"scrub-text", clean, true}, {"scrub-text-values", values, true}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				var r io.Reader = bytes.NewReader(c.body)
				var s *bodyScrubber
				if c.scrub {
					s = secs.newBodyScrubber(struct{ io.Reader }{r}, io.NopCloser(nil))
					r = s
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
					b.Fatal(err)
				}
				if s != nil {
					s.Close()
				}
			}
		})
	}
}

// randomBytes is n bytes of a fixed pseudo-random sequence.
func randomBytes(n int) []byte {
	b := make([]byte, 0, n+8)
	r := rand.New(rand.NewPCG(1, 2))
	for len(b) < n {
		b = binary.LittleEndian.AppendUint64(b, r.Uint64())
	}
	return b[:n]
}
