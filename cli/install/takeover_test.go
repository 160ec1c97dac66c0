package install_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/installtest"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// TestMemberClusterAnswersOneHub: a member cluster joined by hub cluster
// A is refused to hub cluster B before anything is written (B's gossip
// key would replace the one A's spokes use; two hubs would act on the
// same rings); with TakeOver (a take-over after A was lost) B's join ends
// A's credential chain, so A's token stops authenticating at the member
// apiserver (an old hub that comes back cannot write there), and B's
// works. A then needs TakeOver itself. A chain an earlier join started
// without naming its hub cluster is kept for the hub that holds its
// registration, and named.
func TestMemberClusterAnswersOneHub(t *testing.T) {
	cs := installtest.Clusters(t, "hub-a", "hub-b", "member")
	hubA, hubB, member := cs[0], cs[1], cs[2]
	ctx := context.Background()
	progress := func(s string) { t.Log(s) }
	for _, h := range []*testenv.Cluster{hubA, hubB} {
		if err := install.InstallHub(ctx, install.HubInstallOptions{Hub: h.Config, HubOptions: install.HubOptions{External: true}, Progress: progress}); err != nil {
			t.Fatal(err)
		}
	}
	join := func(hub *testenv.Cluster, takeOver bool) error {
		return install.Join(ctx, install.JoinOptions{
			MemberOptions: install.MemberOptions{Name: "member-1", External: true},
			Hub:           hub.Config, Member: member.Config, TakeOver: takeOver, Progress: progress,
		})
	}
	token := func(hub *testenv.Cluster) string {
		sec := &corev1.Secret{}
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: "member-1"}, sec); err != nil {
			t.Fatal(err)
		}
		return string(sec.Data[registry.TokenKey])
	}
	authenticated := func(tok string) bool {
		tr, err := kubernetes.NewForConfigOrDie(member.Config).AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Authenticated
	}
	gossipKey := func() string {
		sec := &corev1.Secret{}
		if err := member.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.GossipSecret}, sec); err != nil {
			t.Fatal(err)
		}
		return string(sec.Data["key"])
	}
	anchor := func() *corev1.Secret {
		sec := &corev1.Secret{}
		if err := member.Client.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: etcdfedv1.HubCredentialAnchor}, sec); err != nil {
			t.Fatal(err)
		}
		return sec
	}

	if err := join(hubA, false); err != nil {
		t.Fatal(err)
	}
	tokA, keyA := token(hubA), gossipKey()
	before := inventory(t, member.Client, install.LabelJoinedAs, "member-1")
	before["anchor"] = anchor().ResourceVersion

	// B without TakeOver: refused, saying what to do, nothing written.
	err := join(hubB, false)
	if !errors.Is(err, install.ErrJoinedToAnotherHub) || !strings.Contains(err.Error(), "--take-over") {
		t.Fatalf("join from a second hub cluster: %v, want ErrJoinedToAnotherHub naming --take-over", err)
	}
	t.Logf("refused: %v", err)
	after := inventory(t, member.Client, install.LabelJoinedAs, "member-1")
	after["anchor"] = anchor().ResourceVersion
	for k, rv := range before {
		if after[k] != rv {
			t.Errorf("the refused join changed %s in the member cluster (resourceVersion %s -> %s)", k, rv, after[k])
		}
	}
	if gossipKey() != keyA || !authenticated(tokA) {
		t.Fatal("the refused join replaced the gossip key or ended A's token")
	}
	if inventory(t, hubB.Client, install.LabelJoinedAs, "member-1")["Secret/"+install.Namespace+"/member-1"] != "" {
		t.Error("the refused join registered the member cluster in B")
	}

	// B with TakeOver: A's token ends, B's works.
	if err := join(hubB, true); err != nil {
		t.Fatal(err)
	}
	// The apiserver caches a token's authentication for up to 10 s.
	ended := time.Now()
	for authenticated(tokA) {
		if time.Since(ended) > time.Minute {
			t.Fatal("A's token still authenticates at the member apiserver a minute after B took the cluster over")
		}
		time.Sleep(time.Second)
	}
	t.Logf("A's token refused %.1fs after B's take-over", time.Since(ended).Seconds())
	if !authenticated(token(hubB)) {
		t.Error("B's token does not authenticate")
	}
	// A coming back is now the other hub.
	if err := join(hubA, false); !errors.Is(err, install.ErrJoinedToAnotherHub) {
		t.Errorf("A's join after B's take-over: %v, want ErrJoinedToAnotherHub", err)
	}
	// A's unjoin is refused too, before it deletes anything: it would
	// remove B's spoke and end B's chain. A keeps its stale registration
	// to delete by hand, as the error says.
	before = inventory(t, member.Client, install.LabelJoinedAs, "member-1")
	before["anchor"] = anchor().ResourceVersion
	err = install.Unjoin(ctx, install.UnjoinOptions{Name: "member-1", Hub: hubA.Config, Member: member.Config, Progress: progress})
	if !errors.Is(err, install.ErrJoinedToAnotherHub) || !strings.Contains(err.Error(), "delete secret member-1") {
		t.Fatalf("unjoin from A after B's take-over: %v, want ErrJoinedToAnotherHub naming the registration to delete", err)
	}
	t.Logf("unjoin refused: %v", err)
	after = inventory(t, member.Client, install.LabelJoinedAs, "member-1")
	after["anchor"] = anchor().ResourceVersion
	for k, rv := range before {
		if after[k] != rv {
			t.Errorf("the refused unjoin changed %s in the member cluster (resourceVersion %s -> %s)", k, rv, after[k])
		}
	}
	if token(hubA) == "" || !authenticated(token(hubB)) {
		t.Error("the refused unjoin deleted A's registration or ended B's token")
	}

	// A chain without its hub cluster's name (an earlier join's): kept for
	// B, which holds the registration, and named; refused to A.
	a := anchor()
	delete(a.Annotations, etcdfedv1.AnnotationCredentialHub)
	if err := member.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	tokB := token(hubB)
	if err := join(hubB, false); err != nil {
		t.Fatal(err)
	}
	if token(hubB) != tokB || !authenticated(tokB) {
		t.Error("B's join of its own unnamed chain replaced its token")
	}
	ns := &corev1.Namespace{}
	if err := hubB.Client.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		t.Fatal(err)
	}
	if got := anchor().Annotations[etcdfedv1.AnnotationCredentialHub]; got != string(ns.UID) {
		t.Errorf("the chain names hub cluster %q, want B's %q", got, ns.UID)
	}
	a = anchor()
	delete(a.Annotations, etcdfedv1.AnnotationCredentialHub)
	if err := member.Client.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := hubA.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: install.Namespace, Name: "member-1"}}); err != nil {
		t.Fatal(err)
	}
	if err := join(hubA, false); !errors.Is(err, install.ErrJoinedToAnotherHub) {
		t.Errorf("A's join of an unnamed chain it holds no registration of: %v, want ErrJoinedToAnotherHub", err)
	}
}
