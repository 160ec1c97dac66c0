package etcdlog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/spoke/etcdlog"
)

// The files in testdata are tails of real etcd v3.6.16 logs (bin/etcd),
// each from a small ring broken on purpose: two members whose peer
// connections come from 127.0.0.1 while their certificates name DNS names
// only, plus a third member with a certificate from another CA
// (san-mismatch: the view of one of the two; unknown-authority: the
// third's); a member whose listed peer is a cluster of its own
// (cluster-id-mismatch-sender and -receiver); a member with a peer whose
// name does not resolve (peer-unresolved); a healthy start (starting); a
// member started on its old data after a --force-new-cluster recovery
// dropped it (member-removed).
func TestClassifyRealLogs(t *testing.T) {
	tests := []struct {
		file string
		// want lists the reasons found, most fundamental first.
		want []string
		// in are substrings the condition message must hold.
		in []string
	}{
		{"starting.log", nil, []string{"show no rejected or failed peer connections"}},
		{"san-mismatch.log", []string{etcdfedv1.ReasonPeerCertificateUntrusted, etcdfedv1.ReasonPeerCertificateNameMismatch},
			[]string{"different CAs", "Also seen: PeerCertificateNameMismatch", `does not match any of DNSNames`}},
		{"unknown-authority.log", []string{etcdfedv1.ReasonPeerCertificateUntrusted},
			[]string{"do not trust each other's certificate", "Fix: every member's TLS Secret must come from the EtcdCluster's current CA"}},
		{"cluster-id-mismatch-sender.log", []string{etcdfedv1.ReasonClusterIDMismatch},
			[]string{"another etcd cluster", "peer 6b8292843f560a85 has cluster ID fb98d4f4297dd81b, this member 29129fb91cef0c86"}},
		{"cluster-id-mismatch-receiver.log", []string{etcdfedv1.ReasonClusterIDMismatch},
			[]string{"this member fb98d4f4297dd81b", "new incarnation"}},
		{"member-removed.log", []string{etcdfedv1.ReasonMemberRemoved},
			[]string{"etcd ID was removed from the cluster", "permanently removed from the cluster", "never start it on this data again"}},
		{"peer-unresolved.log", []string{etcdfedv1.ReasonPeerNameUnresolved},
			[]string{"cannot resolve a peer's DNS name", "v.ring.test: no such host", "EtcdDNSZone"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			d := etcdlog.Classify(data)
			var got []string
			for _, f := range d.Findings {
				got = append(got, f.Reason)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("findings %v, want %v", got, tt.want)
			}
			status, reason, msg := d.Condition()
			wantStatus, wantReason := metav1.ConditionTrue, etcdfedv1.ReasonNoPeerErrors
			if len(tt.want) > 0 {
				wantStatus, wantReason = metav1.ConditionFalse, tt.want[0]
			}
			if status != wantStatus || reason != wantReason {
				t.Errorf("condition %s %s, want %s %s", status, reason, wantStatus, wantReason)
			}
			for _, s := range tt.in {
				if !strings.Contains(msg, s) {
					t.Errorf("message lacks %q:\n%s", s, msg)
				}
			}
		})
	}
}

