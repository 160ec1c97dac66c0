package etcdcluster

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/pkg/timing"
)

// The objects the hub wants, rendered by pure functions from the
// EtcdCluster and the ledger.

// Image is the etcd image of an EtcdCluster.
func Image(ec *etcdfedv1.EtcdCluster) string {
	if ec.Spec.Image != "" {
		return ec.Spec.Image
	}
	return etcdfedv1.DefaultImageRepository + ":v" + ec.Spec.Version
}

// memberDNSName is <member>.<domain>.
func memberDNSName(ec *etcdfedv1.EtcdCluster, member string) string {
	return etcdfedv1.MemberDNSName(member, ec.Spec.DNS.Domain)
}

// memberCertNames are the DNS SANs of a member's certificate: the name
// its incarnation was started under first (etcd's peer address check
// resolves them in order), then the member's stable name when that is
// another (an incarnation added by a Move: clients reach it by the stable
// name once the old incarnation is gone), then the ring's peer name, which
// no client certificate carries. dnsName "" is the stable name.
func memberCertNames(ec *etcdfedv1.EtcdCluster, member, dnsName string) []string {
	stable := memberDNSName(ec, member)
	if dnsName == "" || dnsName == stable {
		return []string{stable, pki.PeerName(ec.Spec.DNS.Domain)}
	}
	return []string{dnsName, stable, pki.PeerName(ec.Spec.DNS.Domain)}
}

// incarnationDNSName is the DNS name a recorded member's incarnation runs
// under: its own (status.members[].dnsName, a Move's) or the stable one.
func incarnationDNSName(ec *etcdfedv1.EtcdCluster, m *etcdfedv1.MemberStatus) string {
	if m.DNSName != "" {
		return m.DNSName
	}
	return memberDNSName(ec, m.Name)
}

// objectDNSName is the DNS name obj runs under, the stable name when obj
// is nil.
func objectDNSName(ec *etcdfedv1.EtcdCluster, obj *etcdfedv1.EtcdMember, member string) string {
	if obj != nil && obj.Spec.DNSName != "" {
		return obj.Spec.DNSName
	}
	return memberDNSName(ec, member)
}

// newObjectName names a new EtcdMember of m's recorded incarnation in cs:
// the scheme's name (etcdfedv1.MemberObjectName), or, while cs holds
// another object of the member under that name (a Move inside the cluster
// keeps its old incarnation beside the new one), the incarnation's own
// (etcdfedv1.IncarnationObjectName). A later move inside the cluster takes
// the scheme's name again: the old object is gone by then.
func newObjectName(ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot, m *etcdfedv1.MemberStatus) string {
	name := etcdfedv1.MemberObjectName(ec.Namespace, ec.Name, m.Name)
	if o := cs.object(m.Name, name); o != nil && o.Spec.Incarnation != m.Incarnation {
		return etcdfedv1.IncarnationObjectName(ec.Namespace, ec.Name, m.Name, m.Incarnation)
	}
	return name
}

// heldObject is the EtcdMember a recorded member's incarnation is written
// to in cs: the member's current object there, unless that is of another
// incarnation that a Move inside the cluster keeps beside the new one, or
// that a fencing confirmation names (fencedObject); then nil, and the new
// incarnation gets an object of its own (newObjectName), and the old one
// is swept with its volume kept. (A Replace rewrites the object in place:
// its old ID was removed from a quorate etcd first, which holds its data.)
func heldObject(s *snapshot, st *etcdfedv1.EtcdClusterStatus, cs *clusterSnapshot, m *etcdfedv1.MemberStatus) *etcdfedv1.EtcdMember {
	o := cs.members[m.Name]
	if o != nil && o.Spec.Incarnation != m.Incarnation && (movesInside(st, m.Name, cs.name) || fencedObject(s.requests(), o)) {
		return nil
	}
	return o
}

