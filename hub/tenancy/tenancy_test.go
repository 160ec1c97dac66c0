package tenancy

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func ring(ns, name, uid, domain string, age time.Duration, members int) etcdfedv1.EtcdCluster {
	ec := etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
	ec.Spec.DNS.Domain = domain
	for range members {
		ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: name})
	}
	return ec
}

func TestDomainOwner(t *testing.T) {
	demo := ring("default", "demo", "uid-b", "demo.etcdfed.test", time.Hour, 5)
	for _, tc := range []struct {
		name   string
		ec     etcdfedv1.EtcdCluster
		others []etcdfedv1.EtcdCluster
		owner  string // namespace/name, "" when ec may serve
		same   bool
	}{
		{"alone", demo, nil, "", false},
		{"itself in the list", demo, []etcdfedv1.EtcdCluster{demo}, "", false},
		{"another domain", ring("team-b", "demo", "uid-c", "demo.team-b.test", 0, 0), []etcdfedv1.EtcdCluster{demo}, "", false},
		{"a newcomer with the same domain is refused", ring("team-c", "copy", "uid-a", "demo.etcdfed.test", 0, 0), []etcdfedv1.EtcdCluster{demo}, "default/demo", true},
		{"the domain compared without case and trailing dot", ring("team-c", "copy", "uid-a", "Demo.Etcdfed.Test.", 0, 0), []etcdfedv1.EtcdCluster{demo}, "default/demo", true},
		{"the first ring is never refused by a newcomer", demo, []etcdfedv1.EtcdCluster{ring("team-c", "copy", "uid-a", "demo.etcdfed.test", 0, 0)}, "", false},
		{"a domain inside the first ring's", ring("team-c", "ns", "uid-a", "ns0.demo.etcdfed.test", 0, 0), []etcdfedv1.EtcdCluster{demo}, "default/demo", false},
		{"a domain containing the first ring's", ring("team-c", "all", "uid-a", "etcdfed.test", 0, 0), []etcdfedv1.EtcdCluster{demo}, "default/demo", false},
		{"a suffix that is not a subdomain", ring("team-c", "x", "uid-a", "xdemo.etcdfed.test", 0, 0), []etcdfedv1.EtcdCluster{demo}, "", false},
		// Created in the same second: the smaller UID wins, both ways.
		{"created at once, larger UID", ring("b", "r", "uid-2", "d.test", 0, 0), []etcdfedv1.EtcdCluster{ring("a", "r", "uid-1", "d.test", 0, 0)}, "a/r", true},
		{"created at once, smaller UID", ring("a", "r", "uid-1", "d.test", 0, 0), []etcdfedv1.EtcdCluster{ring("b", "r", "uid-2", "d.test", 0, 0)}, "", false},
		// A ring the hub began keeps its domain against one created in the
		// same second with a smaller UID that the hub saw later.
		{"a ring that has begun keeps its domain", ring("b", "r", "uid-2", "d.test", 0, 3), []etcdfedv1.EtcdCluster{ring("a", "r", "uid-1", "d.test", 0, 0)}, "", false},
		{"the oldest of several owners is named", ring("c", "r", "uid-9", "d.test", 0, 0),
			[]etcdfedv1.EtcdCluster{ring("b", "r", "uid-2", "d.test", time.Minute, 0), ring("a", "r", "uid-1", "d.test", time.Hour, 0)}, "a/r", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, refused := DomainOwner(&tc.ec, tc.others, Policy{})
			got := ""
			if refused {
				got = c.Owner.Namespace + "/" + c.Owner.Name
			}
			if got != tc.owner || (refused && c.Same != tc.same) {
				t.Fatalf("owner %q (same %v), want %q (same %v)", got, c.Same, tc.owner, tc.same)
			}
			if refused && !strings.Contains(c.Error(), tc.owner) {
				t.Errorf("message %q does not name %s", c.Error(), tc.owner)
			}
		})
	}
}

// refusedRing is a ring the hub refused for its current generation.
func refusedRing(ec etcdfedv1.EtcdCluster, reason string) etcdfedv1.EtcdCluster {
	ec.Generation = 2
	ec.Status.Conditions = []metav1.Condition{{Type: etcdfedv1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason, ObservedGeneration: 2}}
	return ec
}

