package v1alpha1_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// The CRD's rules on spec.version against the policy they are generated
// from (pkg/etcdversion), on a real API server: a version is accepted at
// creation exactly when Check accepts it, a change exactly when Step does,
// and a refused change names the step to take first.
func TestVersionPolicyOnTheAPIServer(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "versions")
	ctx := context.Background()

	// Releases around every boundary of the policy.
	var versions []string
	for _, l := range etcdversion.Lines() {
		versions = append(versions, l.Minor.String(), l.Newest.String())
		for _, b := range l.KnownBad {
			versions = append(versions, b.First.String(), b.Last.String(), b.Fixed.String())
		}
		if u := l.UpgradeFrom; u != (etcdversion.Version{}) {
			versions = append(versions, etcdversion.Version{Major: u.Major, Minor: u.Minor, Patch: u.Patch - 1}.String(), u.String())
		}
	}
	versions = append(versions, "3.4.37", "3.8.0")

	t.Run("create", func(t *testing.T) {
		for _, v := range versions {
			obj := validCluster(ns)
			obj.Spec.Version = v
			err := apiserver.Client.Create(ctx, obj)
			checkErr := etcdversion.Check(etcdversion.MustParse(v))
			switch {
			case checkErr == nil && err != nil:
				t.Errorf("%s: refused by the API server (%v), the policy runs it", v, err)
			case checkErr != nil && err == nil:
				t.Errorf("%s: accepted by the API server, the policy refuses it: %v", v, checkErr)
			case checkErr != nil:
				// The API server's message is the policy's.
				want := strings.TrimPrefix(checkErr.Error(), etcdversion.ErrUnsupported.Error()+": ")
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: the API server says %q, the policy %q", v, err, want)
				}
			}
		}
	})

	// Changes between the runnable ones: accepted exactly when Step
	// accepts them; a refused step names the first step of the way.
	var runnable []string
	for _, v := range versions {
		if etcdversion.Check(etcdversion.MustParse(v)) == nil {
			runnable = append(runnable, v)
		}
	}
	t.Run("change", func(t *testing.T) {
		for _, from := range runnable {
			for _, to := range runnable {
				if from == to {
					continue
				}
				obj := validCluster(ns)
				obj.Spec.Version = from
				if err := apiserver.Client.Create(ctx, obj); err != nil {
					t.Fatalf("create on %s: %v", from, err)
				}
				obj.Spec.Version = to
				err := apiserver.Client.Update(ctx, obj)
				stepErr := etcdversion.Step(etcdversion.MustParse(from), etcdversion.MustParse(to))
				switch {
				case stepErr == nil && err != nil:
					t.Errorf("%s -> %s: refused by the API server (%v), one step in the policy", from, to, err)
				case stepErr != nil && err == nil:
					t.Errorf("%s -> %s: accepted by the API server, the policy refuses it: %v", from, to, stepErr)
				case stepErr != nil:
					var se *etcdversion.StepError
					if !errors.As(stepErr, &se) {
						t.Errorf("%s -> %s: the policy's refusal is no StepError: %v", from, to, stepErr)
						break
					}
					first, _ := se.First()
					want := "change spec.version to " + first.String() + " first"
					if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), se.Why) {
						t.Errorf("%s -> %s: the API server says %q, want %q and %q", from, to, err, se.Why, want)
					}
				}
			}
		}
	})
}

// The cases, spelled out: 3.7 accepted, and an upgrade from 3.5
// straight to 3.7, or to 3.7 from a 3.6 patch before 3.6.11, refused with
// the step to take first.
func TestVersion37(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "v37")
	ctx := context.Background()

	obj := validCluster(ns)
	obj.Spec.Version = "3.7.3"
	if err := apiserver.Client.Create(ctx, obj); err != nil {
		t.Fatalf("3.7.3 refused: %v", err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"3.5.35", "3.7.3", "etcd upgrades one minor version at a time: change spec.version to 3.6.16 first"},
		{"3.6.10", "3.7.3", "moving to 3.7 needs every member on 3.6.11 or later (etcd's upgrade guide: earlier 3.6 patches may not be compatible with a rolling upgrade to 3.7): change spec.version to 3.6.16 first"},
		{"3.5.31", "3.6.16", "moving to 3.6 needs every member on 3.5.32 or later"},
		{"3.7.3", "3.5.35", "etcd downgrades one minor version at a time: change spec.version to 3.6.16 first"},
	} {
		obj := validCluster(ns)
		obj.Spec.Version = c.from
		if err := apiserver.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create on %s: %v", c.from, err)
		}
		obj.Spec.Version = c.to
		wantInvalid(t, apiserver.Client.Update(ctx, obj), c.want)
	}
}
