package realnode

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Provisioner is the provisioner name of the local volumes the cloud
// controller creates (StorageClass standard).
const Provisioner = "etcdfed.dev/local-volume"

// Annotations of the external-provisioner protocol.
const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// CloudNode is what the cloud controller knows of one node.
type CloudNode struct {
	IP      netip.Addr
	Link    string
	PodCIDR netip.Prefix
	// VolumeDir holds the node's local volumes, one directory per PV.
	VolumeDir string
}

// Cloud plays, for one cluster, what a cloud provider and a CSI driver do
// on real infrastructure and what the local environment has no other
// source of: it gives each node its pod range (spec.podCIDR; the
// environment's network routes it to the node), gives LoadBalancer
// Services an address from the cluster's pool and routes it to a node
// with a ready endpoint (as MetalLB's layer-2 mode does), and provisions
// local volumes (a directory on the claim's node, a `local` PV pinned to
// that node) for StorageClasses of Provisioner, deleting them again under
// reclaim policy Delete.
type Cloud struct {
	Cluster string
	Client  kubernetes.Interface
	Nodes   map[string]CloudNode
	LBs     []netip.Addr
	Log     logr.Logger

	mu     sync.Mutex
	routes map[netip.Addr]string // LB address -> node name it is routed to ("" blackholed)
}

// Run runs the controller until ctx ends.
func (c *Cloud) Run(ctx context.Context) {
	c.routes = map[netip.Addr]string{}
	f := informers.NewSharedInformerFactory(c.Client, 5*time.Minute)
	nodes, svcs := f.Core().V1().Nodes(), f.Core().V1().Services()
	slices, pvcs, pvs, scs := f.Discovery().V1().EndpointSlices(), f.Core().V1().PersistentVolumeClaims(), f.Core().V1().PersistentVolumes(), f.Storage().V1().StorageClasses()
	poke := make(chan struct{}, 1)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trigger(poke) },
		UpdateFunc: func(any, any) { trigger(poke) },
		DeleteFunc: func(any) { trigger(poke) },
	}
	for _, inf := range []cache.SharedIndexInformer{nodes.Informer(), svcs.Informer(), slices.Informer(), pvcs.Informer(), pvs.Informer(), scs.Informer()} {
		_, _ = inf.AddEventHandler(h)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	defer f.Shutdown()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poke:
		case <-tick.C:
		}
		s := cloudSnapshot{}
		s.nodes, _ = nodes.Lister().List(labels.Everything())
		s.svcs, _ = svcs.Lister().List(labels.Everything())
		s.slices, _ = slices.Lister().List(labels.Everything())
		s.pvcs, _ = pvcs.Lister().List(labels.Everything())
		s.pvs, _ = pvs.Lister().List(labels.Everything())
		s.scs, _ = scs.Lister().List(labels.Everything())
		c.reconcile(ctx, s)
		// Coalesce bursts of events.
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func trigger(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

type cloudSnapshot struct {
	nodes  []*corev1.Node
	svcs   []*corev1.Service
	slices []*discoveryv1.EndpointSlice
	pvcs   []*corev1.PersistentVolumeClaim
	pvs    []*corev1.PersistentVolume
	scs    []*storagev1.StorageClass
}

func (c *Cloud) reconcile(ctx context.Context, s cloudSnapshot) {
	for _, n := range s.nodes {
		if err := c.assignPodCIDR(ctx, n); err != nil {
			c.Log.Error(err, "Assigning the pod range failed", "node", n.Name)
		}
	}
	c.loadBalancers(ctx, s)
	c.volumes(ctx, s)
}

// assignPodCIDR sets spec.podCIDR of a node that has none to the range the
// environment routes to it.
func (c *Cloud) assignPodCIDR(ctx context.Context, n *corev1.Node) error {
	cn, ok := c.Nodes[n.Name]
	if !ok || n.Spec.PodCIDR != "" {
		return nil
	}
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, cn.PodCIDR, cn.PodCIDR)
	_, err := c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// loadBalancers gives every LoadBalancer Service an address and routes
// each address to a node that can serve it.
func (c *Cloud) loadBalancers(ctx context.Context, s cloudSnapshot) {
	ready := map[string]bool{}
	for _, n := range s.nodes {
		if _, ok := c.Nodes[n.Name]; ok && nodeReady(n) {
			ready[n.Name] = true
		}
	}
	lbs, used := c.heldAddresses(s.svcs)
	wanted := map[netip.Addr]bool{}
	for _, svc := range lbs {
		addr, ok := c.addressOf(svc, used)
		if !ok {
			continue
		}
		wanted[addr] = true
		c.publish(ctx, svc, addr)
		c.route(addr, c.pickNode(svc, s.slices, ready))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for a := range c.routes {
		if !wanted[a] {
			_ = IP("route", "del", a.String()+"/32")
			delete(c.routes, a)
		}
	}
}

// heldAddresses returns the LoadBalancer Services, oldest first, and the
// pool's addresses they hold, by holder ("namespace/name"): each keeps
// the one its status shows, and an address a Service asks for
// (spec.loadBalancerIP, as a reserved one on a cloud) goes to it when it
// is in the pool and free.
func (c *Cloud) heldAddresses(svcs []*corev1.Service) ([]*corev1.Service, map[netip.Addr]string) {
	used := map[netip.Addr]string{}
	var lbs []*corev1.Service
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		lbs = append(lbs, svc)
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(ing.IP); err == nil && c.inPool(a) {
				if _, taken := used[a]; !taken {
					used[a] = svc.Namespace + "/" + svc.Name
				}
			}
		}
	}
	sort.Slice(lbs, func(i, j int) bool {
		return lbs[i].CreationTimestamp.Before(&lbs[j].CreationTimestamp) ||
			lbs[i].CreationTimestamp.Equal(&lbs[j].CreationTimestamp) && lbs[i].Namespace+"/"+lbs[i].Name < lbs[j].Namespace+"/"+lbs[j].Name
	})
	for _, svc := range lbs {
		key := svc.Namespace + "/" + svc.Name
		if want, err := netip.ParseAddr(svc.Spec.LoadBalancerIP); err == nil && c.inPool(want) {
			if _, taken := used[want]; !taken {
				for a, owner := range used {
					if owner == key {
						delete(used, a)
					}
				}
				used[want] = key
			}
		}
	}
	return lbs, used
}

