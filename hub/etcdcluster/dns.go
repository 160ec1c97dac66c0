package etcdcluster

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/hub/planner"
	"github.com/etcdfed/etcdfed/hub/reports"
)

// wantedRecords is the record set of the ledger's members, as the member
// clusters that serve the ring's zone serve it (an EtcdDNSZone in each,
// servesZone) and an RFC 2136 server receives it. A member's record keeps its last known address while its
// cluster is out of sight or it is being moved: the record of a member
// still in the cluster is never deleted.
func wantedRecords(s *snapshot, st *etcdfedv1.EtcdClusterStatus) dnsWork {
	set, err := buildRecordSet(s, st)
	if err != nil || set == nil {
		return dnsWork{err: err, ledger: st}
	}
	recs := set.Records()
	records := make([]etcdfedv1.DNSRecord, len(recs))
	for i, rec := range recs {
		records[i] = etcdfedv1.DNSRecord{Name: rec.Name, Type: rec.Type, TTL: rec.TTL, Data: rec.Data}
	}
	return dnsWork{set: set, records: records, ledger: st}
}

// buildRecordSet returns nil when nothing can be served yet (no spoke has
// reported a DNS server address, so the zone would have no name server).
func buildRecordSet(s *snapshot, st *etcdfedv1.EtcdClusterStatus) (*dnsprovider.RecordSet, error) {
	ec := s.ec
	domain := strings.TrimSuffix(ec.Spec.DNS.Domain, ".")
	spec := dnsprovider.Spec{Domain: domain, Owner: string(ec.RingUID()), TLS: ec.Spec.TLS.Mode.Enabled(), TTL: etcdfedv1.DefaultDNSTTLSeconds}
	if ec.Spec.DNS.TTLSeconds != nil {
		spec.TTL = *ec.Spec.DNS.TTLSeconds
	}
	for _, m := range st.Members {
		addr := m.Address
		peer, cli := etcdfedv1.DefaultPeerPort, etcdfedv1.DefaultClientPort
		if obj := s.currentObject(st, m.Name); obj != nil && obj.Spec.Incarnation == m.Incarnation {
			if obj.Status.Address != "" {
				addr = obj.Status.Address
			}
			peer = urlPort(obj.Status.PeerURL, peer)
			cli = urlPort(obj.Status.ClientURL, cli)
		}
		stable, stablePeer, stableCli := addr, peer, cli
		if from, old, held := moveHoldsStableName(s, st, m.Name); held {
			// The old incarnation's address, and its ports as etcd lists
			// them (a NodePort exposure gives each incarnation its own).
			stable = from
			if len(old.PeerURLs) > 0 {
				stablePeer = urlPort(old.PeerURLs[0], stablePeer)
			}
			if len(old.ClientURLs) > 0 {
				stableCli = urlPort(old.ClientURLs[0], stableCli)
			}
		}
		if dm, ok := memberRecord(s, domain, m.Name, stable, stablePeer, stableCli); ok {
			spec.Members = append(spec.Members, dm)
		}
		if own := m.DNSName; own != "" && own != memberDNSName(ec, m.Name) {
			// The incarnation's own name, which its peers dial (its peer
			// URL), for as long as it is the member's incarnation. Never
			// the old incarnation's address, which the ledger keeps until
			// the new one reports its own: the learner's peers would dial
			// the old member.
			ownAddr := addr
			if op := st.Operation; op != nil && op.Type == etcdfedv1.OperationMove && op.Member == m.Name && ownAddr == op.FromAddress {
				ownAddr = ""
			}
			if dm, ok := memberRecord(s, domain, strings.TrimSuffix(own, "."+domain), ownAddr, peer, cli); ok {
				dm.NoSRV = true
				spec.Members = append(spec.Members, dm)
			}
		}
	}
	if own, addr, held := retiredOwnName(s, st); held {
		if dm, ok := memberRecord(s, domain, strings.TrimSuffix(own, "."+domain), addr, etcdfedv1.DefaultPeerPort, etcdfedv1.DefaultClientPort); ok {
			dm.NoSRV = true
			spec.Members = append(spec.Members, dm)
		}
	}
	for i, cs := range s.clusters {
		if cs.spoke == nil || !servesZone(s, st, cs) {
			continue
		}
		ns := dnsprovider.NameServer{Name: fmt.Sprintf("ns%d.%s", i, domain)}
		for _, a := range cs.spoke.Status.DNSAddresses {
			host := a
			if h, _, err := net.SplitHostPort(a); err == nil {
				host = h
			}
			if ip, err := netip.ParseAddr(host); err == nil {
				ns.Addresses = append(ns.Addresses, ip.Unmap())
			}
		}
		if len(ns.Addresses) > 0 {
			spec.NameServers = append(spec.NameServers, ns)
		}
	}
	if len(spec.NameServers) == 0 {
		return nil, nil
	}
	set, err := dnsprovider.Build(spec)
	if err != nil {
		return nil, fmt.Errorf("DNS records for %s: %w", domain, err)
	}
	return set, nil
}

