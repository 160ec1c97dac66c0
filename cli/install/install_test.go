package install_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/installtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registration"
	"github.com/etcdfed/etcdfed/hub/registry"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// inventory is what the label key=value marks in a cluster, by "Kind
// ns/name", with resourceVersions.
func inventory(t *testing.T, c client.Client, key, value string) map[string]string {
	t.Helper()
	m, err := install.Inventory(context.Background(), c, labels.SelectorFromSet(labels.Set{key: value}))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestJoinTwiceThenUnjoin: join installs the member side and registers the
// cluster with a short-lived token of a least-privilege ServiceAccount; a
// second join writes nothing (every resourceVersion the same); a dry run
// writes nothing and prints no credential; unjoin refuses while the
// cluster hosts a member and then leaves nothing behind.
func TestJoinTwiceThenUnjoin(t *testing.T) {
	cs := installtest.Clusters(t, "hub", "member")
	hub, member := cs[0], cs[1]
	ctx := context.Background()
	var lines []string
	progress := func(s string) { lines = append(lines, s); t.Log(s) }

	if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: hub.Config, HubOptions: install.HubOptions{External: true}, Progress: progress}); err != nil {
		t.Fatal(err)
	}
	join := install.JoinOptions{
		MemberOptions: install.MemberOptions{Name: "member-1", External: true},
		Hub:           hub.Config, Member: member.Config,
		Labels:    map[string]string{"region": "eu"},
		ZoneLabel: "zone-a",
		Progress:  progress,
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if err := member.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	// A long-lived token Secret of an install before join existed.
	if err := member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: install.Namespace}}); err != nil {
		t.Fatal(err)
	}
	legacy := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "etcdfed-hub-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "etcdfed-hub"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	if err := member.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if err := install.Join(ctx, join); err != nil {
		t.Fatal(err)
	}
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(legacy), legacy); !apierrors.IsNotFound(err) {
		t.Errorf("the long-lived token Secret of an earlier install is still there (%v)", err)
	}

	// The registration: the registry's format, a token of the hub's
	// ServiceAccount that expires, and the labels given.
	sec := &corev1.Secret{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "member-1"}, sec); err != nil {
		t.Fatal(err)
	}
	if sec.Labels[registry.KubeconfigSecretLabel] != "true" || sec.Labels["region"] != "eu" {
		t.Errorf("registration labels %v", sec.Labels)
	}
	claims, err := registration.ParseToken(string(sec.Data[registry.TokenKey]))
	if err != nil {
		t.Fatalf("registration token: %v", err)
	}
	if claims.Lifetime() != install.DefaultTokenLifetime || claims.ServiceAccount != "etcdfed-hub" || claims.Namespace != install.Namespace {
		t.Errorf("token claims %+v, want the hub's ServiceAccount for %s", claims, install.DefaultTokenLifetime)
	}
	if bytes.Contains(sec.Data[registry.KubeconfigSecretKey], sec.Data[registry.TokenKey]) {
		t.Error("the kubeconfig holds the token: a renewal would then reconnect the hub")
	}
	asHub, err := registry.RESTConfig(sec)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := client.New(asHub, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := hc.List(ctx, &etcdfedv1.EtcdMemberList{}, client.InNamespace(install.Namespace)); err != nil {
		t.Errorf("the hub lists EtcdMembers in the ring namespace: %v", err)
	}
	if err := hc.List(ctx, &corev1.PodList{}, client.InNamespace(install.Namespace)); !apierrors.IsForbidden(err) {
		t.Errorf("the hub lists pods: %v, want Forbidden (config/rbac/hub-member)", err)
	}
	hcs := kubernetes.NewForConfigOrDie(asHub)
	anchor := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: etcdfedv1.HubCredentialAnchor}, anchor); err != nil {
		t.Fatalf("join started no credential chain: %v", err)
	}
	if _, err := hcs.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, "etcdfed-hub", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: anchor.Name, UID: anchor.UID}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the hub mints its own token, bound to its chain: %v, want Forbidden (the spoke mints and seals them, issue 37)", err)
	}
	if anchor.Annotations[etcdfedv1.AnnotationHubSealingKey] == "" || anchor.Annotations[etcdfedv1.AnnotationHubTokenLifetime] == "" {
		t.Errorf("the anchor carries %v, want the hub's sealing key and the tokens' lifetime", anchor.Annotations)
	}
	if _, err := hcs.CoreV1().ServiceAccounts(install.Namespace).CreateToken(ctx, "etcdfed-spoke", &authenticationv1.TokenRequest{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the hub mints a token of the spoke's ServiceAccount: %v, want Forbidden", err)
	}
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil || node.Labels[corev1.LabelTopologyZone] != "zone-a" {
		t.Errorf("node zone label %v (%v), want zone-a", node.Labels, err)
	}
	gossip := &corev1.Secret{}
	hubGossip := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.GossipSecret}, gossip); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.GossipSecret}, hubGossip); err != nil {
		t.Fatal(err)
	}
	if len(gossip.Data["key"]) != 32 || !bytes.Equal(gossip.Data["key"], hubGossip.Data["key"]) {
		t.Error("the member's gossip key is not the ring's (the hub's)")
	}

	// A second join writes nothing.
	memberBefore := inventory(t, member.Client, install.LabelJoinedAs, "member-1")
	hubBefore := inventory(t, hub.Client, install.LabelJoinedAs, "member-1")
	if len(memberBefore) < 10 || len(hubBefore) != 1 {
		t.Fatalf("labelled objects: member %v, hub %v", keys(memberBefore), keys(hubBefore))
	}
	if err := install.Join(ctx, join); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]map[string]string{
		"member": {memberBefore, inventory(t, member.Client, install.LabelJoinedAs, "member-1")},
		"hub":    {hubBefore, inventory(t, hub.Client, install.LabelJoinedAs, "member-1")},
	} {
		for k, rv := range got[0] {
			if got[1][k] != rv {
				t.Errorf("%s: %s changed on the second join (resourceVersion %s -> %s)", name, k, rv, got[1][k])
			}
		}
		if len(got[0]) != len(got[1]) {
			t.Errorf("%s: %d objects before the second join, %d after", name, len(got[0]), len(got[1]))
		}
	}
	t.Logf("second join: %d objects in the member cluster and the registration in the hub, none written", len(memberBefore))

	// A dry run prints every object and no credential, and writes nothing.
	var out bytes.Buffer
	dry := join
	dry.DryRun = &out
	dry.TokenLifetime = 2 * install.DefaultTokenLifetime // would mint a new token
	if err := install.Join(ctx, dry); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: CustomResourceDefinition", "kind: ClusterRole", "name: member-1", "minted by join"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run prints no %q", want)
		}
	}
	if bytes.Contains(out.Bytes(), sec.Data[registry.TokenKey]) || strings.Contains(out.String(), string(hubGossip.Data["key"])) {
		t.Error("dry run printed a credential")
	}
	if got := inventory(t, hub.Client, install.LabelJoinedAs, "member-1"); got[keys(hubBefore)[0]] != hubBefore[keys(hubBefore)[0]] {
		t.Error("dry run wrote the registration")
	}

	// Unjoin refuses while the cluster hosts a member, and says what to do.
	m := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Name: "main-0", Namespace: install.Namespace},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:    etcdfedv1.ClusterReference{Name: "main", Namespace: "default", UID: "u"},
			MemberName: "main-0", Incarnation: 1, Image: "etcd:v3.6.16", DNSName: "main-0.etcd.test",
			Expose: etcdfedv1.ExposeSpec{Type: etcdfedv1.ExposeNodePort},
			TLS:    etcdfedv1.MemberTLS{Mode: etcdfedv1.TLSDisabled},
		},
	}
	if err := member.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	unjoin := install.UnjoinOptions{Name: "member-1", Hub: hub.Config, Member: member.Config, Progress: progress}
	err = install.Unjoin(ctx, unjoin)
	if !errors.Is(err, install.ErrHostsMembers) || !strings.Contains(err.Error(), "default/main (main-0)") || !strings.Contains(err.Error(), "cordonedClusters") {
		t.Fatalf("unjoin with a member: %v, want ErrHostsMembers naming default/main (main-0) and the cordon", err)
	}
	if len(inventory(t, member.Client, install.LabelJoinedAs, "member-1")) != len(memberBefore) {
		t.Fatal("a refused unjoin deleted something")
	}
	if err := member.Client.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}

	// Unjoin leaves nothing behind, and the hub's token stops working.
	if err := install.Unjoin(ctx, unjoin); err != nil {
		t.Fatal(err)
	}
	if left := inventory(t, member.Client, install.LabelJoinedAs, "member-1"); len(left) > 0 {
		t.Errorf("unjoin left %v in the member cluster", keys(left))
	}
	if left := inventory(t, hub.Client, install.LabelJoinedAs, "member-1"); len(left) > 0 {
		t.Errorf("unjoin left %v in the hub", keys(left))
	}
	if err := member.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil || node.Labels[corev1.LabelTopologyZone] != "" {
		t.Errorf("node labels after unjoin %v (%v): the zone label join set is still there", node.Labels, err)
	}
	tr, err := kubernetes.NewForConfigOrDie(member.Config).AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: string(sec.Data[registry.TokenKey])}}, metav1.CreateOptions{})
	if err != nil || tr.Status.Authenticated {
		t.Errorf("the hub's token after unjoin: authenticated %v (%v), want refused", tr.Status.Authenticated, err)
	}
}
