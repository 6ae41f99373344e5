package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// scrubRef is the body scrubber's specification: from the left, the
// longest value that starts at a byte becomes its placeholder.
func scrubRef(data []byte, vals, phs [][]byte) []byte {
	var out []byte
	for i := 0; i < len(data); {
		k := -1
		for j, v := range vals {
			if bytes.HasPrefix(data[i:], v) && (k < 0 || len(v) > len(vals[k])) {
				k = j
			}
		}
		if k < 0 {
			out = append(out, data[i])
			i++
			continue
		}
		out = append(out, phs[k]...)
		i += len(vals[k])
	}
	return out
}

// pieces hands out data in reads of the given sizes, in turn, and then
// end (io.EOF, or another error), with the last bytes.
type pieces struct {
	data  []byte
	sizes []int
	i     int
	end   error
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, p.end
	}
	n := min(p.sizes[p.i%len(p.sizes)], len(b), len(p.data))
	p.i++
	copy(b, p.data[:n])
	p.data = p.data[n:]
	if len(p.data) == 0 {
		return n, p.end
	}
	return n, nil
}

func scrubSecrets(t testing.TB, values ...string) *Secrets {
	t.Helper()
	var list []Secret
	for i, v := range values {
		name := fmt.Sprintf("S%d", i)
		list = append(list, Secret{Name: name, Placeholder: NewPlaceholder(name), Value: v, Hosts: []string{"allowed.test"}})
	}
	secs, err := NewSecrets(list, nil)
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

// readAllSmall reads r to its end into reads of at most size bytes.
func readAllSmall(r io.Reader, size int) ([]byte, error) {
	var out []byte
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestBodyScrubberSplits: a value is found wherever the reads of the body
// split it (reads of 1 to 7 bytes, a value at every offset of a 64 KiB
// buffer's end, values that overlap, share a start or follow one
// another), read by the client in large and tiny pieces; the output is
// scrubRef's. The control: a body without a value comes out identical.
func TestBodyScrubberSplits(t *testing.T) {
	secs := scrubSecrets(t, "tok-abc", "tok-abcdef", "xyzxyz", "q")
	vals, phs := secs.pats.Load().vals, secs.pats.Load().phs
	var bodies [][]byte
	for _, s := range []string{
		"", "q", "tok-abc", "tok-abcdef", "tok-abcde", "tok-tok-abc", "tok-abcdeftok-abc", "xyzxyzxyz", "xyxyzxyzz",
		"before tok-abcdef middle tok-abc after q end", "tok-ab", "no value here at all",
		strings.Repeat("tok-abc", 50), strings.Repeat("x", 100) + "tok-abcde" + "f",
	} {
		bodies = append(bodies, []byte(s))
	}
	// Values across the scrubber's buffer's end, at every offset.
	for off := scrubBufSize - 12; off <= scrubBufSize+2; off++ {
		b := bytes.Repeat([]byte{'.'}, scrubBufSize+64)
		copy(b[off:], "tok-abcdef")
		bodies = append(bodies, b)
	}
	for _, body := range bodies {
		want := scrubRef(body, vals, phs)
		for _, sizes := range [][]int{{1}, {2}, {3, 1, 7}, {5}, {1 << 20}} {
			for _, readSize := range []int{1, 3, 32 << 10} {
				src := &pieces{data: body, sizes: sizes, end: io.EOF}
				b := secs.newBodyScrubber(src, io.NopCloser(nil))
				got, err := readAllSmall(b, readSize)
				b.Close()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("body %.60q in reads of %v, read %d at a time: %.80q %v, want %.80q", body, sizes, readSize, got, err, want)
				}
			}
		}
	}
	// Random bodies thick with values and their prefixes.
	r := rand.New(rand.NewPCG(1, 2))
	parts := []string{"tok-abc", "tok-abcdef", "tok-", "xyz", "xyzxyz", "q", "-", "ab", "def"}
	for range 300 {
		var body []byte
		for range r.IntN(200) {
			body = append(body, parts[r.IntN(len(parts))]...)
		}
		sizes := []int{1 + r.IntN(9), 1 + r.IntN(3), 1 + r.IntN(40)}
		b := secs.newBodyScrubber(&pieces{data: body, sizes: sizes, end: io.EOF}, io.NopCloser(nil))
		got, err := readAllSmall(b, 1+r.IntN(20))
		if want := scrubRef(body, vals, phs); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("body %q in reads of %v: %q %v, want %q", body, sizes, got, err, want)
		}
	}
}

