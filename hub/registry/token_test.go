package registry

import (
	"net/http"
	"net/http/httptest"
	"testing"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// TestBearerSetsTheCurrentTokenAndNamesItsTransport: each request carries
// the token set last, and the wrapper names the transport it wraps, so
// client-go hands a cancellation down instead of logging "unable to
// cancel request" for every watch a cache closes.
func TestBearerSetsTheCurrentTokenAndNamesItsTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	h := newTokenHolder([]byte("first"))
	rt := h.wrap(http.DefaultTransport)
	get := func() {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get()
	if !h.set([]byte("second")) {
		t.Fatal("set a new token: not changed")
	}
	get()
	if len(got) != 2 || got[0] != "Bearer first" || got[1] != "Bearer second" {
		t.Errorf("Authorization headers %q, want the first then the second token", got)
	}
	w, ok := rt.(utilnet.RoundTripperWrapper)
	if !ok || w.WrappedRoundTripper() != http.DefaultTransport {
		t.Errorf("the token's round tripper %T does not name the transport it wraps", rt)
	}
}