// fencedObject: o runs an incarnation that the EtcdCluster's fencing
// confirmation (annotation etcdfed.dev/fenced) names, by its member and,
// when the confirmation gives one, its etcd ID. Such an incarnation was
// stopped for a quorum-loss recovery, not removed from a quorate etcd: its
// volume may hold writes the recovered ring lacks. Rewritten in place to a
// new incarnation, its spoke would delete that volume by the Delete
// reclaim policy once the new pod runs; beside a new object, it is swept
// with its volume kept (VolumesRetained) like one in another cluster.
func fencedObject(q *requests, o *etcdfedv1.EtcdMember) bool {
	if q.fencedErr != nil {
		return true // unreadable: the cautious side, its volume kept
	}
	f := q.fenced
	if f == nil {
		return false
	}
	id := runsAs(o)
	for _, fm := range f.Members {
		if fm.Name == o.Spec.MemberName && (fm.ID == "" || id == 0 || parseID(fm.ID) == id) {
			return true
		}
	}
	return false
}

// movesInside: the operation in flight moves member make before break
// between two domains of the cluster.
func movesInside(st *etcdfedv1.EtcdClusterStatus, member, cluster string) bool {
	op := st.Operation
	return op != nil && op.Type == etcdfedv1.OperationMove && op.Member == member &&
		op.From != nil && op.To != nil && op.From.Cluster == cluster && op.To.Cluster == cluster
}

// memberURL is a member's URL on port, by its DNS name.
func memberURL(ec *etcdfedv1.EtcdCluster, member string, port int32) string {
	return etcdfedv1.MemberURL(ec.Spec.TLS.Mode, memberDNSName(ec, member), port)
}

// desiredMember renders a member's object. The bootstrap of an existing
// object of the same incarnation is kept, switched from "new" to "existing"
// once the cluster has formed (rule 2: "new" is never used again); a new
// incarnation starts without one.
//
// The object keeps the name of existing (written before the naming scheme,
// it may be the member's name alone); a new object is named by the scheme
// (newObjectName).
func desiredMember(s *snapshot, st *etcdfedv1.EtcdClusterStatus, m *etcdfedv1.MemberStatus, existing *etcdfedv1.EtcdMember) *etcdfedv1.EtcdMember {
	ec := s.ec
	labels := ownerLabels(ec)
	labels[etcdfedv1.LabelMember] = m.Name
	labels[etcdfedv1.LabelIncarnation] = strconv.FormatInt(m.Incarnation, 10)
	name := newObjectName(ec, s.cluster(m.Cluster), m)
	if existing != nil {
		name = existing.Name
	}
	obj := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ringNamespace, Name: name, Labels: labels},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:     etcdfedv1.ClusterReference{Name: ec.Name, Namespace: ec.Namespace, UID: string(ec.RingUID())},
			MemberName:  m.Name,
			Incarnation: m.Incarnation,
			Image:       Image(ec),
			Version:     ec.Spec.Version,
			DNSName:     incarnationDNSName(ec, m),
			Zone:        m.Zone,
			Storage:     memberStorage(ec, m.Cluster),
			Expose:      ec.Spec.Expose,
			Etcd:        timing.Render(ec.Spec.Etcd, st.Timing),
			TLS: etcdfedv1.MemberTLS{
				Mode:                          ec.Spec.TLS.Mode,
				PeerSkipClientSANVerification: ec.Spec.TLS.PeerSkipClientSANVerification,
			},
			PodTemplate: ec.Spec.PodTemplate,
		},
	}
	if ec.Spec.TLS.Mode.Enabled() {
		obj.Spec.TLS.SecretName = pki.MemberSecretName(name)
		// Only during a CA rotation: every change of it restarts the
		// member (one at a time, a Roll) on the bundle and certificate its
		// Secret then holds.
		if a := s.pki.authority(); a != nil && a.Rotating() {
			obj.Spec.TLS.CAHash = a.Trust()
		}
		// The peer port for peers only (peerport.go).
		obj.Spec.TLS.PeerName = pki.PeerName(ec.Spec.DNS.Domain)
		obj.Spec.TLS.RequirePeerName = requirePeerName(s, st, existing)
		// Revocation (revocation.go): a change restarts the member, in a Roll.
		obj.Spec.TLS.RevocationList = memberRevocationList(s, s.cluster(m.Cluster), existing)
		obj.Spec.TLS.PeerRevocationList = memberPeerRevocationList(s, s.cluster(m.Cluster), existing)
	}
	// The seed of a recovery from a backup is rewritten in place to a new
	// incarnation: its earlier volumes may hold writes newer than the
	// backup, so its spoke keeps them whatever the reclaim policy. Kept on
	// the object once set (an older incarnation's volume stays kept).
	if restoringFromBackup(st, m.Name) {
		obj.Spec.Storage.KeepVolumesBefore = m.Incarnation
	}
	if existing != nil && existing.Spec.Storage.KeepVolumesBefore > obj.Spec.Storage.KeepVolumesBefore {
		obj.Spec.Storage.KeepVolumesBefore = existing.Spec.Storage.KeepVolumesBefore
	}
	if grantsDisruption(st, m.Name) {
		obj.Spec.Disruption = &etcdfedv1.MemberDisruption{Allowed: true}
	}
	if existing != nil && existing.Spec.Incarnation == m.Incarnation {
		// Set and cleared only by a Recover's steps.
		obj.Spec.ForceNewCluster = existing.Spec.ForceNewCluster
	}
	if existing != nil && existing.Spec.Incarnation == m.Incarnation && existing.Spec.Bootstrap != nil {
		b := *existing.Spec.Bootstrap
		if restoreEnded(st, m.Name, existing) {
			// Restarts nothing; the copy of the store's credentials goes
			// once the object no longer names it (spentStoreCredentials).
			b.Restore = nil
		}
		if st.ClusterID != "" {
			b.InitialClusterState = etcdfedv1.InitialClusterExisting
			// The spoke refuses to start the member on data of another
			// cluster. Not for the member a recovery from a backup is
			// restoring: its data will be of the new cluster, whose ID is
			// recorded when the recovery ends.
			if !restoringFromBackup(st, m.Name) {
				b.ClusterID = st.ClusterID
			}
		}
		obj.Spec.Bootstrap = &b
	}
	return obj
}

