package etcdcluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/rfc2136"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// applyResult is what apply did, for the status.
type applyResult struct {
	// stepErr: the step failed; notYet: etcd said "not yet" (the step is
	// retried, and the operation's message says why).
	stepErr, notYet error
	// learnerID is the ID etcd gave a learner just added.
	learnerID uint64
	// pkiErr, dnsErr, upkeepErr: writes of the upkeep that failed.
	pkiErr, dnsErr, upkeepErr error
	// crl is the revocation list the members' Secrets get (nil: none);
	// crlSigned: signed in this pass; crlErr: it could not be.
	crl       []byte
	crlSigned bool
	crlErr    error
}

// err is every failure of the pass, for the reconcile's error.
func (r applyResult) err() error {
	return errors.Join(r.pkiErr, r.dnsErr, r.stepErr, r.upkeepErr, r.crlErr)
}

// apply carries out a decision, in order: the hub's own certificates, the
// DNS records, the one step, the upkeep of the member objects. It decides
// nothing: every object it writes was rendered by decide, except the
// certificates, which it issues (fresh keys) where decide found them due.
func (r *Reconciler) apply(ctx context.Context, s *snapshot, d *decision) applyResult {
	var res applyResult
	ca, err := r.applyPKI(ctx, s, d.pki)
	res.pkiErr = err
	// A taken-over ring's carried entries are recorded before a list
	// names them (carry.go): not written, no list is signed.
	switch {
	case d.crl.carry.pending() && d.pki.issueHubClient && err != nil:
		res.crlErr = fmt.Errorf("no revocation list signed: the hub client Secret that records the carried entries was not written")
	default:
		if res.crlErr = r.storeCarried(ctx, s, d.crl.carry, d.pki.issueHubClient); res.crlErr == nil {
			res.crl, res.crlErr = r.applyCRL(s, d.crl, ca)
		}
	}
	res.crlSigned = d.crl.sign && res.crl != nil
	res.dnsErr = r.applyDNS(ctx, s, d.dns)
	r.applyStep(ctx, s, d, ca, &res)
	res.upkeepErr = r.applyUpkeep(ctx, s, d, ca, res.crl)
	return res
}

// applyPKI creates the CA and (re)issues the hub's client certificate when
// due, and returns the CA the pass issues member certificates from.
func (r *Reconciler) applyPKI(ctx context.Context, s *snapshot, w pkiWork) (*pki.CA, error) {
	ec, ca := s.ec, s.pki.ca
	if w.createCA {
		var err error
		if ca, err = pki.NewCA(fmt.Sprintf("etcdfed %s/%s CA", ec.Namespace, ec.Name), r.now()); err != nil {
			return nil, fmt.Errorf("create CA: %w", err)
		}
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: pki.CASecretName(ec), Labels: ownerLabels(ec)},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{pki.KeyCert: ca.CertPEM, pki.KeyKey: ca.KeyPEM},
		}
		// Create only: a CA is never overwritten.
		if err := r.hub().Create(ctx, sec); err != nil {
			return nil, fmt.Errorf("create CA Secret %s/%s: %w", sec.Namespace, sec.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Created the CA", "secret", sec.Name)
	}
	if w.keepCA != nil {
		// The CA a ring taken over without its key runs on, stored without
		// it: create only, as any CA.
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ec.Namespace, Name: pki.CASecretName(ec), Labels: ownerLabels(ec)},
			Type:       corev1.SecretTypeTLS,
			Data:       (&pki.Authority{Signer: w.keepCA}).Data(),
		}
		if err := r.hub().Create(ctx, sec); err != nil {
			return nil, fmt.Errorf("create CA Secret %s/%s without the CA's key: %w", sec.Namespace, sec.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Stored the taken-over ring's CA without its key", "secret", sec.Name, "ca", pki.Describe(w.keepCA.Cert))
		r.event(ec, corev1.EventTypeWarning, etcdfedv1.EventTakeOverKeyless, "TakeOver", "The CA %s the members run on is stored without its key (Secret %s); the rotation asked for moves the ring onto a new CA, one member restart at a time", pki.Describe(w.keepCA.Cert), sec.Name)
		return w.keepCA, nil
	}
	if w.issueHubClient && ca != nil {
		leaf, err := ca.IssueClient(etcdfedv1.EtcdHubUser, r.now())
		if err != nil {
			return ca, fmt.Errorf("issue the hub's client certificate: %w", err)
		}
		bundle := s.pki.bundle()
		if w.createCA {
			bundle = ca.CertPEM
		}
		// The certificate it replaces is kept beside it until it expires:
		// the ring's revocation list names it from the next pass.
		want := hubClientSecret(s, bundle, leaf, r.now())
		// Recorded in the members' Secrets before it is used: a hub
		// rebuilt after the loss of this one's cluster lists it
		// (hubcerts.go).
		if err := r.recordHubCert(ctx, s, leaf.CertPEM); err != nil {
			return ca, err
		}
		if err := writeOwned(ctx, r.hub(), ec.RingUID(), "the hub", present(s.pki.hubClient), want); err != nil {
			return ca, err
		}
	}
	return ca, nil
}

