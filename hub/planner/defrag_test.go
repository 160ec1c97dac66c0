package planner

import (
	"testing"
	"time"
)

const mib = int64(1) << 20

// policy is the default policy (OpenShift's thresholds: 45% and 100 MiB).
var policy = Maintenance{AutoDefrag: true, MinFragmentedPercent: 45, MinReclaimable: 100 * mib}

// sized is rolled() (every member a ready voter on a settled object) with
// the default policy and each member's database file and in-use sizes in
// MiB, in member order (main-0 leads).
func sized(sizes ...[2]int64) Input {
	in := rolled()
	in.Maintenance = policy
	in.Etcd.AlarmsKnown = true
	for i := range in.Etcd.Members {
		in.Etcd.Members[i].DBSize, in.Etcd.Members[i].DBSizeInUse, in.Etcd.Members[i].DBSizeQuota = 20*mib, 20*mib, 2048*mib
		if i < len(sizes) {
			in.Etcd.Members[i].DBSize, in.Etcd.Members[i].DBSizeInUse = sizes[i][0]*mib, sizes[i][1]*mib
		}
	}
	return in
}

// fragmented: 400 MiB file, 20 MiB in use.
var fragmented = [2]int64{400, 20}

// compact: a file with nothing to give back.
var compact = [2]int64{20, 20}

func defragging(in Input, member string, step Action) Input {
	in.Operation = &Operation{Type: OpDefrag, Member: member, Reason: ReasonFragmented, Step: step, StartedAt: t0}
	return in
}

func defragOf(member string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Operation == nil || d.Operation.Type != OpDefrag || d.Operation.Member != member || d.Operation.Reason != ReasonFragmented {
			t.Errorf("operation = %+v, want a Defrag (Fragmented) of %s", d.Operation, member)
		}
	}
}

func actsOn(member string, id uint64) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Member != member || d.MemberID != id {
			t.Errorf("decision acts on %s [%x], want %s [%x]", d.Member, d.MemberID, member, id)
		}
	}
}

// Which member is defragmented, and when: a member's file fragmented
// beyond both thresholds, one member at a time, followers first and the
// leader last, only while every member is a ready voter and nothing else
// is to do.
func TestDefragBegins(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"nothing fragmented: nothing to do", func() Input { return sized() }, []check{action(ActNone), noOperation}},
		{"a follower and the leader fragmented: the follower first", func() Input { return sized(fragmented, compact, fragmented) },
			[]check{action(ActBegin), opRecorded(OpDefrag, ActDefragment), defragOf("main-2"), reason("380.0 MiB of its 400.0 MiB database file are free pages (95%); 2 member(s)")}},
		{"every member fragmented: followers in name order", func() Input { return sized(fragmented, fragmented, fragmented) },
			[]check{action(ActBegin), defragOf("main-1")}},
		{"only the leader fragmented: it goes, leadership first", func() Input { return sized(fragmented) },
			[]check{action(ActBegin), defragOf("main-0"), reason("leadership moves away first")}},
		{"enough bytes but under 45%: not fragmented", func() Input { return sized(compact, [2]int64{1000, 600}) }, []check{action(ActNone), noOperation}},
		{"45% but under 100 MiB: not fragmented", func() Input { return sized(compact, [2]int64{150, 60}) }, []check{action(ActNone), noOperation}},
		{"exactly at both thresholds: fragmented", func() Input { return sized(compact, [2]int64{222, 122}) },
			[]check{action(ActBegin), defragOf("main-1")}},
		{"custom thresholds: 10% and 1 MiB", func() Input {
			in := sized(compact, [2]int64{30, 25})
			in.Maintenance.MinFragmentedPercent, in.Maintenance.MinReclaimable = 10, mib
			return in
		}, []check{action(ActBegin), defragOf("main-1")}},
		{"sizes unknown: not fragmented", func() Input { return sized([2]int64{400, 0}, [2]int64{0, 0}) }, []check{action(ActNone)}},
		{"automatic off: nothing", func() Input {
			in := sized(fragmented, fragmented, fragmented)
			in.Maintenance.AutoDefrag = false
			return in
		}, []check{action(ActNone), noOperation}},
		{"a member not ready: no defragmentation begins", func() Input {
			in := sized(compact, fragmented)
			in.Members[2].Ready = false
			return in
		}, []check{action(ActWait), noOperation, reason("defragmentation of main-1 waits until every member is a ready voter"), reason("main-2 is not a ready voter")}},
		{"an etcd member unhealthy: no defragmentation begins", func() Input {
			in := sized(compact, fragmented)
			in.Etcd.Members[2].Healthy = false
			return in
		}, []check{action(ActWait), noOperation, reason("is not a healthy voter")}},
		{"a learner joining: no defragmentation begins", func() Input {
			in := sized(compact, fragmented)
			in.Etcd.Members = append(in.Etcd.Members, ListEntry{ID: 9, PeerURLs: []string{url("main-3")}, IsLearner: true})
			return in
		}, []check{action(ActWait), noOperation}},
		{"a CORRUPT alarm: no defragmentation", func() Input {
			in := sized(compact, fragmented)
			in.Etcd.Alarms = []Alarm{{MemberID: 3, Type: AlarmCorrupt}}
			return in
		}, []check{action(ActWait), noOperation, reason("CORRUPT alarm raised (main-2)")}},
		{"a spec change goes first: the roll begins", func() Input {
			in := sized(compact, fragmented)
			in.Members[2].Object.Outdated = true
			return in
		}, []check{action(ActBegin), rollOf("main-2")}},
		{"membership goes first: a scale-up begins", func() Input {
			in := sized(compact, fragmented)
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActBegin), opRecorded(OpAdd, ActCreateObjects)}},
	})
}

