package nodeagent_test

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/dev/localenv/nodeagent"
)

func addrFrom(base [4]byte, host int) netip.Addr {
	base[3] = byte(host)
	return netip.AddrFrom4(base)
}

func mustQty(s string) resource.Quantity { return resource.MustParse(s) }

func fmtInt(i int) string { return strconv.Itoa(i) }

func storageBindingWFFC() storagev1.VolumeBindingMode {
	return storagev1.VolumeBindingWaitForFirstConsumer
}

func storageClass(name string, reclaim *corev1.PersistentVolumeReclaimPolicy, mode *storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       nodeagent.DefaultProvisioner,
		ReclaimPolicy:     reclaim,
		VolumeBindingMode: mode,
	}
}
