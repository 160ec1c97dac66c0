package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// Image is the etcd image of an EtcdCluster.
func Image(ec *etcdfedv1.EtcdCluster) string {
	if ec.Spec.Image != "" {
		return ec.Spec.Image
	}
	return etcdfedv1.DefaultImageRepository + ":v" + ec.Spec.Version
}

// desiredMember renders a member's object. The bootstrap of an existing
// object of the same incarnation is kept, switched from "new" to "existing"
// once the cluster has formed (rule 2: "new" is never used again); a new
// incarnation starts without one.
func desiredMember(ec *etcdfedv1.EtcdCluster, m *etcdfedv1.MemberStatus, existing *etcdfedv1.EtcdMember, ns string) *etcdfedv1.EtcdMember {
	labels := ownerLabels(ec)
	labels[etcdfedv1.LabelMember] = m.Name
	labels[etcdfedv1.LabelIncarnation] = strconv.FormatInt(m.Incarnation, 10)
	obj := &etcdfedv1.EtcdMember{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name, Labels: labels},
		Spec: etcdfedv1.EtcdMemberSpec{
			Cluster:     etcdfedv1.ClusterReference{Name: ec.Name, Namespace: ec.Namespace, UID: string(ec.UID)},
			MemberName:  m.Name,
			Incarnation: m.Incarnation,
			Image:       Image(ec),
			DNSName:     memberDNSName(ec, m.Name),
			Zone:        m.Zone,
			Storage:     memberStorage(ec, m.Cluster),
			Expose:      ec.Spec.Expose,
			Etcd:        ec.Spec.Etcd,
			TLS: etcdfedv1.MemberTLS{
				Mode:                          ec.Spec.TLS.Mode,
				PeerSkipClientSANVerification: ec.Spec.TLS.PeerSkipClientSANVerification,
			},
			PodTemplate: ec.Spec.PodTemplate,
		},
	}
	if tlsEnabled(ec) {
		obj.Spec.TLS.SecretName = MemberSecretName(m.Name)
	}
	if existing != nil && existing.Spec.Incarnation == m.Incarnation && existing.Spec.Bootstrap != nil {
		b := *existing.Spec.Bootstrap
		if ec.Status.ClusterID != "" {
			b.InitialClusterState = etcdfedv1.InitialClusterExisting
		}
		obj.Spec.Bootstrap = &b
	}
	return obj
}

func memberStorage(ec *etcdfedv1.EtcdCluster, cluster string) etcdfedv1.MemberStorage {
	s := etcdfedv1.MemberStorage{Size: ec.Spec.Storage.Size, StorageClassName: ec.Spec.Storage.StorageClassName, VolumeReclaimPolicy: ec.Spec.Storage.VolumeReclaimPolicy}
	for _, o := range ec.Spec.Storage.ClusterOverrides {
		if o.Cluster != cluster {
			continue
		}
		if o.Size != nil {
			s.Size = o.Size
		}
		if o.StorageClassName != nil {
			s.StorageClassName = o.StorageClassName
		}
	}
	return s
}

// ensureMemberSecret keeps the member's certificate Secret next to its
// object: ca.crt, and tls.crt/tls.key for server and client auth with the
// member's DNS name as SAN.
func (r *Reconciler) ensureMemberSecret(ctx context.Context, v *view, cv *clusterView, member string) error {
	if v.tls == nil {
		return nil
	}
	dnsName := memberDNSName(v.ec, member)
	labels := ownerLabels(v.ec)
	labels[etcdfedv1.LabelMember] = member
	labels[etcdfedv1.LabelComponent] = "tls"
	_, err := r.ensureLeafSecret(ctx, cv.client, cv.client, v.tls.ca, client.ObjectKey{Namespace: r.RingNamespace, Name: MemberSecretName(member)}, labels, []string{dnsName},
		func() (*pki.Leaf, error) {
			return v.tls.ca.IssueMember(pki.MemberRequest{Member: member, DNSNames: []string{dnsName}}, r.now())
		})
	if err != nil {
		return fmt.Errorf("certificate of %s in %s: %w", member, cv.name, err)
	}
	return nil
}

// reconcileObjects keeps the member objects in line with the spec outside
// membership changes: certificates renewed, "new" switched to "existing",
// and spec changes (image, etcd flags, pod template) rolled out one member
// at a time, each only once every member is ready again. With no operation
// in flight it also deletes objects left behind in clusters that came back.
func (r *Reconciler) reconcileObjects(ctx context.Context, v *view) (ctrl.Result, error) {
	ec := v.ec
	var errs []error
	rolling := false
	allReady := allMembersSettled(v)
	for i := range ec.Status.Members {
		m := &ec.Status.Members[i]
		cv := v.cluster(m.Cluster)
		if cv == nil || !cv.visible() {
			continue
		}
		existing := cv.objects[m.Name]
		if existing == nil || existing.Spec.Incarnation != m.Incarnation {
			continue // created by the membership step
		}
		if err := r.ensureMemberSecret(ctx, v, cv, m.Name); err != nil {
			errs = append(errs, err)
		}
		want := desiredMember(ec, m, existing, r.RingNamespace)
		if equality.Semantic.DeepEqual(existing.Spec, want.Spec) && maps.Equal(existing.Labels, want.Labels) {
			continue
		}
		podChange := !equality.Semantic.DeepEqual(withoutBootstrap(existing.Spec), withoutBootstrap(want.Spec))
		if podChange && (rolling || !allReady || ec.Status.Operation != nil) {
			continue // one member at a time, and only when all are ready
		}
		if podChange {
			rolling = true
			ctrl.LoggerFrom(ctx).Info("Rolling member to the new spec", "member", m.Name, "cluster", cv.name)
		}
		errs = append(errs, r.writeMember(ctx, v, cv, m, nil))
	}
	if ec.Status.Operation == nil && ec.Status.ClusterID != "" && v.etcd.Reachable {
		errs = append(errs, r.sweep(ctx, v))
	}
	if rolling {
		return ctrl.Result{RequeueAfter: soon}, errors.Join(errs...)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

func withoutBootstrap(s etcdfedv1.EtcdMemberSpec) etcdfedv1.EtcdMemberSpec {
	s.Bootstrap = nil
	return s
}

// allMembersSettled: every recorded member is a ready voter and its spoke
// has acted on the object's latest generation with the pod ready.
func allMembersSettled(v *view) bool {
	for _, m := range v.ec.Status.Members {
		if !m.Ready {
			return false
		}
		obj := objectOf(v, m.Name)
		if obj == nil || obj.Status.ObservedGeneration != obj.Generation ||
			!meta.IsStatusConditionTrue(obj.Status.Conditions, etcdfedv1.ConditionPodReady) {
			return false
		}
	}
	return true
}

// sweep deletes this EtcdCluster's objects that no recorded member accounts
// for: an old incarnation left in a cluster that was unreachable when its
// member moved, or a member removed while its cluster was away.
func (r *Reconciler) sweep(ctx context.Context, v *view) error {
	var errs []error
	for _, cv := range v.clusters {
		if !cv.visible() {
			continue
		}
		for name := range cv.objects {
			if m := statusMember(v.ec, name); m != nil && m.Cluster == cv.name {
				continue
			}
			errs = append(errs, r.deleteObject(ctx, v, name, cv.name))
		}
	}
	return errors.Join(errs...)
}
