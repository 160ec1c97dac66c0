// Package waitdns is the check a member pod runs before etcd starts
// (`etcdfed-init wait-dns`): it resolves the member's DNS name until the
// answer is exactly the member's expected address. etcd compares its advertised URLs
// with DNS at first start and peers dial the name, so a member must not
// start while its name still points at an old address or at nothing.
//
// The expected address is an IP (PodIP, NodePort, or a load balancer IP;
// the name's A/AAAA records must be exactly that IP) or a host name (a load
// balancer hostname; the name must be a CNAME to it, or resolve to the same
// addresses). Names are looked up as given, through the same resolver path
// etcd itself will take (resolv.conf search domains included).
package waitdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// ErrEmptyAddress is returned when the expected address is empty, as when
// the downward API gave nothing.
var ErrEmptyAddress = errors.New("waitdns: expected address is empty")

// Resolver is what Check needs of a resolver; *net.Resolver implements it.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
	LookupCNAME(ctx context.Context, host string) (string, error)
}

// Check resolves name once and reports whether it answers with exactly
// address, and what it answered (for logs).
func Check(ctx context.Context, r Resolver, name, address string) (bool, string, error) {
	if address == "" {
		return false, "", ErrEmptyAddress
	}
	fqdn := name
	if want, err := netip.ParseAddr(address); err == nil {
		got, err := r.LookupHost(ctx, fqdn)
		if err != nil {
			return false, "", err
		}
		addrs := normalize(got)
		seen := strings.Join(addrs, ",")
		return len(addrs) == 1 && addrs[0] == want.Unmap().String(), seen, nil
	}
	cname, err := r.LookupCNAME(ctx, fqdn)
	if err == nil && strings.EqualFold(strings.TrimSuffix(cname, "."), strings.TrimSuffix(address, ".")) {
		return true, "CNAME " + cname, nil
	}
	// The load balancer's hostname may itself be a CNAME, which hides it
	// from LookupCNAME's answer: compare the addresses both names reach.
	got, gerr := r.LookupHost(ctx, fqdn)
	if gerr != nil {
		return false, "", gerr
	}
	want, werr := r.LookupHost(ctx, address)
	if werr != nil {
		return false, "", fmt.Errorf("resolve expected host %s: %w", address, werr)
	}
	g, w := normalize(got), normalize(want)
	return len(g) > 0 && slices.Equal(g, w), fmt.Sprintf("CNAME %s, addresses %s", cname, strings.Join(g, ",")), nil
}

// Wait checks every interval until Check passes, ctx ends or timeout (0:
// none) passes. report is called with each new answer (or error), so a
// waiting pod's log says what it sees without repeating itself.
func Wait(ctx context.Context, r Resolver, name, address string, interval, timeout time.Duration, report func(string)) error {
	if address == "" {
		return ErrEmptyAddress
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	last := "\x00"
	for {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ok, seen, err := Check(qctx, r, name, address)
		cancel()
		msg := seen
		if err != nil {
			msg = "error: " + err.Error()
		}
		if ok {
			report(fmt.Sprintf("%s resolves to %s", name, msg))
			return nil
		}
		if msg != last && ctx.Err() == nil {
			if msg == "" {
				msg = "no address"
			}
			report(fmt.Sprintf("%s resolves to %s, waiting for %s", name, msg, address))
			last = seen
			if err != nil {
				last = "error: " + err.Error()
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not resolve to %s: %w", name, address, ctx.Err())
		case <-t.C:
		}
	}
}

func normalize(addrs []string) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			a = ip.Unmap().String()
		}
		out = append(out, a)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// DefaultResolver returns net.DefaultResolver at call time (the CLI may
// replace it, see internal/resolverenv).
func DefaultResolver() Resolver { return net.DefaultResolver }
