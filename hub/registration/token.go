package registration

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Claims are the parts of a ServiceAccount token the hub needs: whose it
// is and when it was issued and expires. They are read without checking
// the signature: the member cluster's apiserver checks it, and the hub only
// needs to know when to ask for the next one.
type Claims struct {
	// Namespace and ServiceAccount name the token's ServiceAccount.
	Namespace, ServiceAccount string
	IssuedAt, Expiry          time.Time
	// SecretName and SecretUID name the Secret the token is bound to
	// (TokenRequest boundObjectRef), "" when it is bound to none.
	SecretName, SecretUID string
}

// Lifetime is the time between issue and expiry.
func (c Claims) Lifetime() time.Duration { return c.Expiry.Sub(c.IssuedAt) }

// ErrNotServiceAccountToken says a token is not a Kubernetes
// ServiceAccount token with an expiry.
var ErrNotServiceAccountToken = errors.New("registration: not a ServiceAccount token with an expiry")

// ParseToken reads the claims of a ServiceAccount token (a JWT).
func ParseToken(token string) (Claims, error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: not a JWT", ErrNotServiceAccountToken)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrNotServiceAccountToken, err)
	}
	var p struct {
		Sub string `json:"sub"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
		K8s struct {
			Namespace      string `json:"namespace"`
			ServiceAccount struct {
				Name string `json:"name"`
			} `json:"serviceaccount"`
			Secret struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"secret"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return Claims{}, fmt.Errorf("%w: payload: %w", ErrNotServiceAccountToken, err)
	}
	c := Claims{Namespace: p.K8s.Namespace, ServiceAccount: p.K8s.ServiceAccount.Name, SecretName: p.K8s.Secret.Name, SecretUID: p.K8s.Secret.UID}
	if c.Namespace == "" || c.ServiceAccount == "" {
		// Older tokens name the ServiceAccount in sub only.
		if rest, ok := strings.CutPrefix(p.Sub, "system:serviceaccount:"); ok {
			c.Namespace, c.ServiceAccount, _ = strings.Cut(rest, ":")
		}
	}
	if c.Namespace == "" || c.ServiceAccount == "" || p.Exp == 0 || p.Iat == 0 || p.Exp <= p.Iat {
		return Claims{}, ErrNotServiceAccountToken
	}
	c.IssuedAt, c.Expiry = time.Unix(p.Iat, 0), time.Unix(p.Exp, 0)
	return c, nil
}

// DefaultRenewAfter is the part of a token's life after which the hub
// renews it: a third, so that the hub may be away for the other two
// thirds before the credential lapses.
const DefaultRenewAfter = 1.0 / 3

// RenewDue reports whether a token with claims c is due for renewal at
// now: once renewAfter (0 < renewAfter <= 1) of its lifetime has passed.
func RenewDue(c Claims, now time.Time, renewAfter float64) bool {
	if renewAfter <= 0 || renewAfter > 1 {
		renewAfter = DefaultRenewAfter
	}
	due := c.IssuedAt.Add(time.Duration(float64(c.Lifetime()) * renewAfter))
	return !now.Before(due)
}

// MinLifetime is the shortest lifetime the TokenRequest API grants (ten
// minutes); a request for less gets an error.
const MinLifetime = 10 * time.Minute

// ErrChainEnds says the hub's credential chain in a member cluster ends
// too soon for another token (AnnotationCredentialNotAfter): only
// `etcdfed cluster join` starts a new one.
var ErrChainEnds = errors.New("registration: the credential chain ends")

// NextLifetime is the lifetime to ask for when renewing a token of
// lifetime want at now, in a chain that ends at notAfter (zero: no end
// known): want, cut to the chain's end, never below MinLifetime (the
// TokenRequest API grants no less); ErrChainEnds when the chain ends
// before MinLifetime. The member cluster ends the chain whatever the hub
// asks (it deletes the Secret the tokens are bound to); asking no further
// keeps the hub's expiry metric, and the alert on it, true.
func NextLifetime(want time.Duration, now, notAfter time.Time) (time.Duration, error) {
	want = max(want, MinLifetime)
	if notAfter.IsZero() {
		return want, nil
	}
	left := notAfter.Sub(now).Truncate(time.Second)
	if left < MinLifetime {
		return 0, fmt.Errorf("%w at %s: run etcdfed cluster join again", ErrChainEnds, notAfter.UTC().Format(time.RFC3339))
	}
	return min(want, left), nil
}
