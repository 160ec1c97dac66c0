package multicluster

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// TestStepHold checks the drill's hook (stepHold) on a real apiserver:
// unarmed it lets status writes through; armed, a write that carries an
// operation waits in the webhook until the drill answers it; a refused
// write fails and leaves the stored status as it was, an allowed one is
// stored; the write that ends the operation is handed over too, with no
// step; writes of another EtcdCluster are never held.
func TestStepHold(t *testing.T) {
	env := testenv.StartT(t, "hold")[0]
	ns := testenv.NamespaceT(t, env, "hold")
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	hub := &Cluster{Name: env.Name, REST: env.Config, Client: env.Client, Clientset: cs}
	for _, name := range []string{"ring", "other"} {
		ec := &etcdfedv1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: etcdfedv1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16", DNS: etcdfedv1.DNSSpec{Domain: name + ".etcd.test"}}}
		if err := env.Client.Create(ctx, ec); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := startStepHold(ctx, hub, ns, "ring")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.stop()

	write := func(name string, op *etcdfedv1.MembershipOperation) error {
		ec := &etcdfedv1.EtcdCluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ec); err != nil {
			return err
		}
		ec.Status.Operation = op
		return env.Client.Status().Update(ctx, ec)
	}
	stored := func() *etcdfedv1.MembershipOperation {
		ec := &etcdfedv1.EtcdCluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ring"}, ec); err != nil {
			t.Fatal(err)
		}
		return ec.Status.Operation
	}
	at := func(step string) *etcdfedv1.MembershipOperation {
		return &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationAdd, Member: "ring-3", Incarnation: 1, Step: step,
			StartedAt: metav1.NewTime(time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC))}
	}
	// held writes op in the background and returns the write handed to
	// the drill, and the write's outcome once answered.
	held := func(op *etcdfedv1.MembershipOperation) (*heldWrite, <-chan error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- write("ring", op) }()
		w, err := hold.next(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the write of %s returned (%v) before the drill answered it", w, err)
		case <-time.After(300 * time.Millisecond):
		}
		return w, done
	}

	// Unarmed: the begin record passes without waiting.
	if err := write("ring", at("CreateObjects")); err != nil {
		t.Fatalf("unarmed: %v", err)
	}
	hold.setArmed(true)

	// Armed: the next step's record waits; refused, it fails, and the
	// stored operation stays at the begin record.
	w, done := held(at("AddLearner"))
	if w.Op != etcdfedv1.OperationAdd || w.Member != "ring-3" || w.Step != "AddLearner" || w.Begin || !w.Moved {
		t.Errorf("held %+v; want Add ring-3 at AddLearner, not a begin, the step moved", w)
	}
	w.refuse()
	if err := <-done; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "killed") {
		t.Errorf("refused write: %v; want Forbidden saying the hub was killed", err)
	}
	if op := stored(); op == nil || op.Step != "CreateObjects" {
		t.Errorf("stored operation after a refused write: %+v; want the begin record (CreateObjects)", op)
	}

	// A write that only changes the message is a new record.
	waiting := at("CreateObjects")
	waiting.Message = "member cluster member-1 is not visible; waiting to create ring-3 there"
	w, done = held(waiting)
	if w.Begin || !w.Moved || w.Step != "CreateObjects" || w.Message != waiting.Message {
		t.Errorf("held %+v; want a new record of CreateObjects (its message changed)", w)
	}
	w.refuse()
	if err := <-done; !apierrors.IsForbidden(err) {
		t.Errorf("refused write: %v; want Forbidden", err)
	}

	// Allowed, it is stored.
	w, done = held(at("AddLearner"))
	w.allow()
	if err := <-done; err != nil {
		t.Fatalf("allowed write: %v", err)
	}
	if op := stored(); op == nil || op.Step != "AddLearner" {
		t.Errorf("stored operation after an allowed write: %+v; want AddLearner", op)
	}

	// A write that carries the stored record unchanged is handed over,
	// not as a record.
	w, done = held(at("AddLearner"))
	if w.Moved || w.Begin {
		t.Errorf("held %+v; want the stored record, unchanged", w)
	}
	w.allow()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Another ring's writes are never held.
	if err := write("other", at("Promote")); err != nil {
		t.Fatalf("another ring's write: %v", err)
	}

	// The end of the operation is handed over with no step.
	w, done = held(nil)
	if w.Op != etcdfedv1.OperationAdd || w.Step != "" {
		t.Errorf("held %+v; want the end of the Add (no step)", w)
	}
	w.allow()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A new operation's first write is a begin.
	w, done = held(at("CreateObjects"))
	if !w.Begin {
		t.Errorf("held %+v; want a begin", w)
	}
	w.allow()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Unarmed again: no wait.
	hold.setArmed(false)
	if err := write("ring", at("StartMember")); err != nil {
		t.Fatalf("unarmed again: %v", err)
	}
}