// TestBodyScrubberHoldsBackOnError: a body that ends in an error (a reset
// connection, a truncated gzip stream) does not hand out the bytes held
// back at its end, which could be the start of a value; the same body
// ending well does (the control).
func TestBodyScrubberHoldsBackOnError(t *testing.T) {
	secs := scrubSecrets(t, "secret-value")
	for _, end := range []error{io.ErrUnexpectedEOF, io.EOF} {
		b := secs.newBodyScrubber(&pieces{data: []byte("some data secret-va"), sizes: []int{4}, end: end}, io.NopCloser(nil))
		got, err := readAllSmall(b, 100)
		if end == io.EOF {
			if err != nil || string(got) != "some data secret-va" {
				t.Errorf("ending with EOF: %q %v, want the whole body", got, err)
			}
		} else if !errors.Is(err, end) || bytes.Contains(got, []byte("secret-")) {
			t.Errorf("ending with %v: %q %v, want the error and no start of the value", end, got, err)
		}
	}
}

// FuzzBodyScrubber checks the scrubber against scrubRef on arbitrary
// bodies, values and read sizes.
func FuzzBodyScrubber(f *testing.F) {
	f.Add([]byte("a tok-abc b"), "tok-abc", "bc", uint8(1), uint8(3))
	f.Add([]byte("aaaaab"), "aab", "ab", uint8(2), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, v1, v2 string, size, readSize uint8) {
		if v1 == "" || v2 == "" || strings.Contains(v1, PlaceholderPrefix) || strings.Contains(v2, PlaceholderPrefix) {
			return
		}
		secs, err := NewSecrets([]Secret{
			{Name: "A", Placeholder: NewPlaceholder("A"), Value: v1, Hosts: []string{"allowed.test"}},
			{Name: "B", Placeholder: NewPlaceholder("B"), Value: v2, Hosts: []string{"allowed.test"}},
		}, nil)
		if err != nil {
			return
		}
		b := secs.newBodyScrubber(&pieces{data: body, sizes: []int{int(size%16) + 1, 1}, end: io.EOF}, io.NopCloser(nil))
		got, err := readAllSmall(b, int(readSize%32)+1)
		if want := scrubRef(body, secs.pats.Load().vals, secs.pats.Load().phs); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%q: %q %v, want %q", body, got, err, want)
		}
	})
}

func TestAcceptEncoding(t *testing.T) {
	for in, want := range map[string]string{
		"": "identity", "gzip": "gzip", "br, gzip;q=0.5": "gzip", "gzip, deflate, br, zstd": "gzip", "br": "identity",
		"gzip;q=0": "identity", "GZIP ; Q=0.000": "identity", "*": "gzip", "x-gzip": "gzip", "identity": "identity", "deflate": "identity",
	} {
		var vs []string
		if in != "" {
			vs = []string{in}
		}
		if got := acceptEncoding(vs); got != want {
			t.Errorf("Accept-Encoding %q: %q, want %q", in, got, want)
		}
	}
}

// bodyServer is an HTTPS destination (certificate from testCert) whose
// answers under /api carry the Authorization header it got in their
// bodies, in the ways that test the proxy's scrubbing; it keeps each
// request's Authorization and Accept-Encoding.
type bodyServer struct {
	port  int
	large []byte // /api/large's body, with "{auth}" where the header goes
	mu    sync.Mutex
	auth  []string
	enc   []string
}

func (s *bodyServer) lastAuth() (auth, enc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.auth) == 0 {
		return "", ""
	}
	return s.auth[len(s.auth)-1], s.enc[len(s.enc)-1]
}

