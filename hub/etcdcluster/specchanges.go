package etcdcluster

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// maxSpecChanges bounds the changes specChanges names; the rest are counted.
const maxSpecChanges = 4

// maxChangeValue bounds one value as specChanges prints it.
const maxChangeValue = 60

// specChanges names what writing want over existing changes in what the
// pod runs (the fields restarts compares), as "spec.etcd.heartbeatIntervalMillis
// 100 -> 180": the reason a Roll gives, so that the hub's log says why a
// member restarts. Empty when nothing restarts it.
func specChanges(existing, want *etcdfedv1.EtcdMember) string {
	var out []string
	diffFields("spec", reflect.ValueOf(withoutBootstrap(existing.Spec)), reflect.ValueOf(withoutBootstrap(want.Spec)), &out)
	if len(out) > maxSpecChanges {
		out = append(out[:maxSpecChanges], fmt.Sprintf("and %d more", len(out)-maxSpecChanges))
	}
	return strings.Join(out, ", ")
}

// apiPackage is the package whose structs diffFields walks field by field;
// any other value (a Quantity, a corev1 type, a map) is compared whole.
var apiPackage = reflect.TypeFor[etcdfedv1.EtcdMemberSpec]().PkgPath()

func diffFields(path string, a, b reflect.Value, out *[]string) {
	if a.Kind() == reflect.Struct && a.Type().PkgPath() == apiPackage {
		for i := range a.NumField() {
			f := a.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				name = f.Name
			}
			diffFields(path+"."+name, a.Field(i), b.Field(i), out)
		}
		return
	}
	if equality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	*out = append(*out, fmt.Sprintf("%s %s -> %s", path, changeValue(a), changeValue(b)))
}

// changeValue prints v for a change: pointers followed, nil and zero
// values "unset", anything else as JSON, bounded.
func changeValue(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "unset"
		}
		v = v.Elem()
	}
	if v.IsZero() {
		return "unset"
	}
	var s string
	if b, err := json.Marshal(v.Interface()); err == nil {
		s = strings.Trim(string(b), `"`)
	} else {
		s = fmt.Sprint(v.Interface())
	}
	if len(s) > maxChangeValue {
		s = s[:maxChangeValue] + "..."
	}
	return s
}
