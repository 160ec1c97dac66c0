package spec

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Validate checks what the CRD schema cannot: that metadata.name follows
// the naming scheme (etcdfedv1.MemberObjectName, an incarnation's
// etcdfedv1.IncarnationObjectName, or the member's name for an object
// written before it) and can name the pod and the Service, that
// cluster.uid is a valid label value, that the DNS name is usable in URLs,
// and that TLS names its Secret. Every problem is reported, joined.
func Validate(m *etcdfedv1.EtcdMember) error {
	var errs []error
	if c := m.Spec.Cluster; !etcdfedv1.IsMemberObjectName(m.Name, c.Namespace, c.Name, m.Spec.MemberName) {
		errs = append(errs, fmt.Errorf("metadata.name %q must be %q (the member %q of EtcdCluster %s/%s), an incarnation's own name such as %q (a move inside the member cluster) or, for an object written before that scheme, %q: the pod, volume and Service are named after it",
			m.Name, etcdfedv1.MemberObjectName(c.Namespace, c.Name, m.Spec.MemberName), m.Spec.MemberName, c.Namespace, c.Name,
			etcdfedv1.IncarnationObjectName(c.Namespace, c.Name, m.Spec.MemberName, max(m.Spec.Incarnation, 1)), m.Spec.MemberName))
	}
	if msgs := validation.IsDNS1123Label(m.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name %q cannot name a pod: %s", m.Name, strings.Join(msgs, "; ")))
	}
	if t := ExposeType(m); t != etcdfedv1.ExposePodIP {
		if msgs := validation.IsDNS1035Label(m.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("name %q cannot name the %s Service: %s", m.Name, t, strings.Join(msgs, "; ")))
		}
	}
	if msgs := validation.IsValidLabelValue(m.Spec.Cluster.UID); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("cluster.uid %q is not a valid label value: %s", m.Spec.Cluster.UID, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(m.Spec.DNSName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("dnsName %q is not a DNS name (no trailing dot): %s", m.Spec.DNSName, strings.Join(msgs, "; ")))
	}
	if TLSEnabled(m) && m.Spec.TLS.SecretName == "" {
		errs = append(errs, errors.New("tls.secretName is required when TLS is enabled"))
	}
	return errors.Join(errs...)
}

// ParseInitialCluster parses etcd's --initial-cluster (name=url pairs, comma
// separated, a name may repeat) into the URLs of each name.
func ParseInitialCluster(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		name, u, ok := strings.Cut(pair, "=")
		if !ok || name == "" || u == "" {
			return nil, fmt.Errorf("initialCluster entry %q is not name=url", pair)
		}
		pu, err := url.Parse(u)
		if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
			return nil, fmt.Errorf("initialCluster entry %q: %q is not an http or https URL", pair, u)
		}
		out[name] = append(out[name], u)
	}
	return out, nil
}

// CheckBootstrap checks that the bootstrap's initialCluster lists the member
// with exactly its advertised peer URL: etcd refuses to start otherwise, and
// a different URL would give the member a different identity.
func CheckBootstrap(m *etcdfedv1.EtcdMember, peerURL string) error {
	b := m.Spec.Bootstrap
	if b == nil {
		return nil
	}
	ic, err := ParseInitialCluster(b.InitialCluster)
	if err != nil {
		return err
	}
	urls := ic[m.Spec.MemberName]
	if len(urls) == 0 {
		return fmt.Errorf("bootstrap.initialCluster does not list member %q", m.Spec.MemberName)
	}
	if len(urls) != 1 || urls[0] != peerURL {
		return fmt.Errorf("bootstrap.initialCluster lists %s=%s but the member advertises %s", m.Spec.MemberName, strings.Join(urls, ","), peerURL)
	}
	return nil
}