// servesZone: cs serves the ring's zone (holds its EtcdDNSZone and is one
// of its name servers) because the ledger st places one of the ring's
// members there, or the operation in flight moves one from or to it, or
// the ring names it (spec.topology lists it by name, its clusterSelector
// selects it, or a consumer of spec.clients runs there). Objects a member cluster holds do not count:
// it could make them. A member cluster that hosts none of a ring's members
// and is not named for it gets nothing of the ring's zone and its spoke
// refuses the zone's names, so a resolver that follows the zone's NS
// records never asks it. Clients and peers check the member's name in its
// certificate besides; with tls.mode Disabled that is gone.
func servesZone(s *snapshot, st *etcdfedv1.EtcdClusterStatus, cs *clusterSnapshot) bool {
	if st == nil {
		st = &s.ec.Status
	}
	for _, m := range st.Members {
		if m.Cluster == cs.name {
			return true
		}
	}
	if op := st.Operation; op != nil && (op.From != nil && op.From.Cluster == cs.name || op.To != nil && op.To.Cluster == cs.name) {
		return true
	}
	for _, c := range s.ec.Spec.Clients {
		if c.Cluster == cs.name {
			return true // a declared consumer resolves the ring's names there
		}
	}
	topo := s.ec.Spec.Topology
	return slices.Contains(topo.Clusters, cs.name) || topo.ClusterSelector != nil && cs.eligible
}

// memberRecord is the record of name (one label under domain) at addr, when
// addr is known and passes the check of reported addresses.
func memberRecord(s *snapshot, domain, name, addr string, peer, cli int32) (dnsprovider.Member, bool) {
	if addr == "" {
		return dnsprovider.Member{}, false
	}
	// The object's address was checked when it was read; one the ledger
	// kept from before that check may not pass it, and one bad address
	// must not stop every other member's record.
	if reports.CheckAddress(addr, reports.Member{Domain: domain, LoadBalancer: true, AllowLoopback: s.allowLoopback}) != nil {
		return dnsprovider.Member{}, false
	}
	dm := dnsprovider.Member{Name: name, PeerPort: peer, ClientPort: cli}
	if ip, err := netip.ParseAddr(addr); err == nil {
		dm.Addresses = []netip.Addr{ip.Unmap()}
	} else {
		dm.Hostname = addr
	}
	return dm, true
}

// moveHoldsStableName: a Move of member is in flight and its old
// incarnation is still in etcd (or etcd did not answer: it may be), so the
// member's stable name keeps the old incarnation's address, from. Peers
// reach the old incarnation by that name; pointing it at the new one
// before the old ID is removed would cut the old voter off (two voters
// fewer, not one more). The new incarnation is reached by its own name
// meanwhile. old is the old incarnation's entry in etcd's member list
// (zero when etcd did not answer): its URLs give the stable name's ports.
func moveHoldsStableName(s *snapshot, st *etcdfedv1.EtcdClusterStatus, member string) (from string, old planner.ListEntry, held bool) {
	op := st.Operation
	if op == nil || op.Type != etcdfedv1.OperationMove || op.Member != member || op.FromAddress == "" {
		return "", old, false
	}
	if !s.etcd.Reachable {
		return op.FromAddress, old, true
	}
	if em, listed := listedID(s.etcd, parseID(op.MemberID)); listed {
		return op.FromAddress, em, true
	}
	return "", old, false
}

// retiredOwnName: an operation retires an incarnation that runs under its
// own name (added by an earlier Move), and etcd still lists it (or did not
// answer): that name keeps the incarnation's address, from, while the
// ledger already names the new incarnation. Its peers dial it by that
// name, and the hub reaches it there (to move leadership away).
func retiredOwnName(s *snapshot, st *etcdfedv1.EtcdClusterStatus) (name, from string, held bool) {
	op := st.Operation
	if op == nil || op.FromDNSName == "" || op.FromAddress == "" || op.FromDNSName == memberDNSName(s.ec, op.Member) {
		return "", "", false
	}
	if m := statusMember(st, op.Member); m != nil && m.DNSName == op.FromDNSName {
		return "", "", false // still the ledger's own incarnation (given back)
	}
	if !s.etcd.Reachable {
		return op.FromDNSName, op.FromAddress, true
	}
	if _, listed := listedID(s.etcd, parseID(op.MemberID)); listed {
		return op.FromDNSName, op.FromAddress, true
	}
	return "", "", false
}