// TestSquattingRingHoldsNoDomain: a ring that has not begun holds no
// domain it may not use, nor one while the hub refuses it. Before, the
// oldest ring with an overlapping domain won, formed or not: one tenant's
// EtcdCluster for example.com (refused by the policy, or kept from forming
// by a ring already serving a.example.com) blocked every later ring under
// example.com for good. A ring that has begun keeps its domain.
func TestSquattingRingHoldsNoDomain(t *testing.T) {
	policy := Policy{Domains: map[string][]string{"team-a": {"a.example.com"}, "team-b": {"b.example.com"}}}
	squat := ring("team-a", "squat", "uid-1", "example.com", time.Hour, 0)
	late := ring("team-b", "late", "uid-2", "etcd.b.example.com", 0, 0)
	for _, tc := range []struct {
		name   string
		policy Policy
		ec     etcdfedv1.EtcdCluster
		others []etcdfedv1.EtcdCluster
		owner  string
	}{
		{"a squatter outside its namespace's domains", policy, late, []etcdfedv1.EtcdCluster{squat}, ""},
		{"the same squatter without a policy (first come)", Policy{}, late, []etcdfedv1.EtcdCluster{squat}, "team-a/squat"},
		{"a squatter the hub refused for a domain in use", Policy{}, late, []etcdfedv1.EtcdCluster{refusedRing(squat, etcdfedv1.ReasonDomainInUse)}, ""},
		{"a squatter the hub refused by policy", Policy{}, late, []etcdfedv1.EtcdCluster{refusedRing(squat, etcdfedv1.ReasonPolicyViolation)}, ""},
		{"a refusal of an older generation still holds", Policy{}, late, []etcdfedv1.EtcdCluster{func() etcdfedv1.EtcdCluster {
			r := refusedRing(squat, etcdfedv1.ReasonDomainInUse)
			r.Generation = 3
			return r
		}()}, "team-a/squat"},
		{"a single-label squatter stored before the CRD rule", Policy{}, late, []etcdfedv1.EtcdCluster{ring("team-a", "com", "uid-1", "com", time.Hour, 0)}, ""},
		{"a ring that has begun keeps its domain whatever the policy", policy, late, []etcdfedv1.EtcdCluster{ring("team-a", "squat", "uid-1", "example.com", time.Hour, 3)}, "team-a/squat"},
		{"a ring inside its namespace's domains holds it", policy, ring("team-b", "late", "uid-2", "etcd.b.example.com", 0, 0),
			[]etcdfedv1.EtcdCluster{ring("team-b", "first", "uid-1", "etcd.b.example.com", time.Hour, 0)}, "team-b/first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, refused := DomainOwner(&tc.ec, tc.others, tc.policy)
			got := ""
			if refused {
				got = c.Owner.Namespace + "/" + c.Owner.Name
			}
			if got != tc.owner {
				t.Fatalf("owner %q, want %q", got, tc.owner)
			}
		})
	}
}

func TestCheckDomain(t *testing.T) {
	policy := Policy{Domains: map[string][]string{"team-a": {"a.example.com", "Shared.Example.COM."}, Any: {"etcd.example.com"}}}
	for _, tc := range []struct {
		policy    Policy
		ns, d     string
		wantError string
	}{
		{Policy{}, "x", "com", "single label"},
		{Policy{}, "x", "com.", "single label"},
		{Policy{}, "x", "anything.example.org", ""},
		{policy, "team-a", "a.example.com", ""},
		{policy, "team-a", "ring.a.example.com", ""},
		{policy, "team-a", "ring.shared.example.com", ""},
		{policy, "team-a", "xa.example.com", "not inside a domain namespace team-a may use"},
		{policy, "team-a", "example.com", "--allowed-domains"},
		{policy, "team-b", "ring.etcd.example.com", ""},
		{policy, "team-b", "ring.a.example.com", "namespace team-b"},
		{Policy{Domains: map[string][]string{"team-a": {"a.example.com"}}}, "team-b", "ring.b.example.com", "none allowed"},
	} {
		ec := ring(tc.ns, "r", "uid", tc.d, 0, 0)
		err := tc.policy.CheckDomain(&ec)
		if (err == nil) != (tc.wantError == "") || (err != nil && !strings.Contains(err.Error(), tc.wantError)) {
			t.Errorf("%s in %s: %v, want %q", tc.d, tc.ns, err, tc.wantError)
		}
	}
}

func TestParents(t *testing.T) {
	if got := strings.Join(Parents("a.b.c"), ","); got != "b.c,c" {
		t.Errorf("Parents(a.b.c) = %s", got)
	}
	if got := Parents("c"); len(got) != 0 {
		t.Errorf("Parents(c) = %v", got)
	}
}

