package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	hubmemberrbac "github.com/etcdfed/etcdfed/config/rbac/hub-member"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// ErrHostsMembers is returned by Unjoin while the cluster hosts members
// of a ring.
var ErrHostsMembers = errors.New("install: the member cluster hosts members of a ring")

// UnjoinOptions configure Unjoin.
type UnjoinOptions struct {
	// Name is the cluster's name in the hub.
	Name string
	// Hub and Member are admin REST configs of the two clusters.
	Hub, Member *rest.Config
	// DryRun prints what Unjoin would delete, and deletes nothing.
	DryRun io.Writer
	// Timeout bounds the wait for the spoke to stop.
	Timeout  time.Duration
	Progress func(string)
}

// Unjoin removes what Join created: the registration in the hub first (the
// hub lets go of the cluster), the hub's ServiceAccount (its token stops
// working), the spoke, what the spoke and the hub kept there for it (the
// spoke's Leases and EtcdSpoke, the rings' DNS zones, certificates of
// members gone), zone labels Join set, and the CRDs and the namespace
// when nothing else is left in them. It never deletes a member's data (a
// PersistentVolumeClaim) nor anything of a live member: while the cluster
// hosts members of a ring it refuses (ErrHostsMembers) and says how to move
// them away.
func Unjoin(ctx context.Context, o UnjoinOptions) error {
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if !nameRE.MatchString(o.Name) {
		return fmt.Errorf("cluster name %q: want a DNS label", o.Name)
	}
	hub, mem, err := hubAndMember(o.Hub, o.Member, o.Name)
	if err != nil {
		return err
	}
	if err := ownChain(ctx, hub, mem, o.Name); err != nil {
		return err
	}
	if err := hostsMembers(ctx, hub, mem, o.Name); err != nil {
		return err
	}
	del := &deleter{c: mem, cluster: o.Name, dryRun: o.DryRun}
	hdel := &deleter{c: hub, cluster: "hub", dryRun: o.DryRun}
	token, err := o.deregister(ctx, hub, hdel)
	if err != nil {
		return err
	}
	if err := o.removeInstalled(ctx, mem, del); err != nil {
		return err
	}
	if err := o.removeBookkeeping(ctx, mem, del, token); err != nil {
		return err
	}
	// Zone labels Join set.
	if err := unlabelZones(ctx, mem, o.Name, o.DryRun); err != nil {
		return err
	}
	// The CRDs and the namespace, when nothing else uses them.
	kept, err := del.sharedOnes(ctx, o.Name)
	if err != nil {
		return err
	}
	if o.DryRun != nil {
		return nil
	}
	msg := fmt.Sprintf("%s: unjoined (%d objects deleted)", o.Name, del.n+hdel.n)
	if len(kept) > 0 {
		msg += "; kept " + strings.Join(kept, "; ")
	}
	o.Progress(msg)
	return nil
}

// ownChain refuses (ErrJoinedToAnotherHub), before Unjoin deletes
// anything, to unjoin a member cluster from a hub cluster it does not
// answer: its credential chain was started by another hub cluster (a
// take-over ended this one's), and unjoin from here would remove that
// hub's spoke and end its access. The stale registration is this hub's
// own to delete.
func ownChain(ctx context.Context, hub, mem client.Client, name string) error {
	hubID, cur, err := readChain(ctx, hub, mem, name)
	if err != nil || cur == nil {
		return err
	}
	mine, _, err := registrations(ctx, hub, name)
	if err != nil {
		return err
	}
	if !foreignChain(cur.Annotations[etcdfedv1.AnnotationCredentialHub], hubID, mine != nil) {
		return nil
	}
	return fmt.Errorf("%s: %w: its hub credential chain (Secret %s/%s) was started by %s, and this hub cluster is %s. Unjoin it from that hub cluster: from here, unjoin would remove that hub's spoke and end its access. To forget the member cluster in this hub cluster only, delete its registration here: kubectl -n %s delete secret %s",
		name, ErrJoinedToAnotherHub, Namespace, etcdfedv1.HubCredentialAnchor, chainStarter(cur), hubID, Namespace, name)
}

