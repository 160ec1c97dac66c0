package etcdsim

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkFleetMemory starts ETCDSIM_RINGS rings (default 1000) of
// ETCDSIM_MEMBERS members (default 3) in one Server and reports what a
// simulated member costs: RSS and Go heap per member at rest, then with
// one gRPC connection open to every member and one Status answered by
// each (the hub's observation keeps such a connection per member; the
// clients, with small buffers, live in the same process and count). Run
// with -benchtime=1x:
//
//	go test ./dev/etcdsim -run '^$' -bench FleetMemory -benchtime=1x
func BenchmarkFleetMemory(b *testing.B) {
	rings, members := envInt(b, "ETCDSIM_RINGS", 1000), envInt(b, "ETCDSIM_MEMBERS", 3)
	for range b.N {
		runtime.GC()
		rss0, heap0 := rssBytes(b), heapBytes()
		start := time.Now()
		s := NewServer()
		var all []*Ring
		for i := range rings {
			r, err := s.NewRing(RingOptions{Name: fmt.Sprintf("r%d", i), Size: members})
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, r)
		}
		took := time.Since(start)
		runtime.GC()
		rss1, heap1 := rssBytes(b), heapBytes()
		n := float64(rings * members)
		b.ReportMetric(float64(rss1-rss0)/n, "rss-B/member")
		b.ReportMetric(float64(heap1-heap0)/n, "heap-B/member")
		b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/member")
		b.ReportMetric(took.Seconds()*1e6/n, "start-µs/member")

		// One connection and one Status per member, as an observation.
		var conns []*grpc.ClientConn
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		errs := make(chan error, 1)
		for _, r := range all {
			for _, m := range r.Members() {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					cc, err := grpc.NewClient(m.ListenAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
						grpc.WithReadBufferSize(4096), grpc.WithWriteBufferSize(4096))
					if err == nil {
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						var st *pb.StatusResponse
						st, err = pb.NewMaintenanceClient(cc).Status(ctx, &pb.StatusRequest{})
						cancel()
						if err == nil && st.Leader == 0 {
							err = fmt.Errorf("member %x has no leader", m.ID)
						}
					}
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
					mu.Lock()
					conns = append(conns, cc)
					mu.Unlock()
				}()
			}
		}
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		runtime.GC()
		rss2, heap2 := rssBytes(b), heapBytes()
		b.ReportMetric(float64(rss2-rss0)/n, "rss-B/member-connected")
		b.ReportMetric(float64(heap2-heap0)/n, "heap-B/member-connected")
		b.ReportMetric(float64(runtime.NumGoroutine())/n, "goroutines/member-connected")
		b.Logf("%d rings x %d members: started in %s; RSS +%d MiB at rest, +%d MiB with a connection to each (client side included); heap +%d MiB, +%d MiB",
			rings, members, took.Round(time.Millisecond), (rss1-rss0)>>20, (rss2-rss0)>>20, (heap1-heap0)>>20, (heap2-heap0)>>20)
		for _, cc := range conns {
			_ = cc.Close()
		}
		s.Close()
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}

func heapBytes() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func rssBytes(b *testing.B) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
