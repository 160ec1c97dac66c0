package shard

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Label is the label that places a ring in a shard when the shard's hub
// is given only --shard NAME: its selector is then Label=NAME.
const Label = "etcdfed.dev/shard"

// LeaseName is the leader-election Lease of the hub without a shard; a
// shard's hub elects its leader with LeaseName-<shard>.
const LeaseName = "etcdfed-hub"

// nameRE is a shard's name: a DNS label short enough to suffix the Lease
// and the Deployment's name.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// ErrNoName is returned for a selector without a shard name: a hub with a
// selector but without its own Lease would elect against the unsharded hub
// and act on its shard only.
var ErrNoName = errors.New("shard: --shard-selector needs --shard NAME (the shard's Lease)")

// Shard is the set of rings one hub owns. The zero Shard is the unsharded
// hub: it owns every ring.
type Shard struct {
	// Name names the shard: its leader-election Lease, its Deployment and
	// its metrics say it. Empty for the unsharded hub.
	Name string
	// Selector selects, over the EtcdClusters' labels, the rings the shard
	// owns; nil owns all.
	Selector labels.Selector
}

// Parse reads --shard and --shard-selector. Both empty is the unsharded
// hub; a name alone selects Label=NAME; a selector that selects every ring
// (empty) is refused: two hubs owning the same ring would both act on it.
func Parse(name, selector string) (Shard, error) {
	if name == "" && selector == "" {
		return Shard{}, nil
	}
	if name == "" {
		return Shard{}, ErrNoName
	}
	if selector == "" {
		selector = Label + "=" + name
	}
	if !nameRE.MatchString(name) {
		return Shard{}, fmt.Errorf("shard %q: want a DNS label of at most 40 characters", name)
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return Shard{}, fmt.Errorf("parse shard selector %q: %w", selector, err)
	}
	if sel.Empty() {
		return Shard{}, fmt.Errorf("shard selector %q selects every EtcdCluster: name the label of the shard's rings", selector)
	}
	return Shard{Name: name, Selector: sel}, nil
}

// Sharded reports whether s is a shard (not the unsharded hub).
func (s Shard) Sharded() bool { return s.Selector != nil }

// Owns reports whether ec belongs to the shard.
func (s Shard) Owns(ec *etcdfedv1.EtcdCluster) bool {
	return s.Selector == nil || s.Selector.Matches(labels.Set(ec.Labels))
}

// Lease is the name of the shard's leader-election Lease: one per shard,
// so that each shard's hub has a leader of its own.
func (s Shard) Lease() string {
	if s.Name == "" {
		return LeaseName
	}
	return LeaseName + "-" + s.Name
}

// String says the shard for logs and status: "NAME (SELECTOR)", or
// "unsharded".
func (s Shard) String() string {
	if !s.Sharded() {
		return "unsharded"
	}
	return s.Name + " (" + s.Selector.String() + ")"
}

// Reader reads EtcdClusters of the shard only: one of another shard reads
// as NotFound, a list leaves it out; every other kind passes through. It is
// the Reader of the hub's controllers that act on an EtcdCluster after
// reading it (hub/backup, hub/restore, hub/clients): each treats NotFound
// as "nothing to do" and forgets only what it holds in memory (metrics),
// so a ring of another shard is neither acted on nor released.
type Reader struct {
	client.Reader
	Shard Shard
	// Claims, when set, hides also a ring of the shard that another hub's
	// live claim selects too (Claims.Conflict): neither hub acts on it.
	Claims *Claims
}

// owns: the ring is the shard's and no other hub claims it.
func (r Reader) owns(ctx context.Context, ec *etcdfedv1.EtcdCluster) bool {
	return r.Shard.Owns(ec) && (r.Claims == nil || r.Claims.Conflict(ctx, ec).Why == "")
}

var etcdClusterResource = schema.GroupResource{Group: etcdfedv1.GroupVersion.Group, Resource: "etcdclusters"}

// Get reads key; an EtcdCluster outside the shard is NotFound.
func (r Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if ec, ok := obj.(*etcdfedv1.EtcdCluster); ok && !r.owns(ctx, ec) {
		*ec = etcdfedv1.EtcdCluster{}
		return apierrors.NewNotFound(etcdClusterResource, key.Name)
	}
	return nil
}

// List lists; EtcdClusters outside the shard are left out.
func (r Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*etcdfedv1.EtcdClusterList); ok && (r.Shard.Sharded() || r.Claims != nil) {
		kept := l.Items[:0]
		for i := range l.Items {
			if r.owns(ctx, &l.Items[i]) {
				kept = append(kept, l.Items[i])
			}
		}
		l.Items = kept
	}
	return nil
}