// applyDNS writes the record set into every member cluster the hub can see
// that serves the ring's zone (servesZone; each spoke serves it), deletes
// it from those that no longer do, and sends it to the RFC 2136 server
// when one is configured.
func (r *Reconciler) applyDNS(ctx context.Context, s *snapshot, w dnsWork) error {
	if s.ec.Spec.DNS.RFC2136 == nil {
		r.forgetDNS(s.ec.UID) // published there before, maybe
	}
	if w.set == nil {
		return nil
	}
	// Side by side: a new member's init container waits on its record, and
	// the resolver it uses asks every spoke, so every cluster's copy counts
	// and one slow cluster must not hold up the others.
	errs := make([]error, len(s.clusters)+1)
	var wg sync.WaitGroup
	for i, cs := range s.clusters {
		if !cs.visible() {
			continue
		}
		if !servesZone(s, w.ledger, cs) {
			if len(cs.zones) > 0 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = deleteOwned(ctx, cs.client, cs.name, zoneObjects(cs)...)
				}()
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := desiredZone(s, cs, w.records)
			errs[i] = writeOwned(ctx, cs.client, s.ec.RingUID(), cs.name, present(cs.zones[want.Name]), want)
		}()
	}
	if rfc := s.ec.Spec.DNS.RFC2136; rfc != nil {
		errs[len(s.clusters)] = r.publishRFC2136(ctx, s.ec, rfc, w.set)
	}
	wg.Wait()
	return errors.Join(errs...)
}

func notYet(err error) bool {
	return errors.Is(err, etcdops.ErrLearnerNotReady) || errors.Is(err, etcdops.ErrUnhealthyCluster) || errors.Is(err, etcdops.ErrTooManyLearners) ||
		errors.Is(err, etcdops.ErrAnswererStopped)
}

// withEtcd runs f with the pass's etcd client, unless the step could not be
// rendered (renderErr).
func withEtcd(s *snapshot, renderErr error, f func(*etcdops.Client) error) error {
	if renderErr != nil {
		return renderErr
	}
	if s.etcdClient == nil {
		return errors.New("no etcd client")
	}
	return f(s.etcdClient)
}

