package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// "Never two rings": a LeaderWatch asks every etcd member of a ring, each
// through its own address, for its own status (the cluster ID it belongs
// to, its member ID, the leader it follows and the raft term) a few times
// a second, while a scenario runs; CheckLeaders then finds the moments two
// rings answered at once. The addresses come from the caller and may grow
// while the watch runs (a second ring's members have addresses the first
// never had), so every address ever named is asked until the end.

// LeaderTarget is one etcd member to ask: its client URL by address and
// the name its serving certificate carries.
type LeaderTarget struct {
	// Member is the member's name (for messages).
	Member string
	// Endpoint is a client URL, e.g. https://10.0.1.5:2379.
	Endpoint string
	// ServerName is the name TLS expects in the member's certificate
	// (its DNS name); "" means Endpoint's host.
	ServerName string
}

func (t LeaderTarget) String() string { return t.Member + "@" + t.Endpoint }

// LeaderSample is one answer of one member about itself. From and To
// bracket the look: the member's answer was true at some moment between.
type LeaderSample struct {
	Target   LeaderTarget
	From, To time.Time
	// ClusterID, MemberID and RaftTerm are the response header's; Leader
	// is the member the answering one follows (itself when it leads, 0
	// when it knows no leader).
	ClusterID, MemberID, Leader, RaftTerm uint64
}

// Leads reports whether the member claimed to lead.
func (s LeaderSample) Leads() bool { return s.Leader != 0 && s.Leader == s.MemberID }

func (s LeaderSample) String() string {
	return fmt.Sprintf("%s between %s and %s: cluster %x, member %x, leader %x, term %d", s.Target, s.From.Format("15:04:05.000"), s.To.Format("15:04:05.000"),
		s.ClusterID, s.MemberID, s.Leader, s.RaftTerm)
}

// LeaderWatchInput configures WatchLeaders.
type LeaderWatchInput struct {
	// Client carries the TLS configuration (and DNS servers, for targets
	// named by DNS).
	Client ClientConfig
	// Targets returns the members to ask now. It is called every Refresh;
	// a target once returned is asked until Stop.
	Targets func(ctx context.Context) []LeaderTarget
	// Every is how often each target is asked; default 250ms.
	Every time.Duration
	// Timeout bounds one look; default 1s.
	Timeout time.Duration
	// Refresh is how often Targets is called; default 2s.
	Refresh time.Duration
}

// LeaderWatch asks members about themselves until stopped.
type LeaderWatch struct {
	in     LeaderWatchInput
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   map[LeaderTarget]bool
	s      []LeaderSample
	looks  int
	failed int
	errs   []string
}

// WatchLeaders starts asking the targets and returns at once.
func WatchLeaders(ctx context.Context, in LeaderWatchInput) *LeaderWatch {
	if in.Every == 0 {
		in.Every = 250 * time.Millisecond
	}
	if in.Timeout == 0 {
		in.Timeout = time.Second
	}
	if in.Refresh == 0 {
		in.Refresh = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &LeaderWatch{in: in, cancel: cancel, seen: map[LeaderTarget]bool{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for ctx.Err() == nil {
			for _, t := range in.Targets(ctx) {
				w.add(ctx, t)
			}
			select {
			case <-ctx.Done():
			case <-time.After(in.Refresh):
			}
		}
	}()
	return w
}

func (w *LeaderWatch) add(ctx context.Context, t LeaderTarget) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[t] || ctx.Err() != nil {
		return
	}
	w.seen[t] = true
	look, err := newLooker(w.in.Client, t.Endpoint, t.ServerName, w.in.Timeout)
	if err != nil {
		w.errs = append(w.errs, fmt.Sprintf("%s: %v", t, err))
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for ctx.Err() == nil {
			start := time.Now()
			st, err := look(ctx)
			end := time.Now()
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.looks++
			if err != nil || st.Header == nil {
				w.failed++
			} else {
				w.s = append(w.s, LeaderSample{Target: t, From: start, To: end, ClusterID: st.Header.ClusterId, MemberID: st.Header.MemberId, Leader: st.Leader, RaftTerm: st.RaftTerm})
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(start.Add(w.in.Every))):
			}
		}
	}()
}

// LeaderWatchResult is what a LeaderWatch saw.
type LeaderWatchResult struct {
	// Samples are the answers, in order of their start.
	Samples []LeaderSample
	// Targets are every target asked; Looks the looks taken, Failed those
	// that got no answer (a member stopped or cut off).
	Targets       []LeaderTarget
	Looks, Failed int
	// Errors are targets that could not be asked at all.
	Errors []string
}