func TestCheckPods(t *testing.T) {
	spec := func(f func(*etcdfedv1.EtcdClusterSpec)) *etcdfedv1.EtcdCluster {
		ec := &etcdfedv1.EtcdCluster{}
		f(&ec.Spec)
		return ec
	}
	for _, tc := range []struct {
		name   string
		policy Policy
		ec     *etcdfedv1.EtcdCluster
		want   []string // substrings of the error; none: allowed
	}{
		{"the default image", Policy{}, spec(func(*etcdfedv1.EtcdClusterSpec) {}), nil},
		{"an etcd release image", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.Image = "registry.k8s.io/etcd:3.6.16-0" }), nil},
		{"an image of another registry", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.Image = "evil.example.com/etcd:3.6.16" }),
			[]string{`spec.image "evil.example.com/etcd:3.6.16"`, "--allowed-image-prefixes"}},
		{"a prefix that is not the repository", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.Image = "registry.k8s.io/etcd-evil:1" }), []string{"spec.image"}},
		{"an image the operator allows", Policy{ImagePrefixes: []string{"mirror.corp/etcd:"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.Image = "mirror.corp/etcd:v3.6.16" }), nil},
		{"the operator's list replaces the default", Policy{ImagePrefixes: []string{"mirror.corp/etcd:"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.Image = "registry.k8s.io/etcd:3.6.16-0" }), []string{"mirror.corp/etcd:"}},
		{"any image", Policy{ImagePrefixes: []string{Any}}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.Image = "x/y:z" }), nil},
		{"a priority class by default", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.PodTemplate.PriorityClassName = "system-node-critical" }),
			[]string{`priorityClassName "system-node-critical"`, "none allowed", "--allowed-priority-classes"}},
		{"an allowed priority class", Policy{PriorityClasses: []string{"etcd-high"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) { s.PodTemplate.PriorityClassName = "etcd-high" }), nil},
		{"a toleration by default", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
		}), []string{`tolerations[0] with key "node-role.kubernetes.io/control-plane"`, "--allowed-toleration-keys"}},
		{"an allowed toleration key", Policy{TolerationKeys: []string{"dedicated"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Tolerations = []corev1.Toleration{{Key: "dedicated", Value: "etcd"}}
		}), nil},
		{"a toleration of every taint needs Any", Policy{TolerationKeys: []string{"dedicated"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), []string{"tolerates every taint"}},
		// Issue 37 (low): before, any annotation reached every member
		// pod in every member cluster.
		{"a pod annotation by default", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/etcd": "unconfined"}
		}), []string{`annotations key "container.apparmor.security.beta.kubernetes.io/etcd"`, "none allowed", "--allowed-pod-annotations"}},
		{"an allowed annotation prefix", Policy{PodAnnotations: []string{"prometheus.io/"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "2381"}
		}), nil},
		{"an allowed annotation key, and one beside it", Policy{PodAnnotations: []string{"team.example.com/owner"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Annotations = map[string]string{"team.example.com/owner": "a", "team.example.com/owner-x": "b"}
		}), []string{`"team.example.com/owner-x"`}},
		{"a prefix is no suffix", Policy{PodAnnotations: []string{"prometheus.io/"}}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Annotations = map[string]string{"evil.prometheus.io/x": "1"}
		}), []string{`"evil.prometheus.io/x"`}},
		{"any annotation", Policy{PodAnnotations: []string{Any}}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.PodTemplate.Annotations = map[string]string{"sidecar.istio.io/inject": "true"}
		}), nil},
		{"every violation is named", Policy{}, spec(func(s *etcdfedv1.EtcdClusterSpec) {
			s.Image, s.PodTemplate.PriorityClassName = "x/etcd:1", "p"
			s.PodTemplate.Tolerations = []corev1.Toleration{{Key: "a"}, {Key: "b"}}
		}), []string{"spec.image", "priorityClassName", "tolerations[0]", "tolerations[1]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.CheckPods(tc.ec)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("allowed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCheckStoreAndSource(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  Policy
		store   etcdfedv1.BackupStore
		refused string
	}{
		{"credentials named", Policy{}, etcdfedv1.BackupStore{URL: "s3://b/p", CredentialsSecretName: "creds"}, ""},
		{"no credentials: the hub's identity", Policy{}, etcdfedv1.BackupStore{URL: "s3://b/p"}, "has no credentialsSecretName"},
		{"no credentials, allowed", Policy{AmbientStoreCredentials: true}, etcdfedv1.BackupStore{URL: "gs://b"}, ""},
		{"the hub's filesystem", Policy{}, etcdfedv1.BackupStore{URL: "file:///var/lib/backups"}, "hub's own filesystem"},
		{"the hub's filesystem, allowed", Policy{AmbientStoreCredentials: true}, etcdfedv1.BackupStore{URL: "file:///var/lib/backups"}, ""},
		{"an endpoint with a password, whatever the policy", Policy{AmbientStoreCredentials: true}, etcdfedv1.BackupStore{URL: "s3://b", CredentialsSecretName: "c",
			S3: &etcdfedv1.S3StoreOptions{Endpoint: "https://u:p@minio:9000"}}, "carries a user or password"},
		{"plain http without insecure", Policy{}, etcdfedv1.BackupStore{URL: "s3://b", CredentialsSecretName: "c", S3: &etcdfedv1.S3StoreOptions{Endpoint: "http://minio:9000"}}, "plain http"},
		{"plain http, insecure", Policy{}, etcdfedv1.BackupStore{URL: "s3://b", CredentialsSecretName: "c", S3: &etcdfedv1.S3StoreOptions{Endpoint: "http://minio:9000", Insecure: true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.CheckStore("spec.backup.store", tc.store)
			if (err == nil) != (tc.refused == "") || (err != nil && (!strings.Contains(err.Error(), tc.refused) || !errors.Is(err, ErrForbidden))) {
				t.Errorf("CheckStore = %v, want refusal %q", err, tc.refused)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		policy  Policy
		source  string
		refused bool
	}{
		{"none", Policy{}, "", false},
		{"own namespace", Policy{}, "team-a/main", false},
		{"another namespace", Policy{}, "team-b/main", true},
		{"another namespace, listed", Policy{SourceNamespaces: []string{"team-b"}}, "team-b/main", false},
		{"another namespace, not listed", Policy{SourceNamespaces: []string{"team-c"}}, "team-b/main", true},
		{"any namespace", Policy{SourceNamespaces: []string{Any}}, "team-b/main", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.CheckSource("team-a", tc.source)
			if (err != nil) != tc.refused {
				t.Errorf("CheckSource(%q) = %v, want refused %v", tc.source, err, tc.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "--allowed-restore-source-namespaces") {
				t.Errorf("%v does not say how to allow it", err)
			}
		})
	}
}

func TestCAOwner(t *testing.T) {
	withCA := func(ec etcdfedv1.EtcdCluster, fp string) etcdfedv1.EtcdCluster {
		ec.Status.CAFingerprint = fp
		return ec
	}
	victim := withCA(ring("victim", "main", "uid-1", "a.test", time.Hour, 3), "fp")
	tenant := ring("tenant", "main", "uid-2", "b.test", 0, 0)
	for _, tc := range []struct {
		name   string
		policy Policy
		ec     etcdfedv1.EtcdCluster
		rings  []etcdfedv1.EtcdCluster
		owner  string
	}{
		{"another namespace's ring has the key", Policy{}, tenant, []etcdfedv1.EtcdCluster{victim}, "victim/main"},
		{"shared CAs allowed", Policy{SharedCA: true}, tenant, []etcdfedv1.EtcdCluster{victim}, ""},
		{"the same namespace", Policy{}, ring("victim", "other", "uid-3", "c.test", 0, 0), []etcdfedv1.EtcdCluster{victim}, ""},
		{"another key", Policy{}, tenant, []etcdfedv1.EtcdCluster{withCA(victim, "other")}, ""},
		{"the ring that had it first is never refused", Policy{}, victim, []etcdfedv1.EtcdCluster{withCA(tenant, "fp")}, ""},
		{"a refused ring that never began holds no CA", Policy{}, tenant,
			[]etcdfedv1.EtcdCluster{refusedRing(withCA(ring("victim", "main", "uid-1", "a.test", time.Hour, 0), "fp"), etcdfedv1.ReasonPolicyViolation)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, refused := CAOwner(&tc.ec, "fp", tc.rings, tc.policy)
			got := ""
			if refused {
				got = c.Owner.Namespace + "/" + c.Owner.Name
				if !strings.Contains(c.Error(), "--allow-shared-ca") {
					t.Errorf("message %q does not name the flag", c.Error())
				}
			}
			if got != tc.owner {
				t.Fatalf("owner %q, want %q", got, tc.owner)
			}
		})
	}
}