// One Defrag in flight: leadership away first, then the call, then done
// once the member answers with its file compact. Nothing else begins
// meanwhile.
func TestDefragContinues(t *testing.T) {
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"a follower: defragment it", func() Input { return defragging(sized(compact, fragmented), "main-1", ActDefragment) },
			[]check{action(ActDefragment), opRecorded(OpDefrag, ActDefragment), actsOn("main-1", 2), reason("defragmenting main-1 (database file 400.0 MiB, 20.0 MiB in use)")}},
		{"the leader: leadership to the lowest other healthy voter first", func() Input { return defragging(sized(fragmented), "main-0", ActDefragment) },
			[]check{action(ActMoveLeader), opRecorded(OpDefrag, ActMoveLeader), actsOn("main-0", 1), func(t *testing.T, d Decision) {
				if d.TransfereeID != 2 {
					t.Errorf("transferee %x, want 2", d.TransfereeID)
				}
			}}},
		{"the leader, MoveLeader for a minute without it moving: defragmented as the leader", func() Input {
			in := defragging(sized(fragmented), "main-0", ActMoveLeader)
			in.Operation.StepStartedAt = t0.Add(-leaderHandOffLimit)
			return in
		}, []check{action(ActDefragment), opRecorded(OpDefrag, ActDefragment), actsOn("main-0", 1), reason("leadership did not move away from main-0 [1] in 1m0s"), reason("defragmenting it as the leader")}},
		{"the leader, MoveLeader for less than a minute: MoveLeader again", func() Input {
			in := defragging(sized(fragmented), "main-0", ActMoveLeader)
			in.Operation.StepStartedAt = t0.Add(-leaderHandOffLimit + time.Second)
			return in
		}, []check{action(ActMoveLeader), actsOn("main-0", 1)}},
		{"the former leader, now a follower: defragment it", func() Input {
			in := defragging(sized(fragmented), "main-0", ActMoveLeader)
			in.Etcd.LeaderID = 2
			return in
		}, []check{action(ActDefragment), actsOn("main-0", 1)}},
		{"the only member: defragmented where it is (no one to hand leadership to)", func() Input {
			in := defragging(sized(fragmented), "main-0", ActDefragment)
			in.Etcd.Members, in.Members, in.Replicas = in.Etcd.Members[:1], in.Members[:1], 1
			return in
		}, []check{action(ActDefragment), actsOn("main-0", 1)}},
		{"the member does not answer (being defragmented): wait, the operation stays", func() Input {
			in := defragging(sized(compact, fragmented), "main-1", ActDefragment)
			in.Etcd.Members[1].Healthy, in.Members[1].Ready, in.Members[1].ReadyChangedAt = false, false, t0.Add(-5*time.Second)
			return in
		}, []check{action(ActWait), opRecorded(OpDefrag, ActDefragment), reason("waiting for main-1 to answer")}},
		{"the member down beyond its grace: the defragmentation gives way", func() Input {
			in := defragging(sized(compact, fragmented), "main-1", ActDefragment)
			in.Etcd.Members[1].Healthy, in.Members[1].Ready, in.Members[1].ReadyChangedAt = false, false, t0.Add(-10*time.Minute)
			return in
		}, []check{action(ActFinish), reason("gives way to its replacement")}},
		{"the member answers with its file compact: done", func() Input { return defragging(sized(compact, [2]int64{21, 20}), "main-1", ActDefragment) },
			[]check{action(ActFinish), actsOn("main-1", 2), reason("main-1 defragmented: database file 21.0 MiB, 20.0 MiB in use")}},
		{"etcd does not answer: wait", func() Input {
			in := defragging(sized(compact, fragmented), "main-1", ActDefragment)
			in.Etcd = Etcd{Error: "context deadline exceeded"}
			return in
		}, []check{action(ActWait), opRecorded(OpDefrag, ActDefragment)}},
		{"the member removed meanwhile: dropped", func() Input {
			in := defragging(sized(compact, fragmented), "main-1", ActDefragment)
			in.Etcd.Members = append(in.Etcd.Members[:1], in.Etcd.Members[2])
			return in
		}, []check{action(ActFinish), reason("no longer a voter")}},
		{"a defragmentation in flight holds a scale-up back", func() Input {
			in := defragging(sized(compact, fragmented), "main-1", ActDefragment)
			in.Replicas = 5
			in.Placement.Steps = scaleUpSteps()
			return in
		}, []check{action(ActDefragment), opRecorded(OpDefrag, ActDefragment)}},
	})
}

