package etcdcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/hub/planner"
)

// Adoption of a running etcd cluster (spec.adopt; the planner's side is
// hub/planner/adopt.go). The reconciler's part is small: the hub's etcd
// client also dials spec.adopt.endpoints while an original member behind
// them is not retired (adoptEndpoints), with the certificate of
// spec.adopt.clientSecretName when one is given (observeAdoptClient); the
// originals are recorded once, when the running cluster is first found,
// and status.adoption says where the adoption stands (recordAdoption);
// members never require the ring's peer name while an original, whose
// certificate does not carry it, is a peer (peersCarryName).

// adoptInput is the planner's view of spec.adopt and status.adoption.
func adoptInput(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) planner.Adopt {
	a := ec.Spec.Adopt
	if a == nil {
		return planner.Adopt{}
	}
	in := planner.Adopt{Wanted: true, Endpoints: a.Endpoints, Retire: a.Retire}
	if st.Adoption != nil {
		for _, o := range st.Adoption.Originals {
			in.Originals = append(in.Originals, parseID(o.ID))
		}
	}
	return in
}

// originalsLeft: some original member of an adopted cluster is not
// recorded as retired, or the cluster is not found yet. A found cluster
// with no original recorded (the status was lost after the last
// retirement, and rebuilt) has none left.
func originalsLeft(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) bool {
	if ec.Spec.Adopt == nil {
		return false
	}
	if st.ClusterID == "" || st.Adoption == nil {
		return true
	}
	return slices.ContainsFunc(st.Adoption.Originals, func(o etcdfedv1.AdoptedMember) bool { return o.Retired == nil })
}

// adoptEndpoints are the spec.adopt.endpoints the hub dials besides its
// members': all of them until the originals are recorded, then those no
// retired original advertised.
func adoptEndpoints(ec *etcdfedv1.EtcdCluster, st *etcdfedv1.EtcdClusterStatus) []string {
	if !originalsLeft(ec, st) {
		return nil
	}
	var retired []string
	if st.Adoption != nil {
		for _, o := range st.Adoption.Originals {
			if o.Retired != nil {
				retired = append(retired, o.ClientURLs...)
			}
		}
	}
	var out []string
	for _, e := range ec.Spec.Adopt.Endpoints {
		if !slices.ContainsFunc(retired, func(u string) bool { return sameURL(u, e) }) {
			out = append(out, e)
		}
	}
	return out
}

// sameURL compares URLs ignoring one trailing slash.
func sameURL(a, b string) bool {
	trim := func(s string) string {
		if len(s) > 0 && s[len(s)-1] == '/' {
			return s[:len(s)-1]
		}
		return s
	}
	return trim(a) == trim(b)
}