// addressOf is the address svc holds in used, else the first free one of
// the pool, then held by it; false when none is left.
func (c *Cloud) addressOf(svc *corev1.Service, used map[netip.Addr]string) (netip.Addr, bool) {
	key := svc.Namespace + "/" + svc.Name
	var addr netip.Addr
	for a, owner := range used {
		if owner == key {
			addr = a
		}
	}
	if addr.IsValid() {
		return addr, true
	}
	for _, a := range c.LBs {
		if _, taken := used[a]; !taken {
			used[a] = key
			return a, true
		}
	}
	c.Log.Info("No load balancer address left", "service", key)
	return netip.Addr{}, false
}

// publish writes addr into svc's status, unless it is there already.
func (c *Cloud) publish(ctx context.Context, svc *corev1.Service, addr netip.Addr) {
	if len(svc.Status.LoadBalancer.Ingress) == 1 && svc.Status.LoadBalancer.Ingress[0].IP == addr.String() {
		return
	}
	cp := svc.DeepCopy()
	mode := corev1.LoadBalancerIPModeVIP
	cp.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: &mode}}
	if _, err := c.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		c.Log.Error(err, "Setting the load balancer address failed", "service", svc.Namespace+"/"+svc.Name)
	}
}

func (c *Cloud) inPool(a netip.Addr) bool {
	for _, p := range c.LBs {
		if p == a {
			return true
		}
	}
	return false
}

