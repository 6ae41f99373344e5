package sandbox_test

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/moatbox/moat/egress"
	"github.com/moatbox/moat/policy"
)

// TestTransparentDNSProbes sends moat's resolver, from a real sandbox,
// the queries a program would use to get data out or names resolved:
// refused names in every type, odd case, a trailing dot, a name with
// escape sequences, two questions in one query, a compression loop, DNS
// to another resolver and over TCP, connections to addresses no name was
// given and to the resolver's. Each allowed probe's twin is the control:
// the allowed name resolves and connects. Then a flood of refused names:
// the resolver answers at its rate and counts the rest in events, and
// answers again after; then a flood of refused connections, after which
// the report keeps the first events and counts the rest.
func TestTransparentDNSProbes(t *testing.T) {
	dir := tunDir(t)
	w := newNetWorld(t)
	echo := serveTCP(t, func(c net.Conn) { c.Write([]byte("hello\n")) })
	req := w.request(func(p *policy.Policy) { p.Network.AllowCIDRs = []string{"127.0.0.0/8"} })
	req.TUNDir = dir
	const flood, tcpFlood = 12000, 8000
	script := fmt.Sprintf(`python3 -c '
import socket, struct
def q(labels, qtype=1, qd=1, extra=b""):
    h = struct.pack(">HHHHHH", 7, 0x0100, qd, 0, 0, 0)
    return h + b"".join(bytes([len(l)]) + l for l in labels) + b"\0" + struct.pack(">HH", qtype, 1) + extra
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
def ask(pkt, dst=("198.18.0.2", 53)):
    s.sendto(pkt, dst)
    try:
        r = s.recv(4096)
    except OSError:
        return "none"
    return "rcode%%d-an%%d" %% (r[3] & 15, struct.unpack(">H", r[6:8])[0])
print("allowed-a", ask(q([b"allowed", b"test"])))
print("allowed-oddcase", ask(q([b"AlLoWeD", b"TeSt"])))
print("allowed-txt", ask(q([b"allowed", b"test"], 16)))
for t, n in ((1, "a"), (16, "txt"), (255, "any"), (28, "aaaa"), (99, "spf")):
    print("denied-" + n, ask(q([b"denied", b"test"], t)))
print("denied-oddcase", ask(q([b"DeNiEd", b"TEST"])))
print("escape", ask(q([b"\x1b[2J\x1b]0;x\x07", b"test"])))
print("long-label", ask(q([b"a" * 63, b"denied", b"test"])))
print("two-questions", ask(q([b"allowed", b"test"], qd=2, extra=b"\x06denied\x04test\x00\x00\x01\x00\x01")))
print("pointer-loop", ask(struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c\x00\x01\x00\x01"))
print("other-resolver", ask(q([b"allowed", b"test"]), ("8.8.8.8", 53)))
print("name-address-53", ask(q([b"allowed", b"test"]), ("198.19.0.1", 53)))
def tcp(addr, port):
    try:
        c = socket.create_connection((addr, port), timeout=5)
        d = c.recv(100)
        return "connected:" + d.decode().strip()
    except OSError as e:
        return "refused"
print("tcp-allowed", tcp("allowed.test", %[1]d))
print("tcp-unknown-address", tcp("198.19.0.200", %[1]d))
print("tcp-resolver-53", tcp("198.18.0.2", 53))
print("tcp-device", tcp("198.18.0.3", %[1]d))
f = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
f.setblocking(False)
sent = 0
while sent < %[2]d:
    try:
        f.sendto(q([b"x%%d" %% sent, b"denied", b"test"]), ("198.18.0.2", 53))
        sent += 1
    except BlockingIOError:
        pass
    try:
        while True:
            f.recv(512)
    except BlockingIOError:
        pass
print("flood-sent", sent)
import time
time.sleep(1.5)
print("after-flood", ask(q([b"allowed", b"test"])))
for i in range(%[3]d):
    tcp("198.19.0.201", 80)
print("tcp-flood-done")
'`, echo.Addr().(*net.TCPAddr).Port, flood, tcpFlood)
	out, rep := w.run(t, req, script)
	for _, want := range []string{
		"allowed-a rcode0-an1", "allowed-oddcase rcode0-an1", "allowed-txt rcode0-an0",
		"denied-a rcode3-an0", "denied-txt rcode3-an0", "denied-any rcode3-an0", "denied-aaaa rcode3-an0", "denied-spf rcode3-an0",
		"denied-oddcase rcode3-an0", "escape rcode3-an0", "long-label rcode3-an0",
		"two-questions rcode1-an0", "pointer-loop rcode1-an0",
		"other-resolver none", "name-address-53 none",
		"tcp-allowed connected:hello", "tcp-unknown-address refused", "tcp-resolver-53 refused", "tcp-device refused",
		fmt.Sprintf("flood-sent %d", flood), "after-flood rcode0-an1", "tcp-flood-done",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	w.mu.Lock()
	audited, rated, tcpRefused, resolverTCP := 0, 0, 0, 0
	floodName := regexp.MustCompile(`^x[0-9]+\.denied\.test$`)
	refusedHosts := map[string]bool{} // refused destinations
	for _, e := range w.events {
		if e.Decision == egress.DecisionDeny {
			// A destination as the report's summary keys it.
			refusedHosts[fmt.Sprintf("%s %d %s", e.Host, e.Port, e.Proto)] = true
		}
		if e.Proto == egress.ProtoDNS && e.Decision == egress.DecisionDeny && floodName.MatchString(e.Host) {
			audited++
		}
		if e.Proto == egress.ProtoDNS && e.Rule == "dns rate" {
			n, _ := strconv.Atoi(strings.Fields(e.Reason)[0])
			rated += n
		}
		if e.Proto == egress.ProtoTCP && e.Host == "198.19.0.201" && e.Decision == egress.DecisionDeny {
			tcpRefused++
		}
		// TCP to moat's resolver is refused as such, never sent on by
		// allow_cidrs: the RFC 2544 refusal advised allow_cidrs, which
		// then dialled whatever answers 198.18.0.2 on the host's network.
		if e.Proto == egress.ProtoTCP && e.Host == "198.18.0.2" {
			if e.Rule != "moat's resolver" || !strings.Contains(e.Reason, "DNS over UDP only") {
				t.Errorf("TCP to moat's resolver: %+v", e)
			}
			resolverTCP++
		}
		if strings.ContainsAny(e.Host, "\x1b\x07") {
			t.Errorf("an event's host has control bytes: %q", e.Host)
		}
	}
	all := len(w.events)
	w.mu.Unlock()
	if resolverTCP != 1 {
		t.Errorf("%d events of TCP to moat's resolver, want 1", resolverTCP)
	}
	n := rep.Network
	// Each query of the flood that reached moat is an event or counted
	// in one (the resolver's rate), never both: the sandbox's kernel
	// drops some when the device's queue is full, and how many, and
	// whether the flood outran the resolver's rate at all, is this
	// machine's speed (egress's TestTUNDNSRate holds the rate itself).
	if audited+rated > flood || audited == 0 || tcpRefused != tcpFlood {
		t.Errorf("of %d refused queries, %d audited and %d dropped at the resolver's rate; %d of %d connections refused",
			flood, audited, rated, tcpRefused, tcpFlood)
	}
	t.Logf("of %d refused queries, %d audited and %d dropped at the resolver's rate (the rest the kernel's)", flood, audited, rated)
	wantEvents, wantDropped := all, 0
	if all > 10000 {
		wantEvents, wantDropped = 10000, all-10000
	}
	if len(n.Events) != wantEvents || n.EventsDropped != wantDropped {
		t.Errorf("report: %d events, %d dropped; the audit hook got %d", len(n.Events), n.EventsDropped, all)
	}
	wantListed := min(len(refusedHosts), egress.MaxRefusals)
	if len(n.Refused) != wantListed || (len(refusedHosts) > egress.MaxRefusals) != (n.RefusedUnlisted > 0) || strings.ContainsAny(n.Summary, "\x1b\x07") {
		t.Errorf("report: %d refused destinations (%d refused hosts), %d refusals unlisted, summary %q", len(n.Refused), len(refusedHosts), n.RefusedUnlisted, n.Summary)
	}
}
