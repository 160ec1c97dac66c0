// Package rfc2136 publishes etcdfed record sets to an external authoritative
// server (BIND, Knot, PowerDNS) with RFC 2136 dynamic updates signed with
// TSIG, and reads the zone back with AXFR.
//
// The provider only changes RRsets its owner holds, as listed in the
// ownership TXT record at "_etcdfed-owner.<domain>"; it never touches the
// zone's SOA or apex NS. Each Apply is one update message whose
// prerequisite is the ownership record as read, so a concurrent writer
// makes the update fail instead of being overwritten.
package rfc2136

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/etcdfed/etcdfed/dnsprovider"
)

// ErrTSIG is wrapped when the server does not accept the TSIG key.
var ErrTSIG = errors.New("rfc2136: server refused the TSIG signature")

// Config configures a Provider.
type Config struct {
	// Server is the primary's address, host:port.
	Server string
	// Zone is the zone to update, for example "example.com."; record
	// sets published through the provider must lie at or below it.
	Zone string
	// KeyName, KeyAlgorithm and KeySecret (base64) form the TSIG key.
	// KeyAlgorithm "" means hmac-sha256.
	KeyName      string
	KeyAlgorithm string
	KeySecret    string
	// Timeout bounds each exchange; 0 means 10s.
	Timeout time.Duration
}

// Provider publishes record sets with RFC 2136. It implements
// dnsprovider.Provider.
type Provider struct {
	cfg  Config
	zone string
	key  string
	alg  string
}

var _ dnsprovider.Provider = (*Provider)(nil)

