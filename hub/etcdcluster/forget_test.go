package etcdcluster

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// The hub remembers, per ring, the record set it last pushed to an RFC 2136
// server (dnsPub). A ring that is gone, or no longer publishes there, must
// leave nothing behind: the memory grew by one entry per ring ever
// published, and a ring that went back to RFC 2136 with the same records
// skipped its first push. Against a real apiserver and a real DNS server
// taking TSIG-signed updates.
func TestGoneRingLeavesNoDNSMemory(t *testing.T) {
	api := testenv.StartT(t, "hub")[0]
	ctx := context.Background()
	ns := "rings"
	if err := api.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// The hub's cache with its domain indexes: a pass reads rival rings
	// there (admit.go).
	mgr := startHubManager(t, api)
	r := &Reconciler{Manager: mgr, Registry: noMemberClusters{}, PassTimeout: 30 * time.Second, ClusterReadTimeout: 3 * time.Second}
	pass := func(t *testing.T, ec *etcdfedv1.EtcdCluster) {
		t.Helper()
		if _, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}}); err != nil {
			t.Fatal(err)
		}
	}

	const keyName, keySecret = "etcdfed-update.", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI="
	start := func(t *testing.T) *embedded.Server {
		t.Helper()
		srv, err := embedded.New(embedded.Config{Addr: "127.0.0.1:0", AllowUpdate: true, TSIGKeys: []embedded.TSIGKey{{Name: keyName, Secret: keySecret}}})
		if err != nil {
			t.Fatal(err)
		}
		zone, err := dnsprovider.FromZoneFile("etcd.test.", []byte("$ORIGIN etcd.test.\n@ 300 IN SOA ns1 hostmaster 1 3600 600 1209600 300\n@ 300 IN NS ns1\nns1 300 IN A 127.0.0.1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.SetZone(zone); err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Stop() })
		return srv
	}
	srv := start(t)
	tsig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tsig"}, StringData: map[string]string{"secret": keySecret}}
	if err := api.Client.Create(ctx, tsig); err != nil {
		t.Fatal(err)
	}

	// published creates a ring publishing to the server, passes over it
	// (no member cluster is registered: the pass adds the finalizer and
	// writes status, nothing more), and pushes the records of three
	// members the way a pass does (applyDNS), so that the hub remembers
	// them.
	published := func(t *testing.T, name string, domain ...string) (*etcdfedv1.EtcdCluster, *snapshot) {
		t.Helper()
		s := ring()
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: *s.ec.Spec.DeepCopy()}
		ec.Spec.DNS.Domain = name + ".etcd.test"
		if len(domain) > 0 {
			ec.Spec.DNS.Domain = domain[0]
		}
		ec.Spec.DNS.RFC2136 = &etcdfedv1.RFC2136Spec{Server: srv.Addr().String(), Zone: "etcd.test", TSIGKeyName: keyName, TSIGSecretName: tsig.Name}
		if err := api.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
		pass(t, ec)
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), ec); err != nil {
			t.Fatal(err)
		}
		if len(ec.Finalizers) == 0 {
			t.Fatalf("%s: no finalizer after a pass", name)
		}
		ec.Status = s.ec.Status
		s.ec = ec
		for _, cs := range s.clusters {
			cs.engaged = false // only the RFC 2136 server is written here
		}
		w := wantedRecords(s, &ec.Status)
		if w.set == nil || w.err != nil {
			t.Fatalf("no record set: %v", w.err)
		}
		if err := r.applyDNS(ctx, s, w); err != nil {
			t.Fatal(err)
		}
		if !r.remembersDNS(ec.UID) {
			t.Fatalf("%s published, but the hub does not remember it", name)
		}
		return ec, s
	}
	gone := func(t *testing.T, ec *etcdfedv1.EtcdCluster) {
		t.Helper()
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), &etcdfedv1.EtcdCluster{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s still there: %v", ec.Name, err)
		}
	}

	t.Run("deleted through its finalizer", func(t *testing.T) {
		ec, _ := published(t, "a")
		if err := api.Client.Delete(ctx, ec); err != nil {
			t.Fatal(err)
		}
		pass(t, ec) // the delete pass
		gone(t, ec)
		if r.remembersDNS(ec.UID) {
			t.Errorf("deleted ring %s: the hub still holds its last pushed record set", ec.Name)
		}
	})
	t.Run("a cluster holding members but not registered keeps the finalizer", func(t *testing.T) {
		// The ring's ledger places a member in member-9, whose kubeconfig
		// Secret is gone (or being re-created): deleting the ring must not
		// abandon it there.
		ec, _ := published(t, "f")
		ec.Status.Members = []etcdfedv1.MemberStatus{{Name: "f-0", Cluster: "member-9", Zone: "zone-9", Incarnation: 1}}
		if err := api.Client.Status().Update(ctx, ec); err != nil {
			t.Fatal(err)
		}
		if err := api.Client.Delete(ctx, ec); err != nil {
			t.Fatal(err)
		}
		res, err := r.Reconcile(ctx, mcreconcile.Request{Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ec)}})
		if err != nil {
			t.Fatal(err)
		}
		got := &etcdfedv1.EtcdCluster{}
		if err := api.Client.Get(ctx, client.ObjectKeyFromObject(ec), got); err != nil {
			t.Fatalf("%s gone while member-9 holds its member: %v", ec.Name, err)
		}
		if len(got.Finalizers) == 0 || res.RequeueAfter == 0 || res.RequeueAfter > time.Minute {
			t.Fatalf("finalizers %v, requeue after %s: want the finalizer kept and a pass within a minute", got.Finalizers, res.RequeueAfter)
		}
		// Abandoned by hand, as the log says.
		before := got.DeepCopy()
		got.Finalizers = nil
		if err := api.Client.Patch(ctx, got, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		gone(t, got)
	})
	t.Run("finalizer removed by hand", func(t *testing.T) {
		keep, _ := published(t, "keep")
		ec, _ := published(t, "b")
		before := ec.DeepCopy()
		ec.Finalizers = nil
		if err := api.Client.Patch(ctx, ec, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		if err := api.Client.Delete(ctx, ec); err != nil {
			t.Fatal(err)
		}
		gone(t, ec)
		pass(t, ec) // the pass its deletion wakes finds it gone
		if r.remembersDNS(ec.UID) {
			t.Errorf("ring %s gone without its delete pass: the hub still holds its last pushed record set", ec.Name)
		}
		if !r.remembersDNS(keep.UID) {
			t.Errorf("ring %s still exists, yet the hub forgot what it pushed for it", keep.Name)
		}
	})
	t.Run("created again under its name", func(t *testing.T) {
		old, _ := published(t, "e")
		before := old.DeepCopy()
		old.Finalizers = nil
		if err := api.Client.Patch(ctx, old, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		if err := api.Client.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		gone(t, old)
		// No pass saw it gone: the new ring's first pass comes first. (Its
		// domain is another: the server keeps the old ring's records,
		// owned by the old UID.)
		ec, _ := published(t, "e", "e2.etcd.test")
		if ec.UID == old.UID {
			t.Fatalf("the new %s has the old UID", ec.Name)
		}
		if r.remembersDNS(old.UID) {
			t.Errorf("ring %s created again: the hub still holds the record set it pushed for the old one", ec.Name)
		}
	})
	t.Run("no longer publishing to RFC 2136", func(t *testing.T) {
		ec, s := published(t, "c")
		ec.Spec.DNS.RFC2136 = nil
		if err := r.applyDNS(ctx, s, wantedRecords(s, &ec.Status)); err != nil {
			t.Fatal(err)
		}
		if r.remembersDNS(ec.UID) {
			t.Errorf("ring %s no longer publishes to RFC 2136: the hub still holds its last pushed record set", ec.Name)
		}
	})
	t.Run("moved to another server", func(t *testing.T) {
		ec, s := published(t, "d")
		other := start(t)
		ec.Spec.DNS.RFC2136.Server = other.Addr().String()
		if err := r.applyDNS(ctx, s, wantedRecords(s, &ec.Status)); err != nil {
			t.Fatal(err)
		}
		m := new(dns.Msg).SetQuestion("main-0.d.etcd.test.", dns.TypeA)
		in, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(m, other.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Answer) == 0 {
			t.Errorf("the new server %s has no record for main-0: the hub did not push the unchanged set to it", other.Addr())
		}
	})
}

// noMemberClusters is a hub with no member cluster registered: a delete
// pass has nothing to wait for.
type noMemberClusters struct{}

func (noMemberClusters) List(context.Context) ([]registry.MemberCluster, error) { return nil, nil }

// remembersDNS reports whether the hub holds a pushed record set for uid.
func (r *Reconciler) remembersDNS(uid types.UID) bool {
	r.dnsMu.Lock()
	defer r.dnsMu.Unlock()
	_, ok := r.dnsPub[uid]
	return ok
}
