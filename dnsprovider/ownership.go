package dnsprovider

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// OwnerLabel is the first label of the ownership TXT record's name:
// "_etcdfed-owner.<domain>".
const OwnerLabel = "_etcdfed-owner"

const (
	heritageText = "heritage=etcdfed"
	ownerPrefix  = "owner="
	rrsetPrefix  = "rrset="
)

// Sentinel errors of providers.
var (
	// ErrNotOwner: the records belong to another owner.
	ErrNotOwner = errors.New("dnsprovider: records belong to another owner")
	// ErrConflict: a record the owner wants to publish already exists and
	// is not owned by anyone etcdfed knows.
	ErrConflict = errors.New("dnsprovider: record exists and is not owned")
)

// OwnershipName returns the name of the ownership TXT record of a domain.
func OwnershipName(origin string) string {
	return OwnerLabel + "." + strings.ToLower(dns.Fqdn(origin))
}

// Ownership is the content of an ownership TXT record: who owns the
// domain's records, and which RRsets they hold.
type Ownership struct {
	Owner  string
	RRsets []RRsetKey // sorted
}

// RRsetKey names one RRset.
type RRsetKey struct {
	Name string // absolute, lowercase
	Type uint16
}

func (k RRsetKey) String() string { return k.Name + " " + dns.TypeToString[k.Type] }

// ParseOwnership reads an ownership TXT record of origin. ok is false when
// the record is not an etcdfed ownership record at all (another TXT at the
// same name); err is set when it claims to be one but is malformed.
func ParseOwnership(origin string, txt *dns.TXT) (o Ownership, ok bool, err error) {
	origin = strings.ToLower(dns.Fqdn(origin))
	if len(txt.Txt) == 0 || txt.Txt[0] != heritageText {
		return Ownership{}, false, nil
	}
	if len(txt.Txt) < 2 || !strings.HasPrefix(txt.Txt[1], ownerPrefix) {
		return Ownership{}, true, errors.New("ownership record has no owner= string after heritage=etcdfed")
	}
	o.Owner = strings.TrimPrefix(txt.Txt[1], ownerPrefix)
	if err := checkOwner(o.Owner); err != nil {
		return Ownership{}, true, err
	}
	for _, t := range txt.Txt[2:] {
		rest, found := strings.CutPrefix(t, rrsetPrefix)
		name, typ, found2 := strings.Cut(rest, " ")
		rtype, known := dns.StringToType[typ]
		if !found || !found2 || !known || name == "" {
			return Ownership{}, true, fmt.Errorf("ownership record: string %q is not %q followed by a relative name, a space and a type", t, rrsetPrefix)
		}
		abs := origin
		if name != "@" {
			abs = strings.ToLower(name) + "." + origin
		}
		o.RRsets = append(o.RRsets, RRsetKey{abs, rtype})
	}
	sortKeys(o.RRsets)
	return o, true, nil
}

// TXT renders the ownership record's strings.
func (o Ownership) txt(origin string) []string {
	out := []string{heritageText, ownerPrefix + o.Owner}
	for _, k := range o.RRsets {
		rel := "@"
		if k.Name != origin {
			rel = strings.TrimSuffix(k.Name, "."+origin)
		}
		out = append(out, rrsetPrefix+rel+" "+dns.TypeToString[k.Type])
	}
	return out
}

func sortKeys(ks []RRsetKey) {
	slices.SortFunc(ks, func(a, b RRsetKey) int {
		if c := CompareNames(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Type) - int(b.Type)
	})
}

func checkOwner(owner string) error {
	if owner == "" {
		return errors.New("owner is empty")
	}
	if len(owner) > 200 {
		return fmt.Errorf("owner is %d characters long, at most 200 allowed", len(owner))
	}
	for _, c := range []byte(owner) {
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ';' {
			return fmt.Errorf("owner %q has character %q: only printable ASCII without space, quote, backslash or semicolon is allowed", owner, c)
		}
	}
	return nil
}

// IsManaged reports whether a provider publishes an RRset: everything but
// the SOA and the apex NS, which belong to the zone's operator.
func IsManaged(origin string, k RRsetKey) bool {
	if k.Type == dns.TypeSOA {
		return false
	}
	return k.Type != dns.TypeNS || k.Name != origin
}

