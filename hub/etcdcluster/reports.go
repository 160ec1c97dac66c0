package etcdcluster

import (
	"fmt"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/reports"
)

// checkReports validates what a member cluster reports before anything of
// it is used (rule 14, hub/reports): the status of the ring's EtcdMembers
// there (peer and client URLs, address) and of its EtcdSpoke (DNS and
// gossip addresses, zones, also against the zones its registration
// names: reports.RegisteredZones). A refused field is cleared in the snapshot's
// copy, so that the pass treats it as not reported (a member without a
// peer URL is not added nor founded, one without an address keeps its last
// recorded record, a DNS server without an address is no name server),
// and the refusal is kept in cs.rejected for Degraded, naming the
// cluster, the object and the field. The expectations come from the
// EtcdCluster (the member's DNS name, the TLS mode, the exposure), not
// from the objects in the member cluster (reportedExposure).
func checkReports(ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot, allowLoopback bool) {
	for _, obj := range cs.allObjects() {
		name := obj.Spec.MemberName
		exp := reportedExposure(ec, obj)
		m := reports.Member{
			DNSName: reportedDNSName(ec, obj, name), Domain: ec.Spec.DNS.Domain, TLS: ec.Spec.TLS.Mode.Enabled(),
			NodePort: exp(etcdfedv1.ExposeNodePort), LoadBalancer: exp(etcdfedv1.ExposeLoadBalancer), AllowLoopback: allowLoopback,
		}
		st, rej := reports.MemberStatus(obj.Status, m)
		obj.Status = st
		for _, r := range rej {
			cs.rejected = append(cs.rejected, fmt.Sprintf("member cluster %s reported for EtcdMember %s (member %s) %s; refused, not used", cs.name, obj.Name, name, r))
		}
	}
	if cs.spoke != nil {
		st, rej := reports.SpokeStatus(cs.spoke.Status, allowLoopback)
		st, zoneRej := reports.SpokeZones(st, reports.RegisteredZones(cs.labels))
		rej = append(rej, zoneRej...)
		cs.spoke.Status = st
		for _, r := range rej {
			cs.rejected = append(cs.rejected, fmt.Sprintf("member cluster %s reported for its EtcdSpoke %s; refused, not used", cs.name, r))
		}
	}
}

// reportedDNSName is the DNS name the hub expects in the URLs obj's spoke
// reports: the member's stable name, or the incarnation's own name when
// the object runs under it (a Move's incarnation). Nothing else, whatever
// the object's spec says: the names come from the EtcdCluster.
func reportedDNSName(ec *etcdfedv1.EtcdCluster, obj *etcdfedv1.EtcdMember, member string) string {
	if own := etcdfedv1.IncarnationDNSName(member, obj.Spec.Incarnation, ec.Spec.DNS.Domain); obj.Spec.DNSName == own {
		return own
	}
	return memberDNSName(ec, member)
}

// reportedExposure says which exposure types a report of obj may be
// checked under: spec.expose of the EtcdCluster, what the hub writes into
// every object. The object's own spec.expose is written in the member
// cluster, which may change it: it widens the check (any port with
// NodePort, a hostname with LoadBalancer) only while a Roll is in flight,
// when members not rolled yet still run the exposure the hub wrote
// before (a change of spec.expose is rolled one member at a time).
func reportedExposure(ec *etcdfedv1.EtcdCluster, obj *etcdfedv1.EtcdMember) func(etcdfedv1.ExposeType) bool {
	rolling := ec.Status.Operation != nil && ec.Status.Operation.Type == etcdfedv1.OperationRoll
	return func(t etcdfedv1.ExposeType) bool {
		return ec.Spec.Expose.Type == t || (rolling && obj.Spec.Expose.Type == t)
	}
}