// Stop stops the looks and returns what they saw.
func (w *LeaderWatch) Stop() LeaderWatchResult {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := LeaderWatchResult{Samples: slices.Clone(w.s), Looks: w.looks, Failed: w.failed, Errors: slices.Clone(w.errs)}
	for t := range w.seen {
		r.Targets = append(r.Targets, t)
	}
	sort.Slice(r.Targets, func(i, j int) bool { return r.Targets[i].String() < r.Targets[j].String() })
	sortSamples(r.Samples)
	return r
}

func sortSamples(s []LeaderSample) {
	slices.SortStableFunc(s, func(a, b LeaderSample) int { return a.From.Compare(b.From) })
}

// LeaderCheckInput is what CheckLeaders judges.
type LeaderCheckInput struct {
	Samples []LeaderSample
	// ClusterID is the ring's recorded cluster ID: a member answering for
	// another one is a violation. 0: not checked.
	ClusterID uint64
	// Together: two answers whose brackets come within this of each
	// other are of the same moment. Default 1s.
	Together time.Duration
	// Overlap is the longest time two members may each claim to lead at
	// once: a leader cut off from its followers steps down within an
	// election timeout (etcd runs raft with CheckQuorum) while the others
	// elect a new one, so one ring shows two leaders only that long.
	// Default 10s.
	Overlap time.Duration
}

// LeaderOverlap is a time two members both claimed to lead: each
// certainly led throughout its own span (from the end of its first
// answer as leader of its term to the start of its last), and the spans
// overlap for Both.
type LeaderOverlap struct {
	A, B LeaderSpan
	Both time.Duration
}

func (o LeaderOverlap) String() string {
	return fmt.Sprintf("%s and %s both led for %s", o.A, o.B, o.Both.Round(time.Millisecond))
}

// LeaderSpan is one member's leadership of one term, as answered by it.
type LeaderSpan struct {
	Target              LeaderTarget
	ClusterID, Member   uint64
	Term                uint64
	From, To            time.Time
	Answers             int
	FirstSeen, LastSeen time.Time
}

func (s LeaderSpan) String() string {
	return fmt.Sprintf("%s (member %x of cluster %x, term %d, leading from %s to %s, %d answers)", s.Target, s.Member, s.ClusterID, s.Term,
		s.FirstSeen.Format("15:04:05.000"), s.LastSeen.Format("15:04:05.000"), s.Answers)
}

// LeaderVerdict is the outcome of CheckLeaders.
type LeaderVerdict struct {
	Samples int
	// ClusterIDs counts the answers per cluster ID.
	ClusterIDs map[uint64]int
	// Foreign are answers for a cluster ID other than the recorded one
	// (the first few; ForeignCount all).
	Foreign      []LeaderSample
	ForeignCount int
	// TwoClusters are moments two cluster IDs each had a leader: pairs of
	// answers within Together of each other, each naming a leader, of
	// different cluster IDs (the first few; TwoClustersCount all).
	TwoClusters      [][2]LeaderSample
	TwoClustersCount int
	// TwoLeaders are the times two members each claimed to lead for
	// longer than Overlap at once.
	TwoLeaders []LeaderOverlap
	// Spans is every member's leadership of a term, in order of start.
	Spans []LeaderSpan
}

// Sentinel errors of a LeaderVerdict.
var (
	ErrForeignCluster  = errors.New("workload: a member answered for another cluster ID")
	ErrTwoClusters     = errors.New("workload: two cluster IDs each had a leader at once")
	ErrTwoLeaders      = errors.New("workload: two members led at once beyond an election")
	ErrNoLeaderSamples = errors.New("workload: no member answered")
)

// Err is nil when the ring was one ring throughout.
func (v LeaderVerdict) Err() error {
	var errs []error
	if v.Samples == 0 {
		errs = append(errs, ErrNoLeaderSamples)
	}
	if v.ForeignCount > 0 {
		errs = append(errs, fmt.Errorf("%w: %d answers, first %s", ErrForeignCluster, v.ForeignCount, v.Foreign[0]))
	}
	if v.TwoClustersCount > 0 {
		p := v.TwoClusters[0]
		errs = append(errs, fmt.Errorf("%w: %d pairs of answers, first %s | %s", ErrTwoClusters, v.TwoClustersCount, p[0], p[1]))
	}
	for _, o := range v.TwoLeaders {
		errs = append(errs, fmt.Errorf("%w: %s", ErrTwoLeaders, o))
	}
	return errors.Join(errs...)
}

func (v LeaderVerdict) String() string {
	var ids []string
	for id, n := range v.ClusterIDs {
		ids = append(ids, fmt.Sprintf("%x (%d answers)", id, n))
	}
	sort.Strings(ids)
	terms := map[uint64]bool{}
	for _, s := range v.Spans {
		terms[s.Term] = true
	}
	if err := v.Err(); err != nil {
		return fmt.Sprintf("%d answers, cluster IDs %s: %v", v.Samples, strings.Join(ids, ", "), err)
	}
	return fmt.Sprintf("%d answers, all for cluster %s; %d leaderships over %d terms, never two rings", v.Samples, strings.Join(ids, ", "), len(v.Spans), len(terms))
}

