package etcdlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Finding is one kind of peer-connection failure seen in the log.
type Finding struct {
	// Reason is one of etcdfedv1.PeerConnectionProblems.
	Reason string
	// Count is how many lines showed it.
	Count int
	// Detail describes the latest of them (peer, names, error), bounded.
	Detail string
	// RunsAs is, for JoinedAsAnotherMember, the member ID (hex) etcd runs
	// under, from its log.
	RunsAs string
	// serving is true for a name mismatch of a peer's serving certificate
	// against the host dialled (not of a client certificate against the
	// source address): another cause, another fix.
	serving bool
}

// Diagnosis is what a log says about a member's peer connections.
type Diagnosis struct {
	// Findings, most fundamental first (PeerConnectionProblems order).
	Findings []Finding
	// Lines is how many lines were read.
	Lines int
}

// maxDetail bounds the detail kept of one line.
const maxDetail = 300

// entry is the part of one etcd log line (zap JSON) the classifier reads.
type entry struct {
	Msg          string   `json:"msg"`
	Error        string   `json:"error"`
	RemoteAddr   string   `json:"remote-addr"`
	ServerName   string   `json:"server-name"`
	DNSNames     []string `json:"dns-names"`
	IPAddresses  []string `json:"ip-addresses"`
	RemotePeerID string   `json:"remote-peer-id"`
	RemoteName   string   `json:"remote-peer-server-name"`
	LocalCluster string   `json:"local-member-cluster-id"`
	RemoteClstr  string   `json:"remote-peer-cluster-id"`
	LocalMember  string   `json:"local-member-id"`
	Mismatch     string   `json:"mismatch-member-id"`
}

var lookupRE = regexp.MustCompile(`lookup ([^ :]+)(?: on [^ ]+)?: (no such host|server misbehaving|i/o timeout)`)

// Classify reads etcd's log (zap JSON lines; other lines are matched as
// text) and reports its peer-connection failures. It is pure.
func Classify(log []byte) Diagnosis {
	var d Diagnosis
	found := map[string]*Finding{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		d.Lines++
		var e entry
		if json.Unmarshal(line, &e) != nil {
			e = entry{Msg: string(line), Error: string(line)}
		}
		reason, detail, serving := classifyLine(e)
		if reason == "" {
			continue
		}
		f := found[reason]
		if f == nil {
			f = &Finding{Reason: reason}
			found[reason] = f
		}
		f.Count++
		f.Detail, f.serving = text.Truncate(detail, maxDetail), serving
		if reason == etcdfedv1.ReasonJoinedAsAnotherMember {
			f.RunsAs = e.LocalMember
		}
	}
	for _, r := range etcdfedv1.PeerConnectionProblems {
		if f := found[r]; f != nil {
			d.Findings = append(d.Findings, *f)
		}
	}
	return d
}

// classifyLine returns the reason a line shows (or "") with a detail.
func classifyLine(e entry) (reason, detail string, serving bool) {
	msg, errText := e.Msg, e.Error
	switch {
	case strings.Contains(errText, "the member has been permanently removed from the cluster"):
		return etcdfedv1.ReasonMemberRemoved, "etcd stopped: " + errText, false
	case strings.Contains(msg, "rejected Raft message to mismatch member") && e.LocalMember != "" && e.Mismatch != "":
		return etcdfedv1.ReasonJoinedAsAnotherMember, fmt.Sprintf("etcd runs as member %s; its peers send this address messages for member %s", e.LocalMember, e.Mismatch), false
	case strings.Contains(msg, "cluster ID mismatch"):
		local, remote := e.LocalCluster, e.RemoteClstr
		peer := e.RemotePeerID
		if peer == "" {
			peer = e.RemoteName
		}
		return etcdfedv1.ReasonClusterIDMismatch, fmt.Sprintf("peer %s has cluster ID %s, this member %s", orUnknown(peer), orUnknown(remote), orUnknown(local)), false
	case strings.Contains(errText, "certificate signed by unknown authority"),
		strings.Contains(errText, "tls: unknown certificate authority"),
		strings.Contains(errText, "certificate has expired or is not yet valid"):
		return etcdfedv1.ReasonPeerCertificateUntrusted, withPeer(e, errText), false
	case strings.Contains(msg, "rejected connection on peer endpoint") && strings.Contains(errText, "remote error: tls: bad certificate"):
		return etcdfedv1.ReasonPeerCertificateUntrusted, withPeer(e, "the peer rejected this member's certificate: "+errText), false
	case strings.Contains(errText, "does not match any of DNSNames"),
		strings.Contains(msg, "rejected connection on peer endpoint") && strings.Contains(errText, "x509: certificate is valid for"):
		d := withPeer(e, errText)
		if len(e.DNSNames) > 0 || len(e.IPAddresses) > 0 {
			d += fmt.Sprintf("; its certificate names %s", strings.Join(append(append([]string{}, e.DNSNames...), e.IPAddresses...), ", "))
		}
		return etcdfedv1.ReasonPeerCertificateNameMismatch, d, false
	case strings.Contains(errText, "x509: certificate is valid for"):
		return etcdfedv1.ReasonPeerCertificateNameMismatch, withPeer(e, errText), true
	}
	if m := lookupRE.FindStringSubmatch(errText); m != nil {
		return etcdfedv1.ReasonPeerNameUnresolved, fmt.Sprintf("%s: %s", m[1], m[2]), false
	}
	if m := lookupRE.FindStringSubmatch(msg); m != nil {
		return etcdfedv1.ReasonPeerNameUnresolved, fmt.Sprintf("%s: %s", m[1], m[2]), false
	}
	return "", "", false
}

