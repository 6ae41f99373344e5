package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseRules(t *testing.T) {
	tests := []struct {
		allow, deny, cidrs []string
		err                string // substring; "" means valid
	}{
		{allow: []string{"pypi.org", "*.pythonhosted.org", "api.github.com:443"}},
		{allow: []string{"Example.COM."}},
		{allow: []string{"bücher.example"}},
		{allow: []string{"r3---sn-abc.googlevideo.com", "_x.example.com"}},
		{allow: []string{"github.io"}}, // the host itself, not everything under it
		{allow: []string{"*"}, err: `allow "*": "*" matches every host`},
		{allow: []string{"*:443"}, err: `matches every host`},
		{allow: []string{"*.com"}, err: `allow "*.com": too broad: "com" is a top-level domain`},
		{allow: []string{"*.co.uk"}, err: `too broad: co.uk is a public suffix`},
		{allow: []string{"*.github.io"}, err: `too broad: github.io is a public suffix`},
		{allow: []string{"*.test"}, err: `too broad`},
		{allow: []string{"db", "db:5432", "Redis."}}, // local services, reachable only within allow_cidrs
		{allow: []string{"https://pypi.org"}, err: `not a destination`},
		{cidrs: []string{"10.1.2.3/24"}, err: `host bits are set; did you mean "10.1.2.0/24"?`},
		{allow: []string{"co.uk"}, err: `co.uk is a public suffix, not a host`},
		{allow: []string{"a.*.example.com"}, err: `may only be the whole first label`},
		{allow: []string{"*example.com"}, err: `may only be the whole first label`},
		{allow: []string{"example.com:0"}, err: `port "0"`},
		{allow: []string{"example.com:99999"}, err: `port "99999"`},
		{allow: []string{"example.com:+80"}, err: `port "+80"`},
		{allow: []string{"example.com:http"}, err: `port "http"`},
		{allow: []string{"10.0.0.1"}, err: `put addresses in allow_cidrs`},
		{allow: []string{"2130706433"}, err: `put addresses in allow_cidrs`},
		{allow: []string{"[::1]:443"}, err: `put addresses in allow_cidrs`},
		{allow: []string{"::1"}, err: `put addresses in allow_cidrs`},
		{allow: []string{"example.123"}, err: `last label is a number`},
		{allow: []string{"exa mple.com"}, err: `contains ' '`},
		{allow: []string{"a..b.com"}, err: `empty label`},
		{allow: []string{""}, err: `empty entry`},
		{allow: []string{strings.Repeat("a", 64) + ".com"}, err: `longer than 63`},
		{deny: []string{"*.co.uk"}}, // a broad deny is fine
		{deny: []string{"*"}, err: `deny "*"`},
		{cidrs: []string{"127.0.0.0/8", "10.1.2.3", "fd00::/8", "::ffff:10.0.0.0/104"}},
		{cidrs: []string{"0.0.0.0/0"}, err: `allow_cidrs "0.0.0.0/0": too broad`},
		{cidrs: []string{"::/0"}, err: `too broad`},
		{cidrs: []string{"10.0.0.0/33"}, err: `not an address range`},
		{cidrs: []string{"example.com"}, err: `not an address`},
		{cidrs: []string{"fe80::1%eth0"}, err: `not an address`},
		// every problem at once
		{allow: []string{"*", "ok.example"}, deny: []string{"a b"}, err: `allow "*": "*" matches every host; list the hosts the command needs; deny "a b"`},
	}
	for _, tt := range tests {
		_, err := ParseRules(tt.allow, tt.deny, tt.cidrs)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("ParseRules(%q, %q, %q): %v", tt.allow, tt.deny, tt.cidrs, err)
		case tt.err != "" && err == nil:
			t.Errorf("ParseRules(%q, %q, %q): no error, want %q", tt.allow, tt.deny, tt.cidrs, tt.err)
		case tt.err != "" && !strings.Contains(err.Error(), tt.err):
			t.Errorf("ParseRules(%q, %q, %q): %v, want %q", tt.allow, tt.deny, tt.cidrs, err, tt.err)
		}
	}
}