// applyUpkeep renews member certificates, writes the changes that restart
// nothing, sweeps objects left behind, and deletes the copies of a restore
// store's credentials no member needs any more.
func (r *Reconciler) applyUpkeep(ctx context.Context, s *snapshot, d *decision, ca *pki.CA, crl []byte) error {
	var errs []error
	written := map[[2]string]bool{}
	for _, c := range d.certs {
		cs := s.cluster(c.cluster)
		obj := cs.refObject(c)
		name := certObjectName(s.ec, cs, c.member, obj)
		errs = append(errs, r.writeMemberCert(ctx, s, cs, ca, crl, c.member, name, objectDNSName(s.ec, obj, c.member)))
		written[[2]string{cs.name, pki.MemberSecretName(name)}] = true
	}
	errs = append(errs, r.writeCRLs(ctx, s, crl, written))
	errs = append(errs, r.writeMembers(ctx, s, ca, crl, d.updates))
	errs = append(errs, r.sweep(ctx, s, d))
	errs = append(errs, r.deleteStoreCredentials(ctx, s, d.spentCredentials))
	return errors.Join(errs...)
}

// sweep deletes the objects left behind, each after rewriting it with the
// Retain reclaim policy (so that its spoke keeps its volume whatever the
// policy was), and tells which volumes are kept and what they hold.
func (r *Reconciler) sweep(ctx context.Context, s *snapshot, d *decision) error {
	var errs []error
	var kept []sweepNote
	for _, ref := range d.sweep {
		cs := s.cluster(ref.cluster)
		i := slices.IndexFunc(d.retain, func(rv retainedVolume) bool { return rv.ref == ref })
		// An EtcdMember already being deleted (its spoke retiring the
		// volume) was named by an earlier pass: the event is said once, not
		// on every pass until the spoke is done (a burst of the same event
		// exhausts the recorder's budget for the EtcdCluster, and the next
		// kept volume went unsaid). Its keep-volumes rewrite still happens:
		// an object deleted by anything else keeps its volume too.
		deleting, object := false, ref.member
		if o := cs.refObject(ref); o != nil {
			deleting, object = !o.DeletionTimestamp.IsZero(), ref.member+"/"+o.Name
		}
		if i >= 0 && d.retain[i].want != nil {
			if err := writeOwned(ctx, cs.client, s.ec.RingUID(), cs.name, present(cs.refObject(ref)), d.retain[i].want); err != nil {
				errs = append(errs, fmt.Errorf("keep the volume of %s in %s before sweeping it: %w", ref.member, cs.name, err))
				continue
			}
		}
		if err := r.deleteMembers(ctx, s, []memberRef{ref}); err != nil {
			errs = append(errs, err)
			continue
		}
		if i >= 0 && !deleting {
			kept = append(kept, sweepNote{cluster: cs.name, object: object, text: d.retain[i].note})
		}
	}
	// Bounded per member cluster (sweepnotes.go): a cluster that re-creates
	// what is swept cannot fill the ring's events.
	for _, msg := range r.sweepNotes.admit(s.ec.UID, kept, r.now()) {
		r.event(s.ec, corev1.EventTypeWarning, etcdfedv1.EventVolumesRetained, "Sweep", "Swept objects left behind and kept their volumes, whatever spec.storage.volumeReclaimPolicy says; delete each once you no longer need its data: %s", msg)
	}
	return errors.Join(errs...)
}

