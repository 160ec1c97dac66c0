package v1alpha1

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"
)

// Names of the objects the hub writes in member clusters (rule 14). Every
// ring's objects share one namespace in each member cluster (the ring
// namespace), so each name carries the ring's namespace and name: two
// EtcdClusters named alike in two namespaces never write the same object.
//
// The scheme, for a member of the EtcdCluster NAMESPACE/RING:
//
//	<namespace>-<member>-<hash>
//
// where hash is RingHash(namespace, ring): the first 40 bits of
// SHA-256("NAMESPACE/RING"), as 8 characters of lowercase base32 (a-z,
// 2-7). The hash, not the readable part, makes the name unique, so the
// readable part may be cut: the whole name fits 63 characters (a
// Service's name, which also names the pod's hostname), the namespace is
// cut from its end first and left out when nothing of it fits or it does
// not start with a letter (a Service name must). A member name too long
// for even "<member>-<hash>" (over 54 characters) is cut to 54 and hashed
// with the ring: "<member[:54]>-<RingHash(namespace, ring+"/"+member)>".
//
// The spoke derives the names of what it creates from the EtcdMember's
// name: the pod and the Service are named like it, the PVC of incarnation
// N is "<name>-data-N", the disruption budget is named like it; the hub
// names a member's certificate Secret "<name>-tls" and its restore
// credentials "<name>-store-credentials". The ring's EtcdDNSZone is
// RingObjectName (the ring's name in place of the member's).
//
// Objects written before this scheme are named after the member alone
// ("main-0", "main-0-tls", PVC "main-0-data-3") and the EtcdDNSZone after
// the ring ("main"). The hub keeps using such a member's object for as long
// as it exists (it finds objects by their labels, not their names), so a
// running member keeps its pod, volume and Service: renaming any of them
// would restart it. A member that gets a new object (it moves to another
// member cluster, or is added) gets the new name. docs/architecture.md,
// "DNS and names", explains why.
//
// A member moved make before break between two zones of one member
// cluster (a Move) has two EtcdMembers there for a while: the new
// incarnation N joins beside the old one, whose object keeps its name. The
// new object is IncarnationObjectName, "<namespace>-<member>-i<N>-<hash>"
// (the same scheme with "<member>-i<N>", as its DNS name
// <member>-i<N>.<domain>), and serves the member for its life; a later
// move inside the cluster takes the scheme's name again, which is free by
// then (docs/architecture.md, "Membership changes").

// objectNameMax is the longest name the scheme gives: a Service's name is
// a DNS-1035 label.
const objectNameMax = 63

// ringHashLen is the length of RingHash.
const ringHashLen = 8

var nameHashEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// RingHash is a stable short hash of an EtcdCluster's namespace and name,
// 8 characters of [a-z2-7].
func RingHash(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return nameHashEncoding.EncodeToString(sum[:5])[:ringHashLen]
}

// MemberObjectName is the name of a member's EtcdMember (and the stem of
// its pod, Service, PVCs and Secrets) in a member cluster.
func MemberObjectName(namespace, ring, member string) string {
	return scopedName(namespace, ring, member)
}

// IncarnationObjectName is the name of the EtcdMember of a member's
// incarnation inc created beside another object of the member in the same
// member cluster (a Move inside it): the scheme's name of "<member>-i<inc>"
// (the readable part cut, never the suffix, to fit 63 characters).
func IncarnationObjectName(namespace, ring, member string, inc int64) string {
	return scopedNameKeeping(namespace, ring, member, incarnationSuffix(inc))
}

func incarnationSuffix(inc int64) string { return "-i" + strconv.FormatInt(inc, 10) }

// RingObjectName is the name of a ring's object that is one per member
// cluster (its EtcdDNSZone).
func RingObjectName(namespace, ring string) string {
	return scopedName(namespace, ring, ring)
}

// IsMemberObjectName reports whether name is a valid name for the EtcdMember
// of member in the ring namespace/ring: the scheme's, the member's name
// alone (an object written before the scheme), or an incarnation's
// (IncarnationObjectName, whichever incarnation the object holds now).
func IsMemberObjectName(name, namespace, ring, member string) bool {
	if name == member || name == MemberObjectName(namespace, ring, member) {
		return true
	}
	inc, ok := nameIncarnation(name)
	return ok && name == IncarnationObjectName(namespace, ring, member, inc)
}

// nameIncarnation reads N from a name "...-i<N>-<hash>".
func nameIncarnation(name string) (int64, bool) {
	if len(name) < ringHashLen+1 || name[len(name)-ringHashLen-1] != '-' {
		return 0, false
	}
	rest := name[:len(name)-ringHashLen-1]
	i := strings.LastIndex(rest, "-i")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(rest[i+2:], 10, 64)
	return n, err == nil && n > 0
}

func scopedName(namespace, ring, base string) string {
	h := RingHash(namespace, ring)
	room := objectNameMax - len(h) - 1 // "-<hash>"
	if len(base) > room {
		return strings.TrimRight(base[:room], "-") + "-" + RingHash(namespace, ring+"/"+base)
	}
	name := base + "-" + h
	if k := room - len(base) - 1; k > 0 { // "<namespace>-"
		ns := strings.TrimRight(namespace[:min(k, len(namespace))], "-")
		if ns != "" && ns[0] >= 'a' && ns[0] <= 'z' {
			name = ns + "-" + name
		}
	}
	return name
}

// scopedNameKeeping is scopedName of base+suffix with the suffix kept
// whole when the readable part must be cut.
func scopedNameKeeping(namespace, ring, base, suffix string) string {
	h := RingHash(namespace, ring)
	room := objectNameMax - len(h) - 1 - len(suffix)
	if len(base) > room {
		return strings.TrimRight(base[:room], "-") + suffix + "-" + RingHash(namespace, ring+"/"+base+suffix)
	}
	return scopedName(namespace, ring, base+suffix)
}
