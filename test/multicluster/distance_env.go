package multicluster

import (
	"context"
	"fmt"
	"os"

	"github.com/etcdfed/etcdfed/dev/localenv"
)

// DistanceEnv names the distance that every local environment a test
// starts is put at from its start, in `etcdfed dev latency set`'s form
// ("one-region", "three-regions", "zone-1:zone-2=20ms/5ms"): `make
// scenarios|failures|nemesis|drill|test-realnodes DISTANCE=one-region`
// runs those scenarios with the members apart, not on loopback's zero
// distance. A test that sets its own distance keeps it. Needs what
// partitions need (root, iptables, cgroup v2; real nodes make it in their
// own network).
const DistanceEnv = "ETCDFED_DISTANCE"

// withDistance is cfg with DistanceEnv's distance when the test set none.
// A distance that cannot be read is an error naming the variable, before
// anything starts.
func withDistance(cfg localenv.Config) (localenv.Config, error) {
	s := os.Getenv(DistanceEnv)
	if s == "" || cfg.Distance != nil {
		return cfg, nil
	}
	d, err := localenv.ParseDistance(s)
	if err != nil {
		return cfg, fmt.Errorf("%s=%q: %w", DistanceEnv, s, err)
	}
	cfg.Distance = &d
	return cfg, nil
}

// startLocalEnv is localenv.Start at DistanceEnv's distance (withDistance).
// Every local environment of this package starts through it.
func startLocalEnv(ctx context.Context, cfg localenv.Config) (*localenv.Env, error) {
	cfg, err := withDistance(cfg)
	if err != nil {
		return nil, err
	}
	return localenv.Start(ctx, cfg)
}

// distanceNote says at which distance an environment runs, for the line
// that says it is ready ("" at zero distance).
func distanceNote(env *localenv.Env) string {
	if d := env.State().Distance; d != nil && !d.IsZero() {
		return ", distance " + d.String()
	}
	return ""
}