func newBodyServer(t *testing.T) *bodyServer {
	t.Helper()
	bs := &bodyServer{}
	// Several MiB of text, with the header at offsets around the
	// proxy's and TLS's buffer sizes, back to back, and after a
	// prefix of itself.
	r := rand.New(rand.NewPCG(3, 4))
	bs.large = make([]byte, 6<<20)
	for i := range bs.large {
		bs.large[i] = "abcdefghijklmnopqrstuvwxyz \n"[r.IntN(28)]
	}
	var out []byte
	last := 0
	for _, off := range []int{0, 100, 16<<10 - 7, 1<<16 - 1, 1<<16 + 3, 3<<16 - 20, 1 << 20, 5<<20 + 12345, len(bs.large) - 1} {
		out = append(out, bs.large[last:off]...)
		out = append(out, "{auth}{auth}Bearer real-{auth}"...)
		last = off
	}
	bs.large = append(out, bs.large[last:]...)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		bs.mu.Lock()
		bs.auth = append(bs.auth, auth)
		bs.enc = append(bs.enc, r.Header.Get("Accept-Encoding"))
		bs.mu.Unlock()
		echo := "auth=" + auth + "\n"
		switch r.URL.Path {
		case "/api/echo": // with Content-Length
			w.Header().Set("Content-Length", strconv.Itoa(len(echo)))
			io.WriteString(w, echo)
		case "/api/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, echo)
			zw.Close()
		case "/api/drip": // chunked, the value a byte at a time
			f := w.(http.Flusher)
			for _, c := range []byte(echo) {
				w.Write([]byte{c})
				f.Flush()
				time.Sleep(time.Millisecond)
			}
		case "/api/large":
			body := bytes.ReplaceAll(bs.large, []byte("{auth}"), []byte(auth))
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		case "/api/br":
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "\x1b\x02\x00"+echo)
		case "/api/notgzip":
			w.Header().Set("Content-Encoding", "gzip")
			io.WriteString(w, echo)
		default: // no value in the body, whatever the request had
			if ce := r.URL.Query().Get("ce"); ce != "" {
				w.Header().Set("Content-Encoding", ce)
			}
			io.WriteString(w, "nothing secret\x00\xff here\n")
		}
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	t.Cleanup(s.Close)
	bs.port = s.Listener.Addr().(*net.TCPAddr).Port
	return bs
}

