package drill

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func cond(typ string, ok bool) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: "R", Message: typ + " message"}
}

// healthyRing is five ready members placed 2/2/1 over member-1/zone-1,
// member-2/zone-2 and member-3/zone-3.
func healthyRing() *etcdfedv1.EtcdCluster {
	ec := &etcdfedv1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "main", Generation: 3},
		Spec:       etcdfedv1.EtcdClusterSpec{Replicas: 5},
		Status: etcdfedv1.EtcdClusterStatus{ClusterID: "abc", ObservedGeneration: 3, ReadyMembers: 5,
			Conditions: []metav1.Condition{cond(etcdfedv1.ConditionAvailable, true), cond(etcdfedv1.ConditionAllMembersReady, true), cond(etcdfedv1.ConditionFailureTolerant, true)}},
	}
	for i, d := range [][2]string{{"member-1", "zone-1"}, {"member-1", "zone-1"}, {"member-2", "zone-2"}, {"member-2", "zone-2"}, {"member-3", "zone-3"}} {
		ec.Status.Members = append(ec.Status.Members, etcdfedv1.MemberStatus{Name: "main-" + string(rune('0'+i)), Cluster: d[0], Zone: d[1], Ready: true})
	}
	return ec
}

func TestParseZone(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Zone
		err  bool
	}{
		{"zone-1", Zone{Name: "zone-1"}, false},
		{"member-1/zone-1", Zone{Cluster: "member-1", Name: "zone-1"}, false},
		{"", Zone{}, true},
		{"a/b/c", Zone{}, true},
		{"/zone-1", Zone{}, true},
		{"member-1/", Zone{}, true},
	} {
		got, err := ParseZone(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseZone(%q) = %+v, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadInput) {
			t.Errorf("ParseZone(%q): %v is not ErrBadInput", tc.in, err)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("%+v prints as %q, want %q", got, got.String(), tc.in)
		}
	}
	if _, err := ParseMode("explode"); !errors.Is(err, ErrBadInput) {
		t.Errorf("ParseMode(explode): %v", err)
	}
}

// Preflight lets a drill start only from a healthy ring on a zone that
// holds members but not a quorum, and says why not otherwise.
func TestPreflight(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name     string
		mutate   func(*etcdfedv1.EtcdCluster)
		zone     string
		mode     Mode
		duration time.Duration
		// want is empty for a drill that may start, else part of the error.
		want    string
		wantErr error
		members string
	}{
		{name: "healthy, zone with two members", zone: "zone-1", mode: ModeKill, members: "main-0,main-1"},
		{name: "cluster/zone form", zone: "member-2/zone-2", mode: ModeCordon, members: "main-2,main-3"},
		{name: "zone without members", zone: "zone-9", mode: ModeKill, wantErr: ErrBadInput,
			want: "zone zone-9 holds no member of EtcdCluster ns/main (its members are in member-1/zone-1, member-2/zone-2, member-3/zone-3)"},
		{name: "zone of another cluster", zone: "member-2/zone-1", mode: ModeKill, wantErr: ErrBadInput, want: "holds no member"},
		{name: "zone holding a quorum", zone: "zone-1", mode: ModeKill, wantErr: ErrBadInput,
			mutate: func(ec *etcdfedv1.EtcdCluster) {
				ec.Status.Members[2].Cluster, ec.Status.Members[2].Zone = "member-1", "zone-1"
			},
			want: "zone zone-1 holds 3 of the 5 members of EtcdCluster ns/main: failing it loses quorum (3 needed)"},
		{name: "not available", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Status.Conditions[0] = cond(etcdfedv1.ConditionAvailable, false) },
			want:   "is not Available (R: Available message)"},
		{name: "a member not ready", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) {
				ec.Status.Conditions[1] = cond(etcdfedv1.ConditionAllMembersReady, false)
			},
			want: "is not AllMembersReady"},
		{name: "ready count short", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Status.ReadyMembers = 4 },
			want:   "has 4 ready of 5 members"},
		{name: "operation in flight", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) {
				ec.Status.Operation = &etcdfedv1.MembershipOperation{Type: etcdfedv1.OperationReplace, Member: "main-2", Step: "Promote"}
			},
			want: "has a membership change in flight (Replace main-2, step Promote)"},
		{name: "spec not yet acted on", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Generation = 4 },
			want:   "generation 4, observed 3"},
		{name: "not formed", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Status.ClusterID = "" },
			want:   "has not formed yet"},
		{name: "being deleted", zone: "zone-1", mode: ModeKill, wantErr: ErrNotReady,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.DeletionTimestamp = &metav1.Time{Time: time.Now()} },
			want:   "is being deleted"},
		{name: "already cordoned", zone: "zone-1", mode: ModeCordon, wantErr: ErrBadInput,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Spec.Topology.CordonedZones = []string{"zone-1"} },
			want:   "zone zone-1 is already cordoned"},
		{name: "no automatic replacement and no duration", zone: "zone-1", mode: ModeKill, wantErr: ErrBadInput,
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Spec.FailurePolicy.Automatic = &no },
			want:   "failurePolicy.automatic=false"},
		{name: "no automatic replacement with a duration", zone: "zone-1", mode: ModeKill, duration: time.Minute, members: "main-0,main-1",
			mutate: func(ec *etcdfedv1.EtcdCluster) { ec.Spec.FailurePolicy.Automatic = &no }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := healthyRing()
			if tc.mutate != nil {
				tc.mutate(ec)
			}
			z, err := ParseZone(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Preflight(ec, z, tc.mode, tc.duration)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want a start, got %v", err)
				}
				if got := strings.Join(p.Members, ","); got != tc.members || p.Replicas != 5 || !p.Tolerant {
					t.Errorf("plan %+v, want members %s", p, tc.members)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v containing %q", err, tc.wantErr, tc.want)
			}
		})
	}
}
