package registry

import (
	"net/http"
	"sync"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// tokenHolder is a registration's current bearer token, set on every
// request of the cluster's clients, so a renewed token takes effect
// without a new client or cache.
type tokenHolder struct {
	mu    sync.RWMutex
	token string
}

// newTokenHolder returns nil for a registration without a token.
func newTokenHolder(token []byte) *tokenHolder {
	if len(token) == 0 {
		return nil
	}
	return &tokenHolder{token: string(token)}
}

// set replaces the token and reports whether it changed.
func (t *tokenHolder) set(token []byte) bool {
	if t == nil || len(token) == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == string(token) {
		return false
	}
	t.token = string(token)
	return true
}

func (t *tokenHolder) get() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.token
}

func (t *tokenHolder) wrap(rt http.RoundTripper) http.RoundTripper {
	return &bearer{holder: t, rt: rt}
}

// bearer sets the holder's token on each request. It names the transport
// it wraps (utilnet.RoundTripperWrapper) so that client-go can hand a
// cancellation down to it: without that every watch a cache closed logged
// "Warning: unable to cancel request" (hundreds a minute in a hub's log).
// The request itself ends with its context, as every request here does.
type bearer struct {
	holder *tokenHolder
	rt     http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.holder.get())
	return b.rt.RoundTrip(req)
}

// WrappedRoundTripper is the transport the token is set for.
func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.rt }

var _ utilnet.RoundTripperWrapper = (*bearer)(nil)
