package images_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/dev/images"
	"github.com/etcdfed/etcdfed/pkg/etcdversion"
)

// `make demo NODES=real` builds the images of IMAGES=demo: etcdfed's three
// and the etcd image of the release a new EtcdCluster runs, no other
// release's (each a cold compile of etcd, etcdctl and etcdutl).
func TestSelectDemoIsTheDefaultRelease(t *testing.T) {
	_, cat := catalog(t)
	for _, names := range [][]string{{images.Demo}, {"hub", images.Demo}} {
		sel, err := images.Select(cat, names)
		if err != nil {
			t.Fatalf("Select(%q): %v", names, err)
		}
		var got, etcd []string
		for _, im := range sel {
			got = append(got, im.Name)
			if strings.HasPrefix(im.Ref, images.EtcdRepository+":") {
				etcd = append(etcd, im.Ref)
			}
		}
		slices.Sort(got)
		want := []string{"etcd-" + etcdversion.Default().MinorString(), "etcdfed-init", "hub", "spoke"}
		if !slices.Equal(got, want) {
			t.Errorf("Select(%q) = %v, want %v", names, got, want)
		}
		if ref := images.EtcdRepository + ":v" + etcdversion.Default().String(); !slices.Equal(etcd, []string{ref}) {
			t.Errorf("Select(%q) picks etcd %v, want only the default release's %s", names, etcd, ref)
		}
	}
}