// managedKeys lists the RRsets the ownership record must list: the managed
// RRsets but the ownership record itself.
func (s *RecordSet) managedKeys() []RRsetKey {
	own := OwnershipName(s.origin)
	var ks []RRsetKey
	for _, rs := range s.sets {
		k := RRsetKey{rs.Name, rs.Type}
		if IsManaged(s.origin, k) && (k.Name != own || k.Type != dns.TypeTXT) {
			ks = append(ks, k)
		}
	}
	sortKeys(ks)
	return ks
}

// checkOwnership finds and checks the ownership record; it returns the owner.
func (s *RecordSet) checkOwnership() (string, error) {
	own := OwnershipName(s.origin)
	var txt *RRset
	for i := range s.sets {
		if s.sets[i].Name == own {
			if s.sets[i].Type != dns.TypeTXT {
				return "", fmt.Errorf("%s %s: the name %s is reserved for the ownership TXT record", own, dns.TypeToString[s.sets[i].Type], own)
			}
			txt = &s.sets[i]
		}
	}
	if txt == nil {
		return "", nil
	}
	o, err := MergeOwnership(s.origin, txt.RRs)
	if err != nil {
		return "", fmt.Errorf("%s TXT: %w", own, err)
	}
	// The owner may hold less than the whole set (records others added
	// by update), never more than it.
	have := s.managedKeys()
	var missing []string
	for _, k := range o.RRsets {
		if !slices.Contains(have, k) {
			missing = append(missing, k.String())
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s TXT: the ownership record lists RRsets the set lacks: %s", own, strings.Join(missing, ", "))
	}
	return o.Owner, nil
}

// Managed returns the records a provider publishes for the set's owner: all
// but the SOA and the apex NS, in canonical order. The ownership record is
// among them.
func (s *RecordSet) Managed() []Record {
	var out []Record
	for _, rs := range s.sets {
		if IsManaged(s.origin, RRsetKey{rs.Name, rs.Type}) {
			out = append(out, rs.record())
		}
	}
	return out
}

// maxOwnershipData bounds one Data string of the ownership record.
const maxOwnershipData = 1000

// MergeOwnership reads an ownership RRset: every TXT record must be an
// etcdfed ownership record of the same owner; their RRset lists add up.
func MergeOwnership(origin string, rrs []dns.RR) (Ownership, error) {
	var out Ownership
	for _, rr := range rrs {
		txt, isTXT := rr.(*dns.TXT)
		if !isTXT {
			return Ownership{}, fmt.Errorf("ownership record is %s, not TXT", dns.TypeToString[rr.Header().Rrtype])
		}
		o, ok, err := ParseOwnership(origin, txt)
		if err != nil {
			return Ownership{}, err
		}
		if !ok {
			return Ownership{}, fmt.Errorf("the ownership record must start with %q", heritageText)
		}
		if out.Owner != "" && o.Owner != out.Owner {
			return Ownership{}, fmt.Errorf("ownership records name two owners, %q and %q", out.Owner, o.Owner)
		}
		out.Owner = o.Owner
		for _, k := range o.RRsets {
			if !slices.Contains(out.RRsets, k) {
				out.RRsets = append(out.RRsets, k)
			}
		}
	}
	sortKeys(out.RRsets)
	return out, nil
}

// OwnershipRecord returns the flat ownership TXT record that claims the
// given RRsets of origin for owner. Build adds it for you; use it when
// assembling a set by hand.
func OwnershipRecord(origin, owner string, ttl int32, rrsets []RRsetKey) (Record, error) {
	origin = strings.ToLower(dns.Fqdn(origin))
	if err := checkOwner(owner); err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	ks := slices.Clone(rrsets)
	for i := range ks {
		ks[i].Name = strings.ToLower(dns.Fqdn(ks[i].Name))
	}
	sortKeys(ks)
	// One TXT record per chunk of at most maxOwnershipData characters,
	// each repeating heritage and owner, so that every Data string stays
	// within the API's bound however long the names are.
	strs := (Ownership{Owner: owner, RRsets: ks}).txt(origin)
	head := `"` + strs[0] + `" "` + strs[1] + `"`
	var data []string
	b := head
	for _, t := range strs[2:] {
		if len(t) > 255 {
			return Record{}, fmt.Errorf("%w: ownership string %q longer than 255 bytes", ErrInvalid, t)
		}
		q := ` "` + t + `"`
		if len(b)+len(q) > maxOwnershipData && b != head {
			data = append(data, b)
			b = head
		}
		b += q
	}
	data = append(data, b)
	return Record{Name: OwnershipName(origin), Type: "TXT", TTL: ttl, Data: data}, nil
}
