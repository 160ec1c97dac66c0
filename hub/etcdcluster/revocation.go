package etcdcluster

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Revocation (spec.tls.revokedCertificates). A root certificate (the
// hub's, `etcdfed client-cert`'s) names etcd's root user, which etcd will
// not delete while authentication is on, so taking its user away revokes
// nothing. etcd's own revocation list does: every member runs with
// --client-crl-file on the list its Secret holds (etcdfedv1.RevocationListKey,
// DER), and etcd reads the file on every client handshake
// (pki.TestRevocationListOnRealEtcd), so a list rewritten in the Secret
// refuses a listed certificate's next connection once the kubelet has
// copied the Secret into the pod, with no restart.
//
//   - decideCRL picks the list: one a member's Secret already holds when
//     it lists exactly the wanted serials, is signed by the CA that signs
//     lists and is not near its nextUpdate; else a new one is signed
//     (applyCRL), numbered one past the highest seen. During a CA
//     rotation the list is signed by the CA that issues (etcd reads one
//     DER list from the file and matches serial numbers only, whichever
//     CA signed them; serials are 127 random bits).
//   - the serials are spec.tls.revokedCertificates and the hub's own
//     client certificates it superseded and that have not expired
//     (supersededHubCerts: kept in its Secret under pki.KeySuperseded,
//     written with the certificate that replaces them, so the record
//     cannot be lost between the two).
//   - every member Secret gets it (writeMemberCert for the Secrets the
//     pass writes, writeCRLs for the others: ca.crl alone is patched).
//   - a member's object asks for the flag (spec.tls.revocationList) once
//     its Secret holds a list, or at once when it is new and the pass has
//     a list to write beside it: etcd refuses every client while the file
//     is missing. A running ring's members are restarted onto the flag by
//     the planner's Roll, one at a time and the leader last, as any change
//     of the member's spec; the flag is never cleared.

// maxSupersededHubCerts bounds the hub's superseded client certificates
// kept (pki.KeySuperseded). The hub replaces its certificate every 4 to 5
// days (pki.ClientValidity, renewed with a third left), on a CA rotation
// and when it is revoked, and drops one when it expires, so a handful are
// kept at a time; past the bound, the ones that expire first are dropped.
const maxSupersededHubCerts = 16

// supersededHubCerts are the hub's client certificates of sec (the hub
// client Secret, nil when missing) that it replaced and that have not
// expired at now: those of pki.KeySuperseded and, when replacing (sec's
// certificate is being replaced), sec's own. Unique by serial, the last
// to expire first, at most maxSupersededHubCerts.
func supersededHubCerts(sec *corev1.Secret, now time.Time, replacing bool) []*x509.Certificate {
	if sec == nil {
		return nil
	}
	certs := pki.Certificates(sec.Data[pki.KeySuperseded])
	if replacing {
		certs = append(certs, pki.Certificates(sec.Data[pki.KeyCert])...)
	}
	certs = slices.DeleteFunc(certs, func(c *x509.Certificate) bool { return !now.Before(c.NotAfter) })
	slices.SortStableFunc(certs, func(a, b *x509.Certificate) int {
		if c := b.NotAfter.Compare(a.NotAfter); c != 0 {
			return c
		}
		return a.SerialNumber.Cmp(b.SerialNumber)
	})
	certs = slices.CompactFunc(certs, func(a, b *x509.Certificate) bool { return a.SerialNumber.Cmp(b.SerialNumber) == 0 })
	if len(certs) > maxSupersededHubCerts {
		certs = certs[:maxSupersededHubCerts]
	}
	return certs
}

// hubClientSecret is the hub client Secret written with leaf: its
// certificate and bundle, and the certificates it supersedes (the one it
// replaces among them) for the revocation list.
func hubClientSecret(s *snapshot, bundle []byte, leaf *pki.Leaf, now time.Time) *corev1.Secret {
	sec := certSecret(s.ec.Namespace, pki.HubClientSecretName(s.ec), ownerLabels(s.ec), bundle, leaf)
	if old := supersededHubCerts(s.pki.hubClient, now, true); len(old) > 0 {
		sec.Data[pki.KeySuperseded] = pki.EncodeCertificates(old)
	}
	// The entries carried from a taken-over ring's list stay recorded
	// (carry.go).
	if rec := carriedRecord(decideCarry(s)); rec != nil {
		sec.Data[pki.KeyCarried] = rec
	}
	// The member certificates it superseded stay recorded (peerrevocation.go).
	if peers := supersededPeers(s.pki.hubClient, now); len(peers) > 0 {
		sec.Data[pki.KeySupersededPeers] = pki.EncodeSuperseded(peers)
	}
	return sec
}

// crlWork is the revocation list the pass gives the members' Secrets.
type crlWork struct {
	// want are the serials to list (pki.FormatSerial), sorted.
	want []string
	// superseded is how many of them are the hub's own superseded client
	// certificates.
	superseded int
	// peers are the serials of member certificates the hub superseded
	// that the list names (listedPeerSerials, read once a pass).
	peers []string
	// carry are the entries carried from the list of a ring taken over
	// (carry.go).
	carry carryWork
	// list is a list a member's Secret already holds that fits; nil when
	// one is signed (sign) or none can be.
	list []byte
	// sign: a new list numbered number is signed by signer (nil: the CA
	// applyPKI creates in this pass).
	sign   bool
	signer *pki.CA
	number int64
	// stale: some member Secret holds another list, or none.
	stale bool
	// unseen: no member Secret exists yet (a new ring): a list is signed
	// for the Secrets the pass may create, with no event.
	unseen bool
	// problem says why no list can be signed; "" when one can.
	problem string
}

// wantedSerials are spec.tls.revokedCertificates, parsed and spelled as
// FormatSerial does, sorted and unique. The CRD admits only that
// spelling; anything else is skipped.
func wantedSerials(ec *etcdfedv1.EtcdCluster) []string {
	out := make([]string, 0, len(ec.Spec.TLS.RevokedCertificates))
	for _, t := range ec.Spec.TLS.RevokedCertificates {
		if n, err := pki.ParseSerial(t); err == nil {
			out = append(out, pki.FormatSerial(n))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// listedSerials are the serials the ring's revocation list holds:
// spec.tls.revokedCertificates, the hub's superseded client certificates
// and peers, the member certificates it superseded (listedPeerSerials),
// that have not expired; sorted and unique.
func listedSerials(s *snapshot, peers []string) []string {
	out := wantedSerials(s.ec)
	for _, c := range supersededHubCerts(s.pki.hubClient, s.now, false) {
		out = append(out, pki.FormatSerial(c.SerialNumber))
	}
	out = append(out, peers...)
	slices.Sort(out)
	return slices.Compact(out)
}

// revoked: spec.tls.revokedCertificates lists the serial of certPEM.
func revoked(ec *etcdfedv1.EtcdCluster, certPEM []byte) bool {
	n, ok := pki.Serial(certPEM)
	return ok && slices.Contains(wantedSerials(ec), pki.FormatSerial(n))
}

// crlSigner is the CA that signs the ring's revocation list: the CA that
// issues, else (a ring taken over without its key, rotating) the new CA
// trusted beside it. created: the CA does not exist yet and this pass
// creates it (pkiDue), so it will sign.
func crlSigner(s *snapshot) (signer *pki.CA, created bool, problem string) {
	if s.pki.ca == nil {
		if s.ec.RingUID() == s.ec.UID {
			return nil, true, ""
		}
		return nil, false, "the ring's CA is not stored yet (taken over)"
	}
	a := s.pki.authority()
	for _, ca := range []*pki.CA{a.Signer, a.Next} {
		if ca.CanSignLists() {
			return ca, false, ""
		}
	}
	return nil, false, fmt.Sprintf("the ring's CA %s cannot sign revocation lists (its key is not held, or its certificate lacks the cRLSign key usage)", pki.Describe(a.Signer.Cert))
}

// decideCRL is the list the pass writes (see above).
func decideCRL(s *snapshot) crlWork {
	if !s.ec.Spec.TLS.Mode.Enabled() {
		return crlWork{}
	}
	peers := listedPeerSerials(s)
	carry := decideCarry(s)
	want := append(listedSerials(s, peers), carry.serials()...)
	slices.Sort(want)
	w := crlWork{want: slices.Compact(want), superseded: len(supersededHubCerts(s.pki.hubClient, s.now, false)), peers: peers, carry: carry}
	signer, created, problem := crlSigner(s)
	if hold := carryHold(s, carry); hold != "" {
		signer, created, problem = nil, false, hold
	}
	w.problem = problem
	var fit, newest []byte
	var fitNumber, maxNumber int64 = -1, 0
	secrets := memberCertSecrets(s)
	for _, sec := range secrets {
		// A list a member cluster holds counts only when it verifies
		// against one of the ring's CAs: a list of another CA (a
		// compromised member cluster's) is neither handed to the other
		// members nor numbered after.
		der := sec.Data[etcdfedv1.RevocationListKey]
		l := genuineList(s, der)
		if l == nil {
			continue
		}
		n := l.Number.Int64()
		if n >= maxNumber {
			maxNumber, newest = n, der
		}
		fits := slices.Equal(pki.ListedSerials(l), w.want) &&
			(signer == nil && !created || pki.SignedBy(l, signer) && l.NextUpdate.Sub(s.now) > pki.RevocationListValidity/3)
		if fits && n > fitNumber {
			fit, fitNumber = der, n
		}
	}
	switch {
	case fit != nil:
		w.list = fit
	case signer != nil || created:
		w.sign, w.signer, w.number = true, signer, maxNumber+1
	default:
		// Nothing can sign: the members keep the newest list they hold.
		w.list = newest
	}
	if w.sign {
		w.unseen = len(secrets) == 0
		w.stale = !w.unseen
		return w
	}
	if w.list != nil {
		for _, sec := range secrets {
			if !bytes.Equal(sec.Data[etcdfedv1.RevocationListKey], w.list) {
				w.stale = true
			}
		}
	}
	return w
}

// crlAvailable: the pass has a revocation list to write into a new
// member's Secret beside its object (decideCRL without parsing lists).
func crlAvailable(s *snapshot) bool {
	if !s.ec.Spec.TLS.Mode.Enabled() {
		return false
	}
	if signer, created, _ := crlSigner(s); signer != nil || created {
		return true
	}
	for _, sec := range memberCertSecrets(s) {
		if genuineList(s, sec.Data[etcdfedv1.RevocationListKey]) != nil {
			return true
		}
	}
	return false
}

// genuineList is der parsed when it is a revocation list signed by one of
// the ring's CAs (the one that issues, and during a rotation the one
// beside it) with a positive CRL number; nil otherwise.
func genuineList(s *snapshot, der []byte) *x509.RevocationList {
	if len(der) == 0 {
		return nil
	}
	l, err := pki.ParseRevocationList(der)
	if err != nil || l.Number == nil || !l.Number.IsInt64() || l.Number.Sign() <= 0 || pki.ListSigner(l, s.pki.authority().Certs()) == nil {
		return nil
	}
	return l
}

// memberRevocationList is a member object's spec.tls.revocationList:
// once set, always; for an object that runs, once its Secret holds a
// list (then a Roll restarts it onto the flag); for a new object, when
// the pass has a list to write into its Secret first.
func memberRevocationList(s *snapshot, cs *clusterSnapshot, existing *etcdfedv1.EtcdMember) bool {
	if existing == nil {
		return crlAvailable(s)
	}
	if existing.Spec.TLS.RevocationList {
		return true
	}
	return cs != nil && holdsList(cs, pki.MemberSecretName(existing.Name))
}

// holdsList: the Secret name in cs holds a revocation list.
func holdsList(cs *clusterSnapshot, name string) bool {
	sec := cs.secrets[name]
	return sec != nil && len(sec.Data[etcdfedv1.RevocationListKey]) > 0
}

// applyCRL signs the list when decideCRL asked for one, with the CA
// applyPKI returned when the CA is created in this pass, and returns the
// list the members' Secrets get (nil: none).
func (r *Reconciler) applyCRL(s *snapshot, w crlWork, ca *pki.CA) ([]byte, error) {
	if !w.sign {
		return w.list, nil
	}
	signer := w.signer
	if signer == nil {
		signer = ca
	}
	if signer == nil {
		return nil, nil // the CA was not created: nothing is issued in this pass
	}
	revoked := make([]pki.Revoked, 0, len(w.want))
	for _, t := range w.want {
		n, err := pki.ParseSerial(t)
		if err != nil {
			return nil, err
		}
		revoked = append(revoked, pki.Revoked{Serial: n, At: w.carry.revokedAt(t)})
	}
	der, err := signer.RevocationListOf(revoked, w.number, r.now(), pki.RevocationListValidity)
	if err != nil {
		return nil, fmt.Errorf("sign revocation list: %w", err)
	}
	if w.unseen {
		return der, nil
	}
	r.event(s.ec, corev1.EventTypeNormal, etcdfedv1.EventRevocationListSigned, "Revoke",
		"Revocation list #%d signed by %s: %s%s%s%s; written into every member's Secret (%s)", w.number, pki.Describe(signer.Cert), serialsText(w.want), supersededText(w.superseded), supersededPeersText(len(w.peers)), carriedText(w.carry), etcdfedv1.RevocationListKey)
	return der, nil
}

func supersededText(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them the hub's own superseded client certificates, until they expire)", n)
}

func serialsText(serials []string) string {
	switch n := len(serials); {
	case n == 0:
		return "no serial revoked"
	case n <= 4:
		return "revokes " + strings.Join(serials, ", ")
	default:
		return fmt.Sprintf("revokes %d serials (%s, ...)", n, strings.Join(serials[:4], ", "))
	}
}

// writeCRLs writes list into every member certificate Secret of the ring
// that holds another one (or none), and the hub's current client
// certificate into the record of those that lack it (hubcerts.go),
// patching ca.crl and the record alone; skip are the Secrets the pass
// wrote whole already (by cluster and name).
func (r *Reconciler) writeCRLs(ctx context.Context, s *snapshot, list []byte, skip map[[2]string]bool) error {
	var errs []error
	for _, cs := range s.clusters {
		for _, sec := range ringMemberSecrets(s, cs) {
			if skip[[2]string{cs.name, sec.Name}] {
				continue
			}
			newList := len(list) > 0 && !bytes.Equal(sec.Data[etcdfedv1.RevocationListKey], list)
			rec, ok := memberHubCerts(s, sec.Data[pki.KeyHubCerts])
			newRec := ok && !bytes.Equal(sec.Data[pki.KeyHubCerts], rec)
			if !newList && !newRec {
				continue
			}
			patched := sec.DeepCopy()
			if patched.Data == nil {
				patched.Data = map[string][]byte{}
			}
			if newList {
				patched.Data[etcdfedv1.RevocationListKey] = list
			}
			if newRec {
				if len(rec) == 0 {
					delete(patched.Data, pki.KeyHubCerts)
				} else {
					patched.Data[pki.KeyHubCerts] = rec
				}
			}
			if err := cs.client.Patch(ctx, patched, client.MergeFrom(sec)); err != nil {
				errs = append(errs, fmt.Errorf("write revocation list and the record of the hub's client certificates into Secret %s in %s: %w", sec.Name, cs.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// setRevocation is status.revocation: the list the pass wrote (list) and
// how many members run with it.
func setRevocation(s *snapshot, st *etcdfedv1.EtcdClusterStatus, d *decision, res applyResult) {
	if !s.ec.Spec.TLS.Mode.Enabled() {
		st.Revocation = nil
		return
	}
	prev := st.Revocation
	rs := &etcdfedv1.RevocationStatus{MembersTotal: int32(len(st.Members))}
	if prev != nil {
		rs.UpdatedAt = prev.UpdatedAt
	}
	if res.crlSigned && !d.crl.unseen {
		rs.UpdatedAt = &metav1.Time{Time: s.now}
	}
	var l *x509.RevocationList
	if len(res.crl) > 0 {
		l, _ = pki.ParseRevocationList(res.crl)
	}
	if rs.UpdatedAt == nil && l != nil {
		// A list signed in a pass whose status was not kept (a ring
		// taken over: its first list's pass wrote a status that a later
		// pass replaced) says when it was signed itself.
		rs.UpdatedAt = &metav1.Time{Time: pki.SignedAt(l)}
	}
	var problems []string
	if l == nil {
		rs.Revoked = int32(len(d.crl.want))
		switch {
		case res.crlErr != nil:
			problems = append(problems, res.crlErr.Error())
		case d.crl.problem != "":
			problems = append(problems, d.crl.problem)
		default:
			problems = append(problems, "no revocation list yet")
		}
		rs.Message = truncate(strings.Join(problems, "; "), 1024)
		st.Revocation = rs
		return
	}
	rs.Revoked = int32(len(l.RevokedCertificateEntries))
	listed := pki.ListedSerials(l)
	for _, t := range d.crl.peers {
		if slices.Contains(listed, t) {
			rs.SupersededPeers++
		}
	}
	for _, c := range supersededHubCerts(s.pki.hubClient, s.now, false) {
		if slices.Contains(listed, pki.FormatSerial(c.SerialNumber)) {
			rs.SupersededHub++
		}
	}
	for _, t := range d.crl.carry.serials() {
		if slices.Contains(listed, t) {
			rs.Carried++
		}
	}
	if l.Number != nil && l.Number.IsInt64() {
		rs.ListNumber = l.Number.Int64()
	}
	rs.SignedBy = truncate(l.Issuer.CommonName, 512)
	if d.crl.problem != "" {
		problems = append(problems, d.crl.problem+": the members keep the list they hold")
	}
	var waiting []string
	for i := range st.Members {
		m := &st.Members[i]
		cs := s.cluster(m.Cluster)
		if !cs.visible() {
			waiting = append(waiting, m.Name+" (its cluster is out of sight)")
			continue
		}
		obj := cs.members[m.Name]
		switch {
		case obj == nil || obj.Spec.Incarnation != m.Incarnation:
			waiting = append(waiting, m.Name+" (not created yet)")
		case !obj.Spec.TLS.RevocationList || !obj.Spec.TLS.PeerRevocationList || obj.Status.ObservedGeneration != obj.Generation:
			waiting = append(waiting, m.Name+" (to restart with --client-crl-file and --peer-crl-file)")
		case res.crlSigned || cs.secrets[obj.Spec.TLS.SecretName] == nil || !bytes.Equal(cs.secrets[obj.Spec.TLS.SecretName].Data[etcdfedv1.RevocationListKey], res.crl):
			waiting = append(waiting, m.Name+" (its Secret gets the list)")
		default:
			rs.MembersCurrent++
		}
	}
	if len(waiting) > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d members run with list #%d; waiting for %s", rs.MembersCurrent, rs.MembersTotal, rs.ListNumber, strings.Join(waiting, ", ")))
	}
	rs.Message = truncate(strings.Join(problems, "; "), 1024)
	st.Revocation = rs
}

// revocationEvents records the list reaching every member, and a list
// that cannot be signed, on the transition.
func (r *Reconciler) revocationEvents(ec *etcdfedv1.EtcdCluster, before *etcdfedv1.RevocationStatus) {
	after := ec.Status.Revocation
	if after == nil {
		return
	}
	current := func(rs *etcdfedv1.RevocationStatus) bool {
		return rs != nil && rs.ListNumber > 0 && rs.MembersTotal > 0 && rs.MembersCurrent == rs.MembersTotal
	}
	if current(after) && (!current(before) || before.ListNumber != after.ListNumber) {
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventRevocationListCurrent, "Revoke",
			"Every member (%d) runs with revocation list #%d (%d serials revoked, %d of them superseded member certificates), on its client and peer ports; a connection opened before stays open until it closes", after.MembersTotal, after.ListNumber, after.Revoked, after.SupersededPeers)
	}
	failing := func(rs *etcdfedv1.RevocationStatus) bool {
		return rs != nil && strings.Contains(rs.Message, "cannot sign revocation lists")
	}
	if failing(after) && !failing(before) {
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventRevocationListFailed, "Revoke", "%s", after.Message)
	}
}
