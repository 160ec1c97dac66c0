package backup

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 17, 0, 0, time.UTC)
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		mt := metav1.NewTime(tm)
		return &mt
	}
	success := func(ts string) *etcdfedv1.BackupSnapshot { return &etcdfedv1.BackupSnapshot{Time: *at(ts)} }
	failure := func(ts string) *etcdfedv1.BackupFailure {
		return &etcdfedv1.BackupFailure{Time: *at(ts), Reason: etcdfedv1.BackupReasonStoreUnreachable}
	}
	for _, tc := range []struct {
		name     string
		in       Input
		want     Action
		trigger  etcdfedv1.BackupTrigger
		requeue  time.Duration
		next     string // RFC3339, "" for none
		wantReas string
	}{
		{name: "first backup at once", in: Input{Schedule: "0 * * * *", Formed: true},
			want: ActStart, trigger: etcdfedv1.BackupTriggerSchedule, next: "2026-03-01T10:17:00Z"},
		{name: "not formed: poll", in: Input{Schedule: "0 * * * *"},
			want: ActWait, requeue: notFormedPoll, wantReas: etcdfedv1.BackupReasonPending},
		{name: "hourly: wait for the next hour", in: Input{Schedule: "0 * * * *", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-03-01T10:00:03Z")}},
			want: ActWait, requeue: 43 * time.Minute, next: "2026-03-01T11:00:00Z"},
		{name: "hourly: due", in: Input{Schedule: "0 * * * *", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-03-01T09:00:02Z")}},
			want: ActStart, trigger: etcdfedv1.BackupTriggerSchedule, next: "2026-03-01T10:00:00Z"},
		{name: "missed many runs: one backup", in: Input{Schedule: "*/5 * * * *", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-02-20T00:00:00Z")}},
			want: ActStart, trigger: etcdfedv1.BackupTriggerSchedule, next: "2026-02-20T00:05:00Z"},
		{name: "every 30m from the last success", in: Input{Schedule: "@every 30m", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-03-01T10:00:00Z")}},
			want: ActWait, requeue: 13 * time.Minute, next: "2026-03-01T10:30:00Z"},
		{name: "failed once: retry after 30s", in: Input{Schedule: "0 * * * *", Formed: true, Status: etcdfedv1.BackupStatus{
			LastSuccess: success("2026-03-01T09:00:00Z"), LastFailure: failure("2026-03-01T10:16:50Z"), ConsecutiveFailures: 1}},
			want: ActWait, requeue: 20 * time.Second, next: "2026-03-01T10:17:20Z"},
		{name: "failed 3 times: 2m backoff passed", in: Input{Schedule: "0 * * * *", Formed: true, Status: etcdfedv1.BackupStatus{
			LastSuccess: success("2026-03-01T09:00:00Z"), LastFailure: failure("2026-03-01T10:14:00Z"), ConsecutiveFailures: 3}},
			want: ActStart, trigger: etcdfedv1.BackupTriggerSchedule, next: "2026-03-01T10:16:00Z"},
		{name: "first backup failing: backoff applies", in: Input{Schedule: "0 * * * *", Formed: true, Status: etcdfedv1.BackupStatus{
			LastFailure: failure("2026-03-01T10:16:30Z"), ConsecutiveFailures: 2}},
			want: ActWait, requeue: 30 * time.Second, next: "2026-03-01T10:17:30Z"},
		{name: "suspended", in: Input{Schedule: "0 * * * *", Suspend: true, Formed: true},
			want: ActWait, wantReas: etcdfedv1.BackupReasonSuspended},
		{name: "request while suspended", in: Input{Schedule: "0 * * * *", Suspend: true, Formed: true, Request: "t1"},
			want: ActStart, trigger: etcdfedv1.BackupTriggerRequest},
		{name: "request ignores schedule and backoff", in: Input{Schedule: "0 * * * *", Formed: true, Request: "t2", Status: etcdfedv1.BackupStatus{
			LastSuccess: success("2026-03-01T10:00:00Z"), LastFailure: failure("2026-03-01T10:16:59Z"), ConsecutiveFailures: 5, LastRequest: "t1"}},
			want: ActStart, trigger: etcdfedv1.BackupTriggerRequest},
		{name: "request already handled", in: Input{Schedule: "0 * * * *", Formed: true, Request: "t1", Status: etcdfedv1.BackupStatus{
			LastSuccess: success("2026-03-01T10:00:00Z"), LastRequest: "t1"}},
			want: ActWait, requeue: 43 * time.Minute, next: "2026-03-01T11:00:00Z"},
		{name: "request before etcd formed is still tried", in: Input{Schedule: "0 * * * *", Request: "t1"},
			want: ActStart, trigger: etcdfedv1.BackupTriggerRequest},
		{name: "in progress: run it", in: Input{Schedule: "0 * * * *", Formed: true, Request: "t9", Status: etcdfedv1.BackupStatus{
			InProgress: &etcdfedv1.BackupInProgress{Trigger: etcdfedv1.BackupTriggerRequest, Request: "t8"}}},
			want: ActRun, trigger: etcdfedv1.BackupTriggerRequest},
		{name: "invalid schedule", in: Input{Schedule: "0 0 31 2-1 *", Formed: true},
			want: ActInvalid, wantReas: etcdfedv1.BackupReasonInvalidSpec},
		// A schedule that never fires (no date matches) is refused; before,
		// robfig/cron's zero Next made it due at once, every time.
		{name: "never fires: February 31st", in: Input{Schedule: "0 0 31 2 *", Formed: true},
			want: ActInvalid, wantReas: etcdfedv1.BackupReasonInvalidSpec},
		{name: "never fires, after a backup: not back to back", in: Input{Schedule: "0 0 31 2 *", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-03-01T10:16:00Z")}},
			want: ActInvalid, wantReas: etcdfedv1.BackupReasonInvalidSpec},
		{name: "never fires: the 31st of 30-day months", in: Input{Schedule: "0 0 31 4,6,9,11 *", Formed: true},
			want: ActInvalid, wantReas: etcdfedv1.BackupReasonInvalidSpec},
		{name: "February 29th fires in leap years", in: Input{Schedule: "0 0 29 2 *", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-03-01T10:00:00Z")}},
			want: ActWait, requeue: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC).Sub(now), next: "2028-02-29T00:00:00Z"},
		{name: "the 31st or a Monday fires (day of month or of week)", in: Input{Schedule: "0 0 31 2 mon", Formed: true, Status: etcdfedv1.BackupStatus{LastSuccess: success("2026-03-01T10:00:00Z")}},
			want: ActWait, requeue: time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC).Sub(now), next: "2027-02-01T00:00:00Z"},
		// The hub's policy refuses the store: nothing runs, not even a
		// backup recorded in progress or requested.
		{name: "store refused by the hub's policy", in: Input{Schedule: "0 * * * *", Formed: true, Request: "t1", Refused: errors.New("no"), Status: etcdfedv1.BackupStatus{
			InProgress: &etcdfedv1.BackupInProgress{Trigger: etcdfedv1.BackupTriggerSchedule}}},
			want: ActInvalid, wantReas: etcdfedv1.BackupReasonForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			d := Decide(tc.in)
			if d.Action != tc.want || d.Trigger != tc.trigger || d.RequeueAfter != tc.requeue {
				t.Errorf("Decide = %+v, want %s %s requeue %s", d, tc.want, tc.trigger, tc.requeue)
			}
			got := ""
			if d.Next != nil {
				got = d.Next.UTC().Format(time.RFC3339)
			}
			if got != tc.next {
				t.Errorf("next %q, want %q", got, tc.next)
			}
			if tc.wantReas != "" && d.Reason != tc.wantReas {
				t.Errorf("reason %q (%s), want %q", d.Reason, d.Message, tc.wantReas)
			}
			if d.Action == ActStart && d.Trigger == etcdfedv1.BackupTriggerRequest && d.Request != tc.in.Request {
				t.Errorf("request %q, want %q", d.Request, tc.in.Request)
			}
		})
	}
}

// TestDecideInUTC: a schedule means UTC even when the hub's clock and the
// times read back from the apiserver are in another zone.
func TestDecideInUTC(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	last := metav1.NewTime(time.Date(2026, 3, 1, 1, 30, 0, 0, berlin)) // 00:30 UTC
	d := Decide(Input{Now: time.Date(2026, 3, 1, 1, 45, 0, 0, berlin), Schedule: "0 3 * * *", Formed: true,
		Status: etcdfedv1.BackupStatus{LastSuccess: &etcdfedv1.BackupSnapshot{Time: last}}})
	if want := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC); d.Next == nil || !d.Next.Equal(want) {
		t.Fatalf("next %v, want %v", d.Next, want)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range map[int32]time.Duration{0: RetryBase, 1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 5: 8 * time.Minute, 6: RetryMax, 60: RetryMax} {
		if got := Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestNormalizeRequest(t *testing.T) {
	short := "2026-03-01T10:17:00Z"
	if normalizeRequest(short) != short {
		t.Error("short token changed")
	}
	long := string(make([]byte, 300))
	n := normalizeRequest(long)
	if len(n) > 253 || n != normalizeRequest(long) || n == normalizeRequest(long+"x") {
		t.Errorf("long token normalized to %q", n)
	}
}