// TestSecretBodyScrubbed: a server that echoes the Authorization header
// in its response bodies hands the command the placeholder, not the
// value: in a plain body with a Content-Length (the length changes, and
// the body is sent chunked), in a gzip body (decoded), in a chunked body
// that sends the value a byte at a time, and in several MiB with the
// value scattered (the proxy's output is the body with every value
// replaced). The controls: the server got the value each time, and a body
// without it passes byte for byte.
func TestSecretBodyScrubbed(t *testing.T) {
	bs := newBodyServer(t)
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	c.Transport.(*http.Transport).DisableCompression = true // the test sets Accept-Encoding itself
	tok := secs.list[0].Placeholder
	get := func(path, acceptEncoding string, auth bool) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://allowed.test:%d%s", bs.port, path), nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: reading the body: %v", path, err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, b)
		}
		return resp, b
	}
	sawValue := func(path string) string {
		t.Helper()
		auth, enc := bs.lastAuth()
		if auth != "Bearer real-token-1" {
			t.Errorf("GET %s: the server got Authorization %q, want the value", path, auth)
		}
		return enc
	}

	resp, body := get("/api/echo", "", true)
	if string(body) != "auth=Bearer "+tok+"\n" || resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 {
		t.Errorf("/api/echo: %q (length %d, %v), want the placeholder, chunked", body, resp.ContentLength, resp.TransferEncoding)
	}
	if enc := sawValue("/api/echo"); enc != "identity" {
		t.Errorf("/api/echo: the server was asked for %q, want identity", enc)
	}

	for ae, want := range map[string]string{"gzip": "gzip", "br, gzip": "gzip", "br": "identity"} {
		resp, body = get("/api/gzip", ae, true)
		if string(body) != "auth=Bearer "+tok+"\n" || resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("/api/gzip with Accept-Encoding %q: %q (Content-Encoding %q), want it decoded with the placeholder", ae, body, resp.Header.Get("Content-Encoding"))
		}
		if enc := sawValue("/api/gzip"); enc != want {
			t.Errorf("/api/gzip with Accept-Encoding %q: the server was asked for %q, want %q", ae, enc, want)
		}
	}

	if _, body = get("/api/drip", "", true); string(body) != "auth=Bearer "+tok+"\n" {
		t.Errorf("/api/drip: %q, want the placeholder", body)
	}
	sawValue("/api/drip")

	_, body = get("/api/large", "", true)
	want := bytes.ReplaceAll(bs.large, []byte("{auth}"), []byte("Bearer "+tok))
	if !bytes.Equal(body, want) || bytes.Contains(body, []byte("real-token-1")) {
		i := 0
		for i < min(len(body), len(want)) && body[i] == want[i] {
			i++
		}
		t.Errorf("/api/large: %d bytes, differing from the %d expected at %d", len(body), len(want), i)
	}
	sawValue("/api/large")
	// The control: without the value in it, the same body is relayed
	// as the server sent it.
	_, body = get("/api/large", "", false)
	if want := bytes.ReplaceAll(bs.large, []byte("{auth}"), nil); !bytes.Equal(body, want) {
		t.Errorf("/api/large without a secret: %d bytes, want the %d the server sent", len(body), len(want))
	}

	for _, path := range []string{"/api/plain", "/api/plain?ce=identity"} {
		if resp, body := get(path, "gzip", true); string(body) != "nothing secret\x00\xff here\n" {
			t.Errorf("%s: %q, want the body as sent", path, body)
		} else if path == "/api/plain" && resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: Content-Encoding %q", path, resp.Header.Get("Content-Encoding"))
		}
		sawValue(path)
	}
	// A response of the host to a request without a secret is scrubbed
	// too (a server can keep what an earlier request carried).
	if _, body := get("/x", "", false); string(body) != "nothing secret\x00\xff here\n" {
		t.Errorf("/x: %q", body)
	}
}

// TestSecretBodyUnreadableRefused: a response of a secret's host whose
// body is in a coding the proxy cannot decode (br, whatever was asked),
// or that says gzip and is not, is refused with 502 and audited, and the
// value in it never reaches the client; a response whose status or
// header line is malformed (which net/http quotes in its error) gets a
// 502 and an event without the value. The controls: the server got the
// value each time; a HEAD answered with Content-Encoding br passes (no
// body), and the same response without a secret's value in the body,
// in identity, passes.
func TestSecretBodyUnreadableRefused(t *testing.T) {
	bs := newBodyServer(t)
	tp, secs := secretsProxy(t, testRoots())
	c := moatClient(tp, secs)
	c.Transport.(*http.Transport).DisableCompression = true
	tok := secs.list[0].Placeholder
	for _, path := range []string{"/api/br", "/api/notgzip", "/api/plain?ce=br", "/api/plain?ce=gzip,%20gzip", "/api/plain?ce=deflate"} {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://allowed.test:%d%s", bs.port, path), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept-Encoding", "br")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Moat-Denied") != "secret response encoding" ||
			!strings.Contains(string(body), "Content-Encoding") || strings.Contains(string(body), "real-token") {
			t.Errorf("GET %s: %d %q %q, want 502 refused", path, resp.StatusCode, resp.Header.Get("X-Moat-Denied"), body)
		}
		if auth, enc := bs.lastAuth(); auth != "Bearer real-token-1" || enc != "identity" {
			t.Errorf("GET %s: the server got %q, asked for %q; want the value, identity", path, auth, enc)
		}
		e := tp.nextOf(t, ProtoIntercepted)
		wantEvent(t, e, ProtoIntercepted, DecisionDeny, "secret response encoding")
		if len(e.Secrets) != 1 || strings.Contains(e.Reason, "real-token") {
			t.Errorf("GET %s: event %+v", path, e)
		}
	}
	for _, method := range []string{"HEAD", "GET"} {
		path := "/api/plain?ce=br"
		if method == "GET" {
			path = "/api/plain"
		}
		req, _ := http.NewRequest(method, fmt.Sprintf("https://allowed.test:%d%s", bs.port, path), nil)
		if method == "GET" { // the secret is for GET and POST
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s %s: %d, want 200", method, path, resp.StatusCode)
		}
		tp.nextOf(t, ProtoIntercepted)
	}
}

