package etcdcluster

import (
	"context"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Take-over of a running ring by a rebuilt hub (rule 17; status.takeOver).
//
// The hub cluster that founded a ring was lost; a new one got the escrowed
// keys (etcdfed hub import), the member clusters were joined again and the
// same EtcdCluster manifest applied. That EtcdCluster has a new UID, while
// every object of the ring in the member clusters carries the UID of the
// one that founded it. Before the ring is founded (no cluster ID, no
// member recorded), observe lists the ring's objects by its namespace and
// name rather than by UID (listRing): objects of another UID are the
// running ring's (foreign). findTakeOver (pure) matches them by the
// ring's identity (namespace and name, spec.dns.domain, the etcd cluster
// ID they carry) and either holds (nothing founded, written or changed:
// a member cluster not read, the ring's CA missing, objects of two rings)
// or records the ring as this EtcdCluster's: status.takeOver.ringUID is
// the founding UID, under which the hub selects and writes the ring's
// objects from then on (EtcdCluster.RingUID), so no object, pod or
// volume changes. The next passes are those of a hub whose status was
// lost: the members are read back from their objects (adoptLostMembers),
// etcd is dialled through them, and the planner adopts the formed cluster
// (ActFinishBootstrap), never founds a second one; recordTakeOverDone then
// completes status.takeOver.

// seeksTakeOver: the ring is not founded and was not taken over yet, so a
// running ring of its namespace and name in the member clusters would be
// taken over rather than a new one founded.
func seeksTakeOver(ec *etcdfedv1.EtcdCluster) bool {
	st := &ec.Status
	if t := st.TakeOver; t != nil && t.Phase != etcdfedv1.TakeOverHeld {
		return false
	}
	if ec.Spec.Adopt != nil || (ec.Spec.Bootstrap != nil && ec.Spec.Bootstrap.FromSnapshot != nil) {
		return false
	}
	return st.ClusterID == "" && len(st.Members) == 0 && st.Operation == nil
}

// ringSelector selects the objects of the ring ns/name, whatever their UID.
func ringSelector(ec *etcdfedv1.EtcdCluster) client.MatchingLabels {
	return client.MatchingLabels{etcdfedv1.LabelClusterName: ec.Name, etcdfedv1.LabelClusterNamespace: ec.Namespace}
}

// foreignObjects are the objects of a ring of the EtcdCluster's namespace
// and name under another UID in one member cluster, by UID.
type foreignObjects struct {
	members map[types.UID][]*etcdfedv1.EtcdMember
	zones   map[types.UID][]*etcdfedv1.EtcdDNSZone
	// secrets are the members' certificate Secrets: a take-over without
	// the CA's key reads the CA the ring runs on from them (runningCA).
	secrets map[types.UID][]*corev1.Secret
}

func (f *foreignObjects) uids() []types.UID {
	if f == nil {
		return nil
	}
	out := slices.Collect(maps.Keys(f.members))
	for uid := range f.zones {
		if !slices.Contains(out, uid) {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out
}

// listRing lists the ring's objects by namespace and name (seeksTakeOver):
// those of ec's UID are sorted into cs as listOwned does, the others kept
// as foreign. Of the foreign Secrets only the members' certificates are
// kept (runningCA reads the ring's CA from them); the rest are found under
// the ring's UID once the take-over is recorded.
func listRing(ctx context.Context, c client.Reader, ns string, ec *etcdfedv1.EtcdCluster, cs *clusterSnapshot) error {
	sel := ringSelector(ec)
	ms := &etcdfedv1.EtcdMemberList{}
	if err := c.List(ctx, ms, client.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("list EtcdMembers in %s: %w", cs.name, err)
	}
	zs := &etcdfedv1.EtcdDNSZoneList{}
	if err := c.List(ctx, zs, client.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("list EtcdDNSZones in %s: %w", cs.name, err)
	}
	own := string(ec.UID)
	f := &foreignObjects{members: map[types.UID][]*etcdfedv1.EtcdMember{}, zones: map[types.UID][]*etcdfedv1.EtcdDNSZone{}, secrets: map[types.UID][]*corev1.Secret{}}
	for i := range ms.Items {
		o := &ms.Items[i]
		if uid := o.Labels[etcdfedv1.LabelClusterUID]; uid != own {
			f.members[types.UID(uid)] = append(f.members[types.UID(uid)], o)
			continue
		}
		cs.add(o)
	}
	for i := range zs.Items {
		o := &zs.Items[i]
		if uid := o.Labels[etcdfedv1.LabelClusterUID]; uid != own {
			f.zones[types.UID(uid)] = append(f.zones[types.UID(uid)], o)
			continue
		}
		cs.zones[o.Name] = o
	}
	// Secrets of the ring's name: ec's own, as listOwned reads them, and
	// the running ring's certificates.
	secs := &corev1.SecretList{}
	if err := c.List(ctx, secs, client.InNamespace(ns), sel); err != nil {
		return fmt.Errorf("list Secrets in %s: %w", cs.name, err)
	}
	for i := range secs.Items {
		o := &secs.Items[i]
		switch uid := o.Labels[etcdfedv1.LabelClusterUID]; {
		case uid == own:
			cs.secrets[o.Name] = o
		case o.Labels[etcdfedv1.LabelComponent] == memberCertComponent:
			f.secrets[types.UID(uid)] = append(f.secrets[types.UID(uid)], o)
		}
	}
	if len(f.members)+len(f.zones) > 0 {
		cs.foreign = f
	}
	return nil
}

// takeOverRetry is the next pass after a take-over held or recorded.
const takeOverRetry = 2 * time.Second

// takeOverEvents tells a take-over found or held (its completion is
// ActFinishBootstrap's event): on a change of phase, or of the reason a
// take-over is held.
func (r *Reconciler) takeOverEvents(ec *etcdfedv1.EtcdCluster, before *etcdfedv1.TakeOverStatus) {
	t := ec.Status.TakeOver
	if t == nil || (before != nil && before.Phase == t.Phase && before.Message == t.Message) {
		return
	}
	switch t.Phase {
	case etcdfedv1.TakeOverHeld:
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventTakeOverHeld, "TakeOver", "%s", t.Message)
	case etcdfedv1.TakeOverTakingOver:
		r.event(ec, corev1.EventTypeNormal, etcdfedv1.EventTakeOverFound, "TakeOver", "%s; reissued: %s", t.Message, orNone(strings.Join(t.Reissued, "; ")))
	}
}

// takeOverFinding is findTakeOver's verdict: phase "" (nothing to take
// over: found a new ring, or go on with this EtcdCluster's own), Held
// (with message) or TakingOver (ringUID and clusterID found).
type takeOverFinding struct {
	phase     etcdfedv1.TakeOverPhase
	ringUID   string
	clusterID string
	members   []string // member@cluster of the objects found
	message   string
}

// findTakeOver decides, from what observe read, whether the EtcdCluster
// takes over a running ring (pure).
func findTakeOver(s *snapshot) takeOverFinding {
	if !seeksTakeOver(s.ec) {
		return takeOverFinding{}
	}
	var uids []types.UID
	var unread []string
	own := false
	for _, cs := range s.clusters {
		if !cs.registered {
			continue
		}
		if !cs.engaged || cs.readErr != nil {
			unread = append(unread, cs.name)
			continue
		}
		if len(cs.members) > 0 || len(cs.zones) > 0 {
			own = true
		}
		for _, uid := range cs.foreign.uids() {
			if !slices.Contains(uids, uid) {
				uids = append(uids, uid)
			}
		}
	}
	if own {
		// This EtcdCluster's own objects: it founded (or is founding) its
		// ring, whatever another ring left.
		return takeOverFinding{}
	}
	ring := fmt.Sprintf("%s/%s", s.ec.Namespace, s.ec.Name)
	if len(uids) == 0 {
		if len(unread) > 0 {
			// A running ring may hide in a cluster not read yet: founding
			// a second one over it would be the worst outcome.
			return takeOverFinding{phase: etcdfedv1.TakeOverHeld, message: fmt.Sprintf("member cluster(s) %s not read yet: the hub founds ring %s only once it has seen that no running ring of this name is there", strings.Join(unread, ", "), ring)}
		}
		return takeOverFinding{}
	}
	held := func(format string, a ...any) takeOverFinding {
		return takeOverFinding{phase: etcdfedv1.TakeOverHeld, message: fmt.Sprintf(format, a...)}
	}
	slices.Sort(uids)
	if len(uids) > 1 {
		return held("objects of %d rings named %s found in the member clusters (EtcdCluster UIDs %v): the hub takes over only one; delete the objects of the ring that does not run", len(uids), ring, uids)
	}
	uid := uids[0]
	domain := strings.TrimSuffix(s.ec.Spec.DNS.Domain, ".")
	f := takeOverFinding{ringUID: string(uid)}
	var ids []string
	for _, cs := range s.clusters {
		if cs.foreign == nil {
			continue
		}
		for _, z := range cs.foreign.zones[uid] {
			if d := strings.TrimSuffix(z.Spec.Domain, "."); d != domain {
				return held("the running ring %s found in member cluster %s serves domain %q, spec.dns.domain is %q: apply the ring's own manifest", ring, cs.name, d, domain)
			}
		}
		for _, m := range cs.foreign.members[uid] {
			if !strings.HasSuffix(strings.TrimSuffix(m.Spec.DNSName, "."), "."+domain) {
				return held("member %s of the running ring %s found in member cluster %s is named %q, outside spec.dns.domain %q: apply the ring's own manifest", m.Spec.MemberName, ring, cs.name, m.Spec.DNSName, domain)
			}
			if b := m.Spec.Bootstrap; b != nil && b.ClusterID != "" && !slices.Contains(ids, b.ClusterID) {
				ids = append(ids, b.ClusterID)
			}
			f.members = append(f.members, m.Spec.MemberName+"@"+cs.name)
		}
	}
	slices.Sort(ids)
	slices.Sort(f.members)
	if len(ids) > 1 {
		return held("the objects of the running ring %s name %d etcd clusters (%s): the hub takes over one cluster only", ring, len(ids), strings.Join(ids, ", "))
	}
	if len(ids) == 1 {
		f.clusterID = ids[0]
	}
	if len(unread) > 0 {
		return held("the running ring %s (EtcdCluster UID %s) was found; member cluster(s) %s not read yet: the hub takes it over once it has read every registered member cluster", ring, uid, strings.Join(unread, ", "))
	}
	keyless := ""
	if s.ec.Spec.TLS.Mode.Enabled() && s.pki.ca == nil {
		if _, asked := caRotationRequest(s.requests()); !asked {
			return held("the running ring %s (EtcdCluster UID %s) was found, but its CA Secret %s/%s is not in this hub cluster: import the hub escrow (etcdfed hub import), or, if the CA's key is lost, run `etcdfed rotate-ca %s -n %s`: the hub then takes the ring over on the CA its members trust and rotates it onto a new CA, one member restart at a time", ring, uid, s.ec.Namespace, pki.CASecretName(s.ec), s.ec.Name, s.ec.Namespace)
		}
		var secrets []*corev1.Secret
		for _, cs := range s.clusters {
			if cs.foreign != nil {
				secrets = append(secrets, cs.foreign.secrets[uid]...)
			}
		}
		ca, problem := runningCA(secrets)
		if problem != "" {
			return held("the running ring %s (EtcdCluster UID %s) was found without its CA Secret in this hub cluster, and a rotation onto a new CA was asked for, but %s", ring, uid, problem)
		}
		keyless = fmt.Sprintf("; its CA's key is not in this hub: the ring keeps its CA %s until the rotation asked for (etcdfed rotate-ca) moves it onto a new one", pki.Describe(ca.Cert))
	}
	f.phase = etcdfedv1.TakeOverTakingOver
	f.message = fmt.Sprintf("taking over the running ring %s (EtcdCluster UID %s, etcd cluster %s) from its members %s%s", ring, uid, orNone(f.clusterID), strings.Join(f.members, ", "), keyless)
	return f
}

func orNone(s string) string {
	if s == "" {
		return "not recorded"
	}
	return s
}

// holdForTakeOver records a running ring of this name found in the member
// clusters (findTakeOver) and makes d's plan a wait on it: the pass holds.
// Without one, a hold recorded before (a member cluster not read yet)
// ends: the ring is this EtcdCluster's own.
func holdForTakeOver(s *snapshot, st *etcdfedv1.EtcdClusterStatus, d *decision) bool {
	if f := findTakeOver(s); f.phase != "" {
		recordTakeOver(s, st, f)
		d.plan = planner.Decision{Action: planner.ActWait, Reason: f.message, RequeueAfter: takeOverRetry}
		return true
	}
	if st.TakeOver != nil && st.TakeOver.Phase == etcdfedv1.TakeOverHeld {
		st.TakeOver = nil
	}
	return false
}

// recordTakeOver records a finding in the ledger: Held with its message,
// or the ring recorded as this EtcdCluster's (ringUID), with what the
// take-over reissues.
func recordTakeOver(s *snapshot, st *etcdfedv1.EtcdClusterStatus, f takeOverFinding) {
	t := &etcdfedv1.TakeOverStatus{Phase: f.phase, Message: truncate(f.message, 1024)}
	if f.phase == etcdfedv1.TakeOverTakingOver {
		now := metav1.NewTime(s.now)
		t.RingUID, t.ClusterID, t.FoundAt = f.ringUID, f.clusterID, &now
		t.Members = firstN(f.members, 32)
		t.Reissued = reissuedOnTakeOver(s)
	}
	st.TakeOver = t
}

// reissuedOnTakeOver lists what the new hub issues anew: its own etcd
// client certificate, and the Secrets of spec.clients that lived in the
// hub cluster (the clients controller issues them from the CA); without
// the CA's key, the CA itself (a rotation).
func reissuedOnTakeOver(s *snapshot) []string {
	var out []string
	if s.ec.Spec.TLS.Mode.Enabled() && s.pki.ca == nil {
		out = append(out, "the ring's CA (its key was not in this hub): a rotation onto a new CA, every member restarted three times, one at a time; certificates of the new CA for the hub, the members and spec.clients")
	}
	if s.ec.Spec.TLS.Mode.Enabled() && s.pki.hubClient == nil {
		out = append(out, "the hub's etcd client certificate (Secret "+pki.HubClientSecretName(s.ec)+")")
	}
	for _, c := range s.ec.Spec.Clients {
		if c.Cluster == "" {
			out = append(out, "spec.clients "+c.Name+": its Secret in the hub cluster, from the ring's CA")
		}
	}
	return firstN(out, 72)
}

// recordTakeOverDone completes the take-over once the planner adopted the
// formed cluster (ActFinishBootstrap): the members as found, with their
// etcd IDs.
func recordTakeOverDone(s *snapshot, st *etcdfedv1.EtcdClusterStatus) {
	t := st.TakeOver
	if t == nil || t.Phase != etcdfedv1.TakeOverTakingOver {
		return
	}
	now := metav1.NewTime(s.now)
	t.Phase, t.CompletedAt = etcdfedv1.TakeOverComplete, &now
	t.Members = nil
	for _, m := range st.Members {
		t.Members = append(t.Members, fmt.Sprintf("%s@%s (%s)", m.Name, m.Cluster, orNone(m.ID)))
	}
	t.Members = firstN(t.Members, 32)
	t.Message = truncate(fmt.Sprintf("took over etcd cluster %s with %d member(s) as they run: none restarted, replaced or renamed", st.ClusterID, len(st.Members)), 1024)
}

// memberCertComponent is the component label of a member's certificate
// Secret (memberCertLabels).
const memberCertComponent = "tls"

// runningCA is the CA a running ring's members run on, read from their
// certificate Secrets (the certificate of ca.crt that signed tls.crt):
// what a hub that takes the ring over without the CA's key keeps trusting
// until a rotation replaces it. problem says why there is none to keep.
func runningCA(secrets []*corev1.Secret) (ca *pki.CA, problem string) {
	var found []*pki.CA
	for _, sec := range secrets {
		issuer := pki.IssuerIn(sec.Data[pki.KeyCA], sec.Data[pki.KeyCert])
		if issuer == nil || slices.ContainsFunc(found, func(c *pki.CA) bool { return c.Cert.Equal(issuer) }) {
			continue
		}
		c, err := pki.LoadCACert(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuer.Raw}))
		if err != nil {
			continue
		}
		found = append(found, c)
	}
	switch len(found) {
	case 0:
		return nil, "no member's certificate Secret in the member clusters holds a certificate and the CA that signed it"
	case 1:
		return found[0], ""
	}
	names := make([]string, len(found))
	for i, c := range found {
		names[i] = pki.Describe(c.Cert)
	}
	return nil, fmt.Sprintf("the members' certificates are of %d CAs (%s): the ring was rotating its CA when its hub was lost; only the escrow can take it over (etcdfed hub import)", len(found), strings.Join(names, ", "))
}