// recordAdoption keeps status.adoption: the originals recorded when the
// running cluster is found (the pass whose step is ActFinishBootstrap:
// every member etcd lists then, none of them etcdfed's), each marked
// retired once a quorate member list no longer has it, and the phase,
// summary and message.
func recordAdoption(s *snapshot, st *etcdfedv1.EtcdClusterStatus, plan planner.Decision) {
	if s.ec.Spec.Adopt == nil {
		return
	}
	if st.Adoption == nil {
		st.Adoption = &etcdfedv1.AdoptionStatus{}
	}
	a := st.Adoption
	if len(a.Originals) == 0 && plan.Action == planner.ActFinishBootstrap && s.etcd.Reachable {
		for _, em := range s.etcd.Members {
			if recordedID(st, em.ID) {
				continue
			}
			a.Originals = append(a.Originals, etcdfedv1.AdoptedMember{Name: em.Name, ID: hexID(em.ID), ClientURLs: firstN(em.ClientURLs, 8)})
		}
	}
	now := metav1.NewTime(s.now)
	retired := 0
	for i := range a.Originals {
		o := &a.Originals[i]
		if o.Retired == nil && s.etcd.Reachable && st.ClusterID != "" && parseID(st.ClusterID) == s.etcd.ClusterID {
			if _, ok := listedID(s.etcd, parseID(o.ID)); !ok {
				o.Retired = &now
			}
		}
		if o.Retired != nil {
			retired++
		}
	}
	voters := 0
	for _, m := range st.Members {
		if em, ok := listedID(s.etcd, parseID(m.ID)); ok && !em.IsLearner {
			voters++
		}
	}
	replicas := int(s.ec.Spec.Replicas)
	switch {
	case st.ClusterID == "":
		a.Phase = etcdfedv1.AdoptionConnecting
	case retired == len(a.Originals):
		a.Phase = etcdfedv1.AdoptionComplete
	case retired > 0 || (s.ec.Spec.Adopt.Retire && voters >= replicas):
		a.Phase = etcdfedv1.AdoptionRetiring
	case voters >= replicas:
		a.Phase = etcdfedv1.AdoptionJoined
	default:
		a.Phase = etcdfedv1.AdoptionJoining
	}
	a.Summary = fmt.Sprintf("%s: %d/%d retired, %d/%d joined", a.Phase, retired, len(a.Originals), min(voters, replicas), replicas)
	switch {
	case a.Phase == etcdfedv1.AdoptionComplete:
		a.Message = fmt.Sprintf("every one of the %d original members is retired: etcdfed manages the whole ring; clients use status.endpoints", len(a.Originals))
	case plan.Reason != "":
		a.Message = truncate(plan.Reason, 1024)
	case st.Operation != nil:
		a.Message = truncate(st.Operation.Message, 1024)
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return slices.Clone(s[:n])
	}
	return slices.Clone(s)
}

// observeAdoptClient reads spec.adopt.clientSecretName, the client
// certificate the hub uses on an adopted cluster instead of its own; nil
// when none is named.
func (r *Reconciler) observeAdoptClient(ctx context.Context, ec *etcdfedv1.EtcdCluster) (*pki.Leaf, error) {
	if ec.Spec.Adopt == nil || ec.Spec.Adopt.ClientSecretName == "" {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: ec.Namespace, Name: ec.Spec.Adopt.ClientSecretName}
	sec := &corev1.Secret{}
	if err := r.hubReader().Get(ctx, key, sec); err != nil {
		return nil, fmt.Errorf("get Secret %s named in spec.adopt.clientSecretName: %w", key, err)
	}
	if len(sec.Data[pki.KeyCert]) == 0 || len(sec.Data[pki.KeyKey]) == 0 {
		return nil, fmt.Errorf("secret %s named in spec.adopt.clientSecretName has no %s and %s", key, pki.KeyCert, pki.KeyKey)
	}
	return &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]}, nil
}

// adoption is the feature of spec.adopt: the running cluster's originals
// recorded and retired (status.adoption), the planner's Adopt input.
type adoption struct{ s *snapshot }

func (f *adoption) observe(*etcdfedv1.EtcdClusterStatus, *decision) {}

func (f *adoption) input(in *planner.Input, st *etcdfedv1.EtcdClusterStatus) {
	in.Adopt = adoptInput(f.s.ec, st)
}

func (f *adoption) record(st *etcdfedv1.EtcdClusterStatus, d *decision) {
	recordAdoption(f.s, st, d.plan)
}

// status: nothing beyond status.adoption, recorded; setRoles names an
// original that leads.
func (f *adoption) status(*etcdfedv1.EtcdClusterStatus, *decision, applyResult) {}

// adoptionWaits: adopted, the originals kept until spec.adopt.retire; the
// plan (nothing to do) says so, and Progressing says it as a wait.
func adoptionWaits(st *etcdfedv1.EtcdClusterStatus, plan planner.Decision) bool {
	return plan.Action == planner.ActNone && st.Adoption != nil && st.Adoption.Phase == etcdfedv1.AdoptionJoined
}
