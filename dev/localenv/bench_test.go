package localenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// BenchmarkStart measures what `etcdfed dev up` waits for: a hub and three
// member clusters (4 apiservers) ready, CRDs installed, members registered,
// node agents running; and the memory of everything then running.
func BenchmarkStart(b *testing.B) {
	testenv.SkipIfShort(b, "kube-apiserver and etcd")
	var total time.Duration
	var pss uint64
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		start := time.Now()
		env, err := localenv.Start(context.Background(), localenv.Config{StateDir: dir, Clusters: 3, NoComponents: true})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		b.StopTimer()
		time.Sleep(5 * time.Second) // let the apiservers settle before measuring memory
		pss += env.Status().TotalPSS
		if err := env.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/ready")
	b.ReportMetric(float64(pss>>20)/float64(b.N), "MiB-PSS")
}
