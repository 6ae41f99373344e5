// Package egress is moat's network side: the host-side proxy through which
// a sandbox in network mode "allow" reaches the destinations its policy
// lists, and nothing else.
//
// It owns:
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
//     allow_cidrs lists them. Both front ends (the proxy and the TUN
//     device) call these two functions through the same code (decide,
//     then connect), so they decide alike.
//
//   - Proxy: HTTP/1.1 (absolute-URI forwarding with keep-alive, and
//     CONNECT) and SOCKS5 (CONNECT) on any stream listener, told apart by
//     the first byte. A refused name is never looked up (a DNS query is
//     itself a way out); an allowed name is resolved once by the proxy, and
//     the proxy connects to exactly an address it checked, so DNS
//     rebinding has nothing to rebind. A Host header must name the
//     request's target, in a CONNECT as in a forwarded request. In a
//     tunnel, a TLS ClientHello must name the CONNECT target (or no name
//     at all), also one behind the records a TLS server skips before it
//     (warning alerts, empty change_cipher_spec records), which stops
//     naive domain fronting; with HTTPSOnly, nothing
//     from the destination reaches the client before its ClientHello.
//     Refusals are HTTP 403 with an X-Moat-Denied header
//     and a body saying how to allow the destination, or SOCKS5 reply 2.
//     Malformed, oversized and slow requests get 400, 431 and 408, excess
//     connections a quick refusal, and a panic ends one connection only.
//
//   - ServeTUN: the transparent front end, for programs that ignore the
//     proxy variables. The packets of a TUN device in the sandbox's
//     network namespace are served by gVisor's netstack (pure Go) in this
//     process. DNS to the configured address is answered from the rules
//     (Rules.DecideName): an allowed name gets an address of TUNConfig.Names
//     that stands for it for the whole run, and resolving it for real is
//     left to the connection, exactly as a CONNECT to the name would; a
//     refused name gets NXDOMAIN, and is never looked up. A TCP connection
//     to a name's address is decided as a CONNECT to name:port (decide,
//     Check, connect, then the tunnel's ClientHello, HTTPSOnly and Secrets
//     checks), one to any other address as a CONNECT to that IP literal;
//     a refusal is a reset. Every DNS query and every connection is an
//     Event (ProtoDNS, ProtoTCP), but for queries beyond the resolver's
//     rate (a flood of them would be work and records without end), which
//     are dropped unanswered and counted, an event a second; a query of
//     more than one question is malformed. Other UDP is dropped and
//     reported once per destination (ProtoUDP); only TCP and UDP reach
//     the stack (not ICMP), and nothing else is forwarded. A host that is
//     no host name (DNS and SOCKS5 names are any bytes) is recorded
//     quoted, and a Summary lists a bounded number of destinations.
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
//     placeholders in the headers, also inside a header's Basic
//     credentials ("Authorization: Basic base64(user:password)", which it
//     decodes and encodes again), and in the values of declared request
//     trailers (decided when the body ends), or a header template set,
//     when the request is one the secret is for (host, method, path); a
//     request that carries a placeholder anywhere else the proxy sees
//     (another host's intercepted request, its method, its URL, as sent
//     or percent-decoded, user information included, a header's or
//     trailer's name, any plain-HTTP request, Basic credentials included)
//     is refused with 403; a refusal in the trailers closes the
//     connection to the server before they are sent. A destination name
//     with a placeholder in it (which a wildcard allow entry would match)
//     is refused before any lookup, by every front end. In every response of an
//     intercepted host each secret's value becomes its placeholder again,
//     and Basic credentials the proxy sent become, encoded, those the
//     command sent, in the status, headers (names without regard to
//     case), trailers and body (streamed; the proxy asks for gzip, which it
//     decodes, or identity, and refuses with 502 a body in any other
//     coding). Each intercepted request is an Event of its own
//     (ProtoIntercepted, with the method, path and the names of the
//     secrets added, never their values).
//
// It refuses to do more: no packet-level filtering (the TUN front end
// terminates each TCP connection and decides it as the proxy does), no
// DNS answer but the name's stand-in address (no records of other types,
// no IPv6), no UDP but DNS to the TUN's resolver, no reading of plain
// HTTP through the TUN device (it is relayed as a tunnel: its Host header
// is not checked and a placeholder in it is not seen), no TLS
// interception for hosts without a secret (the proxy never sees inside
// those tunnels, so a Host header inside their TLS is not
// checked, and a placeholder sent inside one is not seen: it is only a
// placeholder), no HTTP/2 inside an intercepted tunnel (ALPN offers
// http/1.1 only) and no secret in a request body, no placeholder looked
// for in any other encoding than Basic credentials, no HTTP/2 or WebSocket
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
// The TUN front end links gVisor's netstack (gvisor.dev/gvisor/pkg/tcpip,
// pure Go) into every moat process, so every run pays for it whatever its
// network mode. Measured on the 2-core test VM, under loads of 4 to 18
// from other work: 31 more package initialisers (about 0.17 ms at best;
// the largest gVisor's log package, with its global regexp, and
// tcpip/network/hash's seeds) and a larger binary (13.4 to 16.8 MB, 37%
// more functions for the runtime to walk at start); `moat version` +0.3
// to +0.85 ms (bench/abtime, four runs of 600 to 800 rounds, each 95%
// interval above zero), `moat run -- /bin/true` +0.2 to +0.9 ms (three
// runs, one interval above zero). Go runs the initialisers of every
// package a binary links, so within one binary there is no way to keep
// them off the runs that do not use the device. In allow mode, the device
// and the stack add about 1.5 ms to a start (BenchmarkAllowStart: the
// kernel's device, address and route, and the stack, which the host sets
// up while the command starts). A new connection through the device costs
// 0.3 to 0.5 ms more than one through the proxy at a load of 4 (1 to 1.7
// ms at 15), and a download runs at about a quarter of the proxy's rate
// (TestTransparentLatency with MOAT_BENCH_TUN=1): each packet crosses the
// device with a read(2) or write(2) and several goroutines, where the
// proxy's relay is splice(2). Proxy-aware programs keep the proxy.
//
// After the handshake the proxy copies between the two connections with
// plain io.Copy on the *net.TCPConn and *net.UnixConn values themselves,
// so Linux moves the bytes with splice(2) and no per-byte work is done in
// Go.
package egress
