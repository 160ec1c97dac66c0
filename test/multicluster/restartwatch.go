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
// from one that is briefly not ready in the same pod that was ready: a
// blip, not a restart. The CA-rotation scenario saw every member's
// PodReady False (NotReady) at once for 0.3 to 0.6 s, in the pods that had
// been ready, just after its workload started; the cause is not found yet
// (the readiness probe fails a pod only after 3 failures 5 s apart, so it
// is not one slow /readyz). A nil watch counts every member not ready on
// its latest spec as restarting.
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