func withPeer(e entry, text string) string {
	switch {
	case e.RemoteAddr != "":
		return fmt.Sprintf("connection from %s: %s", e.RemoteAddr, text)
	case e.RemotePeerID != "":
		return fmt.Sprintf("peer %s: %s", e.RemotePeerID, text)
	}
	return text
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// causes says, per reason, what it means and how to fix it.
var causes = map[string]struct{ cause, fix string }{
	etcdfedv1.ReasonMemberRemoved: {
		cause: "this member's etcd ID was removed from the cluster, and its peers refuse it: its data is of a replaced incarnation or of a member dropped by a quorum-loss recovery, and etcd stops on it (it is fenced)",
		fix:   "never start it on this data again: the hub deletes the member's object here when it no longer holds the member, or gives it a new incarnation on a fresh volume; the volume is kept until you delete it",
	},
	etcdfedv1.ReasonJoinedAsAnotherMember: {
		cause: "this member, started to join the cluster, runs under another member's ID: etcd took the ID its peer URL had in the member list of the first peer that answered, and that peer had not yet seen the member of that ID removed (a replacement under the same name while a peer was cut off from the leader); its peers refuse it for good",
		fix:   "none by hand: the hub removes the learner added for this incarnation and places the member again as a new incarnation on a fresh volume",
	},
	etcdfedv1.ReasonClusterIDMismatch: {
		cause: "a peer belongs to another etcd cluster: a data volume of another cluster or of an earlier bootstrap, or two rings sharing member names or addresses",
		fix:   "give every ring its own DNS domain and addresses; a member whose data is of another cluster must be replaced by a new incarnation on an empty volume, never started on that data again",
	},
	etcdfedv1.ReasonPeerCertificateUntrusted: {
		cause: "this member and a peer do not trust each other's certificate: the members' certificates or CA bundles come from different CAs (the EtcdCluster's CA Secret was replaced, or a member TLS Secret was written by something other than the hub), or a certificate expired",
		fix:   "every member's TLS Secret must come from the EtcdCluster's current CA: the hub rewrites a member Secret its CA did not issue; then restart the pods still running with the old certificate",
	},
	etcdfedv1.ReasonPeerCertificateNameMismatch: {
		cause: "etcd checks the address a peer connects from against the names in the peer's client certificate, and the connection comes from an address the certificate does not name: peers connect through NAT, a load balancer, or one shared source address (the local environment without root and iptables)",
		fix:   "set spec.tls.peerSkipClientSANVerification: true on the EtcdCluster (certificates are still verified against the ring's CA; only the address check is off; the hub rolls it out to the members once no membership change is in flight, so a ring that never formed must be deleted, with its volumes, and created again with it), or give every member pod its own source address",
	},
	etcdfedv1.ReasonPeerNameUnresolved: {
		cause: "etcd cannot resolve a peer's DNS name",
		fix:   "the ring's DNS must serve every member's record before its pod starts: check the EtcdDNSZone in each member cluster and that the spoke's DNS server answers, and that the pods' resolver reaches it (cluster DNS forwarding the ring's domain to the spokes)",
	},
}

// RunsAs is the member ID (hex) etcd's log says it runs under when it
// joined as another member (JoinedAsAnotherMember), "" otherwise.
func (d Diagnosis) RunsAs() string {
	for _, f := range d.Findings {
		if f.Reason == etcdfedv1.ReasonJoinedAsAnotherMember {
			return f.RunsAs
		}
	}
	return ""
}

// servingMismatch is the name-mismatch text when a peer's serving
// certificate does not name the host etcd dialled.
var servingMismatch = struct{ cause, fix string }{
	cause: "a peer's serving certificate does not name the host this member dialled",
	fix:   "member certificates must carry the member's DNS name: the hub reissues a member Secret whose names are wrong; check that peer URLs use the members' DNS names",
}

// Condition turns a diagnosis into the PeerConnections condition: False
// with the most fundamental finding's reason, its cause and its fix (and
// the other findings named), or True with NoPeerErrors.
func (d Diagnosis) Condition() (metav1.ConditionStatus, string, string) {
	if len(d.Findings) == 0 {
		return metav1.ConditionTrue, etcdfedv1.ReasonNoPeerErrors,
			fmt.Sprintf("etcd is not ready, but the last %d lines of its log show no rejected or failed peer connections", d.Lines)
	}
	f := d.Findings[0]
	c := causes[f.Reason]
	if f.serving {
		c = servingMismatch
	}
	msg := fmt.Sprintf("%s (%d of the last %d log lines; latest: %s). Fix: %s.", upper(c.cause), f.Count, d.Lines, f.Detail, c.fix)
	if len(d.Findings) > 1 {
		var also []string
		for _, o := range d.Findings[1:] {
			also = append(also, fmt.Sprintf("%s (%d lines; latest: %s)", o.Reason, o.Count, o.Detail))
		}
		msg += " Also seen: " + strings.Join(also, "; ") + "."
	}
	return metav1.ConditionFalse, f.Reason, msg
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
