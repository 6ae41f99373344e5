package egress

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The bodies of the responses of an intercepted host are scrubbed as they
// are relayed: each secret's value becomes its placeholder, as in the
// status, headers and trailers. Every response of such a host is, not
// only those to a request that carried a secret: a server that keeps a
// request (a request inspector, a log a later request reads back) can
// hand the value out in the answer to another request, on this
// connection or a later one. And every secret's value is scrubbed, not
// only those of the host's secrets: there are few, and a search is cheap.
//
// The proxy must be able to read a body to scrub it, so it asks the
// server for gzip (which it decodes, and relays decoded) when the client
// takes gzip, and for identity otherwise; a response in any other
// Content-Encoding is refused rather than relayed unread.

// scrubBufSize is what a body scrubber reads at a time, besides the bytes
// it holds back.
const scrubBufSize = 64 << 10

// acceptEncoding is the Accept-Encoding the proxy sends for an intercepted
// request whose client sent vs: "gzip" when the client takes gzip (the
// proxy decodes it), "identity" otherwise. What else the client takes (br,
// zstd, deflate) the proxy could not read.
func acceptEncoding(vs []string) string {
	for _, v := range vs {
		for _, e := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(e, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			if !qZero(params) {
				return "gzip"
			}
		}
	}
	return "identity"
}

// qZero reports whether the parameters of an Accept-Encoding element say
// q=0: not acceptable.
func qZero(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// contentEncoding returns the codings of a response's body, lower case,
// "identity" left out: "" for an unencoded body.
func contentEncoding(h http.Header) string {
	var codings []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.ToLower(strings.TrimSpace(c)); c != "" && c != "identity" {
				codings = append(codings, c)
			}
		}
	}
	return strings.Join(codings, ", ")
}

// scrubBody makes resp's body read with each secret's value replaced by
// its placeholder, decoding a gzip body. It returns why the response must
// be refused instead, or "": a body in a coding the proxy cannot decode
// would reach the client unscrubbed. The body's length changes when a
// placeholder's length differs from its value's, and a decoded body's
// does: such a body is sent chunked (Content-Length dropped), or, to an
// HTTP/1.0 client, delimited by the connection's close.
func (s *Secrets) scrubBody(resp *http.Response) string {
	if resp.Body == nil || resp.Body == http.NoBody || resp.Request != nil && resp.Request.Method == http.MethodHead {
		// No body (HEAD, 204, 304, an empty one): its headers, Content-Length
		// and Content-Encoding with them, describe a body that is not here.
		return ""
	}
	var src io.Reader = resp.Body
	switch enc := contentEncoding(resp.Header); enc {
	case "":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return fmt.Sprintf("the response's Content-Encoding is gzip but its body is not gzip (%v); moat must read a body to put secrets' placeholders in place of their values", err)
		}
		src = zr
		resp.Header.Del("Content-Encoding")
		resp.ContentLength = -1
	default:
		return fmt.Sprintf("the response's body is in Content-Encoding %q, which moat cannot decode, and moat must read a body to put secrets' placeholders in place of their values "+
			"(it asks the server for gzip or identity only; this server sent another coding anyway)", headerSafe(enc))
	}
	if !s.sameLen {
		resp.ContentLength = -1
	}
	if resp.ContentLength < 0 {
		resp.Header.Del("Content-Length")
		resp.TransferEncoding = []string{"chunked"}
	}
	resp.Body = s.newBodyScrubber(src, resp.Body)
	return ""
}

// bodyScrubber reads a body with each secret's value replaced by its
// placeholder. It holds back the last hold bytes of what it has read (one
// less than the longest value) until it has read what follows, so that a
// value split between reads is still found; the held-back bytes are
// handed out at the end of the body, and not when the body ends in an
// error (they could be the start of a value). It allocates nothing per
// Read: its buffer comes from, and goes back to, its Secrets' pool.
//
// The patterns (values, and the Basic credentials apply has sent: see
// basicForm) can grow while a body is read, as another request goes out.
// Before it hands out bytes the scrubber takes up any new ones, looks for
// them in all it has not handed out, and holds back as much as the
// longest needs from then on. What it handed out before was read before
// the new credentials were sent, so a server cannot have echoed them
// there.
type bodyScrubber struct {
	s    *Secrets
	pats *patterns
	src  io.Reader // the body, decoded
	body io.Closer // the body as read
	buf  *[]byte
	r, w int // buf[r:w] is read and not handed out yet
	// lim: a value starting in buf[r:lim] is known, as pos. For each
	// value, pos is where it next starts in buf[r:lim], or -1.
	lim  int
	pos  []int
	pend []byte // the rest of a placeholder being handed out
	err  error  // src's error, once it returned one
}

func (s *Secrets) newBodyScrubber(src io.Reader, body io.Closer) *bodyScrubber {
	pats := s.pats.Load()
	b := &bodyScrubber{s: s, pats: pats, src: src, body: body, buf: s.bufs.Get().(*[]byte), pos: make([]int, len(pats.vals))}
	for i := range b.pos {
		b.pos[i] = -1
	}
	return b
}

var errBodyClosed = errors.New("egress: read of a closed body")