// writeMembers writes member objects, each after its certificate and its
// copy of the restore store's credentials when it needs them (an object
// whose certificate or credentials failed is not written).
func (r *Reconciler) writeMembers(ctx context.Context, s *snapshot, ca *pki.CA, crl []byte, writes []memberWrite) error {
	var errs []error
	for _, w := range writes {
		cs := s.cluster(w.cluster)
		if w.cert {
			if err := r.writeMemberCert(ctx, s, cs, ca, crl, w.want.Spec.MemberName, w.want.Name, w.want.Spec.DNSName); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		listWritten := w.cert && len(crl) > 0
		if (w.want.Spec.TLS.RevocationList || w.want.Spec.TLS.PeerRevocationList) && !listWritten && !holdsList(cs, w.want.Spec.TLS.SecretName) {
			// etcd would refuse every client while the file is missing.
			errs = append(errs, fmt.Errorf("member %s in %s: no revocation list for its Secret %s yet, so its object is not written", w.want.Spec.MemberName, cs.name, w.want.Spec.TLS.SecretName))
			continue
		}
		if w.storeCredentials {
			if err := r.writeStoreCredentials(ctx, s, cs, w.want.Spec.MemberName); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		// The object of that name: a Move inside the cluster writes the new
		// incarnation's beside the old one's.
		errs = append(errs, writeOwned(ctx, cs.client, s.ec.RingUID(), cs.name, present(cs.object(w.want.Spec.MemberName, w.want.Name)), w.want))
	}
	return errors.Join(errs...)
}

// writeMemberCert issues a member's certificate (server and client auth,
// its DNS names as SANs: memberCertNames) and writes its Secret next to
// its object, the EtcdMember named object.
// The Secret holds the ring's revocation list crl too (ca.crl), or, with
// none this pass, the one it holds.
func (r *Reconciler) writeMemberCert(ctx context.Context, s *snapshot, cs *clusterSnapshot, ca *pki.CA, crl []byte, member, object, dnsName string) error {
	if ca == nil {
		return fmt.Errorf("certificate of %s in %s: no CA yet", member, cs.name)
	}
	name := pki.MemberSecretName(object)
	leaf, err := memberLeaf(s, cs, ca, name, member, dnsName, r.now())
	if err != nil {
		return err
	}
	bundle := s.pki.bundle()
	if s.pki.ca == nil {
		bundle = ca.CertPEM // created in this pass
	}
	want := certSecret(s.ringNamespace, name, memberCertLabels(s.ec, member), bundle, leaf)
	if len(crl) == 0 && cs.secrets[name] != nil {
		crl = cs.secrets[name].Data[etcdfedv1.RevocationListKey]
	}
	if len(crl) > 0 {
		want.Data[etcdfedv1.RevocationListKey] = crl
	}
	// The record of the hub's client certificates (hubcerts.go) is kept,
	// with the current one.
	var held []byte
	if old := cs.secrets[name]; old != nil {
		held = old.Data[pki.KeyHubCerts]
	}
	rec, ok := memberHubCerts(s, held)
	if !ok {
		rec = held
	}
	if len(rec) > 0 {
		want.Data[pki.KeyHubCerts] = rec
	}
	// The certificate it replaces is recorded first: the revocation list
	// names it from a later pass (peerrevocation.go).
	if old := cs.secrets[name]; old != nil && !pki.Equal(old.Data[pki.KeyCert], leaf.CertPEM) {
		if err := r.recordSuperseded(ctx, s, cs.name, old); err != nil {
			return fmt.Errorf("certificate of %s in %s: %w", member, cs.name, err)
		}
	}
	return writeOwned(ctx, cs.client, s.ec.RingUID(), cs.name, present(cs.secrets[name]), want)
}

// memberLeaf is the certificate a member's Secret gets: a new one of ca,
// or, when ca's key is not held (a ring taken over without it), the one
// the Secret holds, if ca signed it and it is good: the Trusting phase
// of the rotation that follows only changes what the member trusts.
func memberLeaf(s *snapshot, cs *clusterSnapshot, ca *pki.CA, secret, member, dnsName string, now time.Time) (*pki.Leaf, error) {
	names := memberCertNames(s.ec, member, dnsName)
	if ca.CanSign() {
		leaf, err := ca.IssueMember(pki.MemberRequest{Member: member, DNSNames: names}, now)
		if err != nil {
			return nil, fmt.Errorf("certificate of %s in %s: %w", member, cs.name, err)
		}
		return leaf, nil
	}
	sec := cs.secrets[secret]
	if sec == nil {
		return nil, fmt.Errorf("certificate of %s in %s: no Secret %s to keep, and the ring's CA key is not held (taken over without it): the member waits for the new CA to issue (CA rotation, phase Reissuing)", member, cs.name, secret)
	}
	if renew, why := ca.NeedsRenewal(sec.Data[pki.KeyCert], names, now); renew {
		return nil, fmt.Errorf("certificate of %s in %s: %s, and the ring's CA key is not held (taken over without it): the member waits for the new CA to issue (CA rotation, phase Reissuing)", member, cs.name, why)
	}
	return &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]}, nil
}

