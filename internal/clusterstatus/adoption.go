package clusterstatus

import (
	"strings"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// renderAdoption prints the adoption of a running etcd cluster
// (spec.adopt): its phase and counts, what it waits for, each original
// member (retired or serving, with its client URLs, which work until it
// is retired), and what the user does next.
func renderAdoption(p *printer, ec *etcdfedv1.EtcdCluster, now time.Time) {
	a := ec.Status.Adoption
	if ec.Spec.Adopt == nil || a == nil {
		return
	}
	p.f("\nAdoption: %s\n", orDash(a.Summary))
	if a.Message != "" {
		p.f("  %s\n", oneLine(a.Message))
	}
	for _, o := range a.Originals {
		state := "serving, old endpoint works until it is retired"
		if o.Retired != nil {
			state = "retired " + age(now, o.Retired.Time) + " ago"
		}
		p.f("  original %s [%s] %s: %s\n", orDash(o.Name), o.ID, strings.Join(o.ClientURLs, ","), state)
	}
	switch a.Phase {
	case etcdfedv1.AdoptionJoined:
		p.f("  next: move clients to the endpoints below, then: etcdfed adopt %s -n %s --retire (or kubectl patch etcdcluster %s -n %s --type merge -p '{\"spec\":{\"adopt\":{\"retire\":true}}}')\n",
			ec.Name, ec.Namespace, ec.Name, ec.Namespace)
	case etcdfedv1.AdoptionJoining, etcdfedv1.AdoptionConnecting:
		if ec.Spec.Adopt.Retire {
			p.f("  the originals are retired once every etcdfed member is a ready voter (spec.adopt.retire)\n")
		}
	}
}
