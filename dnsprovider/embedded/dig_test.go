package embedded

import (
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dev/dnstest"
)

// digCase runs dig and checks its output for every want pattern and
// against every reject pattern.
type digCase struct {
	name   string
	args   []string
	want   []string
	reject []string
}

func runDigCases(t *testing.T, addr string, cases []digCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := dnstest.Dig(t, addr, tc.args...)
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("dig %s: output lacks %q:\n%s", strings.Join(tc.args, " "), w, out)
				}
			}
			for _, r := range tc.reject {
				if regexp.MustCompile(r).MatchString(out) {
					t.Errorf("dig %s: output has %q:\n%s", strings.Join(tc.args, " "), r, out)
				}
			}
		})
	}
}

func TestDig(t *testing.T) {
	dnstest.RequireTool(t, "dig")
	s := startServer(t, Config{
		TransferAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
		TSIGKeys:      []TSIGKey{{Name: keyName, Secret: keySecret}},
	}, mustBuild(t, testSpec()), bigZone(t))
	addr := s.Addr().String()
	const aa = `flags: qr aa( rd)?;`
	runDigCases(t, addr, []digCase{
		{"A", []string{"+norec", "main-0.main.etcd.test", "A"},
			[]string{`status: NOERROR`, aa, `(?m)^main-0\.main\.etcd\.test\.\s+60\s+IN\s+A\s+10\.0\.0\.10$`}, nil},
		{"AAAA", []string{"main-1.main.etcd.test", "AAAA"},
			[]string{`status: NOERROR`, `flags: qr aa rd;`, `(?m)^main-1\.main\.etcd\.test\.\s+60\s+IN\s+AAAA\s+fd00::1:10$`}, nil},
		{"CNAME", []string{"main-2.main.etcd.test", "A"},
			[]string{`status: NOERROR`, aa, `(?m)IN\s+CNAME\s+lb-2\.example\.net\.$`}, nil},
		{"CNAME chased in zone", []string{"main-3.main.etcd.test", "A"},
			[]string{`ANSWER: 2,`, `IN\s+CNAME\s+main-0\.main\.etcd\.test\.`, `(?m)^main-0\.main\.etcd\.test\.\s+60\s+IN\s+A\s+10\.0\.0\.10$`}, nil},
		{"SRV", []string{"_etcd-server-ssl._tcp.main.etcd.test", "SRV"},
			[]string{`ANSWER: 4,`, `IN\s+SRV\s+0 0 2380 main-0\.main\.etcd\.test\.`, `ADDITIONAL SECTION`, `(?m)^main-1\.main\.etcd\.test\.\s+60\s+IN\s+AAAA\s+fd00::1:10$`}, nil},
		{"client SRV", []string{"_etcd-client-ssl._tcp.main.etcd.test", "SRV"},
			[]string{`ANSWER: 4,`, `IN\s+SRV\s+0 0 2379 main-1\.main\.etcd\.test\.`}, nil},
		{"SOA", []string{"main.etcd.test", "SOA"},
			[]string{aa, `IN\s+SOA\s+ns1\.main\.etcd\.test\. hostmaster\.main\.etcd\.test\. \d+ 3600 600 1209600 60`}, nil},
		{"NS with glue", []string{"main.etcd.test", "NS"},
			[]string{aa, `IN\s+NS\s+ns1\.main\.etcd\.test\.`, `(?m)^ns1\.main\.etcd\.test\.\s+60\s+IN\s+A\s+127\.0\.0\.53$`}, nil},
		{"NXDOMAIN", []string{"main-9.main.etcd.test", "A"},
			[]string{`status: NXDOMAIN`, aa, `ANSWER: 0, AUTHORITY: 1`, `AUTHORITY SECTION:\s+main\.etcd\.test\.\s+60\s+IN\s+SOA`}, nil},
		{"NXDOMAIN below a name", []string{"x.main-0.main.etcd.test", "A"},
			[]string{`status: NXDOMAIN`, aa}, nil},
		{"NODATA", []string{"main-0.main.etcd.test", "TXT"},
			[]string{`status: NOERROR`, aa, `ANSWER: 0, AUTHORITY: 1`, `AUTHORITY SECTION:\s+main\.etcd\.test\.\s+60\s+IN\s+SOA`}, nil},
		{"NODATA at an empty non-terminal", []string{"_tcp.main.etcd.test", "A"},
			[]string{`status: NOERROR`, aa, `ANSWER: 0, AUTHORITY: 1`}, nil},
		{"REFUSED outside the zones", []string{"example.com", "A"},
			[]string{`status: REFUSED`}, []string{`flags: qr aa`, `ANSWER SECTION`}},
		{"REFUSED for a parent of the zone", []string{"etcd.test", "SOA"},
			[]string{`status: REFUSED`}, nil},
		{"CHAOS class", []string{"version.bind", "TXT", "CH"},
			[]string{`status: REFUSED`}, nil},
		{"EDNS0", []string{"+edns=0", "main-0.main.etcd.test", "A"},
			[]string{`EDNS: version: 0, flags:; udp: 1232`}, nil},
		{"EDNS0 DO bit copied", []string{"+dnssec", "main-0.main.etcd.test", "A"},
			[]string{`EDNS: version: 0, flags: do; udp: 1232`}, nil},
		{"no EDNS asked, none given", []string{"+noedns", "main-0.main.etcd.test", "A"},
			[]string{`status: NOERROR`}, []string{`EDNS:`}},
		{"BADVERS", []string{"+edns=1", "+noednsnegotiation", "main-0.main.etcd.test", "A"},
			[]string{`status: BADVERS`, `EDNS: version: 0`}, nil},
		{"truncated over UDP", []string{"+ignore", "+bufsize=1232", "many.big.test", "AAAA"},
			[]string{`flags: qr aa tc rd;`, `ANSWER: 0,`}, nil},
		{"TCP fallback", []string{"+bufsize=1232", "many.big.test", "AAAA"},
			[]string{`Truncated, retrying in TCP mode`, `ANSWER: 100,`}, nil},
		{"TCP", []string{"+tcp", "main-0.main.etcd.test", "A"},
			[]string{`status: NOERROR`, aa, `10\.0\.0\.10`}, nil},
		{"AXFR refused to 127.0.0.1", []string{"main.etcd.test", "AXFR"},
			[]string{`Transfer failed`}, []string{`IN\s+SOA`}},
		{"AXFR allowed to 127.0.0.2", []string{"-b", "127.0.0.2", "main.etcd.test", "AXFR"},
			[]string{`(?s)IN\s+SOA.*main-0\.main\.etcd\.test\.\s+60\s+IN\s+A\s+10\.0\.0\.10.*IN\s+SOA`, `XFR size: 18 records`}, nil},
		{"AXFR with TSIG", []string{"-y", "hmac-sha256:" + keyName + ":" + keySecret, "main.etcd.test", "AXFR"},
			[]string{`XFR size: 18 records`}, []string{`Transfer failed`, `tsig verify failure`}},
		{"AXFR with a wrong TSIG secret", []string{"-y", "hmac-sha256:" + keyName + ":d3JvbmdzZWNyZXR3cm9uZ3NlY3JldA==", "main.etcd.test", "AXFR"},
			[]string{`(?i)(tsig|notauth|failed)`}, []string{`XFR size`}},
		{"AXFR of a name that is not a zone", []string{"-b", "127.0.0.2", "main-0.main.etcd.test", "AXFR"},
			[]string{`Transfer failed`}, nil},
		{"ANY", []string{"main-1.main.etcd.test", "ANY"},
			[]string{`ANSWER: 2,`}, nil},
	})
}