// deregister deletes the cluster's registration in the hub, and returns
// the hub's token it held. The hub disengages within a second or two and,
// seeing the registration gone, revokes the cluster's gossip identity and
// rotates the gossip key (hub/spokes): whatever the cluster kept, it can no
// longer speak in the spokes' gossip. deregister waits for that.
func (o *UnjoinOptions) deregister(ctx context.Context, hub client.Client, hdel *deleter) (string, error) {
	reg := &corev1.Secret{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: o.Name}, reg); client.IgnoreNotFound(err) != nil {
		return "", fmt.Errorf("read the registration of %s in the hub: %w", o.Name, err)
	}
	token := string(reg.Data[registry.TokenKey])
	regU := &unstructured.Unstructured{}
	regU.SetAPIVersion("v1")
	regU.SetKind("Secret")
	regU.SetNamespace(Namespace)
	regU.SetName(o.Name)
	if err := hdel.delete(ctx, regU); err != nil {
		return "", err
	}
	if o.DryRun == nil {
		o.Progress(waitGossipRevoked(ctx, hub, o.Name, o.Timeout))
	}
	return token, nil
}

// removeInstalled deletes what Join installed in the member cluster, the
// hub's ServiceAccount first: its tokens stop working at once, so nothing
// the hub still does reaches here.
func (o *UnjoinOptions) removeInstalled(ctx context.Context, mem client.Client, del *deleter) error {
	sel := labels.SelectorFromSet(labels.Set{LabelJoinedAs: o.Name})
	objs, err := labelled(ctx, mem, sel, kinds)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Name, err)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		return isHubAccount(objs[i]) && !isHubAccount(objs[j])
	})
	for _, obj := range objs {
		if err := del.delete(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// removeBookkeeping waits until the spoke has stopped and the hub's token
// is refused (the apiserver caches a token's authentication for some
// seconds), then deletes what the spoke and the hub kept in the member
// cluster, with nobody left to write it again.
func (o *UnjoinOptions) removeBookkeeping(ctx context.Context, mem client.Client, del *deleter, token string) error {
	if o.DryRun == nil {
		if err := waitNoSpokePods(ctx, mem, o.Timeout); err != nil {
			return fmt.Errorf("%s: %w", o.Name, err)
		}
		if token != "" {
			if err := waitRefused(ctx, mem, token, o.Timeout); err != nil {
				return fmt.Errorf("%s: %w", o.Name, err)
			}
		}
	}
	leftovers, err := bookkeeping(ctx, mem)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Name, err)
	}
	for _, obj := range leftovers {
		if err := del.delete(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

func isHubAccount(o *unstructured.Unstructured) bool {
	return o.GetKind() == "ServiceAccount" && o.GetName() == hubmemberrbac.ServiceAccountName
}

// hostsMembers returns ErrHostsMembers, with what to do, while a ring has
// members in the cluster (by the hub's records, or EtcdMembers there).
func hostsMembers(ctx context.Context, hub, mem client.Client, name string) error {
	hosted := map[string][]string{}
	var rings etcdfedv1.EtcdClusterList
	if err := hub.List(ctx, &rings); err != nil && !isNoMatch(err) {
		return fmt.Errorf("list EtcdClusters in the hub: %w", err)
	}
	for _, ec := range rings.Items {
		for _, m := range ec.Status.Members {
			if m.Cluster == name {
				k := ec.Namespace + "/" + ec.Name
				hosted[k] = append(hosted[k], m.Name)
			}
		}
	}
	var members etcdfedv1.EtcdMemberList
	if err := mem.List(ctx, &members); err != nil && !isNoMatch(err) {
		return fmt.Errorf("%s: list EtcdMembers: %w", name, err)
	}
	for _, m := range members.Items {
		k := m.Spec.Cluster.Namespace + "/" + m.Spec.Cluster.Name
		if !slices.Contains(hosted[k], m.Spec.MemberName) {
			hosted[k] = append(hosted[k], m.Spec.MemberName)
		}
	}
	if len(hosted) == 0 {
		return nil
	}
	var cordon []string
	for k := range hosted {
		ns, ring, _ := strings.Cut(k, "/")
		cordon = append(cordon, fmt.Sprintf("kubectl -n %s patch etcdcluster %s --type json -p '[{\"op\":\"add\",\"path\":\"/spec/topology/cordonedClusters/-\",\"value\":%q}]'", ns, ring, name))
	}
	sort.Strings(cordon)
	return fmt.Errorf("%w: %s hosts %s. Cordon it first, so the hub moves those members to other clusters one at a time:\n  %s\n(if spec.topology.cordonedClusters does not exist yet, add it with '{\"op\":\"add\",\"path\":\"/spec/topology/cordonedClusters\",\"value\":[%q]}'), wait until `etcdfed status` shows none of them there, then unjoin again",
		ErrHostsMembers, name, strings.Join(sortedNames(hosted), "; "), strings.Join(cordon, "\n  "), name)
}

// isNoMatch: the cluster does not serve the kind (no CRDs).
func isNoMatch(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}

// sortedNames renders ring -> members for messages.
func sortedNames(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		sort.Strings(v)
		out = append(out, k+" ("+strings.Join(v, ", ")+")")
	}
	sort.Strings(out)
	return out
}

// bookkeeping is what the spoke and the hub keep in a member cluster for
// etcdfed, none of it a member's data: the spoke's EtcdSpoke and Leases,
// the rings' DNS zones, certificate Secrets the hub wrote (for members
// that are gone: Unjoin runs only when none is there), the Secret the
// hub's tokens were bound to (etcdfedv1.HubCredentialAnchor) and the one
// the spoke sealed them into (etcdfedv1.HubSealedToken).
func bookkeeping(ctx context.Context, c client.Client) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	add := func(list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, append(opts, client.InNamespace(Namespace))...); err != nil {
			if isNoMatch(err) {
				return nil
			}
			return err
		}
		items, err := metaItems(list)
		if err != nil {
			return err
		}
		out = append(out, items...)
		return nil
	}
	certs, _ := labels.NewRequirement(etcdfedv1.LabelClusterUID, selection.Exists, nil)
	var leases coordinationv1.LeaseList
	var errs []error
	errs = append(errs,
		add(&etcdfedv1.EtcdSpokeList{}),
		add(&etcdfedv1.EtcdDNSZoneList{}),
		add(&corev1.SecretList{}, client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*certs)}, client.MatchingLabels{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue}),
		// The hub's copy of the gossip key, with this cluster's gossip
		// identity: revoked by now, and no use to anyone here.
		add(&corev1.SecretList{}, client.MatchingLabels{etcdfedv1.LabelManagedBy: etcdfedv1.ManagedByValue, etcdfedv1.LabelComponent: etcdfedv1.ComponentGossipKey}),
	)
	if err := c.List(ctx, &leases, client.InNamespace(Namespace)); err != nil {
		errs = append(errs, err)
	}
	// The hub's credential chain (its tokens are refused already) and the
	// Secret the spoke sealed them into.
	for _, name := range []string{etcdfedv1.HubCredentialAnchor, etcdfedv1.HubSealedToken} {
		sec := &corev1.Secret{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, sec); {
		case err == nil:
			u, err := toUnstructured(sec)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	for i := range leases.Items {
		// The spoke's liveness Lease and its leader election's.
		if n := leases.Items[i].Name; n == etcdfedv1.SpokeObjectName || n == "etcdfed-spoke-leader" {
			u, err := toUnstructured(&leases.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		}
	}
	return out, errors.Join(errs...)
}

func metaItems(list client.ObjectList) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	var errs []error
	each := func(o client.Object) {
		u, err := toUnstructured(o)
		errs = append(errs, err)
		if err == nil {
			out = append(out, u)
		}
	}
	switch l := list.(type) {
	case *etcdfedv1.EtcdSpokeList:
		for i := range l.Items {
			each(&l.Items[i])
		}
	case *etcdfedv1.EtcdDNSZoneList:
		for i := range l.Items {
			each(&l.Items[i])
		}
	case *corev1.SecretList:
		for i := range l.Items {
			each(&l.Items[i])
		}
	}
	return out, errors.Join(errs...)
}

// unlabelZones removes the zone labels Join set on nodes.
func unlabelZones(ctx context.Context, c client.Client, name string, dryRun io.Writer) error {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("%s: list nodes: %w", name, err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Annotations[AnnotationZoneSetBy] != name {
			continue
		}
		if dryRun != nil {
			fmt.Fprintf(dryRun, "# %s: Node %s loses label %s\n", name, n.Name, corev1.LabelTopologyZone)
			continue
		}
		patched := n.DeepCopy()
		delete(patched.Labels, corev1.LabelTopologyZone)
		delete(patched.Annotations, AnnotationZoneSetBy)
		if err := c.Patch(ctx, patched, client.MergeFrom(n)); err != nil {
			return fmt.Errorf("%s: remove the zone label of node %s: %w", name, n.Name, err)
		}
	}
	return nil
}
