package etcdops

import (
	"sync"
	"time"
)

// Status timeouts for members that did not answer.
const (
	// FailingStatusTimeout bounds the status request to a member whose last
	// request failed: a member that is down costs each pass this, not
	// StatusTimeout. A live member answers a status request on a local
	// network in milliseconds.
	FailingStatusTimeout = 500 * time.Millisecond
	// FullProbeEvery: a failing member still gets the full StatusTimeout
	// this often, so one that is alive but slow is not held unhealthy by the
	// short timeout.
	FullProbeEvery = 10 * time.Second
	// OutOfSightProbeEvery: a member out of sight (ObserveOptions) that did
	// not answer its last status request, or was never asked, is asked
	// again at most this often, and never by a pass: the request runs in
	// the background (with StatusTimeout), and until it has answered the
	// member counts unhealthy without a request. So no pass of an
	// evacuation, one per step, waits for a zone that is gone.
	OutOfSightProbeEvery = 3 * time.Second
)

// ProbeMemory remembers, per etcd member ID, whether its last status
// request failed and when it last got the full timeout. The hub keeps one
// per ring across passes (and across the etcd clients it makes for the
// ring), so a zone that is down does not add StatusTimeout to every pass
// while its members are still in the member list: detection and every step
// of an evacuation wait less. Safe for concurrent use; nil remembers
// nothing.
type ProbeMemory struct {
	mu     sync.Mutex
	probes map[uint64]probe
}

type probe struct {
	failing   bool
	lastFull  time.Time
	lastAsked time.Time
	// inFlight: a background request (out of sight) has not returned yet.
	inFlight bool
}

// probePlan is how a member is asked for its status: by the pass, with
// timeout (0: the pass does not ask, and the member counts unhealthy), or
// in the background, with background (0: not now), never waited for.
type probePlan struct {
	timeout    time.Duration
	background time.Duration
}

// planProbe decides a member's next status request. A member out of sight
// (ObserveOptions) that answered its last request is asked with the short
// timeout; one that did not, or was never asked, is not asked by the pass
// (it counts unhealthy), and a background request with StatusTimeout goes
// out when none is in flight and the last is OutOfSightProbeEvery old.
// Without memory (remember false) nothing can be learnt in the background,
// so such a member is asked with the short timeout. A member in sight is
// asked with the short timeout while it fails, except every FullProbeEvery,
// and with StatusTimeout otherwise.
func planProbe(p probe, now time.Time, outOfSight, remember bool) probePlan {
	switch {
	case outOfSight && remember && (p.failing || p.lastAsked.IsZero()):
		if !p.inFlight && now.Sub(p.lastAsked) >= OutOfSightProbeEvery {
			return probePlan{background: StatusTimeout}
		}
		return probePlan{}
	case outOfSight || (p.failing && now.Sub(p.lastFull) < FullProbeEvery):
		return probePlan{timeout: FailingStatusTimeout}
	}
	return probePlan{timeout: StatusTimeout}
}

// plan is planProbe for member id's next status request. A plan with a
// background request marks it in flight: its caller must record it.
func (m *ProbeMemory) plan(id uint64, now time.Time, outOfSight bool) probePlan {
	if m == nil {
		return planProbe(probe{}, now, outOfSight, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.probes[id]
	pl := planProbe(p, now, outOfSight, true)
	if pl.background > 0 {
		if m.probes == nil {
			m.probes = map[uint64]probe{}
		}
		p.inFlight = true
		m.probes[id] = p
	}
	return pl
}

// record notes the outcome of a status request made with timeout at now.
func (m *ProbeMemory) record(id uint64, ok bool, timeout time.Duration, now time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.probes == nil {
		m.probes = map[uint64]probe{}
	}
	p := m.probes[id]
	p.failing, p.lastAsked, p.inFlight = !ok, now, false
	if timeout >= StatusTimeout {
		p.lastFull = now
	}
	m.probes[id] = p
}

// forget drops members no longer in the member list.
func (m *ProbeMemory) forget(keep map[uint64]bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.probes {
		if !keep[id] {
			delete(m.probes, id)
		}
	}
}