func TestDecide(t *testing.T) {
	r, err := ParseRules(
		[]string{"pypi.org", "*.pythonhosted.org", "api.github.com:443", "Bücher.example", "denied.example"},
		[]string{"denied.example", "evil.pythonhosted.org"},
		[]string{"10.1.0.0/16", "8.8.8.8"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		d     Dest
		allow bool
		rule  string
	}{
		{Dest{Host: "pypi.org", Port: 443}, true, "pypi.org"},
		{Dest{Host: "PyPI.org.", Port: 80}, true, "pypi.org"},
		{Dest{Host: "www.pypi.org", Port: 443}, false, RuleDefaultDeny},
		{Dest{Host: "files.pythonhosted.org", Port: 443}, true, "*.pythonhosted.org"},
		{Dest{Host: "a.b.pythonhosted.org", Port: 443}, true, "*.pythonhosted.org"},
		{Dest{Host: "pythonhosted.org", Port: 443}, false, RuleDefaultDeny}, // wildcard excludes the apex
		{Dest{Host: "xpythonhosted.org", Port: 443}, false, RuleDefaultDeny},
		{Dest{Host: "evil.pythonhosted.org", Port: 443}, false, "evil.pythonhosted.org"}, // deny beats allow
		{Dest{Host: "denied.example", Port: 443}, false, "denied.example"},
		{Dest{Host: "api.github.com", Port: 443}, true, "api.github.com:443"},
		{Dest{Host: "api.github.com", Port: 22}, false, RuleDefaultDeny},
		{Dest{Host: "xn--bcher-kva.example", Port: 443}, true, "Bücher.example"},
		{Dest{Host: "BÜCHER.example", Port: 443}, true, "Bücher.example"},
		{Dest{Host: "pypi.org", Port: 0}, false, "invalid port"},
		{Dest{Host: "pypi.org", Port: 70000}, false, "invalid port"},
		{Dest{Host: "py pi.org", Port: 443}, false, "invalid host"},
		{Dest{Host: "", Port: 443}, false, "invalid host"},
		{Dest{Host: "1.2.3.4.5", Port: 443}, false, "invalid host"},
		// IP literals match allow_cidrs only
		{Dest{Host: "10.1.2.3", Port: 80}, true, "10.1.0.0/16"},
		{Dest{Host: "8.8.8.8", Port: 53}, true, "8.8.8.8"},
		{Dest{Host: "0x8.8.8.8", Port: 53}, true, "8.8.8.8"},
		{Dest{Host: "8.8.4.4", Port: 53}, false, RuleDefaultDeny},
		{Dest{IP: netip.MustParseAddr("::ffff:10.1.0.9"), Port: 80}, true, "10.1.0.0/16"},
		{Dest{Host: "127.0.0.1", Port: 80}, false, "loopback address 127.0.0.1 (RFC 1122)"},
		{Dest{Host: "2130706433", Port: 80}, false, "loopback address 127.0.0.1 (RFC 1122)"},
		{Dest{Host: "0177.0.0.1", Port: 80}, false, "loopback address 127.0.0.1 (RFC 1122)"},
		{Dest{Host: "127.1", Port: 80}, false, "loopback address 127.0.0.1 (RFC 1122)"},
		{Dest{Host: "0x7f.1", Port: 80}, false, "loopback address 127.0.0.1 (RFC 1122)"},
		{Dest{Host: "[::1]", Port: 80}, false, "loopback address ::1 (RFC 4291)"},
		{Dest{Host: "::ffff:127.0.0.1", Port: 80}, false, "loopback address 127.0.0.1 (RFC 1122)"},
		{Dest{Host: "169.254.169.254", Port: 80}, false, "cloud metadata address 169.254.169.254 (link-local)"},
	}
	for _, tt := range tests {
		v := r.Decide(tt.d)
		if v.Allow != tt.allow || v.Rule != tt.rule {
			t.Errorf("Decide(%+v) = %+v, want allow=%v rule=%q", tt.d, v, tt.allow, tt.rule)
		}
		if v.Reason == "" {
			t.Errorf("Decide(%+v): empty reason", tt.d)
		}
	}
	v := r.Decide(Dest{Host: "example.net", Port: 443})
	if want := `add "example.net" to [network] allow, or --net allow:example.net`; !strings.Contains(v.Reason, want) {
		t.Errorf("default deny reason %q does not say %q", v.Reason, want)
	}
	v = r.Decide(Dest{Host: "2130706433", Port: 80})
	if want := `add "127.0.0.1/32" to [network] allow_cidrs`; !strings.Contains(v.Reason, want) {
		t.Errorf("IP literal reason %q does not say %q", v.Reason, want)
	}
}

func TestCheckAddr(t *testing.T) {
	none, _ := ParseRules(nil, nil, nil)
	refused := map[string]string{
		"127.0.0.1":            "loopback address 127.0.0.1 (RFC 1122)",
		"127.255.0.9":          "loopback",
		"10.0.0.1":             "private address 10.0.0.1 (RFC 1918)",
		"172.16.5.4":           "RFC 1918",
		"172.31.255.255":       "RFC 1918",
		"192.168.1.1":          "RFC 1918",
		"100.64.0.1":           "CGNAT",
		"100.127.255.254":      "CGNAT",
		"169.254.169.254":      "cloud metadata address 169.254.169.254",
		"169.254.1.1":          "link-local address",
		"224.0.0.1":            "multicast",
		"239.255.255.250":      "multicast",
		"255.255.255.255":      "broadcast",
		"0.0.0.0":              "unspecified",
		"0.1.2.3":              "this-network",
		"240.0.0.1":            "reserved",
		"192.0.0.192":          "IETF protocol",
		"::1":                  "loopback address ::1",
		"::":                   "unspecified",
		"fd00::1":              "unique local",
		"fc12::1":              "unique local",
		"fe80::1":              "link-local",
		"ff02::1":              "multicast",
		"::ffff:127.0.0.1":     "loopback address 127.0.0.1",
		"::ffff:10.0.0.1":      "RFC 1918",
		"::127.0.0.1":          "IPv4-compatible",
		"64:ff9b::7f00:1":      "NAT64 address 64:ff9b::7f00:1 (embeds loopback address 127.0.0.1",
		"64:ff9b::a9fe:a9fe":   "embeds cloud metadata address 169.254.169.254",
		"64:ff9b:1::1":         "local-use NAT64",
		"64:ff9b:1::7f00:1":    "local-use NAT64 address 64:ff9b:1::7f00:1 (embeds loopback address 127.0.0.1",
		"64:ff9b:1::a9fe:a9fe": "local-use NAT64 address 64:ff9b:1::a9fe:a9fe (embeds cloud metadata address 169.254.169.254",
		"2002:7f00:1::":        "6to4 address 2002:7f00:1:: (embeds loopback",
		"2002:a00:1::1":        "6to4 address 2002:a00:1::1 (embeds private",
		// Teredo: client 127.0.0.1 is stored inverted (0x80ffff fe).
		"2001:0:4136:e378:8000:63bf:80ff:fffe": "Teredo address",
		"2001:db8::1":                          "documentation",
		"3fff::1":                              "", // (3fff::/20 is documentation since RFC 9637 but global-unicast space)
		"::ffff:0:0":                           "unspecified",
		"100::1":                               "discard-only",
		"4000::1":                              "reserved address",
	}
	for s, want := range refused {
		if want == "" {
			continue
		}
		v := none.CheckAddr("allowed.test", netip.MustParseAddr(s), nil)
		if v.Allow || !strings.Contains(v.Rule, want) {
			t.Errorf("CheckAddr(%s) = %+v, want a refusal naming %q", s, v, want)
		}
		if !strings.Contains(v.Reason, "allowed.test resolves to") || !strings.Contains(v.Reason, "allow_cidrs") {
			t.Errorf("CheckAddr(%s) reason %q does not explain", s, v.Reason)
		}
	}
	for _, s := range []string{"93.184.216.34", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808",
		"2002:808:808::1", "172.32.0.1", "100.128.0.1", "::ffff:1.1.1.1", "3fff::1"} {
		if v := none.CheckAddr("x", netip.MustParseAddr(s), nil); !v.Allow {
			t.Errorf("CheckAddr(%s) = %+v, want allowed", s, v)
		}
	}
	r, _ := ParseRules(nil, nil, []string{"127.0.0.0/8", "fd00::/8"})
	for _, s := range []string{"127.0.0.1", "::ffff:127.0.0.1", "fd00::5"} {
		if v := r.CheckAddr("x", netip.MustParseAddr(s), nil); !v.Allow {
			t.Errorf("with allow_cidrs, CheckAddr(%s) = %+v, want allowed", s, v)
		}
	}
	if v := r.CheckAddr("x", netip.MustParseAddr("10.0.0.1"), nil); v.Allow {
		t.Errorf("allow_cidrs 127.0.0.0/8 let 10.0.0.1 through")
	}
}

// The host's own addresses are refused in every spelling unless
// allow_cidrs lists them; what an address is (private, loopback) still
// names the refusal first.
func TestCheckAddrHostAddress(t *testing.T) {
	none, _ := ParseRules(nil, nil, nil)
	own := []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::7"),
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")}
	for s, want := range map[string]string{
		"93.184.216.34":        "the host's own address 93.184.216.34",
		"::ffff:93.184.216.34": "the host's own address 93.184.216.34",
		"2606:2800:220:1::7":   "the host's own address 2606:2800:220:1::7",
		"64:ff9b::5db8:d822":   "NAT64 address 64:ff9b::5db8:d822 (embeds the host's own address 93.184.216.34)",
		"2002:5db8:d822::1":    "6to4 address 2002:5db8:d822::1 (embeds the host's own address 93.184.216.34)",
		// Teredo: the client address is stored inverted.
		"2001:0:4136:e378:8000:63bf:a247:27dd": "Teredo address 2001:0:4136:e378:8000:63bf:a247:27dd (embeds the host's own address 93.184.216.34)",
		"10.0.0.1":                             "private address 10.0.0.1 (RFC 1918)",
		"127.0.0.1":                            "loopback address 127.0.0.1 (RFC 1122)",
	} {
		v := none.CheckAddr("own.test", netip.MustParseAddr(s), own)
		if v.Allow || v.Rule != want {
			t.Errorf("CheckAddr(%s) = %+v, want a refusal by %q", s, v, want)
		}
		if !strings.Contains(v.Reason, "own.test resolves to") || !strings.Contains(v.Reason, "allow_cidrs") {
			t.Errorf("CheckAddr(%s) reason %q does not explain", s, v.Reason)
		}
	}
	for _, s := range []string{"93.184.216.35", "2606:2800:220:1::8", "64:ff9b::5db8:d823"} {
		if v := none.CheckAddr("x", netip.MustParseAddr(s), own); !v.Allow {
			t.Errorf("CheckAddr(%s) = %+v, want allowed", s, v)
		}
	}
	r, _ := ParseRules(nil, nil, []string{"93.184.216.34", "2606:2800:220:1::7/128"})
	for _, s := range []string{"93.184.216.34", "::ffff:93.184.216.34", "2606:2800:220:1::7"} {
		if v := r.CheckAddr("x", netip.MustParseAddr(s), own); !v.Allow {
			t.Errorf("with allow_cidrs, CheckAddr(%s) = %+v, want allowed", s, v)
		}
	}
}

// TestWideCIDRDoesNotOpenTheHost: an allow_cidrs range that merely
// contains an address leading into the host (the LAN the host sits in,
// half the address space, a NAT64 prefix) does not open it; an entry
// within its block does. Positive control: the range's other addresses.
func TestWideCIDRDoesNotOpenTheHost(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("45.45.45.1"), netip.MustParseAddr("127.0.0.1")}
	for _, tt := range []struct {
		cidrs   []string
		refused []string
		allowed []string
	}{
		{[]string{"45.45.45.0/24"}, []string{"45.45.45.1", "::ffff:45.45.45.1"}, []string{"45.45.45.2"}},
		{[]string{"45.45.45.1/32"}, nil, []string{"45.45.45.1"}},
		{[]string{"0.0.0.0/1"}, []string{"127.0.0.1", "0.0.0.0", "::ffff:127.0.0.1", "45.45.45.1"}, []string{"10.1.2.3", "8.8.8.8"}},
		{[]string{"127.0.0.0/8"}, nil, []string{"127.0.0.1", "127.1.2.3"}},
		{[]string{"169.254.0.0/16"}, []string{"169.254.169.254"}, []string{"169.254.1.1"}},
		{[]string{"169.254.169.254/32"}, nil, []string{"169.254.169.254"}},
		{[]string{"64:ff9b::/96"}, []string{"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "64:ff9b::2d2d:2d01"}, []string{"64:ff9b::808:808"}},
		// RFC 8215's local-use prefix, under a /48, /56, /64 or /96
		// (RFC 6052 layouts; moat cannot know which): each layout embeds
		// 127.0.0.1, 127.1.1.1 (only that layout's decoding leads into the
		// host), 169.254.169.254 and the host's own 45.45.45.1; other
		// bytes are 01. Positive control: 8.8.8.8 in each layout, and in
		// all four at once. 64:ff9b:1::808:808 is 0.0.0.0 as a /48.
		{[]string{"64:ff9b:1::/48"}, []string{
			"64:ff9b:1::7f00:1", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1::808:808",
			"64:ff9b:1:7f00:0:101:101:101", "64:ff9b:1:17f:0:1:101:101", "64:ff9b:1:101:7f:0:101:101", "64:ff9b:1:101:1:101:7f00:1",
			"64:ff9b:1:7f01:1:101:101:101", "64:ff9b:1:17f:1:101:101:101", "64:ff9b:1:101:7f:101:101:101", "64:ff9b:1:101:1:101:7f01:101",
			"64:ff9b:1:a9fe:a9:fe01:101:101", "64:ff9b:1:1a9:fe:a9fe:101:101", "64:ff9b:1:101:a9:fea9:fe01:101", "64:ff9b:1:101:1:101:a9fe:a9fe",
			"64:ff9b:1:2d2d:2d:101:101:101", "64:ff9b:1:12d:2d:2d01:101:101", "64:ff9b:1:101:2d:2d2d:101:101", "64:ff9b:1:101:1:101:2d2d:2d01",
		}, []string{
			"64:ff9b:1:808:8:801:101:101", "64:ff9b:1:108:8:808:101:101", "64:ff9b:1:101:8:808:801:101", "64:ff9b:1:101:1:101:808:808",
			"64:ff9b:1:808:8:808:808:808",
		}},
		{[]string{"64:ff9b:1:101:1:101:7f00:1/128"}, nil, []string{"64:ff9b:1:101:1:101:7f00:1"}},
		{[]string{"2002::/16"}, []string{"2002:7f00:1::"}, nil},
		{[]string{"::/1"}, []string{"::1", "::", "::7f00:1", "::ffff:0:7f00:1", "::ffff:0:2d2d:2d01"}, nil},
		{[]string{"fd00::/8"}, []string{"fd00:ec2::254"}, []string{"fd00::1"}},
	} {
		r, err := ParseRules(nil, nil, tt.cidrs)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tt.refused {
			v := r.CheckAddr("x.test", netip.MustParseAddr(s), own)
			if v.Allow || !strings.Contains(v.Reason, "wider than") {
				t.Errorf("allow_cidrs %q: CheckAddr(%s) = %+v, want refused as wider than its block", tt.cidrs, s, v)
			}
		}
		for _, s := range tt.allowed {
			if v := r.CheckAddr("x.test", netip.MustParseAddr(s), own); !v.Allow {
				t.Errorf("allow_cidrs %q: CheckAddr(%s) = %+v, want allowed", tt.cidrs, s, v)
			}
		}
	}
}

// TestListedRangeHostAddress: an address of the host's own inside a
// listed private range is refused naming the host, not the range's kind,
// which the listing already answered. The control: another address of
// the range is allowed.
func TestListedRangeHostAddress(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("192.0.2.2")}
	r, err := ParseRules(nil, nil, []string{"10.77.0.0/24", "192.0.2.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"10.77.0.1", "192.0.2.2", "::ffff:10.77.0.1"} {
		v := r.CheckAddr("own.test", netip.MustParseAddr(s), own)
		if v.Allow || !strings.Contains(v.Rule, ruleHostAddress) || !strings.Contains(v.Reason, "wider than") {
			t.Errorf("CheckAddr(%s) = %+v, want refused as the host's own", s, v)
		}
	}
	if v := r.CheckAddr("ok.test", netip.MustParseAddr("10.77.0.2"), own); !v.Allow {
		t.Errorf("control: CheckAddr(10.77.0.2) = %+v, want allowed", v)
	}
}

// TestLocalUseNAT64Layouts: a local-use NAT64 address is refused naming
// an address it embeds in one of the RFC 6052 layouts (/48, /56, /64,
// /96) that would be refused: the first in that order, so 169.254.169.254
// outside /96 is named by another layout's 254.x or 169.254.1.1. Other
// bytes are 01, which no layout refuses alone.
func TestLocalUseNAT64Layouts(t *testing.T) {
	none, _ := ParseRules(nil, nil, nil)
	for s, want := range map[string]string{
		"64:ff9b:1:7f01:1:101:101:101":   "embeds loopback address 127.1.1.1",
		"64:ff9b:1:17f:1:101:101:101":    "embeds loopback address 127.1.1.1",
		"64:ff9b:1:101:7f:101:101:101":   "embeds loopback address 127.1.1.1",
		"64:ff9b:1:101:1:101:7f01:101":   "embeds loopback address 127.1.1.1",
		"64:ff9b:1:101:7f:0:101:101":     "embeds loopback address 127.0.0.1",
		"64:ff9b:1:101:1:101:7f00:1":     "embeds loopback address 127.0.0.1",
		"64:ff9b:1:a9fe:a9:fe01:101:101": "(embeds ",
		"64:ff9b:1:1a9:fe:a9fe:101:101":  "(embeds ",
		"64:ff9b:1:101:a9:fea9:fe01:101": "(embeds ",
		"64:ff9b:1:101:1:101:a9fe:a9fe":  "embeds cloud metadata address 169.254.169.254",
		"64:ff9b:1:101:1:101:808:808":    "local-use NAT64 address 64:ff9b:1:101:1:101:808:808 (RFC 8215)",
	} {
		v := none.CheckAddr("x.test", netip.MustParseAddr(s), nil)
		if v.Allow || !strings.Contains(v.Rule, "local-use NAT64 address "+s+" (") || !strings.Contains(v.Rule, want) {
			t.Errorf("CheckAddr(%s) = %+v, want a refusal naming %q", s, v, want)
		}
	}
}

func TestParseIPLiteral(t *testing.T) {
	tests := map[string]string{
		"127.0.0.1":          "127.0.0.1",
		"127.0.0.1.":         "127.0.0.1",
		"2130706433":         "127.0.0.1",
		"0x7f000001":         "127.0.0.1",
		"017700000001":       "127.0.0.1",
		"0177.0.0.1":         "127.0.0.1",
		"0177.1":             "127.0.0.1",
		"127.1":              "127.0.0.1",
		"0x7f.1":             "127.0.0.1",
		"0X7F.0.0.1":         "127.0.0.1",
		"127.0.1":            "127.0.0.1",
		"10.0.65535":         "10.0.255.255",
		"192.168.0x1":        "192.168.0.1",
		"0":                  "0.0.0.0",
		"00":                 "0.0.0.0",
		"4294967295":         "255.255.255.255",
		"[::1]":              "::1",
		"::1":                "::1",
		"[::ffff:127.0.0.1]": "::ffff:127.0.0.1",
		"4294967296":         "",
		"256.0.0.1":          "",
		"1.2.3.256":          "",
		"1.2.65536":          "",
		"1.2.3.4.5":          "",
		"08.0.0.1":           "",
		"0x":                 "",
		"0xg.1":              "",
		"1..2":               "",
		"":                   "",
		".":                  "",
		"example.com":        "",
		"1e3":                "",
		"+1.2.3.4":           "",
		"1.-2.3.4":           "",
		"[fe80::1%eth0]":     "",
		"fe80::1%25eth0":     "",
		"[1.2.3.4]":          "",
		"1_000":              "",
	}
	for in, want := range tests {
		a, ok := ParseIPLiteral(in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != want {
			t.Errorf("ParseIPLiteral(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.pythonhosted.org", "api.github.com:443", "*.co.uk", "*",
		"Bücher.example", "10.0.0.1", "0x7f.1", "xn--bcher-kva.example", "a.*.b", "*.a.b:65535", "[::1]:1"} {
		f.Add(s, "files.pythonhosted.org", 443)
	}
	f.Fuzz(func(t *testing.T, entry, host string, port int) {
		if _, err := ParseRules(nil, nil, []string{entry}); err == nil {
			// what allow_cidrs accepts is an address range
			if _, err := parseCIDR(entry); err != nil {
				t.Fatalf("parseCIDR(%q) failed after ParseRules accepted it", entry)
			}
		}
		allow, aerr := ParseRules([]string{entry}, nil, nil)
		both, berr := ParseRules([]string{entry}, []string{entry}, nil)
		d := Dest{Host: host, Port: port}
		if aerr == nil {
			v := allow.Decide(d)
			if v.Rule == "" || v.Reason == "" {
				t.Fatalf("Decide(%+v) with allow %q: empty rule or reason: %+v", d, entry, v)
			}
			if v.Allow {
				if _, isIP := ParseIPLiteral(host); isIP {
					t.Fatalf("allow %q let the IP literal %q through", entry, host)
				}
				if v.Rule != allow.allow[0].Entry {
					t.Fatalf("allowed by %q, not by the entry", v.Rule)
				}
			}
		}
		if berr == nil && both.Decide(d).Allow {
			t.Fatalf("allow and deny %q: Decide(%+v) allowed (deny must win)", entry, d)
		}
	})
}

// TestSingleLabelRemedies: the remedy a refusal of a single-label name
// gives names allow_cidrs too (the allow entry alone is refused next),
// and CheckLocal's reason names the address as "NAME resolves to ADDR,",
// which moat policy suggest reads (harness.localNameAddr). The control:
// a dotted name's remedy is the allow entry alone.
func TestSingleLabelRemedies(t *testing.T) {
	r := mustRules(t, nil, nil, nil)
	for _, v := range []Verdict{r.Decide(Dest{Host: "db", Port: 5432}), r.DecideName("db")} {
		if v.Allow || !strings.Contains(v.Reason, `add "db" to [network] allow`) || !strings.Contains(v.Reason, "allow_cidrs") {
			t.Errorf("db: %+v", v)
		}
	}
	if v := r.Decide(Dest{Host: "pypi.org", Port: 443}); v.Allow || strings.Contains(v.Reason, "allow_cidrs") {
		t.Errorf("control, pypi.org: %+v", v)
	}
	if v := r.CheckLocal("db", netip.MustParseAddr("10.1.2.3")); v.Allow || !strings.Contains(v.Reason, "db resolves to 10.1.2.3, ") {
		t.Errorf("CheckLocal: %+v", v)
	}
}