// TestSecretMalformedResponseScrubbed: a server that puts the value in a
// malformed header line (which net/http quotes in its error) gets the
// client a 502 and an audit event with the placeholder in its place; a
// server that switches protocols, asked for it or not (the proxy drops a
// client's Upgrade header, hop by hop, so the server never is), gets the
// client a 502 rather than a raw connection. The controls: the server got
// the value each time.
func TestSecretMalformedResponseScrubbed(t *testing.T) {
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{testCert()}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type seen struct{ auth, upgrade string }
	got := make(chan seen, 10)
	serveEach(l, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		auth := req.Header.Get("Authorization")
		got <- seen{auth, req.Header.Get("Upgrade")}
		if req.URL.Path == "/api/upgrade" {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"+auth)
		} else {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Ok: 1\r\nno colon "+auth+"\r\n\r\n")
		}
		time.Sleep(100 * time.Millisecond)
	})
	port := l.Addr().(*net.TCPAddr).Port
	tp, secs := secretsProxy(t, testRoots())
	tok := secs.list[0].Placeholder
	for _, path := range []string{"/api/malformed", "/api/upgrade"} {
		resp, body := interceptedRaw(t, tp, secs, fmt.Sprintf("allowed.test:%d", port), "GET "+path+" HTTP/1.1\r\nHost: allowed.test:"+
			strconv.Itoa(port)+"\r\nAuthorization: Bearer "+tok+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, "real-token") {
			t.Errorf("GET %s: %d %q, want 502 without the value", path, resp.StatusCode, body)
		}
		if s := <-got; s.auth != "Bearer real-token-1" || s.upgrade != "" {
			t.Errorf("GET %s: the server got %+v, want the value and no Upgrade", path, s)
		}
		e := tp.nextOf(t, ProtoIntercepted)
		wantEvent(t, e, ProtoIntercepted, DecisionError, "upstream")
		if strings.Contains(e.Reason, "real-token") {
			t.Errorf("GET %s: the event carries the value: %s", path, e.Reason)
		}
		if path == "/api/malformed" && !strings.Contains(body, "no colon Bearer "+tok) {
			t.Errorf("GET %s: %q, want net/http's error with the placeholder", path, body)
		}
	}
}

