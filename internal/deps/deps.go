package deps
import (
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/multicluster-runtime/pkg/manager"
	_ "sigs.k8s.io/multicluster-runtime/providers/kubeconfig"
	_ "go.etcd.io/etcd/client/v3"
	_ "github.com/hashicorp/memberlist"
	_ "github.com/miekg/dns"
	_ "github.com/anishathalye/porcupine"
	_ "github.com/onsi/gomega"
	_ "github.com/spf13/cobra"
)