// deleteMembers deletes members' objects (EtcdMember and every Secret of
// the member: certificate, store credentials) in the clusters named. The
// spoke deletes the pod and keeps the volume. An object already being
// deleted (an EtcdMember whose spoke has not yet removed its finalizer)
// is left alone: its deletion was asked by an earlier pass, and asking
// again logged "Deleting member object" and sent a request on every pass
// until the spoke was done.
func (r *Reconciler) deleteMembers(ctx context.Context, s *snapshot, refs []memberRef) error {
	var errs []error
	for _, ref := range refs {
		cs := s.cluster(ref.cluster)
		objs := slices.DeleteFunc(memberObjects(cs, ref), func(o client.Object) bool { return !o.GetDeletionTimestamp().IsZero() })
		if len(objs) == 0 {
			continue
		}
		inc, name := "", ""
		if o := cs.refObject(ref); o != nil {
			inc, name = fmt.Sprint(o.Spec.Incarnation), o.Name
		}
		// Their certificates are recorded first (peerrevocation.go).
		var secs []*corev1.Secret
		for _, o := range objs {
			if sec, ok := o.(*corev1.Secret); ok {
				secs = append(secs, sec)
			}
		}
		if err := r.recordSuperseded(ctx, s, cs.name, secs...); err != nil {
			errs = append(errs, fmt.Errorf("delete member %s in %s: %w", ref.member, cs.name, err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleting member object", "member", ref.member, "cluster", ref.cluster, "incarnation", inc, "object", name)
		errs = append(errs, deleteOwned(ctx, cs.client, cs.name, objs...))
	}
	return errors.Join(errs...)
}

// publishRFC2136 sends the set to the external server when it, or where it
// goes (server, zone, key), changed since the last successful push.
func (r *Reconciler) publishRFC2136(ctx context.Context, ec *etcdfedv1.EtcdCluster, spec *etcdfedv1.RFC2136Spec, set *dnsprovider.RecordSet) error {
	digest := fmt.Sprintf("%s %s %s %s\n%s", spec.Server, spec.Zone, spec.TSIGKeyName, spec.TSIGAlgorithm, set.ZoneFile())
	r.dnsMu.Lock()
	same := r.dnsPub[ec.UID] == digest
	r.dnsMu.Unlock()
	if same {
		return nil
	}
	sec := &corev1.Secret{}
	if err := r.hubReader().Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: spec.TSIGSecretName}, sec); err != nil {
		return fmt.Errorf("TSIG Secret %s: %w", spec.TSIGSecretName, err)
	}
	secret := strings.TrimSpace(string(sec.Data["secret"]))
	if _, err := base64.StdEncoding.DecodeString(secret); err != nil || secret == "" {
		return fmt.Errorf("TSIG Secret %s: key \"secret\" must hold the base64 TSIG secret", spec.TSIGSecretName)
	}
	zone := spec.Zone
	if zone == "" {
		zone = ec.Spec.DNS.Domain
	}
	p, err := rfc2136.New(rfc2136.Config{Server: spec.Server, Zone: zone, KeyName: spec.TSIGKeyName, KeyAlgorithm: string(spec.TSIGAlgorithm), KeySecret: secret})
	if err != nil {
		return fmt.Errorf("RFC 2136 provider: %w", err)
	}
	if err := p.Apply(ctx, set); err != nil {
		return fmt.Errorf("publish to %s: %w", spec.Server, err)
	}
	r.dnsMu.Lock()
	if r.dnsPub == nil {
		r.dnsPub = map[types.UID]string{}
	}
	r.dnsPub[ec.UID] = digest
	r.dnsMu.Unlock()
	return nil
}

func (r *Reconciler) event(ec *etcdfedv1.EtcdCluster, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(ec, nil, typ, reason, action, format, args...)
	}
}