// New checks cfg.
func New(cfg Config) (*Provider, error) {
	if _, _, err := net.SplitHostPort(cfg.Server); err != nil {
		return nil, fmt.Errorf("rfc2136: server %q must be host:port: %w", cfg.Server, err)
	}
	zone := strings.ToLower(dns.Fqdn(cfg.Zone))
	if _, ok := dns.IsDomainName(zone); !ok || cfg.Zone == "" {
		return nil, fmt.Errorf("rfc2136: zone %q is not a domain name", cfg.Zone)
	}
	if cfg.KeyName == "" || cfg.KeySecret == "" {
		return nil, errors.New("rfc2136: a TSIG key (KeyName, KeySecret) is required: updates are always signed")
	}
	alg := strings.ToLower(dns.Fqdn(cfg.KeyAlgorithm))
	if cfg.KeyAlgorithm == "" {
		alg = dns.HmacSHA256
	}
	switch alg {
	case dns.HmacSHA256, dns.HmacSHA512, dns.HmacSHA384, dns.HmacSHA224, dns.HmacSHA1:
	default:
		return nil, fmt.Errorf("rfc2136: TSIG algorithm %q not supported", cfg.KeyAlgorithm)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	return &Provider{cfg: cfg, zone: zone, key: strings.ToLower(dns.Fqdn(cfg.KeyName)), alg: alg}, nil
}

func (p *Provider) secrets() map[string]string { return map[string]string{p.key: p.cfg.KeySecret} }

// state is the zone as read by AXFR, grouped into RRsets.
type state struct {
	rrsets map[dnsprovider.RRsetKey][]dns.RR
}

func (p *Provider) read(ctx context.Context) (*state, error) {
	m := new(dns.Msg).SetAxfr(p.zone)
	m.SetTsig(p.key, p.alg, 300, time.Now().Unix())
	d := &net.Dialer{Timeout: p.cfg.Timeout}
	conn, err := d.DialContext(ctx, "tcp", p.cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("rfc2136: read zone %s from %s: %w", p.zone, p.cfg.Server, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	tr := &dns.Transfer{Conn: &dns.Conn{Conn: conn}, TsigSecret: p.secrets(), ReadTimeout: p.cfg.Timeout, WriteTimeout: p.cfg.Timeout}
	ch, err := tr.In(m, p.cfg.Server)
	if err != nil {
		return nil, fmt.Errorf("rfc2136: read zone %s from %s: %w", p.zone, p.cfg.Server, err)
	}
	st := &state{rrsets: map[dnsprovider.RRsetKey][]dns.RR{}}
	n := 0
	for env := range ch {
		if env.Error != nil {
			for range ch {
			}
			return nil, p.transferError(env.Error)
		}
		for _, rr := range env.RR {
			n++
			h := rr.Header()
			k := dnsprovider.RRsetKey{Name: strings.ToLower(h.Name), Type: h.Rrtype}
			if h.Rrtype == dns.TypeSOA && len(st.rrsets[k]) == 1 {
				continue // the closing SOA
			}
			st.rrsets[k] = append(st.rrsets[k], rr)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("rfc2136: read zone %s from %s: empty transfer", p.zone, p.cfg.Server)
	}
	return st, nil
}

func (p *Provider) transferError(err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "bad xfr rcode: 9"), errors.Is(err, dns.ErrAuth), errors.Is(err, dns.ErrSig), errors.Is(err, dns.ErrSecret), errors.Is(err, dns.ErrTime), errors.Is(err, dns.ErrNoSig):
		return fmt.Errorf("%w: AXFR of %s from %s with key %s (%s): check the key name, algorithm and secret, and the zone's allow-transfer", ErrTSIG, p.zone, p.cfg.Server, p.key, p.alg)
	case strings.Contains(msg, "bad xfr rcode: 5"):
		return fmt.Errorf("rfc2136: AXFR of %s from %s refused: allow transfers for key %s", p.zone, p.cfg.Server, p.key)
	}
	return fmt.Errorf("rfc2136: read zone %s from %s: %w", p.zone, p.cfg.Server, err)
}

// ownership returns the owner's ownership record in the zone, if any; it
// fails when another owner holds the domain or foreign TXT data sits at the
// ownership name.
func (st *state) ownership(domain, owner string) (*dnsprovider.Ownership, []dns.RR, error) {
	name := dnsprovider.OwnershipName(domain)
	txts := st.rrsets[dnsprovider.RRsetKey{Name: name, Type: dns.TypeTXT}]
	var mine *dnsprovider.Ownership
	for _, rr := range txts {
		o, ok, err := dnsprovider.ParseOwnership(domain, rr.(*dns.TXT))
		switch {
		case err != nil:
			return nil, nil, fmt.Errorf("rfc2136: %s: %w", name, err)
		case !ok:
			return nil, nil, fmt.Errorf("%w: %s TXT holds data etcdfed did not write: %s", dnsprovider.ErrConflict, name, rr)
		case o.Owner != owner:
			return nil, nil, fmt.Errorf("%w: domain %s is held by owner %q", dnsprovider.ErrNotOwner, domain, o.Owner)
		}
		if mine == nil {
			mine = &dnsprovider.Ownership{Owner: o.Owner}
		}
		for _, k := range o.RRsets {
			if !slices.Contains(mine.RRsets, k) {
				mine.RRsets = append(mine.RRsets, k)
			}
		}
	}
	if mine != nil {
		sortKeys(mine.RRsets)
	}
	return mine, txts, nil
}

// Changes is what one Apply or Remove sends.
type Changes struct {
	Delete []dnsprovider.RRsetKey // whole RRsets removed
	Add    []dns.RR               // records added
}

// Empty reports whether there is nothing to send.
func (c Changes) Empty() bool { return len(c.Delete) == 0 && len(c.Add) == 0 }

// plan computes the changes that make the zone hold set for its owner.
func plan(st *state, set *dnsprovider.RecordSet) (Changes, []dns.RR, error) {
	origin, owner := set.Origin(), set.Owner()
	own, ownTXT, err := st.ownership(origin, owner)
	if err != nil {
		return Changes{}, nil, err
	}
	owned := map[dnsprovider.RRsetKey]bool{}
	if own != nil {
		for _, k := range own.RRsets {
			owned[k] = true
		}
		owned[dnsprovider.RRsetKey{Name: dnsprovider.OwnershipName(origin), Type: dns.TypeTXT}] = true
	}
	desired := map[dnsprovider.RRsetKey]dnsprovider.RRset{}
	var desiredKeys []dnsprovider.RRsetKey
	for _, rs := range set.RRsets() {
		k := dnsprovider.RRsetKey{Name: rs.Name, Type: rs.Type}
		if dnsprovider.IsManaged(origin, k) {
			desired[k] = rs
			desiredKeys = append(desiredKeys, k)
		}
	}
	// Conflicts first: nothing is sent if any exists.
	var errs []error
	for _, k := range desiredKeys {
		if _, exists := st.rrsets[k]; exists && !owned[k] && k.Name != dnsprovider.OwnershipName(origin) {
			errs = append(errs, fmt.Errorf("%w: %s exists and is not held by owner %q", dnsprovider.ErrConflict, k, owner))
		}
		for ck := range st.rrsets {
			if ck.Name != k.Name || ck == k || owned[ck] || ck.Type == dns.TypeSOA || ck.Type == dns.TypeNS {
				continue
			}
			if k.Type == dns.TypeCNAME || ck.Type == dns.TypeCNAME {
				errs = append(errs, fmt.Errorf("%w: %s would stand beside %s, which owner %q does not hold", dnsprovider.ErrConflict, k, ck, owner))
			}
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return Changes{}, nil, errors.Join(errs...)
	}
	var ch Changes
	// Deletes of RRsets the owner held and no longer wants.
	var stale []dnsprovider.RRsetKey
	for k := range owned {
		if _, want := desired[k]; !want {
			if _, exists := st.rrsets[k]; exists {
				stale = append(stale, k)
			}
		}
	}
	sortKeys(stale)
	ch.Delete = append(ch.Delete, stale...)
	// Replacements and additions.
	for _, k := range desiredKeys {
		want := desired[k]
		cur, exists := st.rrsets[k]
		if exists && sameRRset(cur, want) {
			continue
		}
		if exists {
			ch.Delete = append(ch.Delete, k)
		}
		for _, rr := range want.RRs {
			ch.Add = append(ch.Add, dns.Copy(rr))
		}
	}
	return ch, ownTXT, nil
}

func sortKeys(ks []dnsprovider.RRsetKey) {
	slices.SortFunc(ks, func(a, b dnsprovider.RRsetKey) int {
		if c := dnsprovider.CompareNames(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Type) - int(b.Type)
	})
}

func sameRRset(cur []dns.RR, want dnsprovider.RRset) bool {
	if len(cur) != len(want.RRs) {
		return false
	}
	for _, c := range cur {
		if c.Header().Ttl != want.TTL {
			return false
		}
		found := false
		for _, w := range want.RRs {
			if dns.IsDuplicate(c, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Plan returns the changes Apply would send, without sending them.
func (p *Provider) Plan(ctx context.Context, set *dnsprovider.RecordSet) (Changes, error) {
	if err := p.check(set); err != nil {
		return Changes{}, err
	}
	st, err := p.read(ctx)
	if err != nil {
		return Changes{}, err
	}
	ch, _, err := plan(st, set)
	return ch, err
}

func (p *Provider) check(set *dnsprovider.RecordSet) error {
	if set == nil {
		return errors.New("rfc2136: nil record set")
	}
	if set.Owner() == "" {
		return fmt.Errorf("rfc2136: record set %s has no ownership record: build it with dnsprovider.Build", set.Origin())
	}
	if !dns.IsSubDomain(p.zone, set.Origin()) {
		return fmt.Errorf("rfc2136: record set %s lies outside zone %s", set.Origin(), p.zone)
	}
	return nil
}

// Apply implements dnsprovider.Provider: it reads the zone, computes the
// changes for set's owner and sends them in one update message.
func (p *Provider) Apply(ctx context.Context, set *dnsprovider.RecordSet) error {
	if err := p.check(set); err != nil {
		return err
	}
	st, err := p.read(ctx)
	if err != nil {
		return err
	}
	ch, ownTXT, err := plan(st, set)
	if err != nil {
		return fmt.Errorf("rfc2136: apply %s for %q: %w", set.Origin(), set.Owner(), err)
	}
	if ch.Empty() {
		return nil
	}
	return p.send(ctx, set.Origin(), ch, ownTXT)
}

// Current implements dnsprovider.Provider.
func (p *Provider) Current(ctx context.Context, domain, owner string) ([]dnsprovider.Record, error) {
	domain = strings.ToLower(dns.Fqdn(domain))
	st, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	own, ownTXT, err := st.ownership(domain, owner)
	if err != nil {
		if errors.Is(err, dnsprovider.ErrNotOwner) {
			return nil, nil
		}
		return nil, err
	}
	if own == nil {
		return nil, nil
	}
	keys := append(slices.Clone(own.RRsets), dnsprovider.RRsetKey{Name: dnsprovider.OwnershipName(domain), Type: dns.TypeTXT})
	sortKeys(keys)
	var out []dnsprovider.Record
	for _, k := range keys {
		rrs := st.rrsets[k]
		if k.Type == dns.TypeTXT && k.Name == dnsprovider.OwnershipName(domain) {
			rrs = ownTXT
		}
		if len(rrs) == 0 {
			continue
		}
		r := dnsprovider.Record{Name: k.Name, Type: dns.TypeToString[k.Type], TTL: int32(rrs[0].Header().Ttl)}
		for _, rr := range rrs {
			r.Data = append(r.Data, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
		slices.Sort(r.Data)
		out = append(out, r)
	}
	return out, nil
}

// Remove implements dnsprovider.Provider.
func (p *Provider) Remove(ctx context.Context, domain, owner string) error {
	domain = strings.ToLower(dns.Fqdn(domain))
	st, err := p.read(ctx)
	if err != nil {
		return err
	}
	own, ownTXT, err := st.ownership(domain, owner)
	if err != nil {
		return fmt.Errorf("rfc2136: remove %s for %q: %w", domain, owner, err)
	}
	if own == nil {
		return nil
	}
	var ch Changes
	for _, k := range own.RRsets {
		if _, exists := st.rrsets[k]; exists {
			ch.Delete = append(ch.Delete, k)
		}
	}
	ch.Delete = append(ch.Delete, dnsprovider.RRsetKey{Name: dnsprovider.OwnershipName(domain), Type: dns.TypeTXT})
	return p.send(ctx, domain, ch, ownTXT)
}

// send signs and sends one update. Its prerequisite is the ownership record
// as read (or its absence), so that a concurrent change fails the update.
func (p *Provider) send(ctx context.Context, domain string, ch Changes, ownTXT []dns.RR) error {
	m := new(dns.Msg).SetUpdate(p.zone)
	if len(ownTXT) > 0 {
		m.Used(ownTXT)
	} else {
		m.RRsetNotUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: dnsprovider.OwnershipName(domain), Rrtype: dns.TypeTXT, Class: dns.ClassINET}}})
	}
	for _, k := range ch.Delete {
		m.RemoveRRset([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: k.Name, Rrtype: k.Type, Class: dns.ClassINET}}})
	}
	if len(ch.Add) > 0 {
		m.Insert(ch.Add)
	}
	m.SetTsig(p.key, p.alg, 300, time.Now().Unix())
	if l := m.Len(); l > dns.MaxMsgSize {
		return fmt.Errorf("rfc2136: update for %s is %d bytes, more than one message holds", domain, l)
	}
	c := &dns.Client{Net: "tcp", Timeout: p.cfg.Timeout, TsigSecret: p.secrets()}
	r, _, err := c.ExchangeContext(ctx, m, p.cfg.Server)
	if r != nil && r.Rcode == dns.RcodeNotAuth {
		return fmt.Errorf("%w: update of %s at %s with key %s (%s): %s", ErrTSIG, p.zone, p.cfg.Server, p.key, p.alg, tsigDetail(r))
	}
	if err != nil {
		if errors.Is(err, dns.ErrAuth) || errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrTime) {
			return fmt.Errorf("%w: update of %s at %s with key %s: %w", ErrTSIG, p.zone, p.cfg.Server, p.key, err)
		}
		return fmt.Errorf("rfc2136: update %s at %s: %w", p.zone, p.cfg.Server, err)
	}
	// The client verifies a TSIG only when the answer carries one: an
	// answer without one (from anyone on the path) would otherwise count
	// as the server's.
	if r.IsTsig() == nil {
		return fmt.Errorf("%w: the answer to the update of %s from %s (%s) is not signed: it did not come from a server holding key %s", ErrTSIG, p.zone, p.cfg.Server, dns.RcodeToString[r.Rcode], p.key)
	}
	switch r.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeRefused:
		return fmt.Errorf("rfc2136: update of %s at %s refused: allow updates for key %s", p.zone, p.cfg.Server, p.key)
	case dns.RcodeYXRrset, dns.RcodeNXRrset, dns.RcodeYXDomain, dns.RcodeNameError:
		return fmt.Errorf("rfc2136: update of %s: the ownership record changed since it was read (%s); retry", domain, dns.RcodeToString[r.Rcode])
	case dns.RcodeNotZone:
		return fmt.Errorf("rfc2136: update of %s: a name lies outside zone %s (NOTZONE)", domain, p.zone)
	default:
		return fmt.Errorf("rfc2136: update of %s at %s failed: %s", p.zone, p.cfg.Server, dns.RcodeToString[r.Rcode])
	}
}

func tsigDetail(r *dns.Msg) string {
	if t := r.IsTsig(); t != nil && t.Error != 0 {
		return "TSIG error " + dns.RcodeToString[int(t.Error)]
	}
	return "NOTAUTH"
}
