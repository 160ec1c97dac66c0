package localenv_test

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/dev/testenv"
)

func resourceQty(s string) resource.Quantity { return resource.MustParse(s) }

func testenvClient(rc *rest.Config) (client.Client, error) {
	return client.New(rc, client.Options{Scheme: testenv.Scheme()})
}
