package etcdcluster

import (
	"net/url"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdfed/etcdfed/internal/text"
)

// Small conversions between the API's strings and the planners' values.

// hexID is an etcd member ID as the API writes it ("" for none).
func hexID(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 16)
}

func parseID(s string) uint64 {
	id, _ := strconv.ParseUint(s, 16, 64)
	return id
}

// urlPort is the port of u, def when it has none.
func urlPort(u string, def int32) int32 {
	p, err := url.Parse(u)
	if err != nil {
		return def
	}
	n, err := strconv.Atoi(p.Port())
	if err != nil {
		return def
	}
	return int32(n)
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// truncate is text.Truncate under the name this package's many callers
// use.
func truncate(s string, n int) string { return text.Truncate(s, n) }