// TestClassifyLines covers each rule with one line, including the exact
// line of the first-run report and lines that must not count.
func TestClassifyLines(t *testing.T) {
	tests := []struct {
		name, line, want string
		in               string
	}{
		{"client certificate against source address (first-run report)",
			`{"level":"warn","ts":"2026-01-01T00:00:00Z","caller":"embed/config_logging.go:185","msg":"rejected connection on peer endpoint","remote-addr":"127.0.0.1:40102","server-name":"demo-1.demo.etcdfed.test","ip-addresses":[],"dns-names":["demo-0.demo.etcdfed.test"],"error":"tls: \"127.0.0.1\" does not match any of DNSNames [\"demo-0.demo.etcdfed.test\"] (lookup demo-0.demo.etcdfed.test on 127.1.0.2:1053: no such host)"}`,
			etcdfedv1.ReasonPeerCertificateNameMismatch, "peerSkipClientSANVerification: true"},
		{"client certificate with IP SANs only",
			`{"level":"warn","msg":"rejected connection on peer endpoint","remote-addr":"127.0.0.1:1","ip-addresses":["127.3.1.10"],"error":"x509: certificate is valid for 127.3.1.10, not 127.0.0.1"}`,
			etcdfedv1.ReasonPeerCertificateNameMismatch, "certificate names 127.3.1.10"},
		{"serving certificate against the host dialled",
			`{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"a1","error":"tls: failed to verify certificate: x509: certificate is valid for other.example, not main-1.etcd.test"}`,
			etcdfedv1.ReasonPeerCertificateNameMismatch, "serving certificate does not name the host"},
		{"unknown authority, client side",
			`{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"412b7335794019b4","error":"tls: failed to verify certificate: x509: certificate signed by unknown authority"}`,
			etcdfedv1.ReasonPeerCertificateUntrusted, "peer 412b7335794019b4"},
		{"expired certificate",
			`{"level":"warn","msg":"rejected connection on peer endpoint","remote-addr":"127.0.0.1:5","error":"tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 2030-01-01T00:00:00Z is after 2029-01-01T00:00:00Z"}`,
			etcdfedv1.ReasonPeerCertificateUntrusted, "expired"},
		{"cluster ID mismatch, plain text",
			`2026-01-01 W | rafthttp: request cluster ID mismatch (got 1 want 2)`,
			etcdfedv1.ReasonClusterIDMismatch, "another etcd cluster"},
		{"own URL does not resolve at start",
			`{"level":"error","msg":"failed to resolve URL Host","url":"https://main-3.etcd.test:2380","host":"main-3.etcd.test:2380","retry-interval":"1s","error":"lookup main-3.etcd.test on 127.1.0.2:1053: no such host"}`,
			etcdfedv1.ReasonPeerNameUnresolved, "main-3.etcd.test: no such host"},
		{"joined under a removed member's ID (the line of a nemesis run)",
			`{"level":"warn","ts":"2026-11-26T23:30:07.165272Z","caller":"etcdserver/server.go:726","msg":"rejected Raft message to mismatch member","local-member-id":"bae111bbcd85ee30","mismatch-member-id":"2c5606393bc77cd7"}`,
			etcdfedv1.ReasonJoinedAsAnotherMember, "etcd runs as member bae111bbcd85ee30; its peers send this address messages for member 2c5606393bc77cd7"},
		{"a peer not started yet is not a cause",
			`{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"b2","error":"dial tcp 127.1.1.10:2380: connect: connection refused"}`,
			"", ""},
		{"EOF is not a cause",
			`{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"b2","error":"EOF"}`,
			"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := etcdlog.Classify([]byte(tt.line + "\n"))
			got := ""
			if len(d.Findings) > 0 {
				got = d.Findings[0].Reason
			}
			if got != tt.want || len(d.Findings) > 1 {
				t.Fatalf("findings %+v, want %q", d.Findings, tt.want)
			}
			if tt.want == "" {
				return
			}
			if _, _, msg := d.Condition(); !strings.Contains(msg, tt.in) {
				t.Errorf("message lacks %q:\n%s", tt.in, msg)
			}
		})
	}
}

// RunsAs gives the ID a member that joined as another runs under, and
// nothing otherwise.
func TestDiagnosisRunsAs(t *testing.T) {
	log := `{"level":"warn","msg":"failed to find remote peer in cluster","local-member-id":"bae111bbcd85ee30","remote-peer-id-stream-handler":"bae111bbcd85ee30","remote-peer-id-from":"773935baee5e13b4","cluster-id":"edc7a9974d0017a3"}
{"level":"warn","msg":"rejected Raft message to mismatch member","local-member-id":"bae111bbcd85ee30","mismatch-member-id":"2c5606393bc77cd7"}
{"level":"warn","msg":"failed to process Raft message","local-member-id":"bae111bbcd85ee30","error":"cannot process message to mismatch member"}
`
	if got := etcdlog.Classify([]byte(log)).RunsAs(); got != "bae111bbcd85ee30" {
		t.Errorf("RunsAs %q, want bae111bbcd85ee30", got)
	}
	if got := etcdlog.Classify([]byte(`{"level":"warn","msg":"prober detected unhealthy status","remote-peer-id":"b2","error":"EOF"}` + "\n")).RunsAs(); got != "" {
		t.Errorf("RunsAs %q of a log without the finding", got)
	}
}

func TestClassifyBoundsTheMessage(t *testing.T) {
	long := `{"msg":"rejected connection on peer endpoint","remote-addr":"127.0.0.1:1","error":"tls: \"127.0.0.1\" does not match any of DNSNames [\"` + strings.Repeat("x", 5000) + `\"]"}`
	d := etcdlog.Classify([]byte(long + "\n" + long + "\n"))
	if len(d.Findings) != 1 || d.Findings[0].Count != 2 || d.Lines != 2 {
		t.Fatalf("findings %+v, lines %d", d.Findings, d.Lines)
	}
	if _, _, msg := d.Condition(); len(msg) > 2000 {
		t.Errorf("message of %d bytes", len(msg))
	}
}
