package registry

import (
	"net/http"
	"sync"
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
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.get())
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