func noSpace(in Input) Input {
	in.Etcd.Alarms = []Alarm{{MemberID: 2, Type: AlarmNoSpace}}
	return in
}

func noSpaceRecovering(in Input, step Action, member string) Input {
	in.Operation = &Operation{Type: OpDefrag, Reason: ReasonNoSpace, Member: member, Step: step, StartedAt: t0}
	return noSpace(in)
}

// A NOSPACE alarm: compaction, every member defragmented once in name
// order (leadership moved away from the leader when its turn comes), the
// alarm disarmed once every file is under 90% of its
// quota; tried again 10 minutes after a recovery that could not disarm.
func TestNoSpaceRecovery(t *testing.T) {
	full := [2]int64{64, 63} // at a 64 MiB quota
	freed := [2]int64{64, 8} // compaction freed most of it
	small := [2]int64{9, 9}  // defragmented
	quota := func(in Input) Input {
		for i := range in.Etcd.Members {
			in.Etcd.Members[i].DBSizeQuota = 64 * mib
		}
		return in
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"NOSPACE raised: the recovery begins, compaction first", func() Input { return noSpace(quota(sized(full, full, full))) },
			[]check{action(ActBegin), opRecorded(OpDefrag, ActCompact), reason("NOSPACE alarm on main-1: compacting no further than the configured retention, defragmenting every member")}},
		{"NOSPACE raised with consent: compaction to the current revision said", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Maintenance.NoSpaceCompactToCurrent = true
			return in
		}, []check{action(ActBegin), opRecorded(OpDefrag, ActCompact), reason("NOSPACE alarm on main-1: compacting to the current revision (consented), defragmenting every member")}},
		{"NOSPACE goes before a rollout", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Members[1].Object.Outdated = true
			return in
		}, []check{action(ActBegin), opRecorded(OpDefrag, ActCompact)}},
		{"NOSPACE with automatic defragmentation off: recovered all the same", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Maintenance.AutoDefrag = false
			return in
		}, []check{action(ActBegin), opRecorded(OpDefrag, ActCompact)}},
		{"NOSPACE while a member is not ready: wait", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Members[2].Ready = false
			return in
		}, []check{action(ActWait), noOperation, reason("waits until every member is a ready voter")}},
		{"alarms not read: no recovery begins on a partial view", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Etcd.AlarmsKnown = false
			return in
		}, []check{action(ActNone)}},
		{"compaction pending: compact and defragment the first member by name (leadership away first)", func() Input { return noSpaceRecovering(quota(sized(full, full, full)), ActCompact, "") },
			[]check{action(ActMoveLeader), opRecorded(OpDefrag, ActMoveLeader), actsOn("main-0", 1), operationNames("main-0")}},
		{"leadership moved: compact and defragment it", func() Input {
			in := noSpaceRecovering(quota(sized(full, full, full)), ActMoveLeader, "main-0")
			in.Etcd.LeaderID = 2
			return in
		}, []check{action(ActDefragment), opRecorded(OpDefrag, ActDefragment), actsOn("main-0", 1), reason("compacting no further than the configured retention and defragmenting main-0")}},
		{"main-0 done: the next by name, though its in-use size shows nothing freed yet", func() Input {
			return noSpaceRecovering(quota(sized(small, full, full)), ActDefragment, "main-0")
		}, []check{action(ActDefragment), actsOn("main-1", 2), operationNames("main-1")}},
		{"main-1's defragmentation did not take (free pages left): again", func() Input {
			return noSpaceRecovering(quota(sized(small, freed, full)), ActDefragment, "main-1")
		}, []check{action(ActDefragment), actsOn("main-1", 2)}},
		{"a member not answering (being defragmented): wait", func() Input {
			in := noSpaceRecovering(quota(sized(small, small, freed)), ActDefragment, "main-2")
			in.Etcd.Members[2].Healthy, in.Members[2].Ready, in.Members[2].ReadyChangedAt = false, false, t0.Add(-3*time.Second)
			return in
		}, []check{action(ActWait), opRecorded(OpDefrag, ActDefragment), reason("waiting for main-2")}},
		{"the last one done, every file under 90% of its quota: disarm", func() Input { return noSpaceRecovering(quota(sized(small, small, small)), ActDefragment, "main-2") },
			[]check{action(ActDisarm), opRecorded(OpDefrag, ActDisarm)}},
		{"disarm not taken yet: again", func() Input { return noSpaceRecovering(quota(sized(small, small, small)), ActDisarm, "") },
			[]check{action(ActDisarm)}},
		{"the data in use is above the quota: end without disarming", func() Input { return noSpaceRecovering(quota(sized(full, full, full)), ActDefragment, "main-2") },
			[]check{action(ActFinish), reason("too little room to disarm NOSPACE"), reason("main-1: 64.0 MiB file, 63.0 MiB in use, quota 64.0 MiB"),
				reason("set spec.defragmentation.noSpaceCompaction: CurrentRevision")}},
		{"... with consent given: the remedy is keys or quota", func() Input {
			in := noSpaceRecovering(quota(sized(full, full, full)), ActDefragment, "main-2")
			in.Maintenance.NoSpaceCompactToCurrent = true
			return in
		}, []check{action(ActFinish), reason("compacting to the current revision (consented) and defragmentation left too little room"), reason("; delete keys or raise spec.etcd.quotaBackendBytes")}},
		{"the alarm is gone: done", func() Input {
			in := noSpaceRecovering(quota(sized(small, small, small)), ActDisarm, "")
			in.Etcd.Alarms = nil
			return in
		}, []check{action(ActFinish), reason("disarmed")}},
		{"a recovery could not disarm 5 minutes ago: not yet again", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Maintenance.NoSpaceLastRecovery = t0.Add(-5 * time.Minute)
			return in
		}, []check{action(ActNone), noOperation}},
		{"... and a rollout (a raised quota) goes on meanwhile", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Maintenance.NoSpaceLastRecovery = t0.Add(-5 * time.Minute)
			in.Members[1].Object.Outdated = true
			return in
		}, []check{action(ActBegin), rollOf("main-1")}},
		{"11 minutes later: again", func() Input {
			in := noSpace(quota(sized(full, full, full)))
			in.Maintenance.NoSpaceLastRecovery = t0.Add(-11 * time.Minute)
			return in
		}, []check{action(ActBegin), opRecorded(OpDefrag, ActCompact)}},
	})
}

