package registration

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	b, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(b) + ".c2ln"
}

func TestParseToken(t *testing.T) {
	iat := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	k8s := map[string]any{"namespace": "etcdfed-system", "serviceaccount": map[string]any{"name": "etcdfed-hub", "uid": "u"}}
	for _, tc := range []struct {
		name    string
		token   string
		want    Claims
		wantErr bool
	}{
		{name: "bound token", token: jwt(t, map[string]any{"iat": iat.Unix(), "exp": iat.Add(24 * time.Hour).Unix(), "kubernetes.io": k8s, "sub": "system:serviceaccount:etcdfed-system:etcdfed-hub"}),
			want: Claims{Namespace: "etcdfed-system", ServiceAccount: "etcdfed-hub", IssuedAt: iat, Expiry: iat.Add(24 * time.Hour)}},
		{name: "sub only", token: jwt(t, map[string]any{"iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix(), "sub": "system:serviceaccount:ring:hub"}),
			want: Claims{Namespace: "ring", ServiceAccount: "hub", IssuedAt: iat, Expiry: iat.Add(time.Hour)}},
		{name: "no expiry (a legacy Secret token)", token: jwt(t, map[string]any{"kubernetes.io": k8s, "sub": "system:serviceaccount:etcdfed-system:etcdfed-hub"}), wantErr: true},
		{name: "a user, not a ServiceAccount", token: jwt(t, map[string]any{"iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix(), "sub": "alice"}), wantErr: true},
		{name: "not a JWT", token: "abc", wantErr: true},
		{name: "bad payload", token: "a.!!!.c", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseToken(tc.token)
			if tc.wantErr {
				if !errors.Is(err, ErrNotServiceAccountToken) {
					t.Fatalf("err = %v, want ErrNotServiceAccountToken", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.IssuedAt.Equal(tc.want.IssuedAt) || !got.Expiry.Equal(tc.want.Expiry) || got.Namespace != tc.want.Namespace || got.ServiceAccount != tc.want.ServiceAccount {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRenewDue(t *testing.T) {
	iat := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	c := Claims{IssuedAt: iat, Expiry: iat.Add(24 * time.Hour)}
	for _, tc := range []struct {
		name  string
		at    time.Duration
		after float64
		want  bool
	}{
		{"fresh", time.Minute, DefaultRenewAfter, false},
		{"just before a third", 8*time.Hour - time.Second, DefaultRenewAfter, false},
		{"at a third", 8 * time.Hour, DefaultRenewAfter, true},
		{"expired", 25 * time.Hour, DefaultRenewAfter, true},
		{"a tiny fraction: at once", time.Second, 1e-9, true},
		{"nonsense fraction falls back to a third", 7 * time.Hour, 2, false},
	} {
		if got := RenewDue(c, iat.Add(tc.at), tc.after); got != tc.want {
			t.Errorf("%s: RenewDue = %v, want %v", tc.name, got, tc.want)
		}
	}
}