func (b *bodyScrubber) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.buf == nil {
		return 0, errBodyClosed
	}
	buf := *b.buf
	for {
		if len(b.pend) > 0 {
			n := copy(p, b.pend)
			b.pend = b.pend[n:]
			return n, nil
		}
		if pats := b.s.pats.Load(); pats != b.pats {
			b.update(pats)
		}
		vals := b.pats.vals
		// The first value known to start, the longest of those that
		// start there.
		m, k := b.lim, -1
		for i, q := range b.pos {
			if q >= 0 && (q < m || q == m && len(vals[i]) > len(vals[k])) {
				m, k = q, i
			}
		}
		if b.r < m {
			n := copy(p, buf[b.r:m])
			b.r += n
			return n, nil
		}
		if k >= 0 {
			b.r += len(vals[k])
			b.pend = b.pats.phs[k]
			b.lim = max(b.lim, b.r)
			for i, q := range b.pos {
				if q >= 0 && q < b.r {
					b.pos[i] = b.search(i, b.r, b.lim)
				}
			}
			continue
		}
		// All that is known is handed out. Look further in what is
		// read: all of it at the end of the body, else all but hold
		// bytes, which a value starting there would run past.
		lim := b.w - b.pats.hold
		if b.err == io.EOF {
			lim = b.w
		}
		if lim > b.lim {
			for i, q := range b.pos {
				if q < 0 {
					b.pos[i] = b.search(i, b.lim, lim)
				}
			}
			b.lim = lim
			continue
		}
		if b.err != nil {
			return 0, b.err
		}
		// Keep the held-back bytes, at the start of the buffer, and
		// read more after them.
		if b.r > 0 {
			b.w = copy(buf, buf[b.r:b.w])
			b.lim -= b.r
			b.r = 0
		}
		n, err := b.src.Read(buf[b.w:])
		b.w += n
		b.err = err
	}
}

// update takes up pats, which has more patterns than the scrubber's:
// what is known (buf[r:lim]) shrinks to what the longest pattern cannot
// run past, and each new pattern is looked for there. A position known
// of another pattern stays right if it is still within, being the first;
// one past it is looked for again as lim grows.
func (b *bodyScrubber) update(pats *patterns) {
	n := len(b.pats.vals)
	b.pats = pats
	if lim := b.w - pats.hold; lim < b.lim {
		b.lim = max(lim, b.r)
		for i, q := range b.pos {
			if q >= b.lim {
				b.pos[i] = -1
			}
		}
	}
	for i := n; i < len(pats.vals); i++ {
		b.pos = append(b.pos, b.search(i, b.r, b.lim))
	}
}

// search returns where value i first starts in buf[from:to], or -1.
func (b *bodyScrubber) search(i, from, to int) int {
	v := b.pats.vals[i]
	end := min(to+len(v)-1, b.w)
	if end-from < len(v) {
		return -1
	}
	j := bytes.Index((*b.buf)[from:end], v)
	if j < 0 {
		return -1
	}
	return from + j
}

func (b *bodyScrubber) Close() error {
	if b.buf != nil {
		b.s.bufs.Put(b.buf)
		b.buf = nil
	}
	if zr, ok := b.src.(*gzip.Reader); ok {
		zr.Close()
	}
	return b.body.Close()
}

// ScrubFetched puts each secret's placeholder in place of its value in a
// fetch's result (Fetcher.Fetch, which a daemon makes for a session on
// the host): its headers, names and values, and its body, as the proxy
// scrubs the responses of a secret's host. A server the session's
// commands sent a secret to (its own host, or one its request body
// reached) could otherwise hand the caller the value in a page. A body
// in a coding this cannot read (gzip, br sent unasked) is refused
// rather than handed on unread.
func (s *Secrets) ScrubFetched(r *FetchResult) error {
	if c := contentEncoding(r.Header); c != "" {
		return &FetchError{Reason: fmt.Sprintf("the response's body is in %s, which moat cannot search for the session's secrets", c)}
	}
	s.scrubHeader(r.Header)
	r.Body = []byte(s.scrub(string(r.Body)))
	return nil
}

// ScrubText puts each secret's placeholder in place of its value in v,
// a text a server chose (Fetcher.Scrub); v as it is for a nil s.
func (s *Secrets) ScrubText(v string) string {
	if s == nil {
		return v
	}
	return s.scrub(v)
}

// CheckFetchURL refuses a fetch of u (Fetcher.Fetch, made on the host)
// that carries a secret's placeholder anywhere: in the host name, the
// user information, the path or the query, as sent or percent-decoded.
// A fetch never adds a secret, so the placeholder would go out as it is,
// to a host that may not be the secret's: as for the proxy, that is
// refused, and the caller audits it. nil when u carries none.
func (s *Secrets) CheckFetchURL(u *url.URL) error {
	if s == nil {
		return nil
	}
	c := s.leakFold(u.Hostname())
	if c == nil {
		c = s.leakInUserinfo(u)
	}
	if c == nil {
		c = s.leakInURL(u)
	}
	if c == nil {
		return nil
	}
	return &FetchError{Reason: fmt.Sprintf("the URL carries the placeholder of secret %s; a fetch never adds secrets, so it would send the placeholder as it is: "+
		"make the request from a command in the sandbox, whose proxy adds the secret on requests to %s", c.Name, strings.Join(c.Hosts, ", "))}
}