func operationNames(member string) check {
	return func(t *testing.T, d Decision) {
		t.Helper()
		if d.Operation == nil || d.Operation.Member != member {
			t.Errorf("operation = %+v, want it to name %s", d.Operation, member)
		}
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 100 * mib: "100.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// A scheduled run: every member with free pages worth giving back (1 MiB
// and 5%), whatever the thresholds, one at a time, the leader last; the
// thresholds' own defragmentation goes first.
func TestDefragScheduled(t *testing.T) {
	some := [2]int64{60, 40} // 20 MiB free: under the thresholds, worth it on schedule
	scheduled := func(sizes ...[2]int64) Input {
		in := sized(sizes...)
		in.Maintenance.ScheduledDue = true
		return in
	}
	run(t, []struct {
		name   string
		input  func() Input
		checks []check
	}{
		{"not due: members under the thresholds are left alone", func() Input { return sized(some, some, some) }, []check{action(ActNone)}},
		{"due: a follower first", func() Input { return scheduled(some, some, some) },
			[]check{action(ActBegin), opRecorded(OpDefrag, ActDefragment), reason("scheduled run: defragmenting main-1"), func(t *testing.T, d Decision) {
				if d.Operation.Reason != ReasonScheduled || d.Operation.Member != "main-1" {
					t.Errorf("operation %+v", d.Operation)
				}
			}}},
		{"due, with automatic defragmentation off: all the same", func() Input {
			in := scheduled(some, compact, some)
			in.Maintenance.AutoDefrag = false
			return in
		}, []check{action(ActBegin), operationNames("main-2")}},
		{"due, only the leader left with free pages", func() Input { return scheduled(some, compact, compact) },
			[]check{action(ActBegin), operationNames("main-0"), reason("leadership moves away first")}},
		{"due, nothing worth giving back: nothing (the run is done)", func() Input { return scheduled(compact, compact, [2]int64{30, 29}) },
			[]check{action(ActNone)}},
		{"due, a member fragmented beyond the thresholds: that one first, as Fragmented", func() Input { return scheduled(some, some, fragmented) },
			[]check{action(ActBegin), defragOf("main-2")}},
		{"a scheduled defragmentation done once the file has nothing worth giving back", func() Input {
			in := scheduled(some, [2]int64{41, 40}, some)
			in.Operation = &Operation{Type: OpDefrag, Member: "main-1", Reason: ReasonScheduled, Step: ActDefragment, StartedAt: t0}
			return in
		}, []check{action(ActFinish)}},
		{"a scheduled defragmentation at its step", func() Input {
			in := scheduled(some, some, some)
			in.Operation = &Operation{Type: OpDefrag, Member: "main-1", Reason: ReasonScheduled, Step: ActDefragment, StartedAt: t0}
			return in
		}, []check{action(ActDefragment), actsOn("main-1", 2)}},
	})
}
