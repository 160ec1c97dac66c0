package etcdcluster

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Peer revocation. Every certificate of a ring comes from its one CA, so
// the ring's one revocation list (revocation.go) serves both of etcd's
// checks: every member runs with --peer-crl-file on the same file as
// --client-crl-file. etcd reads it on every connection its peer port
// accepts (client/pkg/transport's TLS listener, checkCRL: os.ReadFile per
// handshake, in 3.5, 3.6 and 3.7), so a rewritten Secret refuses a listed
// peer certificate's next connection without a restart; a connection open
// before stays open. The flag itself is a change of the member's spec
// (spec.tls.peerRevocationList), which the planner's Roll brings to a
// running ring one member at a time, as it brought --client-crl-file; the
// spoke restarts nothing on its own. etcd checks the list only on the
// side that accepts: a member dialing a peer does not check the peer's
// certificate against it.
//
// The list names the member certificates the hub superseded and that have
// not expired: the one a renewal or a CA rotation replaced
// (writeMemberCert) and those of the member Secrets it deletes (an earlier
// incarnation of a replaced or moved member, a removed member:
// deleteMembers). The hub records each in its own hub client Secret
// (pki.KeySupersededPeers) before it writes over or deletes the Secret
// that holds it, so the record cannot be lost between the two, and a
// member cluster (compromised, or gone) cannot drop it. A recorded
// certificate is listed:
//   - once peerRevocationGrace has passed since it was superseded: the
//     other members' Secrets may be copied into their pods before the
//     renewed member's own Secret is copied into its pod, and until then
//     its etcd still presents the old certificate;
//   - never while a member Secret the hub sees still holds it (a write
//     that failed after the record);
//   - while its member cluster is out of sight, only if the list already
//     names it (the hub cannot see whether the Secret was written).

// peerRevocationGrace is how long after the hub superseded a member
// certificate it is listed: the kubelet copies a changed Secret into a
// running pod within its sync period (about a minute).
const peerRevocationGrace = 2 * time.Minute

// maxSupersededPeerCerts bounds the superseded member certificates kept
// (a member certificate lives a year; a ring of 7 members renewed yearly,
// rotated and replaced a few times keeps a few dozen); past the bound the
// ones that expire first are dropped.
const maxSupersededPeerCerts = 128

// supersededPeers are the member certificates recorded in sec (the hub
// client Secret, nil when missing) with add, that have not expired at now:
// unique by serial (the earliest record kept), the last to expire first,
// at most maxSupersededPeerCerts.
func supersededPeers(sec *corev1.Secret, now time.Time, add ...pki.Superseded) []pki.Superseded {
	var list []pki.Superseded
	if sec != nil {
		list = pki.ParseSuperseded(sec.Data[pki.KeySupersededPeers])
	}
	list = append(list, add...)
	list = slices.DeleteFunc(list, func(p pki.Superseded) bool { return !now.Before(p.Cert.NotAfter) })
	slices.SortStableFunc(list, func(a, b pki.Superseded) int {
		if c := b.Cert.NotAfter.Compare(a.Cert.NotAfter); c != 0 {
			return c
		}
		if c := a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber); c != 0 {
			return c
		}
		return a.At.Compare(b.At)
	})
	list = slices.CompactFunc(list, func(a, b pki.Superseded) bool { return a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0 })
	if len(list) > maxSupersededPeerCerts {
		list = list[:maxSupersededPeerCerts]
	}
	return list
}

