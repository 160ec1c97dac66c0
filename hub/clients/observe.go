package clients

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/etcdops"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// snapshot is what one pass read of one EtcdCluster's consumers. It is
// read-only once observe returns: decide turns it into the pass's writes,
// computeStatus into status.clients, ClientsReady and the next pass.
type snapshot struct {
	ec  *etcdfedv1.EtcdCluster
	now time.Time
	// removed are the entries of status.clients no longer in spec.clients,
	// in status order, each with its Secret as read (a member cluster's;
	// the hub cluster's is not read: the hub deletes no Secret there).
	removed []removedView
	// auth is etcd's authentication as read; zero when TLS is off.
	auth authView
	// ca and endpoints go into every consumer's Secret; waiting says which
	// is missing ("" when both are there), and then no consumer's Secret
	// was read. All three are zero when TLS is off or spec.clients empty.
	ca        *pki.Authority
	endpoints string
	waiting   string
	// consumers are spec.clients' Secrets as read, in spec order.
	consumers []secretView
}

// secretView is one consumer's Secret as read where it lives.
type secretView struct {
	t Target
	// refused says why the Secret may not go where its entry says
	// (Refusal): nothing was read there.
	refused string
	// err says why the Secret could not be read (its cluster is not
	// connected, the read failed).
	err error
	// cur is the Secret, nil when absent (or not read).
	cur *corev1.Secret
	// w writes in the Secret's cluster.
	w client.Client
}

// removedView is a removed entry: its last status and its Secret.
type removedView struct {
	status etcdfedv1.ClientStatus
	secretView
}

// authView is etcd's authentication as read.
type authView struct {
	// waiting says why etcd's users and roles were not read ("" when
	// they were).
	waiting string
	have    etcdops.AuthState
	// cli is the connection apply changes them through; nil when not read.
	cli AccessClient
}

// close releases what observe opened.
func (s *snapshot) close() {
	if s.auth.cli != nil {
		_ = s.auth.cli.Close()
	}
}

// idle says that a pass has nothing to look at: no consumer, none left to
// clean up, no condition to clear and no TLS (so no etcd users either).
func idle(ec *etcdfedv1.EtcdCluster) bool {
	return len(ec.Spec.Clients) == 0 && len(ec.Status.Clients) == 0 && meta.FindStatusCondition(ec.Status.Conditions, etcdfedv1.ConditionClientsReady) == nil &&
		!ec.Spec.TLS.Mode.Enabled()
}

// observe reads what one pass needs, each read bounded: the Secrets of
// removed entries, etcd's users and roles, the CA and the endpoints, and
// each consumer's Secret where it lives (none where Refusal forbids it).
// A failed read is recorded in the snapshot, never returned: decide and
// computeStatus say what it means.
func (r *Reconciler) observe(ctx context.Context, ec *etcdfedv1.EtcdCluster) *snapshot {
	s := &snapshot{ec: ec, now: r.now()}
	for _, st := range ec.Status.Clients {
		if slices.ContainsFunc(ec.Spec.Clients, func(c etcdfedv1.ClientSpec) bool { return c.Name == st.Name }) {
			continue
		}
		v := secretView{t: Target{Name: st.Name, Cluster: st.Cluster, Namespace: st.Namespace, SecretName: st.SecretName}}
		if v.t.Cluster != "" {
			v = r.readSecret(ctx, v.t)
		}
		s.removed = append(s.removed, removedView{status: st, secretView: v})
	}
	if !ec.Spec.TLS.Mode.Enabled() {
		return s
	}
	s.auth = r.observeAuth(ctx, ec)
	if len(ec.Spec.Clients) == 0 {
		return s
	}
	s.ca, s.endpoints, s.waiting = r.inputs(ctx, ec)
	if s.waiting != "" {
		return s
	}
	for _, c := range ec.Spec.Clients {
		t := TargetOf(ec, c)
		v := secretView{t: t, refused: Refusal(ec, c, t, r.Policy)}
		if v.refused == "" {
			v = r.readSecret(ctx, t)
		}
		s.consumers = append(s.consumers, v)
	}
	return s
}

// observeAuth reads etcd's users and roles, once the ring has formed.
func (r *Reconciler) observeAuth(ctx context.Context, ec *etcdfedv1.EtcdCluster) authView {
	if ec.Status.ClusterID == "" || len(ec.Status.Endpoints) == 0 {
		return authView{waiting: "waiting for the ring to form before etcd's users and roles are set"}
	}
	cli, err := r.etcd(ctx, ec)
	if err != nil {
		return authView{waiting: fmt.Sprintf("etcd's users and roles not checked: %v", err)}
	}
	have, err := cli.ReadAuth(ctx)
	if err != nil {
		_ = cli.Close()
		return authView{waiting: fmt.Sprintf("etcd's users and roles not checked: %v", err)}
	}
	return authView{have: have, cli: cli}
}

// inputs reads the CA Secret and the endpoints, or says what is missing.
func (r *Reconciler) inputs(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*pki.Authority, string, string) {
	if len(ec.Status.Endpoints) == 0 {
		return nil, "", "waiting for the ring's endpoints (status.endpoints)"
	}
	ca, err := pki.ReadAuthority(ctx, r.Reader, ec)
	if err != nil {
		return nil, "", fmt.Sprintf("waiting for the ring's CA: %v", err)
	}
	return ca, Endpoints(ec), ""
}

// readSecret reads a consumer's Secret in its cluster (uncached, bounded).
func (r *Reconciler) readSecret(ctx context.Context, t Target) secretView {
	v := secretView{t: t}
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	w, rd, err := r.cluster(ctx, t.Cluster)
	if err != nil {
		v.err = err
		return v
	}
	v.w = w
	cur := &corev1.Secret{}
	switch err := rd.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.SecretName}, cur); {
	case apierrors.IsNotFound(err):
	case err != nil:
		v.err = fmt.Errorf("read Secret: %w", err)
	default:
		v.cur = cur
	}
	return v
}

func (r *Reconciler) cluster(ctx context.Context, name string) (client.Client, client.Reader, error) {
	if name == "" {
		return r.Client, r.Reader, nil
	}
	if r.Clusters == nil {
		return nil, nil, fmt.Errorf("member cluster %q is not known to the hub", name)
	}
	cl, err := r.Clusters.GetCluster(ctx, multicluster.ClusterName(name))
	if err != nil {
		return nil, nil, fmt.Errorf("member cluster %q is not connected: %w", name, err)
	}
	return cl.GetClient(), cl.GetAPIReader(), nil
}
