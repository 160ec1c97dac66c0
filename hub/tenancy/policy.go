package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/pkg/allowlist"
)

// Any, in an allow list, allows every value.
const Any = allowlist.Any

// DefaultImagePrefixes are the images spec.image may name when the hub's
// operator lists none: etcd's own releases, from its two registries.
var DefaultImagePrefixes = []string{etcdfedv1.DefaultImageRepository + ":", "registry.k8s.io/etcd:"}

// Policy is what the hub's operator allows EtcdCluster authors. The zero
// value is the safe default.
type Policy struct {
	// AmbientStoreCredentials lets a backup or restore store without
	// credentialsSecretName use the hub's own identity (its environment,
	// instance role or workload identity), and a file:// store read and
	// write the hub's (and for a restore, the member nodes') filesystem:
	// both are the hub's power, not the spec author's. Flag
	// --allow-ambient-store-credentials.
	AmbientStoreCredentials bool
	// SourceNamespaces are namespaces, besides the ring's own, whose
	// EtcdClusters a restore may name in sourceCluster (Any: every one).
	// Flag --allowed-restore-source-namespaces.
	SourceNamespaces []string
	// ImagePrefixes: spec.image must start with one of them (Any: every
	// image). Empty means DefaultImagePrefixes. The image etcdfed picks
	// when spec.image is empty is always allowed. Flag
	// --allowed-image-prefixes.
	ImagePrefixes []string
	// PriorityClasses spec.podTemplate.priorityClassName may name (Any:
	// every one). Empty: none. Flag --allowed-priority-classes.
	PriorityClasses []string
	// TolerationKeys are the taint keys spec.podTemplate.tolerations may
	// tolerate (Any: every key, and a toleration without a key, which
	// tolerates every taint). Empty: none. Flag --allowed-toleration-keys.
	TolerationKeys []string
	// PodAnnotations are what spec.podTemplate.annotations may hold: a key
	// equal to an entry, or, for an entry ending in '/' or '.', starting
	// with it (prometheus.io/ allows prometheus.io/scrape); Any: every
	// key. Empty: none. Annotations reach every member pod in every member
	// cluster, and some make the node or the cluster act on the pod
	// (AppArmor and seccomp profiles, the autoscaler's safe-to-evict,
	// sidecar injection). Flag --allowed-pod-annotations.
	PodAnnotations []string
	// Domains are the DNS domains the EtcdClusters of each namespace may
	// use: namespace to suffixes, spec.dns.domain equal to one or inside
	// one. The entry Any applies to namespaces without their own. Empty:
	// every domain, first come first served (DomainOwner). Flag
	// --allowed-domains.
	Domains map[string][]string
	// SharedCA lets rings of different namespaces use the same CA (the
	// same key in their spec.tls.caSecretName): the hub issues every
	// certificate of a ring from its CA (its own root client, spec.clients),
	// so a shared CA makes each namespace's certificates trusted by the
	// other's rings. Flag --allow-shared-ca.
	SharedCA bool
}

