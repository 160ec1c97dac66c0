package nodeagent

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// IPRange is an inclusive range of IPv4 addresses.
type IPRange struct{ First, Last netip.Addr }

// Contains reports whether a is in the range.
func (r IPRange) Contains(a netip.Addr) bool {
	return a.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// reserveKnownIPs keeps the addresses the pods on our nodes had, so that
// after a restart every pod gets its own address back and no new pod takes
// it first.
func (a *Agent) reserveKnownIPs() {
	pods, _ := a.pods.List(everything)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range pods {
		n, ok := a.nodes[p.Spec.NodeName]
		if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if ip, err := netip.ParseAddr(p.Status.PodIP); err == nil && n.PodIPs.Contains(ip) {
			if _, used := a.ips[ip]; !used {
				a.ips[ip] = p.UID
			}
		}
	}
}

// sweepIPs frees the addresses of pods that no longer exist.
func (a *Agent) sweepIPs() {
	pods, _ := a.pods.List(everything)
	live := map[types.UID]bool{}
	for _, p := range pods {
		live[p.UID] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for ip, uid := range a.ips {
		if _, running := a.workers[uid]; !running && !live[uid] {
			delete(a.ips, ip)
		}
	}
}

// allocateIP returns the pod's IP: the one in want when it is in the range
// and free (a restarted agent keeps pods on their addresses), else the
// lowest free one.
func (a *Agent) allocateIP(uid types.UID, r IPRange, want string) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, err := netip.ParseAddr(want); err == nil && r.Contains(w) {
		if owner, used := a.ips[w]; !used || owner == uid {
			a.ips[w] = uid
			return w, nil
		}
	}
	for ip := r.First; r.Contains(ip); ip = ip.Next() {
		if owner, used := a.ips[ip]; !used || owner == uid {
			a.ips[ip] = uid
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no free pod IP in %s-%s", r.First, r.Last)
}

func (a *Agent) releaseIP(uid types.UID, ip netip.Addr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ips[ip] == uid {
		delete(a.ips, ip)
	}
}
