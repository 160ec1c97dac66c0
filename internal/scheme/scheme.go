// Package scheme builds the runtime scheme every etcdfed binary uses: the
// Kubernetes built-in types and etcdfed's API.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// New returns a scheme with the Kubernetes and etcdfed types.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := etcdfedv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