// TestNsupdate sends RFC 2136 updates with BIND's nsupdate.
func TestNsupdate(t *testing.T) {
	nsupdate := dnstest.RequireTool(t, "nsupdate")
	s := startServer(t, Config{AllowUpdate: true, TSIGKeys: []TSIGKey{{Name: keyName, Secret: keySecret}}}, mustBuild(t, testSpec()))
	addr := s.Addr()
	serial := s.Zone(testOrigin).Serial()
	run := func(key string, lines ...string) (string, error) {
		script := fmt.Sprintf("server %s %d\nzone %s\n%s\nsend\n", addr.Addr(), addr.Port(), testOrigin, strings.Join(lines, "\n"))
		cmd := exec.Command(nsupdate, "-y", "hmac-sha256:"+keyName+":"+key)
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(keySecret, "update add extra.main.etcd.test. 60 IN A 192.0.2.7"); err != nil {
		t.Fatalf("nsupdate add: %v\n%s", err, out)
	}
	runDigCases(t, addr.String(), []digCase{
		{"added", []string{"extra.main.etcd.test", "A"}, []string{`IN\s+A\s+192\.0\.2\.7`}, nil},
	})
	if got := s.Zone(testOrigin).Serial(); got != serial+1 {
		t.Errorf("serial %d after update, want %d", got, serial+1)
	}
	// A failed prerequisite changes nothing.
	out, err := run(keySecret, "prereq nxrrset main-0.main.etcd.test. A", "update delete main-0.main.etcd.test. A")
	if err == nil || !strings.Contains(out, "YXRRSET") {
		t.Errorf("nsupdate with a false prerequisite: %v\n%s", err, out)
	}
	// An update that breaks the zone's rules is refused.
	out, err = run(keySecret, "update add main-0.main.etcd.test. 60 IN CNAME elsewhere.example.net.")
	if err != nil {
		t.Errorf("nsupdate adding a CNAME beside A (ignored by RFC 2136): %v\n%s", err, out)
	}
	// A wrong key is refused.
	out, err = run("d3JvbmdzZWNyZXR3cm9uZ3NlY3JldA==", "update delete main-0.main.etcd.test. A")
	if err == nil {
		t.Errorf("nsupdate with a wrong key succeeded:\n%s", out)
	}
	runDigCases(t, addr.String(), []digCase{
		{"main-0 intact", []string{"main-0.main.etcd.test", "A"}, []string{`ANSWER: 1,`, `10\.0\.0\.10`}, []string{`CNAME`}},
	})
	// Unsigned updates never pass.
	m := new(dns.Msg).SetUpdate(testOrigin)
	rr, _ := dns.NewRR("evil.main.etcd.test. 60 IN A 192.0.2.66")
	m.Insert([]dns.RR{rr})
	r := exchange(t, addr.String(), m, "udp")
	if r.Rcode != dns.RcodeRefused {
		t.Errorf("unsigned update: %s", dns.RcodeToString[r.Rcode])
	}
}
