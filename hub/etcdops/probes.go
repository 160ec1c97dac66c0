package etcdops

import (
	"sync"
	"time"
)

// How members are asked for their status.
const (
	// FailingStatusTimeout bounds the status request a pass makes to a
	// member out of sight (ObserveOptions) that answered its last one: a
	// live member answers a status request on a local network in
	// milliseconds, and a zone that just died costs the pass this once.
	FailingStatusTimeout = 500 * time.Millisecond
	// FailingProbeEvery: a member in sight that did not answer its last
	// status request, or a learner never asked, is asked again at most this
	// often, and never by a pass: the request runs in the background with
	// StatusTimeout, and until it answers the member counts unhealthy
	// without a request. A learner starts serving clients only once it has
	// caught up with the entry that publishes it, seconds after the member
	// list shows it started, and a member that just died stays in the list
	// until it is removed: neither holds up the passes of an evacuation,
	// one per step.
	FailingProbeEvery = time.Second
	// OutOfSightProbeEvery is FailingProbeEvery for a member out of sight.
	OutOfSightProbeEvery = 3 * time.Second
)

// ProbeMemory remembers, per etcd member ID, whether its last status
// request failed, when it was made, and whether a background request is
// in flight. The hub keeps one per ring across passes (and across the
// etcd clients it makes for the ring). Safe for concurrent use; nil
// remembers nothing.
type ProbeMemory struct {
	mu     sync.Mutex
	probes map[uint64]probe
}

type probe struct {
	failing   bool
	lastAsked time.Time
	// inFlight: a background request has not returned yet.
	inFlight bool
	// leaderlessSince: since when every status answer named no leader
	// (zero once one named a leader, or a request went unanswered).
	leaderlessSince time.Time
}

// probePlan is how a member is asked for its status: by the pass, with
// timeout (0: the pass does not ask, and the member counts unhealthy), or
// in the background, with background (0: not now), never waited for.
type probePlan struct {
	timeout    time.Duration
	background time.Duration
}

// planProbe decides a member's next status request. A member that did not
// answer its last request, or was never asked and is a learner or out of
// sight, is not asked by the pass (it counts unhealthy): a background
// request with StatusTimeout goes out when none is in flight and the last
// is FailingProbeEvery (OutOfSightProbeEvery out of sight) old, and once
// one answers, the next pass asks the member itself. Any other member is
// asked by the pass: with FailingStatusTimeout out of sight, StatusTimeout
// in sight. Without memory (remember false) nothing can be learnt in the
// background, so every member is asked by the pass.
func planProbe(p probe, now time.Time, outOfSight, learner, remember bool) probePlan {
	never := p.lastAsked.IsZero()
	if remember && (p.failing || never && (outOfSight || learner)) {
		every := FailingProbeEvery
		if outOfSight {
			every = OutOfSightProbeEvery
		}
		if !p.inFlight && now.Sub(p.lastAsked) >= every {
			return probePlan{background: StatusTimeout}
		}
		return probePlan{}
	}
	if outOfSight {
		return probePlan{timeout: FailingStatusTimeout}
	}
	return probePlan{timeout: StatusTimeout}
}

// plan is planProbe for member id's next status request. A plan with a
// background request marks it in flight: its caller must record it.
func (m *ProbeMemory) plan(id uint64, now time.Time, outOfSight, learner bool) probePlan {
	if m == nil {
		return planProbe(probe{}, now, outOfSight, learner, false)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.probes[id]
	pl := planProbe(p, now, outOfSight, learner, true)
	if pl.background > 0 {
		if m.probes == nil {
			m.probes = map[uint64]probe{}
		}
		p.inFlight = true
		m.probes[id] = p
	}
	return pl
}

// record notes the outcome of a status request made at now: answered
// (ok), and if so whether the answer named no leader.
func (m *ProbeMemory) record(id uint64, ok, leaderless bool, now time.Time) {
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
	switch {
	case !ok || !leaderless:
		p.leaderlessSince = time.Time{}
	case p.leaderlessSince.IsZero():
		p.leaderlessSince = now
	}
	m.probes[id] = p
}

// leaderlessSince is since when member id has answered every status
// request without naming a leader (zero: it named one, or did not answer).
func (m *ProbeMemory) leaderlessSince(id uint64) time.Time {
	if m == nil {
		return time.Time{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.probes[id].leaderlessSince
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