// memberCertSecrets are the members' certificate Secrets of the ring in
// the clusters the hub reads, by cluster and name.
func memberCertSecrets(s *snapshot) []*corev1.Secret {
	var out []*corev1.Secret
	for _, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(cs.secrets)) {
			if sec := cs.secrets[name]; sec.Labels[etcdfedv1.LabelComponent] == memberCertComponent {
				out = append(out, sec)
			}
		}
	}
	return out
}

// borrowedLeaf is the client certificate the hub reaches etcd with while
// the ring's CA key is not held and nothing issued the hub's own: a
// member's (its certificate serves client authentication too, and with
// authentication on its name is an etcd user with the role
// etcdfed-member), the
// first good one of the bundle's CAs. nil when there is none.
func borrowedLeaf(s *snapshot) *pki.Leaf {
	a := s.pki.authority()
	if !a.Keyless() {
		return nil
	}
	for _, sec := range memberCertSecrets(s) {
		if a.Issuer(sec.Data[pki.KeyCert]) == nil {
			continue
		}
		if renew, _ := a.Signer.NeedsRenewal(sec.Data[pki.KeyCert], nil, s.now); renew {
			continue
		}
		return &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]}
	}
	return nil
}

// takeOverMismatch says why etcd's answer is not the ring recorded by the
// take-over ("" when it is, or etcd did not answer): the cluster ID the
// objects carry must be the one etcd answers with.
func takeOverMismatch(s *snapshot, st *etcdfedv1.EtcdClusterStatus) string {
	t := st.TakeOver
	if t == nil || t.Phase != etcdfedv1.TakeOverTakingOver || t.ClusterID == "" || !s.etcd.Reachable {
		return ""
	}
	if got := hexID(s.etcd.ClusterID); got != t.ClusterID {
		return fmt.Sprintf("etcd answers with cluster ID %s, the ring's objects carry %s: the take-over waits", got, t.ClusterID)
	}
	return ""
}