// pickNode chooses the node a load balancer address goes to: one with a
// ready endpoint of the Service (the one it goes to already, if still
// good), or with externalTrafficPolicy Cluster any ready node; "" when
// none can serve it.
func (c *Cloud) pickNode(svc *corev1.Service, slices []*discoveryv1.EndpointSlice, ready map[string]bool) string {
	var withEndpoint []string
	for _, sl := range slices {
		if sl.Namespace != svc.Namespace || sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.NodeName != nil && ready[*ep.NodeName] && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
				withEndpoint = append(withEndpoint, *ep.NodeName)
			}
		}
	}
	sort.Strings(withEndpoint)
	candidates := withEndpoint
	if len(candidates) == 0 && svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		for n := range ready {
			candidates = append(candidates, n)
		}
		sort.Strings(candidates)
	}
	if len(candidates) == 0 {
		return ""
	}
	for _, a := range svc.Status.LoadBalancer.Ingress {
		c.mu.Lock()
		cur := c.routes[netip.MustParseAddr(a.IP)]
		c.mu.Unlock()
		for _, n := range candidates {
			if n == cur {
				return cur
			}
		}
	}
	return candidates[0]
}

// route points a load balancer address at a node (its veth), or drops
// what is sent to it when no node can serve it.
func (c *Cloud) route(addr netip.Addr, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.routes[addr]; ok && cur == node {
		return
	}
	var err error
	if node == "" {
		err = IP("route", "replace", "blackhole", addr.String()+"/32")
	} else {
		n := c.Nodes[node]
		err = IP("route", "replace", addr.String()+"/32", "via", n.IP.String(), "dev", n.Link)
	}
	if err != nil {
		c.Log.Error(err, "Routing a load balancer address failed", "address", addr, "node", node)
		return
	}
	c.Log.Info("Load balancer address routed", "cluster", c.Cluster, "address", addr, "node", node)
	c.routes[addr] = node
}

// volumes provisions a local volume for every claim the scheduler placed
// on a node (WaitForFirstConsumer) and deletes released ones.
func (c *Cloud) volumes(ctx context.Context, s cloudSnapshot) {
	ours := map[string]*storagev1.StorageClass{}
	for _, sc := range s.scs {
		if sc.Provisioner == Provisioner {
			ours[sc.Name] = sc
		}
	}
	pvByName := map[string]*corev1.PersistentVolume{}
	for _, pv := range s.pvs {
		pvByName[pv.Name] = pv
	}
	for _, pvc := range s.pvcs {
		sc := ours[ptrString(pvc.Spec.StorageClassName)]
		node := pvc.Annotations[annSelectedNode]
		if sc == nil || node == "" || pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || pvc.Status.Phase != corev1.ClaimPending {
			continue
		}
		if _, ok := pvByName["pvc-"+string(pvc.UID)]; ok {
			continue
		}
		if err := c.provision(ctx, pvc, sc, node); err != nil {
			c.Log.Error(err, "Provisioning failed", "claim", pvc.Namespace+"/"+pvc.Name)
		}
	}
	for _, pv := range s.pvs {
		if pv.Annotations[annProvisionedBy] != Provisioner || pv.Status.Phase != corev1.VolumeReleased ||
			pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.DeletionTimestamp != nil {
			continue
		}
		if pv.Spec.Local != nil {
			if err := os.RemoveAll(pv.Spec.Local.Path); err != nil {
				c.Log.Error(err, "Deleting a volume's directory failed", "pv", pv.Name)
				continue
			}
		}
		if err := c.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.Log.Error(err, "Deleting a released volume failed", "pv", pv.Name)
			continue
		}
		c.Log.Info("Deleted a released volume", "cluster", c.Cluster, "pv", pv.Name)
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// provision creates the volume's directory on the node and a `local` PV
// bound to the claim, pinned to the node.
func (c *Cloud) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, node string) error {
	cn, ok := c.Nodes[node]
	if !ok {
		return fmt.Errorf("node %s is not one of %s's", node, c.Cluster)
	}
	name := "pvc-" + string(pvc.UID)
	dir := filepath.Join(cn.VolumeDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	modes := pvc.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              sc.Name,
			VolumeMode:                    &fs,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	c.Log.Info("Provisioned a local volume", "cluster", c.Cluster, "claim", pvc.Namespace+"/"+pvc.Name, "pv", name, "node", node)
	return nil
}
