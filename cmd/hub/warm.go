package main

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// memberKinds are the kinds the hub's controllers watch in every member
// cluster (hub/etcdcluster, hub/spokes); localKinds those it watches in
// the hub cluster. A controller starts its informers only when it starts,
// on the leader: warming opens them on every replica, so a standby that
// takes the Lease finds them synced.
func memberKinds() []client.Object {
	return []client.Object{&etcdfedv1.EtcdMember{}, &etcdfedv1.EtcdDNSZone{}, &corev1.Secret{}, &etcdfedv1.EtcdSpoke{},
		&coordinationv1.Lease{}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}}
}

func localKinds() []client.Object {
	return []client.Object{&etcdfedv1.EtcdCluster{}, &coordinationv1.Lease{}}
}

// warmingAware engages a member cluster with the manager, then opens the
// informers of memberKinds in that cluster's cache in the background.
type warmingAware struct{ multicluster.Aware }

func (w warmingAware) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	if err := w.Aware.Engage(ctx, name, cl); err != nil {
		return err
	}
	go warm(ctx, cl, string(name), memberKinds())
	return nil
}

// warm opens an informer per kind in cl's cache (each waits for its
// sync); a failure is logged, the leader's controllers open it anyway.
func warm(ctx context.Context, cl cluster.Cluster, name string, kinds []client.Object) {
	log := ctrl.Log.WithName("warm").WithValues("cluster", name)
	for _, obj := range kinds {
		if _, err := cl.GetCache().GetInformer(ctx, obj); err != nil && ctx.Err() == nil {
			log.Error(err, "Warming an informer failed", "kind", fmt.Sprintf("%T", obj))
		}
	}
	if ctx.Err() == nil {
		log.Info("Informers warm", "kinds", len(kinds))
	}
}
