package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

func validCluster(ns string) *etcdfedv1.EtcdCluster {
	return &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "main-", Namespace: ns},
		Spec: etcdfedv1.EtcdClusterSpec{
			Replicas: 3,
			Version:  "3.6.16",
			DNS:      etcdfedv1.DNSSpec{Domain: "etcd.example.com"},
		},
	}
}

func validMember(ns string) *etcdfedv1.EtcdMember {
	return &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "main-0-", Namespace: ns},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:     etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "0b5f7d1e-0000-4000-8000-000000000001"},
			MemberName:  "main-0",
			Incarnation: 1,
			Image:       "gcr.io/etcd-development/etcd:v3.6.16",
			DNSName:     "main-0.etcd.example.com",
			TLS:         etcdfedv1.MemberTLS{SecretName: "main-0-tls"},
		},
	}
}

// wantInvalid asserts that err is an Invalid error whose text holds want.
func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("object accepted, want rejection with %q", want)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error with %q", err, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q, want it to contain %q", err.Error(), want)
	}
}

func TestEtcdClusterValidObjectsAccepted(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "valid")
	full := validCluster(ns)
	full.Spec.Replicas = 5
	full.Spec.DNS.TTLSeconds = ptr.To[int32](10)
	full.Spec.Topology = etcdfedv1.TopologySpec{
		Clusters:         []string{"a", "b", "c"},
		CordonedZones:    []string{"zone-a", "b/zone-b"},
		CordonedClusters: []string{"d"},
		ClusterSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"ring": "eu"}},
	}
	full.Spec.Etcd = etcdfedv1.EtcdConfig{
		HeartbeatIntervalMillis: ptr.To[int32](250),
		ElectionTimeoutMillis:   ptr.To[int32](2500),
		QuotaBackendBytes:       ptr.To(resource.MustParse("8Gi")),
		AutoCompactionMode:      etcdfedv1.AutoCompactionPeriodic,
		AutoCompactionRetention: "1h",
	}
	full.Spec.Expose.Type = etcdfedv1.ExposeLoadBalancer
	full.Spec.FailurePolicy = etcdfedv1.FailurePolicy{
		Automatic:         ptr.To(true),
		MemberGracePeriod: &metav1.Duration{Duration: 300e9},
		ZoneGracePeriod:   &metav1.Duration{Duration: 120e9},
	}
	longest := validCluster(ns)
	longest.GenerateName, longest.Name = "", strings.Repeat("m", 60)
	for name, obj := range map[string]*etcdfedv1.EtcdCluster{"minimal": validCluster(ns), "full": full, "60-character name": longest} {
		if err := apiserver.Client.Create(ctx, obj); err != nil {
			t.Errorf("%s: valid EtcdCluster rejected: %v", name, err)
		}
	}
	if err := apiserver.Client.Create(ctx, validMember(ns)); err != nil {
		t.Errorf("valid EtcdMember rejected: %v", err)
	}
}

func TestEtcdClusterCreateValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "create")
	for _, tc := range []struct {
		name   string
		mutate func(*etcdfedv1.EtcdCluster)
		want   string
	}{
		{"even replicas", func(c *etcdfedv1.EtcdCluster) { c.Spec.Replicas = 4 }, "replicas must be odd"},
		{"replicas 11", func(c *etcdfedv1.EtcdCluster) { c.Spec.Replicas = 11 }, "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 9"},
		{"replicas 0", func(c *etcdfedv1.EtcdCluster) { c.Spec.Replicas = 0 }, "should be greater than or equal to 1"},
		{"malformed version", func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "v3.6" }, "version must be an etcd release such as 3.7.3"},
		{"version with letters", func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "latest" }, "version must be an etcd release such as 3.7.3"},
		{"old version", func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.4.30" }, "etcd versions before 3.5 are not supported"},
		{"unknown minor version", func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.8.0" }, "unknown etcd version: etcdfed knows etcd 3.5, 3.6 and 3.7"},
		{"unknown future version", func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.10.0" }, "unknown etcd version"},
		{"uppercase domain", func(c *etcdfedv1.EtcdCluster) { c.Spec.DNS.Domain = "Etcd.Example.com" }, "domain must be a lowercase DNS name"},
		{"domain with underscore", func(c *etcdfedv1.EtcdCluster) { c.Spec.DNS.Domain = "etcd_ring.example.com" }, "domain must be a lowercase DNS name"},
		{"domain too long", func(c *etcdfedv1.EtcdCluster) { c.Spec.DNS.Domain = strings.Repeat("a.", 101) + "io" }, "spec.dns.domain: Too long"},
		{"ttl 0", func(c *etcdfedv1.EtcdCluster) { c.Spec.DNS.TTLSeconds = ptr.To[int32](0) }, "spec.dns.ttlSeconds: Invalid value: 0"},
		{"ttl a day", func(c *etcdfedv1.EtcdCluster) { c.Spec.DNS.TTLSeconds = ptr.To[int32](86400) }, "should be less than or equal to 3600"},
		{"heartbeat too small", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.HeartbeatIntervalMillis = ptr.To[int32](1) }, "spec.etcd.heartbeatIntervalMillis"},
		{"election timeout too large", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](60000) }, "spec.etcd.electionTimeoutMillis"},
		{"election below 5x heartbeat", func(c *etcdfedv1.EtcdCluster) {
			c.Spec.Etcd.HeartbeatIntervalMillis = ptr.To[int32](500)
			c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](2000)
		}, "electionTimeoutMillis must be at least 5 times heartbeatIntervalMillis"},
		{"heartbeat above default election/5", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.HeartbeatIntervalMillis = ptr.To[int32](300) }, "electionTimeoutMillis must be at least 5 times heartbeatIntervalMillis"},
		{"quota too small", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("1Mi")) }, "quotaBackendBytes must be between 16Mi and 100Gi"},
		{"quota too large", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("1Ti")) }, "quotaBackendBytes must be between 16Mi and 100Gi"},
		{"retention without mode", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.AutoCompactionRetention = "1h" }, "autoCompactionRetention needs autoCompactionMode"},
		{"revision retention not a number", func(c *etcdfedv1.EtcdCluster) {
			c.Spec.Etcd.AutoCompactionMode = etcdfedv1.AutoCompactionRevision
			c.Spec.Etcd.AutoCompactionRetention = "1h"
		}, "autoCompactionRetention is a number of revisions"},
		{"periodic retention not a duration", func(c *etcdfedv1.EtcdCluster) {
			c.Spec.Etcd.AutoCompactionMode = etcdfedv1.AutoCompactionPeriodic
			c.Spec.Etcd.AutoCompactionRetention = "soon"
		}, "autoCompactionRetention is a duration"},
		{"compaction mode enum", func(c *etcdfedv1.EtcdCluster) { c.Spec.Etcd.AutoCompactionMode = "hourly" }, `spec.etcd.autoCompactionMode: Unsupported value: "hourly"`},
		{"expose type enum", func(c *etcdfedv1.EtcdCluster) { c.Spec.Expose.Type = "Ingress" }, `spec.expose.type: Unsupported value: "Ingress"`},
		{"tls mode enum", func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.Mode = "Sometimes" }, `spec.tls.mode: Unsupported value: "Sometimes"`},
		{"reclaim policy enum", func(c *etcdfedv1.EtcdCluster) { c.Spec.Storage.VolumeReclaimPolicy = "Recycle" }, `Unsupported value: "Recycle"`},
		{"member grace too short", func(c *etcdfedv1.EtcdCluster) {
			c.Spec.FailurePolicy.MemberGracePeriod = &metav1.Duration{Duration: 5e9}
		}, "memberGracePeriod must be at least 30s"},
		{"zone grace too short", func(c *etcdfedv1.EtcdCluster) {
			c.Spec.FailurePolicy.ZoneGracePeriod = &metav1.Duration{Duration: 1e9}
		}, "zoneGracePeriod must be at least 30s"},
		{"cordoned zone malformed", func(c *etcdfedv1.EtcdCluster) { c.Spec.Topology.CordonedZones = []string{"a/b/c"} }, "spec.topology.cordonedZones[0]"},
		{"too many clusters", func(c *etcdfedv1.EtcdCluster) {
			for i := range 65 {
				c.Spec.Topology.Clusters = append(c.Spec.Topology.Clusters, "c"+strings.Repeat("x", i))
			}
		}, "spec.topology.clusters: Too many"},
		{"image too long", func(c *etcdfedv1.EtcdCluster) { c.Spec.Image = strings.Repeat("i", 513) }, "spec.image: Too long"},
		// The name names the members (<name>-0, ...): DNS labels in the
		// domain, and part of object names in every member cluster.
		{"name with a dot", func(c *etcdfedv1.EtcdCluster) { c.GenerateName, c.Name = "", "main.eu" }, "metadata.name must be a lowercase DNS label of at most 60 characters"},
		{"name starting with a digit", func(c *etcdfedv1.EtcdCluster) { c.GenerateName, c.Name = "", "1main" }, "metadata.name must be a lowercase DNS label"},
		{"name of 61 characters", func(c *etcdfedv1.EtcdCluster) { c.GenerateName, c.Name = "", strings.Repeat("m", 61) }, "metadata.name must be a lowercase DNS label of at most 60 characters"},
		{"tsig algorithm enum", func(c *etcdfedv1.EtcdCluster) {
			c.Spec.DNS.RFC2136 = &etcdfedv1.RFC2136Spec{Server: "127.0.0.1:53", TSIGKeyName: "k", TSIGSecretName: "s", TSIGAlgorithm: "md5"}
		}, `spec.dns.rfc2136.tsigAlgorithm: Unsupported value: "md5"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := validCluster(ns)
			tc.mutate(obj)
			wantInvalid(t, apiserver.Client.Create(context.Background(), obj), tc.want)
		})
	}
}

func TestEtcdClusterUpdateValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "update")
	for _, tc := range []struct {
		name    string
		initial func(*etcdfedv1.EtcdCluster)
		mutate  func(*etcdfedv1.EtcdCluster)
		want    string // empty: the update must be accepted
	}{
		{name: "changed domain", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.DNS.Domain = "other.example.com" }, want: "domain is immutable"},
		{name: "downgrade one minor", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.5.35" }},
		{name: "upgrade one minor", initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.5.35" }, mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.6.16" }},
		{name: "patch downgrade", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.6.8" }},
		{name: "upgrade two minors", initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.5.35" }, mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.7.3" }, want: "etcd upgrades one minor version at a time: change spec.version to 3.6.16 first"},
		{name: "upgrade to unknown minor", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.8.0" }, want: "unknown etcd version"},
		{name: "downgrade two minors", initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.6.16" }, mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Version = "3.4.30" }, want: "etcd downgrades one minor version at a time: change spec.version to 3.5.35 first"},
		{name: "scale up", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Replicas = 5 }},
		{name: "CA Secret set", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.CASecretName = "my-ca" }, want: "tls.caSecretName cannot be set, changed or removed after creation"},
		{name: "CA Secret changed", initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.CASecretName = "my-ca" }, mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.CASecretName = "other-ca" }, want: "tls.caSecretName cannot be set, changed or removed after creation"},
		{name: "CA Secret removed", initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.CASecretName = "my-ca" }, mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.CASecretName = "" }, want: "tls.caSecretName cannot be set, changed or removed after creation"},
		{name: "CA Secret kept", initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.CASecretName = "my-ca" }, mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.Replicas = 5 }},
		{name: "tls switched off", mutate: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.Mode = etcdfedv1.TLSDisabled }, initial: func(c *etcdfedv1.EtcdCluster) { c.Spec.TLS.Mode = etcdfedv1.TLSEnabled }, want: "tls.mode is immutable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			obj := validCluster(ns)
			if tc.initial != nil {
				tc.initial(obj)
			}
			if err := apiserver.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.mutate(obj)
			err := apiserver.Client.Update(ctx, obj)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("update rejected: %v", err)
				}
				return
			}
			wantInvalid(t, err, tc.want)
		})
	}
}

func TestEtcdMemberValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "member")
	for _, tc := range []struct {
		name   string
		create func(*etcdfedv1.EtcdMember)
		update func(*etcdfedv1.EtcdMember)
		want   string
	}{
		{name: "tls without secret", create: func(m *etcdfedv1.EtcdMember) { m.Spec.TLS.SecretName = "" }, want: "tls.secretName is required when TLS is enabled"},
		{name: "bad initial cluster state", create: func(m *etcdfedv1.EtcdMember) {
			m.Spec.Bootstrap = &etcdfedv1.BootstrapSpec{InitialCluster: "main-0=https://main-0.etcd.example.com:2380", InitialClusterState: "fresh", Token: "t"}
		}, want: `spec.bootstrap.initialClusterState: Unsupported value: "fresh"`},
		{name: "incarnation goes down", update: func(m *etcdfedv1.EtcdMember) { m.Spec.Incarnation = 0 }, want: "incarnation never goes down"},
		{name: "keepVolumesBefore negative", create: func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.KeepVolumesBefore = -1 }, want: "should be greater than or equal to 0"},
		{name: "keepVolumesBefore above the incarnation", create: func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.KeepVolumesBefore = 2 }, want: "storage.keepVolumesBefore is at most the incarnation"},
		{name: "keepVolumesBefore dropped", create: func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.KeepVolumesBefore = 1 },
			update: func(m *etcdfedv1.EtcdMember) { m.Spec.Storage.KeepVolumesBefore = 0 }, want: "storage.keepVolumesBefore never goes down"},
		{name: "member renamed", update: func(m *etcdfedv1.EtcdMember) { m.Spec.MemberName = "main-1" }, want: "memberName is immutable"},
		{name: "moved to another cluster uid", update: func(m *etcdfedv1.EtcdMember) { m.Spec.Cluster.UID = "another" }, want: "cluster.uid is immutable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			obj := validMember(ns)
			if tc.create != nil && tc.update == nil {
				tc.create(obj)
				wantInvalid(t, apiserver.Client.Create(ctx, obj), tc.want)
				return
			}
			if tc.create != nil {
				tc.create(obj)
			}
			if err := apiserver.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			tc.update(obj)
			wantInvalid(t, apiserver.Client.Update(ctx, obj), tc.want)
		})
	}
}

func TestEtcdDNSZoneValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "zone")
	zone := &etcdfedv1.EtcdDNSZone{
		ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: ns},
		Spec: etcdfedv1.EtcdDNSZoneSpec{
			Cluster: etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "u"},
			Domain:  "etcd.example.com",
			Records: []etcdfedv1.DNSRecord{{Name: "main-0.etcd.example.com.", Type: "MX", TTL: 30, Data: []string{"10 mx."}}},
		},
	}
	wantInvalid(t, apiserver.Client.Create(context.Background(), zone), `spec.records[0].type: Unsupported value: "MX"`)
}

var _ client.Object = &etcdfedv1.EtcdSpoke{}

// TestPodTemplateResourcesValidation: podTemplate.resources is checked at
// admission by the real apiserver: requests above zero and within their
// limits, no dynamic resource claims. Leaving requests out is fine (the
// spoke requests defaults, so a member pod is never BestEffort).
func TestPodTemplateResourcesValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ctx := context.Background()
	ns := testenv.NamespaceT(t, apiserver, "resources")
	q := resource.MustParse
	withResources := func(r *corev1.ResourceRequirements) *etcdfedv1.EtcdCluster {
		c := validCluster(ns)
		c.Spec.PodTemplate.Resources = r
		return c
	}
	for _, r := range []*corev1.ResourceRequirements{
		nil,
		{},
		{Requests: corev1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")}},
		{Requests: corev1.ResourceList{"cpu": q("1")}, Limits: corev1.ResourceList{"cpu": q("1"), "memory": q("2Gi")}},
		{Requests: corev1.ResourceList{"memory": q("2Gi")}, Limits: corev1.ResourceList{"memory": q("2Gi")}},
		{Limits: corev1.ResourceList{"memory": q("4Gi")}},
		{Requests: corev1.ResourceList{"cpu": q("2"), "memory": q("8Gi"), "ephemeral-storage": q("1Gi")}},
	} {
		if err := apiserver.Client.Create(ctx, withResources(r)); err != nil {
			t.Errorf("resources %v rejected: %v", r, err)
		}
	}
	for _, tc := range []struct {
		name string
		r    *corev1.ResourceRequirements
		want string
	}{
		{"cpu request zero", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("0")}}, "resources.requests.cpu must be above zero"},
		{"memory request zero", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("0")}}, "resources.requests.memory must be above zero"},
		{"cpu request above limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": q("2")}, Limits: corev1.ResourceList{"cpu": q("1500m")}}, "resources.requests.cpu must not exceed resources.limits.cpu"},
		{"memory request above limit", &corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi")}, Limits: corev1.ResourceList{"memory": q("512Mi")}}, "resources.requests.memory must not exceed resources.limits.memory"},
		{"claims", &corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}, "resources.claims is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, apiserver.Client.Create(ctx, withResources(tc.r)), tc.want)
		})
	}
	// The same rules guard EtcdMember, which carries the same template.
	m := validMember(ns)
	m.Spec.PodTemplate.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{"memory": q("1Gi")}, Limits: corev1.ResourceList{"memory": q("512Mi")}}
	wantInvalid(t, apiserver.Client.Create(ctx, m), "resources.requests.memory must not exceed resources.limits.memory")
}