// listedPeerSerials are the serials of the superseded member certificates
// the ring's list names in this pass (see above), sorted.
func listedPeerSerials(s *snapshot) []string {
	recorded := supersededPeers(s.pki.hubClient, s.now)
	if len(recorded) == 0 {
		return nil
	}
	held, listed := map[string]bool{}, map[string]bool{}
	for _, sec := range memberCertSecrets(s) {
		if n, ok := pki.Serial(sec.Data[pki.KeyCert]); ok {
			held[pki.FormatSerial(n)] = true
		}
		if l, err := pki.ParseRevocationList(sec.Data[etcdfedv1.RevocationListKey]); err == nil {
			for _, t := range pki.ListedSerials(l) {
				listed[t] = true
			}
		}
	}
	var out []string
	for _, p := range recorded {
		serial := pki.FormatSerial(p.Cert.SerialNumber)
		switch cs := s.cluster(p.Cluster); {
		case held[serial]:
		case listed[serial]:
			out = append(out, serial)
		case s.now.Before(p.At.Add(peerRevocationGrace)):
		case cs != nil && !cs.visible():
		default:
			out = append(out, serial)
		}
	}
	slices.Sort(out)
	return out
}

// nextPeerListing is how long after now the grace of the first recorded
// member certificate still in it ends (the pass then lists it); 0 when
// none is.
func nextPeerListing(s *snapshot, now time.Time) time.Duration {
	var next time.Duration
	for _, p := range supersededPeers(s.pki.hubClient, now) {
		if d := p.At.Add(peerRevocationGrace).Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// recordSuperseded records the member certificates of secs (member
// certificate Secrets of the ring in cluster, about to be written over or
// deleted) in the hub client Secret, before they are: an error means they
// must not be. The snapshot's hub client Secret becomes the one written,
// for the next record of the pass. Without a hub client Secret (a ring
// taken over without its CA's key, where member certificates are kept,
// not replaced) nothing is recorded.
func (r *Reconciler) recordSuperseded(ctx context.Context, s *snapshot, cluster string, secs ...*corev1.Secret) error {
	now := r.now()
	known := map[string]bool{}
	for _, p := range supersededPeers(s.pki.hubClient, now) {
		known[pki.FormatSerial(p.Cert.SerialNumber)] = true
	}
	var add []pki.Superseded
	for _, sec := range secs {
		if sec == nil || sec.Labels[etcdfedv1.LabelComponent] != memberCertComponent || sec.Labels[etcdfedv1.LabelClusterUID] != string(s.ec.RingUID()) {
			continue
		}
		certs := pki.Certificates(sec.Data[pki.KeyCert])
		if len(certs) == 0 || !now.Before(certs[0].NotAfter) || known[pki.FormatSerial(certs[0].SerialNumber)] {
			continue
		}
		add = append(add, pki.Superseded{Cert: certs[0], At: now, Cluster: cluster})
	}
	if len(add) == 0 {
		return nil
	}
	hc := s.pki.hubClient
	if hc == nil {
		ctrl.LoggerFrom(ctx).Info("Not recording superseded member certificates: no hub client Secret", "cluster", cluster, "certificates", len(add))
		return nil
	}
	patched := hc.DeepCopy()
	if patched.Data == nil {
		patched.Data = map[string][]byte{}
	}
	patched.Data[pki.KeySupersededPeers] = pki.EncodeSuperseded(supersededPeers(hc, now, add...))
	if bytes.Equal(patched.Data[pki.KeySupersededPeers], hc.Data[pki.KeySupersededPeers]) {
		return nil
	}
	if err := r.hub().Patch(ctx, patched, client.MergeFrom(hc)); err != nil {
		return fmt.Errorf("record superseded member certificates of %s in Secret %s: %w", cluster, hc.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Recorded superseded member certificates for the revocation list", "cluster", cluster, "certificates", len(add))
	s.pki.hubClient = patched
	return nil
}

// memberPeerRevocationList is a member object's spec.tls.peerRevocationList,
// set as spec.tls.revocationList is (memberRevocationList): both flags
// read the one file.
func memberPeerRevocationList(s *snapshot, cs *clusterSnapshot, existing *etcdfedv1.EtcdMember) bool {
	if existing != nil && existing.Spec.TLS.PeerRevocationList {
		return true
	}
	return memberRevocationList(s, cs, existing)
}

func supersededPeersText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them member certificates the hub replaced or deleted, refused on the peer port too, until they expire)", n)
}
