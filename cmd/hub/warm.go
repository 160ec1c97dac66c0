package main

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// memberKinds are the kinds the hub's controllers watch in every member
// cluster (hub/etcdcluster, hub/spokes); localKinds those it watches in
// the hub cluster. A controller starts its informers only when it starts,
// on the leader: warming opens them on every replica, so a standby that
// takes the Lease finds them synced. The registry warms memberKinds in a
// member cluster before it engages it (registry.Provider.Kinds).
func memberKinds() []client.Object {
	return []client.Object{&etcdfedv1.EtcdMember{}, &etcdfedv1.EtcdDNSZone{}, &corev1.Secret{}, &etcdfedv1.EtcdSpoke{},
		&coordinationv1.Lease{}, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}}
}

func localKinds() []client.Object {
	return []client.Object{&etcdfedv1.EtcdCluster{}, &coordinationv1.Lease{}}
}

// warmHub opens the informers of localKinds in the hub cluster's cache; a
// failure is logged, the leader's controllers open them anyway.
func warmHub(ctx context.Context, cl cluster.Cluster) {
	log := ctrl.Log.WithName("warm").WithValues("cluster", "hub")
	if err := registry.Warm(ctx, cl, localKinds()); err != nil {
		if ctx.Err() == nil {
			log.Error(err, "Warming the hub cluster's informers failed")
		}
		return
	}
	log.Info("Informers warm", "kinds", len(localKinds()))
}
