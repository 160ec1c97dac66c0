package multicluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"

	"github.com/etcdfed/etcdfed/dnsprovider"
	"github.com/etcdfed/etcdfed/dnsprovider/embedded"
)

// RingDNS is the ring's DNS played by the test: one embedded authoritative
// server per address (where the spokes would serve it), all fed the same
// record set. Scenarios without a hub publish their records through it.
type RingDNS struct {
	mu      sync.Mutex
	servers []*embedded.Server
	records map[string]map[string]string // domain -> name -> address
}

// StartRingDNS starts an embedded server on every address (ip:port).
func StartRingDNS(addrs []string) (*RingDNS, error) {
	r := &RingDNS{records: map[string]map[string]string{}}
	for _, a := range addrs {
		s, err := embedded.New(embedded.Config{Addr: a, UDPSockets: 1})
		if err == nil {
			err = s.Start()
		}
		if err != nil {
			r.Stop()
			return nil, fmt.Errorf("ring DNS on %s: %w", a, err)
		}
		r.servers = append(r.servers, s)
	}
	return r, nil
}

// Addresses are the servers' host:port.
func (r *RingDNS) Addresses() []string {
	var out []string
	for _, s := range r.servers {
		out = append(out, s.Addr().String())
	}
	return out
}

// Publish adds (or changes) A records name -> address in the domain's
// zone on every server: the member records the hub would write.
func (r *RingDNS) Publish(_ context.Context, domain string, records map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.records[domain] == nil {
		r.records[domain] = map[string]string{}
	}
	for n, a := range records {
		r.records[domain][n] = a
	}
	spec := dnsprovider.Spec{Domain: domain, Owner: "test-multicluster", TTL: 5}
	names := make([]string, 0, len(r.records[domain]))
	for n := range r.records[domain] {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a, err := netip.ParseAddr(r.records[domain][n])
		if err != nil {
			return err
		}
		spec.Members = append(spec.Members, dnsprovider.Member{Name: n, Addresses: []netip.Addr{a}})
	}
	for i, s := range r.servers {
		spec.NameServers = append(spec.NameServers, dnsprovider.NameServer{
			Name: fmt.Sprintf("ns%d.%s", i+1, domain), Addresses: []netip.Addr{s.Addr().Addr()}})
	}
	set, err := dnsprovider.Build(spec)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range r.servers {
		errs = append(errs, s.SetZone(set))
	}
	return errors.Join(errs...)
}

// Stop stops every server.
func (r *RingDNS) Stop() {
	for _, s := range r.servers {
		_ = s.Stop()
	}
}
