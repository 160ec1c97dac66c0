package etcdcluster

import (
	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// A peer port for peers only. Every certificate of the ring comes from
// its one CA, and etcd's peer port accepts any certificate the CA signed
// (its address check passes a certificate without SANs, which is what a
// client certificate is): a consumer's certificate would speak raft.
// Every member certificate therefore carries the ring's peer name
// (pki.PeerName) besides its own, and etcd's peer port requires it
// (--peer-cert-allowed-hostname, the same flag on etcd 3.5, 3.6 and 3.7,
// checked on both ends of every peer connection). No client certificate
// has a SAN, so the TLS handshake refuses it.
//
// A ring that ran before is moved over without a moment where two members
// distrust each other, in two rolls (one member at a time, the leader
// last, as a CA rotation's):
//
//  1. The member certificates are reissued with the peer name (upkeep:
//     etcd reads its certificate again on every handshake, but a Secret
//     reaches a running pod late, so) and spec.tls.peerName is set, which
//     restarts each member on a certificate that carries it.
//  2. Once every member runs so, spec.tls.requirePeerName is set, which
//     restarts each member requiring it. A restarted member refuses no
//     peer: every peer presents the name since step 1.
//
// A new ring's members start with both (nothing runs before them); a
// member added while step 1 is under way starts without the requirement
// and is rolled with the others in step 2.

// requirePeerName says whether a member's object requires the peer name:
// once set, always; once the ring has moved over (ringRequires), for
// every member, whichever cluster the hub cannot see; otherwise when
// every member of the ring runs with a certificate that carries it
// (peersCarryName).
func requirePeerName(s *snapshot, st *etcdfedv1.EtcdClusterStatus, existing *etcdfedv1.EtcdMember) bool {
	if existing != nil && existing.Spec.TLS.RequirePeerName {
		return true
	}
	return ringRequires(s, st) || peersCarryName(s, st)
}

// ringRequires: step 2 has begun, so every member of the ring carries the
// peer name (step 2 begins only once every member runs with it, and every
// member made since is created with it): a member of the ledger, in a
// cluster the hub sees, runs an object of its recorded incarnation that
// requires the name. From then on a member created while some cluster is
// out of sight (a Replace after a cluster failed, most of all) requires
// it too: before, peersCarryName answered no on the partial view, and
// the replacement's peer port took any certificate of the CA for as long
// as the cluster stayed away. Not while an adopted cluster's originals
// remain (they present no peer name), nor while a member the hub sees
// runs without the name: the flag is read from objects in member
// clusters, and one that set it on its own object in the middle of step 1
// must not roll the requirement onto members whose peers lack the name.
func ringRequires(s *snapshot, st *etcdfedv1.EtcdClusterStatus) bool {
	if originalsLeft(s.ec, st) {
		return false
	}
	want := pki.PeerName(s.ec.Spec.DNS.Domain)
	required := false
	for i := range st.Members {
		m := &st.Members[i]
		cs := s.cluster(m.Cluster)
		if !cs.visible() {
			continue
		}
		obj := cs.members[m.Name]
		if obj == nil || obj.Spec.Incarnation != m.Incarnation {
			continue // created with the name
		}
		if obj.Spec.TLS.PeerName != want || obj.Status.ObservedGeneration != obj.Generation {
			return false
		}
		required = required || obj.Spec.TLS.RequirePeerName
	}
	return required
}

// peersCarryName: every member of the ledger runs, or will start, with a
// certificate carrying the peer name. A member whose object is absent from
// its (visible) cluster has not started yet and starts with one; a member
// whose cluster is not seen is not known to, so the answer is no.
func peersCarryName(s *snapshot, st *etcdfedv1.EtcdClusterStatus) bool {
	if originalsLeft(s.ec, st) {
		// An adopted cluster's original members present certificates of
		// the same CA without the peer name: required, it would cut them
		// off. The requirement follows the last one's retirement.
		return false
	}
	want := pki.PeerName(s.ec.Spec.DNS.Domain)
	for i := range st.Members {
		m := &st.Members[i]
		cs := s.cluster(m.Cluster)
		if !cs.visible() {
			return false
		}
		obj := cs.members[m.Name]
		if obj == nil || obj.Spec.Incarnation != m.Incarnation {
			continue // created with the name
		}
		if obj.Spec.TLS.PeerName != want || obj.Status.ObservedGeneration != obj.Generation {
			return false
		}
	}
	return true
}
