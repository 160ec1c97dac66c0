package v1alpha1_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

func withDefrag(ns string, d etcdfedv1.DefragmentationSpec) *etcdfedv1.EtcdCluster {
	c := validCluster(ns)
	c.Spec.Defragmentation = d
	return c
}

func qty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// TestDefragmentationValidation: defragmentation thresholds in range and
// cron schedules are accepted by the real apiserver; thresholds out of
// range and bad schedules are refused at admission with a message that
// says what to write.
func TestDefragmentationValidation(t *testing.T) {
	apiserver := testenv.Shared(t, "crd-validation")
	ns := testenv.NamespaceT(t, apiserver, "defrag")
	ctx := context.Background()
	for _, d := range []etcdfedv1.DefragmentationSpec{
		{},
		{Automatic: ptr.To(false)},
		{MinFragmentedPercent: ptr.To[int32](1), MinReclaimable: qty("1Mi")},
		{MinFragmentedPercent: ptr.To[int32](99), MinReclaimable: qty("100Gi")},
		{MinFragmentedPercent: ptr.To[int32](45), MinReclaimable: qty("100M")},
		{MinReclaimable: qty("2G")},
		{Schedule: "0 3 * * sun"},
		{Schedule: "@weekly"},
		{Schedule: "@every 12h", Automatic: ptr.To(false)},
		{NoSpaceCompaction: etcdfedv1.NoSpaceCompactionRetention},
		{NoSpaceCompaction: etcdfedv1.NoSpaceCompactionCurrentRevision},
	} {
		if err := apiserver.Client.Create(ctx, withDefrag(ns, d)); err != nil {
			t.Errorf("defragmentation %+v rejected: %v", d, err)
		}
	}
	for _, tc := range []struct {
		name string
		d    etcdfedv1.DefragmentationSpec
		want string
	}{
		{"percent 0", etcdfedv1.DefragmentationSpec{MinFragmentedPercent: ptr.To[int32](0)}, "should be greater than or equal to 1"},
		{"percent 100", etcdfedv1.DefragmentationSpec{MinFragmentedPercent: ptr.To[int32](100)}, "should be less than or equal to 99"},
		{"percent negative", etcdfedv1.DefragmentationSpec{MinFragmentedPercent: ptr.To[int32](-5)}, "should be greater than or equal to 1"},
		{"reclaimable 0", etcdfedv1.DefragmentationSpec{MinReclaimable: qty("0")}, "minReclaimable must be between 1Mi and 100Gi"},
		{"reclaimable 1023Ki", etcdfedv1.DefragmentationSpec{MinReclaimable: qty("1023Ki")}, "minReclaimable must be between 1Mi and 100Gi"},
		{"reclaimable 101Gi", etcdfedv1.DefragmentationSpec{MinReclaimable: qty("101Gi")}, "minReclaimable must be between 1Mi and 100Gi"},
		{"reclaimable 1Ti", etcdfedv1.DefragmentationSpec{MinReclaimable: qty("1Ti")}, "minReclaimable must be between 1Mi and 100Gi"},
		{"schedule not cron", etcdfedv1.DefragmentationSpec{Schedule: "sundays at 3"}, "schedule must be cron syntax"},
		{"schedule minute 60", etcdfedv1.DefragmentationSpec{Schedule: "60 3 * * *"}, "schedule must be cron syntax"},
		{"noSpaceCompaction not a policy", etcdfedv1.DefragmentationSpec{NoSpaceCompaction: "Always"}, `supported values: "Retention", "CurrentRevision"`},
		{"schedule every 10s", etcdfedv1.DefragmentationSpec{Schedule: "@every 10s"}, "@every needs an interval of at least 1m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalid(t, apiserver.Client.Create(ctx, withDefrag(ns, tc.d)), tc.want)
		})
	}
}
