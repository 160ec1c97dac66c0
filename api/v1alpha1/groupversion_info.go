package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every etcdfed object.
	GroupVersion = schema.GroupVersion{Group: "etcdfed.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the etcdfed types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the etcdfed types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	objects []runtime.Object
)

// register records types for addKnownTypes; called from each type's file.
func register(objs ...runtime.Object) { objects = append(objects, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objects...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