// TestScrubResponseFraming: how scrubResponse frames what it relays. A
// body keeps its Content-Length only when every placeholder is as long
// as its value (the control); otherwise, and when decoded from gzip, it
// goes chunked. A response without a body (HEAD) is left as it is, its
// coding whatever it says; a body in another coding is refused.
func TestScrubResponseFraming(t *testing.T) {
	ph := NewPlaceholder("S")
	sameLen, err := NewSecrets([]Secret{{Name: "S", Placeholder: ph, Value: strings.Repeat("v", len(ph)), Hosts: []string{"allowed.test"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := scrubSecrets(t, "short-value")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, "hello short-value")
	zw.Close()
	for _, tc := range []struct {
		name    string
		secs    *Secrets
		method  string
		header  string
		body    string
		refused bool
		length  int64
		chunked bool
		want    string
	}{
		{"same length", sameLen, "GET", "", "hello", false, 5, false, "hello"},
		{"other length", other, "GET", "", "hello short-value", false, -1, true, "hello " + other.list[0].Placeholder},
		{"gzip", sameLen, "GET", "Content-Encoding: gzip\r\n", gz.String(), false, -1, true, "hello short-value"},
		{"gzip scrubbed", other, "GET", "Content-Encoding: gzip\r\n", gz.String(), false, -1, true, "hello " + other.list[0].Placeholder},
		{"identity", sameLen, "GET", "Content-Encoding: identity\r\n", "hello", false, 5, false, "hello"},
		{"br", sameLen, "GET", "Content-Encoding: br\r\n", "hello", true, 0, false, ""},
		{"br to HEAD", other, "HEAD", "Content-Encoding: br\r\n", "", false, 5, false, ""},
	} {
		raw := "HTTP/1.1 200 OK\r\n" + tc.header + "Content-Length: " + strconv.Itoa(len(tc.body)) + "\r\n\r\n" + tc.body
		if tc.method == "HEAD" {
			raw = "HTTP/1.1 200 OK\r\n" + tc.header + "Content-Length: 5\r\n\r\n"
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), &http.Request{Method: tc.method})
		if err != nil {
			t.Fatal(err)
		}
		reason := tc.secs.scrubResponse(resp)
		if (reason != "") != tc.refused {
			t.Errorf("%s: refused %q, want refused=%v", tc.name, reason, tc.refused)
			continue
		}
		if tc.refused {
			continue
		}
		var out bytes.Buffer
		if err := resp.Write(&out); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		back, err := http.ReadResponse(bufio.NewReader(&out), &http.Request{Method: tc.method})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, err := io.ReadAll(back.Body)
		chunked := len(back.TransferEncoding) == 1 && back.TransferEncoding[0] == "chunked"
		if err != nil || string(body) != tc.want || back.ContentLength != tc.length || chunked != tc.chunked || back.Header.Get("Content-Encoding") == "gzip" {
			t.Errorf("%s: %q %v, length %d, chunked %v, Content-Encoding %q; want %q, length %d, chunked %v",
				tc.name, body, err, back.ContentLength, chunked, back.Header.Get("Content-Encoding"), tc.want, tc.length, tc.chunked)
		}
	}
}

// TestSecretNestedValuesScrubbed: when one secret's value contains
// another's, the longer one becomes its placeholder whole, in the
// headers as in the body. The headers (and status, trailers, error
// messages) were scrubbed one value after another in the secrets'
// order, so the shorter value went first and the rest of the longer one
// ("xyz-" and "-tail" here) reached the command. The controls: the body
// scrubber, which was right already, and the shorter value on its own,
// which still becomes its placeholder.
func TestSecretNestedValuesScrubbed(t *testing.T) {
	const inner, outer = "abc123", "xyz-abc123-tail"
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Outer", "v="+outer)
		w.Header().Set("X-Inner", "v="+inner)
		io.WriteString(w, "v="+outer+" w="+inner)
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{testCert()}}
	s.StartTLS()
	defer s.Close()
	hostport := fmt.Sprintf("allowed.test:%d", s.Listener.Addr().(*net.TCPAddr).Port)
	a := Secret{Name: "A", Placeholder: NewPlaceholder("A"), Value: inner, Hosts: []string{"allowed.test"}}
	b := Secret{Name: "B", Placeholder: NewPlaceholder("B"), Value: outer, Hosts: []string{"allowed.test"}}
	for _, list := range [][]Secret{{a, b}, {b, a}} {
		secs, err := NewSecrets(list, testRoots())
		if err != nil {
			t.Fatal(err)
		}
		tp := newProxy(t, mustRules(t, []string{"allowed.test"}, nil, loopbackCIDR))
		tp.Secrets = secs
		resp, body := interceptedRaw(t, tp, secs, hostport, "GET /x HTTP/1.1\r\nHost: "+hostport+"\r\nConnection: close\r\n\r\n")
		if want := "v=" + b.Placeholder + " w=" + a.Placeholder; body != want {
			t.Errorf("secrets %s, %s: body %q, want %q", list[0].Name, list[1].Name, body, want)
		}
		if got, want := resp.Header.Get("X-Outer"), "v="+b.Placeholder; got != want {
			t.Errorf("secrets %s, %s: X-Outer %q, want %q", list[0].Name, list[1].Name, got, want)
		}
		if got, want := resp.Header.Get("X-Inner"), "v="+a.Placeholder; got != want {
			t.Errorf("secrets %s, %s: X-Inner %q, want %q", list[0].Name, list[1].Name, got, want)
		}
	}
}
