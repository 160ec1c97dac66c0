package registration

import (
	"time"

	"github.com/etcdfed/etcdfed/hub/registry"
	"github.com/etcdfed/etcdfed/internal/text"
)

// Annotations on a registration Secret.
const (
	// AnnotationCredential marks a Secret whose "token" the hub renews;
	// `etcdfed cluster join` sets it to CredentialSealedToken (before
	// issue 37's sealing: CredentialServiceAccountToken).
	AnnotationCredential = "etcdfed.dev/credential"
	// CredentialSealedToken: the token is a ServiceAccount token of the
	// member cluster; the member cluster's spoke mints the next one and
	// seals it to the hub's key (Secret etcdfedv1.HubSealedToken there),
	// and the hub opens it. The hub never mints a token itself.
	CredentialSealedToken = "SealedServiceAccountToken"
	// CredentialServiceAccountToken: the token is a ServiceAccount token
	// of the member cluster, renewable with TokenRequest by itself: a
	// registration of a `cluster join` before sealing, which the hub
	// renews itself until `cluster join` runs again (and which a stolen
	// token can renew until the chain's end).
	CredentialServiceAccountToken = "ServiceAccountToken"

	// AnnotationEngaged is "True" while the hub holds a synced connection
	// to the cluster, else "False" (written by the hub).
	AnnotationEngaged = "etcdfed.dev/hub-engaged"
	// AnnotationSpoke is the hub's view of the cluster's spoke: SpokeAlive,
	// SpokeStale or SpokeUnseen (written by the hub).
	AnnotationSpoke = "etcdfed.dev/hub-spoke"
	// AnnotationProblem says why the hub is not engaged, or why renewing
	// the credential failed; absent when all is well (written by the hub).
	AnnotationProblem = "etcdfed.dev/hub-problem"
	// AnnotationSince is when the three above last changed (RFC 3339,
	// the hub's clock).
	AnnotationSince = "etcdfed.dev/hub-status-since"
)

// The hub's view of a member cluster's spoke.
const (
	// SpokeAlive: the hub saw the spoke's Lease renewed within the
	// staleness window, on its own clock.
	SpokeAlive = "Alive"
	// SpokeStale: the hub saw it once, but not within the window.
	SpokeStale = "Stale"
	// SpokeUnseen: the hub never saw it (no spoke, or not engaged).
	SpokeUnseen = "Unseen"
)

// Status is what the hub says on a registration Secret.
type Status struct {
	Engaged bool
	Spoke   string
	Problem string
}

// Annotations renders s (AnnotationSince aside).
func (s Status) Annotations() map[string]string {
	engaged := "False"
	if s.Engaged {
		engaged = "True"
	}
	a := map[string]string{AnnotationEngaged: engaged, AnnotationSpoke: s.Spoke}
	if s.Problem != "" {
		a[AnnotationProblem] = s.Problem
	}
	return a
}

// StatusOf reads the hub's status from a Secret's annotations; ok is false
// when the hub never wrote one.
func StatusOf(annotations map[string]string) (s Status, ok bool) {
	e, ok := annotations[AnnotationEngaged]
	if !ok {
		return Status{}, false
	}
	return Status{Engaged: e == "True", Spoke: annotations[AnnotationSpoke], Problem: annotations[AnnotationProblem]}, true
}

// judge is the hub's status of one registered cluster: its connection
// state from the registry, when the hub last saw its spoke's Lease renewed
// (zero: never), and why its credential could not be renewed ("" when it
// could, or was not due).
func judge(state *registry.ClusterState, lastSeen, now time.Time, staleAfter time.Duration, renewErr string) Status {
	s := Status{Spoke: SpokeUnseen}
	if state != nil {
		s.Engaged = state.Engaged
		s.Problem = state.Problem
	}
	switch {
	case lastSeen.IsZero():
	case now.Sub(lastSeen) <= staleAfter:
		s.Spoke = SpokeAlive
	default:
		s.Spoke = SpokeStale
	}
	if renewErr != "" {
		if s.Problem != "" {
			s.Problem += "; "
		}
		s.Problem += "renewing the credential: " + renewErr
	}
	const maxProblem = 512
	s.Problem = text.Truncate(s.Problem, maxProblem)
	return s
}
