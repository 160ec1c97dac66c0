package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every etcdfed object.
	GroupVersion = schema.GroupVersion{Group: "etcdfed.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the etcdfed types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the etcdfed types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
