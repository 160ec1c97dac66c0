package dnszone

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	zonesServed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_dns_zones_served",
		Help: "EtcdDNSZone objects the spoke's DNS server serves.",
	})
	zoneSerial = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "etcdfed_spoke_dns_zone_serial",
		Help: "SOA serial the spoke's DNS server serves, by zone.",
	}, []string{"zone"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(zonesServed, zoneSerial)
}
