package etcdcluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/rfc2136"
)

// reconcileDNS computes the record set and writes it, as an EtcdDNSZone,
// into every member cluster the hub can see, where each spoke serves it;
// and to the RFC 2136 server when one is configured. A member's record
// keeps its last known address while its cluster is out of sight: the
// record of a member still in the cluster is never deleted.
func (r *Reconciler) reconcileDNS(ctx context.Context, v *view) (ctrl.Result, error) {
	set, err := buildRecordSet(v)
	if err != nil {
		v.dnsErr = err
		return ctrl.Result{}, nil // a spec problem, shown in conditions
	}
	if set == nil {
		return ctrl.Result{}, nil
	}
	recs := set.Records()
	records := make([]etcdfedv1.DNSRecord, len(recs))
	for i, rec := range recs {
		records[i] = etcdfedv1.DNSRecord{Name: rec.Name, Type: rec.Type, TTL: rec.TTL, Data: rec.Data}
	}
	var errs []error
	for _, cv := range v.clusters {
		if !cv.visible() {
			continue
		}
		errs = append(errs, r.writeZone(ctx, v, cv, records))
	}
	if rfc := v.ec.Spec.DNS.RFC2136; rfc != nil {
		errs = append(errs, r.publishRFC2136(ctx, v, rfc, set))
	}
	if err := errors.Join(errs...); err != nil {
		v.dnsErr = err
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// ZoneName is the EtcdDNSZone of an EtcdCluster in a member cluster.
func ZoneName(ec *etcdfedv1.EtcdCluster) string { return ec.Name }

func (r *Reconciler) writeZone(ctx context.Context, v *view, cv *clusterView, records []etcdfedv1.DNSRecord) error {
	want := etcdfedv1.EtcdDNSZoneSpec{
		Cluster: etcdfedv1.ClusterReference{Name: v.ec.Name, Namespace: v.ec.Namespace, UID: string(v.ec.UID)},
		Domain:  strings.TrimSuffix(v.ec.Spec.DNS.Domain, "."),
		Records: records,
	}
	zone := &etcdfedv1.EtcdDNSZone{}
	key := client.ObjectKey{Namespace: r.RingNamespace, Name: ZoneName(v.ec)}
	switch err := cv.client.Get(ctx, key, zone); {
	case apierrors.IsNotFound(err):
		zone = &etcdfedv1.EtcdDNSZone{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: ownerLabels(v.ec)}, Spec: want}
		if err := cv.client.Create(ctx, zone); err != nil {
			return fmt.Errorf("create EtcdDNSZone in %s: %w", cv.name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get EtcdDNSZone in %s: %w", cv.name, err)
	}
	if zone.Spec.Cluster.UID != string(v.ec.UID) {
		return fmt.Errorf("EtcdDNSZone %s in %s belongs to another EtcdCluster (uid %s)", key, cv.name, zone.Spec.Cluster.UID)
	}
	if equality.Semantic.DeepEqual(zone.Spec, want) {
		return nil
	}
	patched := zone.DeepCopy()
	patched.Spec = want
	if err := cv.client.Patch(ctx, patched, client.MergeFrom(zone)); err != nil {
		return fmt.Errorf("update EtcdDNSZone in %s: %w", cv.name, err)
	}
	return nil
}

// buildRecordSet returns nil when nothing can be served yet (no spoke has
// reported a DNS server address, so the zone would have no name server).
func buildRecordSet(v *view) (*dnsprovider.RecordSet, error) {
	ec := v.ec
	domain := strings.TrimSuffix(ec.Spec.DNS.Domain, ".")
	spec := dnsprovider.Spec{Domain: domain, Owner: string(ec.UID), TLS: tlsEnabled(ec), TTL: etcdfedv1.DefaultDNSTTLSeconds}
	if ec.Spec.DNS.TTLSeconds != nil {
		spec.TTL = *ec.Spec.DNS.TTLSeconds
	}
	for _, m := range ec.Status.Members {
		addr := m.Address
		peer, cli := etcdfedv1.DefaultPeerPort, etcdfedv1.DefaultClientPort
		if obj := objectOf(v, m.Name); obj != nil && obj.Spec.Incarnation == m.Incarnation {
			if obj.Status.Address != "" {
				addr = obj.Status.Address
			}
			peer = urlPort(obj.Status.PeerURL, peer)
			cli = urlPort(obj.Status.ClientURL, cli)
		}
		if addr == "" {
			continue
		}
		dm := dnsprovider.Member{Name: m.Name, PeerPort: peer, ClientPort: cli}
		if ip, err := netip.ParseAddr(addr); err == nil {
			dm.Addresses = []netip.Addr{ip.Unmap()}
		} else {
			dm.Hostname = addr
		}
		spec.Members = append(spec.Members, dm)
	}
	for i, cv := range v.clusters {
		if cv.spoke == nil {
			continue
		}
		ns := dnsprovider.NameServer{Name: fmt.Sprintf("ns%d.%s", i, domain)}
		for _, a := range cv.spoke.Status.DNSAddresses {
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

// publishRFC2136 sends the set to the external server when it changed since
// the last successful push.
func (r *Reconciler) publishRFC2136(ctx context.Context, v *view, spec *etcdfedv1.RFC2136Spec, set *dnsprovider.RecordSet) error {
	digest := set.ZoneFile()
	r.dnsMu.Lock()
	same := r.dnsPub[v.ec.UID] == digest
	r.dnsMu.Unlock()
	if same {
		return nil
	}
	sec := &corev1.Secret{}
	if err := r.hubReader().Get(ctx, client.ObjectKey{Namespace: v.ec.Namespace, Name: spec.TSIGSecretName}, sec); err != nil {
		return fmt.Errorf("TSIG Secret %s: %w", spec.TSIGSecretName, err)
	}
	secret := strings.TrimSpace(string(sec.Data["secret"]))
	if _, err := base64.StdEncoding.DecodeString(secret); err != nil || secret == "" {
		return fmt.Errorf("TSIG Secret %s: key \"secret\" must hold the base64 TSIG secret", spec.TSIGSecretName)
	}
	zone := spec.Zone
	if zone == "" {
		zone = v.ec.Spec.DNS.Domain
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
	r.dnsPub[v.ec.UID] = digest
	r.dnsMu.Unlock()
	return nil
}
