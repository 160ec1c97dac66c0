// Package leaderlock builds the leader-election lock of a replica that has
// a stable name: its pod's.
//
// controller-runtime names each process afresh (its host name and a random
// suffix), so a hub or spoke whose container crashed and was restarted in
// the same pod is a stranger to the Lease its previous process held, and
// waits for that Lease to expire (15 s by default) before it reconciles
// again, although nothing else holds it. Under its pod's name, the
// restarted process is the holder: client-go's elector renews a Lease held
// under its own identity at once. That is safe because the kubelet starts
// a container again only after its previous process exited, and no two
// live pods of a namespace share a name; a replica that is a new pod (a
// rollout, a reschedule) has a new name and still waits the Lease out
// unless its predecessor released it.
package leaderlock

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
)

// PodNameEnv is the variable the Deployments set from the downward API
// (metadata.name): a replica's default identity.
const PodNameEnv = "POD_NAME"

// RenewDeadline is controller-runtime's default renew deadline, which the
// managers keep: a request of the elector times out within half of it, so
// that one hung request does not cost the Lease (as controller-runtime
// sets its own lock's client).
const RenewDeadline = 10 * time.Second

// New returns the Lease lock namespace/name held under identity, recording
// the elector's events (became leader, stopped leading) in namespace as
// controller-runtime's lock does. identity must name one live replica at a
// time: a pod's name.
func New(cfg *rest.Config, namespace, name, identity string) (resourcelock.Interface, error) {
	if identity == "" {
		return nil, fmt.Errorf("leader election %s/%s: empty identity", namespace, name)
	}
	cfg = rest.CopyConfig(cfg)
	cfg = rest.AddUserAgent(cfg, "leader-election")
	cfg.Timeout = RenewDeadline / 2
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election %s/%s: %w", namespace, name, err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events(namespace)})
	return resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{
			Identity:      identity,
			EventRecorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: identity}),
		})
}
