// Package egress is moat's network side: the host-side proxy through which
// a sandbox in network mode "allow" reaches the destinations its policy
// lists, and nothing else.
//
// It owns three things:
//
//   - Rules (ParseRules): the [network] allow, deny and allow_cidrs lists,
//     and the one decision function, Rules.Decide(Dest) Verdict, which looks
//     at the destination only and never resolves or connects. Deny beats
//     allow; IP literals (in any spelling curl or glibc accept) match
//     allow_cidrs only. Rules.CheckAddr is the second check, applied to
//     every address a name resolves to: loopback, private, CGNAT,
//     link-local (the cloud metadata service), multicast, reserved and
//     unspecified addresses, the host's own addresses (those on its
//     interfaces, which the proxy reads and passes in), and their
//     IPv4-mapped, NAT64, 6to4 and Teredo spellings, are refused unless
//     allow_cidrs lists them. A future
//     transparent front end (a TUN device and a userspace TCP/IP stack)
//     and credential injection are meant to call the same two functions.
//
//   - Proxy: HTTP/1.1 (absolute-URI forwarding with keep-alive, and
//     CONNECT) and SOCKS5 (CONNECT) on any stream listener, told apart by
//     the first byte. A refused name is never looked up (a DNS query is
//     itself a way out); an allowed name is resolved once by the proxy, and
//     the proxy connects to exactly an address it checked, so DNS
//     rebinding has nothing to rebind. A Host header must name the
//     request's target, in a CONNECT as in a forwarded request. In a
//     tunnel, a TLS ClientHello must name the CONNECT target (or no name
//     at all), which stops naive domain fronting; with HTTPSOnly, nothing
//     from the destination reaches the client before its ClientHello.
//     Refusals are HTTP 403 with an X-Moat-Denied header
//     and a body saying how to allow the destination, or SOCKS5 reply 2.
//     Malformed, oversized and slow requests get 400, 431 and 408, excess
//     connections a quick refusal, and a panic ends one connection only.
//
//   - Event: one audit record per connection attempt (per request for
//     forwarded plain HTTP), and Summary, the human account of what was
//     refused.
//
//   - Secrets (NewSecrets): credentials the sandbox holds only as
//     placeholders. For a secret's hosts, and only those, the proxy
//     terminates the tunnel's TLS with a certificate from a CA made for the
//     run (its key stays in this process; its name constraints allow only
//     the secrets' hosts), opens TLS to the real server itself (verified
//     against the host's roots), and forwards the HTTP/1.1 requests read
//     inside, each with its secrets' values put in place of their
//     placeholders in the headers (or a header template set) when the
//     request is one the secret is for (host, method, path); a request
//     that carries a placeholder anywhere else the proxy sees (another
//     host's intercepted request, its URL, any plain-HTTP request) is
//     refused with 403. Each intercepted request is an Event of its own
//     (ProtoIntercepted, with the method, path and the names of the
//     secrets added, never their values).
//
// It refuses to do more: no TUN device or packet-level filtering, no DNS
// server (inside the sandbox there is no resolver; the proxy resolves),
// no UDP, no TLS interception for hosts without a secret (the proxy never
// sees inside those tunnels, so a Host header inside their TLS is not
// checked, and a placeholder sent inside one is not seen: it is only a
// placeholder), no HTTP/2 inside an intercepted tunnel (ALPN offers
// http/1.1 only) and no secret in a request body, no HTTP/2 or WebSocket
// forwarding of plain-HTTP requests (HTTPS clients tunnel those through
// CONNECT).
//
// What is hand-written, and why: the SOCKS5 handshake (a few fixed fields;
// the standard library has no server), the framing of the TLS records
// that carry a ClientHello (the proxy must read exactly those bytes and
// pass them on, so it cannot hand the connection to crypto/tls), and
// the inet_aton-style IPv4 parser (the standard library rejects
// "2130706433" and "0177.0.0.1" on purpose, but a client that sends them
// reaches those addresses, so the proxy must recognise them). HTTP
// requests and responses are read and written by net/http. Host names go
// through golang.org/x/net/idna (non-ASCII names only) and patterns that
// are too broad are recognised with golang.org/x/net/publicsuffix, the
// Public Suffix List compiled into that package.
//
// The ClientHello itself is parsed by crypto/tls: its server handshake
// runs over the bytes already read (a connection whose reads return them
// and whose writes fail) and is stopped from GetConfigForClient, which
// records ClientHelloInfo.ServerName. This replaced a hand-written parser
// of the same bytes; measured on the 2-core test VM (Go 1.26.8, load 7-9
// from a concurrent CI run), alternating ten runs of each build of
// BenchmarkClientHello/sni (a 1.8 KiB crypto/tls ClientHello from memory,
// -benchtime 20000x): hand-written median 2.6 µs (min 1.5), 3.2 KB and 7
// allocations; crypto/tls median 10.2 µs (min 9.0), 11.4 KB and 42
// allocations. The extra ~8 µs is paid once per TLS tunnel, about 5% of
// the 130 to 170 µs the proxy adds to a new connection
// (BenchmarkEgressLatency, 500 connections, the same load), and far less
// than the TLS handshake that follows. It links crypto/tls's
// server side, which moat did not link before (only types from it): the
// moat binary grows from 10.15 MB to 11.82 MB (go build, CGO_ENABLED=0);
// its package initialisers are unchanged (94, GODEBUG=inittrace=1), and
// `moat run -- /bin/true` is not measurably slower (bench/abtime, 300
// rounds: +0.15 ms, 95% interval [-0.18, +0.44] around a 7.7 ms median
// under that load). crypto/tls is kept: one parser, the one Go's own
// servers trust, for 8 µs a tunnel and 1.7 MB of binary. It is stricter
// than the parser it replaced in ways the RFCs ask for: a server name
// with a trailing dot (RFC 6066 3), a repeated extension, or a malformed
// known extension (a bad key share, a malformed encrypted_client_hello)
// now refuse the tunnel as a malformed ClientHello. Encrypted Client
// Hello is treated as before: the proxy holds no ECH keys, so the name it
// checks against the CONNECT target is the outer ClientHello's (the ECH
// configuration's public name), and the inner name stays unseen.
//
// After the handshake the proxy copies between the two connections with
// plain io.Copy on the *net.TCPConn and *net.UnixConn values themselves,
// so Linux moves the bytes with splice(2) and no per-byte work is done in
// Go.
package egress