// CheckPods says what of ec's pod settings the policy refuses, each
// naming the field, the value and the flag that would allow it (nil when
// everything is allowed).
func (p Policy) CheckPods(ec *etcdfedv1.EtcdCluster) error {
	var errs []error
	if img := ec.Spec.Image; img != "" {
		prefixes := p.ImagePrefixes
		if len(prefixes) == 0 {
			prefixes = DefaultImagePrefixes
		}
		if !slices.Contains(prefixes, Any) && !slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(img, pre) }) {
			errs = append(errs, fmt.Errorf("spec.image %q does not start with an allowed prefix (%s); the hub's operator allows more with --allowed-image-prefixes", img, strings.Join(prefixes, ", ")))
		}
	}
	tpl := ec.Spec.PodTemplate
	if pc := tpl.PriorityClassName; pc != "" && !allowlist.Allows(p.PriorityClasses, pc) {
		errs = append(errs, fmt.Errorf("spec.podTemplate.priorityClassName %q is not allowed (%s); the hub's operator allows it with --allowed-priority-classes", pc, allowlist.String(p.PriorityClasses)))
	}
	for i, t := range tpl.Tolerations {
		key := t.Key
		if key == "" {
			key = Any // tolerates every taint
		}
		if !allowlist.Allows(p.TolerationKeys, key) {
			what := fmt.Sprintf("key %q", t.Key)
			if t.Key == "" {
				what = "no key (it tolerates every taint)"
			}
			errs = append(errs, fmt.Errorf("spec.podTemplate.tolerations[%d] with %s is not allowed (%s); the hub's operator allows keys with --allowed-toleration-keys", i, what, allowlist.String(p.TolerationKeys)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(tpl.Annotations)) {
		if !allowlist.AllowsKey(p.PodAnnotations, k) {
			errs = append(errs, fmt.Errorf("spec.podTemplate.annotations key %q is not allowed (%s); the hub's operator allows keys or prefixes with --allowed-pod-annotations", k, allowlist.String(p.PodAnnotations)))
		}
	}
	return errors.Join(errs...)
}

// ErrForbidden wraps every refusal of a store or a source.
var ErrForbidden = errors.New("tenancy: not allowed by the hub's policy")

// CheckStore says whether the policy lets a spec use store (field is its
// path in the spec, for the message): a store without credentials acts
// with the hub's own identity, and a file:// store with the hub's (and the
// member nodes') filesystem, both only when the hub's operator allows it.
//
// An s3.endpoint with a user or password, or plain http:// without
// s3.insecure, is refused whatever the policy: the CRD refuses both, and
// this covers objects stored before it did.
func (p Policy) CheckStore(field string, store etcdfedv1.BackupStore) error {
	if o := store.S3; o != nil && o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %s.s3.endpoint: %w", ErrForbidden, field, err)
		case u.User != nil:
			return fmt.Errorf("%w: %s.s3.endpoint carries a user or password; put the credentials in the Secret named by credentialsSecretName", ErrForbidden, field)
		case u.Scheme == "http" && !o.Insecure:
			return fmt.Errorf("%w: %s.s3.endpoint %s is plain http: use https://, or set s3.insecure: true", ErrForbidden, field, o.Endpoint)
		}
	}
	if p.AmbientStoreCredentials {
		return nil
	}
	switch {
	case strings.HasPrefix(store.URL, "file://"):
		return fmt.Errorf("%w: %s.url %s is a directory of the hub's own filesystem; the hub's operator allows file:// stores with --allow-ambient-store-credentials", ErrForbidden, field, store.URL)
	case store.CredentialsSecretName == "":
		return fmt.Errorf("%w: %s has no credentialsSecretName, so the hub would use its own cloud identity; name a Secret with the store's credentials (the hub's operator allows the hub's identity with --allow-ambient-store-credentials)", ErrForbidden, field)
	}
	return nil
}

// CheckSource says whether a restore of an EtcdCluster in namespace may
// name sourceCluster (NAMESPACE/NAME; "" for none): its own namespace
// always, another only when the policy lists it.
func (p Policy) CheckSource(namespace, sourceCluster string) error {
	if sourceCluster == "" {
		return nil
	}
	return p.CheckOwner(namespace, "bootstrap.fromSnapshot.sourceCluster "+sourceCluster, sourceCluster)
}

// CheckOwner says whether a restore of an EtcdCluster in namespace may
// read a snapshot that owner (NAMESPACE/NAME of the EtcdCluster that wrote
// it, or a NAMESPACE alone) owns, however the spec named it: what says
// where the owner was read (the source cluster, the object's key, the
// snapshot's sidecar), for the message. The ring's own namespace always,
// another only when the policy lists it.
func (p Policy) CheckOwner(namespace, what, owner string) error {
	ns, _, _ := strings.Cut(owner, "/")
	if ns == namespace || allowlist.Allows(p.SourceNamespaces, ns) {
		return nil
	}
	return fmt.Errorf("%w: %s is in namespace %s, not this EtcdCluster's (%s); the hub's operator allows other namespaces with --allowed-restore-source-namespaces", ErrForbidden, what, ns, namespace)
}