func memberStorage(ec *etcdfedv1.EtcdCluster, cluster string) etcdfedv1.MemberStorage {
	s := etcdfedv1.MemberStorage{Size: ec.Spec.Storage.Size, StorageClassName: ec.Spec.Storage.StorageClassName, VolumeReclaimPolicy: ec.Spec.Storage.VolumeReclaimPolicy}
	for _, o := range ec.Spec.Storage.ClusterOverrides {
		if o.Cluster != cluster {
			continue
		}
		if o.Size != nil {
			s.Size = o.Size
		}
		if o.StorageClassName != nil {
			s.StorageClassName = o.StorageClassName
		}
	}
	return s
}

// desiredZone renders the EtcdDNSZone every member cluster serves, as it
// is written in cs: under the name of the ring's zone there (zoneObject),
// else the scheme's (etcdfedv1.RingObjectName).
func desiredZone(s *snapshot, cs *clusterSnapshot, records []etcdfedv1.DNSRecord) *etcdfedv1.EtcdDNSZone {
	ec := s.ec
	name := etcdfedv1.RingObjectName(ec.Namespace, ec.Name)
	if z := zoneObject(ec, cs); z != nil {
		name = z.Name
	}
	return &etcdfedv1.EtcdDNSZone{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ringNamespace, Name: name, Labels: ownerLabels(ec)},
		Spec: etcdfedv1.EtcdDNSZoneSpec{
			Cluster: etcdfedv1.ClusterReference{Name: ec.Name, Namespace: ec.Namespace, UID: string(ec.RingUID())},
			Domain:  strings.TrimSuffix(ec.Spec.DNS.Domain, "."),
			Records: records,
		},
	}
}

// certSecret renders a Secret holding a certificate and the CA bundle to
// trust: ca.crt, tls.crt and tls.key.
func certSecret(ns, name string, labels map[string]string, bundle []byte, leaf *pki.Leaf) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{pki.KeyCA: bundle, pki.KeyCert: leaf.CertPEM, pki.KeyKey: leaf.KeyPEM},
	}
}

// memberCertLabels label a member's certificate Secret.
func memberCertLabels(ec *etcdfedv1.EtcdCluster, member string) map[string]string {
	l := ownerLabels(ec)
	l[etcdfedv1.LabelMember] = member
	l[etcdfedv1.LabelComponent] = memberCertComponent
	return l
}
