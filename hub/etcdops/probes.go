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
	// OutOfSightProbeEvery: a member out of sight (ObserveOptions) whose
	// last status request failed is not asked again sooner. Meanwhile it
	// counts unhealthy without a request, so the passes of an evacuation,
	// one per step, wait for it at most once every few seconds.
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
}

// statusTimeout is the timeout for a member's next status request, 0 for
// none: one out of sight (ObserveOptions) gets the short one, first
// request included, and none while its last failed request is less than
// OutOfSightProbeEvery old.
func statusTimeout(p probe, now time.Time, outOfSight bool) time.Duration {
	switch {
	case outOfSight && p.failing && now.Sub(p.lastAsked) < OutOfSightProbeEvery:
		return 0
	case outOfSight || (p.failing && now.Sub(p.lastFull) < FullProbeEvery):
		return FailingStatusTimeout
	}
	return StatusTimeout
}

// timeout is the timeout for member id's next status request.
func (m *ProbeMemory) timeout(id uint64, now time.Time, outOfSight bool) time.Duration {
	if m == nil {
		return statusTimeout(probe{}, now, outOfSight)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return statusTimeout(m.probes[id], now, outOfSight)
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
	p.failing, p.lastAsked = !ok, now
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
