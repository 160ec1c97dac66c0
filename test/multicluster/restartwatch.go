package multicluster

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// restartWatch tells a member that is restarting (its latest spec not yet
// observed, its pod being replaced or not yet ready since it was created)
// from one whose etcd is briefly not ready in a pod that was ready. etcd's
// /readyz includes a linearizable read, so every member fails it for the
// length of a leader election (a roll moves leadership away on purpose);
// that is a blip, not a restart. A nil watch counts every member not ready
// on its latest spec as restarting.
type restartWatch struct {
	// readyPod is, per member, the UID of the pod last seen ready on its
	// object's latest spec.
	readyPod map[string]types.UID
}

func newRestartWatch() *restartWatch { return &restartWatch{readyPod: map[string]types.UID{}} }

// observe looks at one member's object (and its pod, in c): why it is not
// settled ("" when it is), and whether that is only a blip.
func (w *restartWatch) observe(ctx context.Context, c *Cluster, obj *etcdfedv1.EtcdMember) (why string, blip bool) {
	var whys []string
	observed := obj.Status.ObservedGeneration == obj.Generation
	if !observed {
		whys = append(whys, fmt.Sprintf("generation %d observed %d", obj.Generation, obj.Status.ObservedGeneration))
	}
	var uid types.UID
	if w != nil && obj.Status.PodName != "" {
		pod := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: obj.Status.PodName}, pod); err == nil {
			uid = pod.UID
		}
	}
	cond := meta.FindStatusCondition(obj.Status.Conditions, etcdfedv1.ConditionPodReady)
	switch {
	case cond == nil:
		whys = append(whys, "no PodReady")
	case cond.Status != metav1.ConditionTrue:
		whys = append(whys, fmt.Sprintf("PodReady %s %s: %s", cond.Status, cond.Reason, cond.Message))
		blip = observed && uid != "" && w.readyPod[obj.Name] == uid && cond.Reason == "NotReady"
	case observed && uid != "":
		w.readyPod[obj.Name] = uid
	}
	return strings.Join(whys, "; "), blip
}