const maxListed = 5

// CheckLeaders judges the answers of a LeaderWatch: no member answers for
// a cluster ID other than the recorded one, no two cluster IDs each have
// a leader at the same moment, and no two members claim to lead at once
// for longer than Overlap (a second ring forced from the same data keeps
// the cluster ID; only its leader shows it).
func CheckLeaders(in LeaderCheckInput) LeaderVerdict {
	if in.Together == 0 {
		in.Together = time.Second
	}
	if in.Overlap == 0 {
		in.Overlap = 10 * time.Second
	}
	s := slices.Clone(in.Samples)
	sortSamples(s)
	v := LeaderVerdict{Samples: len(s), ClusterIDs: map[uint64]int{}}
	for _, a := range s {
		v.ClusterIDs[a.ClusterID]++
		if in.ClusterID != 0 && a.ClusterID != in.ClusterID {
			if v.ForeignCount++; len(v.Foreign) < maxListed {
				v.Foreign = append(v.Foreign, a)
			}
		}
	}
	v.twoClusters(s, in.Together)
	v.Spans = leaderSpans(s)
	v.twoLeaders(in.Overlap)
	return v
}

// twoClusters finds two cluster IDs with a leader at one moment (answers
// within together of each other). The answers are sorted by start; every
// earlier answer starting within the widest bracket plus together could
// be near.
func (v *LeaderVerdict) twoClusters(s []LeaderSample, together time.Duration) {
	var led []LeaderSample
	for _, a := range s {
		if a.Leader != 0 {
			led = append(led, a)
		}
	}
	var widest time.Duration
	for _, a := range led {
		widest = max(widest, a.To.Sub(a.From))
	}
	for j, b := range led {
		for i := j - 1; i >= 0 && b.From.Sub(led[i].From) <= widest+together; i-- {
			a := led[i]
			if a.ClusterID == b.ClusterID || gapBetween(a, b) > together {
				continue
			}
			if v.TwoClustersCount++; len(v.TwoClusters) < maxListed {
				v.TwoClusters = append(v.TwoClusters, [2]LeaderSample{a, b})
			}
		}
	}
}

// leaderSpans are the leaderships the answers show, first seen first: one
// span per (cluster, member, term); a leader of a term leads from its
// election until it steps down, without a break.
func leaderSpans(s []LeaderSample) []LeaderSpan {
	type key struct{ cluster, member, term uint64 }
	spans := map[key]*LeaderSpan{}
	for _, a := range s {
		if !a.Leads() {
			continue
		}
		k := key{a.ClusterID, a.MemberID, a.RaftTerm}
		sp := spans[k]
		if sp == nil {
			sp = &LeaderSpan{Target: a.Target, ClusterID: a.ClusterID, Member: a.MemberID, Term: a.RaftTerm, From: a.To, To: a.From, FirstSeen: a.From, LastSeen: a.To}
			spans[k] = sp
		}
		sp.Answers++
		// Certain: from the end of the first answer to the start of the
		// last.
		if a.To.Before(sp.From) {
			sp.From = a.To
		}
		if a.From.After(sp.To) {
			sp.To = a.From
		}
		if a.From.Before(sp.FirstSeen) {
			sp.FirstSeen = a.From
		}
		if a.To.After(sp.LastSeen) {
			sp.LastSeen = a.To
		}
	}
	var out []LeaderSpan
	for _, sp := range spans {
		out = append(out, *sp)
	}
	slices.SortFunc(out, func(a, b LeaderSpan) int {
		if c := a.FirstSeen.Compare(b.FirstSeen); c != 0 {
			return c
		}
		return strings.Compare(a.Target.String(), b.Target.String())
	})
	return out
}

// twoLeaders finds two members that claim to lead at once, for longer than
// overlap.
func (v *LeaderVerdict) twoLeaders(overlap time.Duration) {
	for i, a := range v.Spans {
		for _, b := range v.Spans[i+1:] {
			if a.ClusterID == b.ClusterID && a.Member == b.Member {
				continue // one member, two terms: one after the other
			}
			both := minTime(a.To, b.To).Sub(maxTime(a.From, b.From))
			if both > overlap {
				v.TwoLeaders = append(v.TwoLeaders, LeaderOverlap{A: a, B: b, Both: both})
			}
		}
	}
}

// gapBetween is the time between two answers' brackets (0 when they
// overlap).
func gapBetween(a, b LeaderSample) time.Duration {
	switch {
	case a.To.Before(b.From):
		return b.From.Sub(a.To)
	case b.To.Before(a.From):
		return a.From.Sub(b.To)
	}
	return 0
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
