package multicluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/testenv"
	"github.com/etcdfed/etcdfed/hub/registry"
)

// legacyCommit is the last commit whose hub and spoke name every object of
// a member after the member alone ("main-0"), the scheme rings formed
// before names carried the ring's namespace (ETCDFED_LEGACY_COMMIT
// overrides it).
const legacyCommit = "1b133dd"

// legacyBinDir is a bin directory for the local environment whose hub and
// spoke are switches: a script that runs the build of legacyCommit
// (hub.old, spoke.old) until the file use-new-<name> exists beside it, and
// this checkout's build (hub.new, spoke.new) after. The old binaries do
// not know every flag the local environment passes today (--allow-*,
// --allowed-pod-annotations, --metrics-secure, and whatever comes next):
// the script keeps only the flags the old binary's own -help lists, and
// says on stderr (the component's log) which it dropped.
func legacyBinDir(t *testing.T) string {
	t.Helper()
	commit := legacyCommit
	if c := os.Getenv("ETCDFED_LEGACY_COMMIT"); c != "" {
		commit = c
	}
	dir := t.TempDir()
	if err := testenv.FreshBinDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"hub", "spoke"} {
		if err := os.Rename(filepath.Join(dir, b), filepath.Join(dir, b+".new")); err != nil {
			t.Fatal(err)
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	start := time.Now()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %s archive %s | tar -x -C %s", shq(root), shq(commit), shq(src)))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	for _, b := range []string{"hub", "spoke", "etcdfed"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b+".old"), "./cmd/"+b)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s of %s: %v\n%s", b, commit, err, out)
		}
	}
	t.Logf("built hub, spoke and etcdfed of %s in %.1fs", commit, time.Since(start).Seconds())
	if err := legacyCLISwitch(dir); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"hub", "spoke"} {
		known, err := definedFlags(filepath.Join(dir, b+".old"))
		if err != nil {
			t.Fatalf("flags of the %s of %s: %v", b, commit, err)
		}
		script := fmt.Sprintf(`#!/bin/sh
d=$(dirname "$0")
if [ -e "$d/use-new-%[1]s" ]; then exec "$d/%[1]s.new" "$@"; fi
for a do
	shift
	case "$a" in
	%[2]s) set -- "$@" "$a" ;;
	-*) echo "legacy switch: dropped $a (the old %[1]s does not define it)" >&2 ;;
	*) set -- "$@" "$a" ;;
	esac
done
exec "$d/%[1]s.old" "$@"
`, b, shellFlagPattern(known))
		if err := os.WriteFile(filepath.Join(dir, b), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// legacyCLISwitch makes dir/etcdfed run the old CLI for the commands only
// it has: the old spoke's member pods run their init containers as
// `etcdfed wait-dns` and `etcdfed prepare-data` (since moved to
// etcdfed-init), and the local environment's nodes run every image's
// command from this bin directory. In a real cluster those pods keep the
// old image; here they would find this checkout's CLI, which no longer
// has those commands.
func legacyCLISwitch(dir string) error {
	cur := filepath.Join(dir, "etcdfed")
	oldCmds, err := cliCommands(filepath.Join(dir, "etcdfed.old"))
	if err != nil {
		return err
	}
	newCmds, err := cliCommands(cur)
	if err != nil {
		return err
	}
	var only []string
	for _, c := range oldCmds {
		if !slices.Contains(newCmds, c) {
			only = append(only, c)
		}
	}
	if len(only) == 0 {
		return os.Remove(filepath.Join(dir, "etcdfed.old"))
	}
	if err := os.Rename(cur, cur+".new"); err != nil {
		return err
	}
	script := fmt.Sprintf(`#!/bin/sh
d=$(dirname "$0")
case "$1" in %s) exec "$d/etcdfed.old" "$@" ;; esac
exec "$d/etcdfed.new" "$@"
`, strings.Join(only, " | "))
	return os.WriteFile(cur, []byte(script), 0o755)
}

// cliCommands are the commands a cobra CLI's --help lists.
func cliCommands(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --help: %w\n%s", bin, err, out)
	}
	var cmds []string
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Available Commands:"):
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			cmds = append(cmds, strings.Fields(line)[0])
		}
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("%s --help listed no commands:\n%s", bin, out)
	}
	return cmds, nil
}

// definedFlags are the flag names a binary's -help lists: the standard
// flag package's "  -name value" lines and pflag's "  -n, --name type".
func definedFlags(bin string) ([]string, error) {
	out, _ := exec.Command(bin, "-help").CombinedOutput() // -help exits 0 or 2; the listing is what counts
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "-") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if !strings.HasPrefix(f, "-") {
				break
			}
			names = append(names, strings.TrimRight(strings.TrimLeft(f, "-"), ","))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s -help listed no flags:\n%s", bin, out)
	}
	return names, nil
}

// shellFlagPattern is a sh case pattern matching each of names as -name
// or --name, alone or with =value.
func shellFlagPattern(names []string) string {
	var alts []string
	for _, n := range names {
		for _, dash := range []string{"-", "--"} {
			alts = append(alts, dash+n, dash+n+"=*")
		}
	}
	return strings.Join(alts, " | ")
}

// inlineRegistrationTokens writes each registration Secret's token into
// its kubeconfig too, as registrations were before `etcdfed cluster join`
// kept the token beside it (registry.TokenKey): the hub of legacyCommit
// reads the kubeconfig alone and would reach the member clusters with no
// credentials. This checkout's hub prefers the token key, so the swap to
// it changes nothing.
func inlineRegistrationTokens(ctx context.Context, t *testing.T, hub *Cluster) {
	t.Helper()
	var secrets corev1.SecretList
	if err := hub.Client.List(ctx, &secrets, client.InNamespace(install.Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range secrets.Items {
		sec := &secrets.Items[i]
		tok := sec.Data[registry.TokenKey]
		if len(tok) == 0 || len(sec.Data[registry.KubeconfigSecretKey]) == 0 {
			continue
		}
		kc, err := clientcmd.Load(sec.Data[registry.KubeconfigSecretKey])
		if err != nil {
			t.Fatalf("kubeconfig of %s: %v", sec.Name, err)
		}
		for _, ai := range kc.AuthInfos {
			ai.Token = string(tok)
		}
		data, err := clientcmd.Write(*kc)
		if err != nil {
			t.Fatal(err)
		}
		sec.Data[registry.KubeconfigSecretKey] = data
		if err := hub.Client.Update(ctx, sec); err != nil {
			t.Fatalf("registration %s: %v", sec.Name, err)
		}
	}
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestScenarioLegacyNamesAdopted: a ring formed by the hub and spokes of
// legacyCommit (every object named after its member alone: EtcdMember
// main-0, pod main-0, PVC main-0-data-N, Secret main-0-tls, EtcdDNSZone
// main) keeps running, under a recorded workload, when the spokes and
// then the hub are replaced by this checkout's: no pod is replaced or
// restarted by the upgrade itself, no etcd member ID changes, the objects
// keep their names. The new hub then brings the ring what later releases
// require of every ring (a peer port for peers only): rolls in place, one
// member at a time, each naming the flags it brings, and nothing else.
// Then the new hub takes care of it (a scale-up adds members under the
// new names beside the old ones), and a ring of the same name in another
// namespace forms beside it.
func TestScenarioLegacyNamesAdopted(t *testing.T) {
	if os.Getenv("ETCDFED_SCENARIOS") != "1" {
		t.Skip("a long scenario (builds the hub and spoke of an earlier commit; several minutes): run it with make scenarios (ETCDFED_SCENARIOS=1)")
	}
	testenv.SkipIfShort(t, "the local environment with the hub and spokes")
	bin := legacyBinDir(t)
	state, err := os.MkdirTemp("", "multicluster-legacy-")
	if err != nil {
		t.Fatal(err)
	}
	verbose := os.Getenv("MULTICLUSTER_LOG") != ""
	env, err := startLocalEnv(context.Background(), localenv.Config{
		StateDir: state, Clusters: 3, ZonesPerCluster: 1, BinDir: bin,
		BackoffBase: time.Second, BackoffMax: 5 * time.Second,
		Log: funcr.New(func(prefix, args string) {
			if verbose {
				fmt.Fprintln(os.Stderr, prefix, args)
			}
		}, funcr.Options{}),
	})
	if err != nil {
		t.Fatalf("local environment: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop the environment: %v", err)
		}
		if t.Failed() {
			t.Logf("kept for inspection: %s", state)
			return
		}
		_ = os.RemoveAll(state)
	})
	topo, err := LocalTopology(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hub := topo.Hub
	inlineRegistrationTokens(ctx, t, hub)

	// 1. Formed the old way.
	legacy := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "legacy", Name: "main", Domain: "main.legacy.test", Replicas: 3, WantZones: "1/1/1"})
	ec, err := legacy.Get(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	uid := string(ec.UID)
	oldNames, err := RingObjectNames(ctx, topo, uid)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range oldNames {
		if member := n[strings.Index(n, "/")+1:]; !strings.HasPrefix(member, "main-") || strings.Count(member, "-") != 1 {
			t.Fatalf("the old hub named an EtcdMember %s: not the legacy scheme (is %s before the naming change?)", n, legacyCommit)
		}
	}
	podsBefore, err := RingPods(ctx, topo, uid)
	if err != nil {
		t.Fatal(err)
	}
	idsBefore, err := memberIDs(ctx, legacy.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("formed by %s: EtcdMembers %v", legacyCommit, oldNames)
	w := startScenarioWorkload(ctx, t, legacy, "legacy")

	// 2. The spokes, then the hub, replaced by this checkout's.
	swap := func(names ...string) {
		t.Helper()
		for _, n := range names {
			if err := env.StopComponent(n, 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range names {
			b := "spoke"
			if n == "hub" {
				b = "hub"
			}
			if err := os.WriteFile(filepath.Join(bin, "use-new-"+b), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := env.StartComponent(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	var spokes []string
	for _, c := range env.State().MemberClusters {
		spokes = append(spokes, "spoke-"+c.Name)
	}
	swap(spokes...)
	t.Log("spokes replaced by this checkout's")
	progress(ctx, t, w, 100, time.Minute)
	swap("hub")
	upgraded := time.Now()
	t.Log("hub replaced by this checkout's")
	// The new hub has taken over once it has passed the ring: it records
	// every pass's observation in status (observedGeneration of a changed
	// spec is the sure sign).
	if ec, err = legacy.Get(ctx, hub); err != nil {
		t.Fatal(err)
	}
	ec.Spec.DNS.TTLSeconds = ptrTo[int32](6) // a change that rolls nothing: records only
	if err := hub.Client.Update(ctx, ec); err != nil {
		t.Fatal(err)
	}
	if err := WaitForStatus(ctx, WaitForStatusInput{Hub: hub, Etcd: legacy, What: "the new hub passing the ring (observedGeneration)", Until: func(got *etcdfedv1.EtcdCluster) string {
		if got.Status.ObservedGeneration < got.Generation {
			return fmt.Sprintf("observed %d of %d", got.Status.ObservedGeneration, got.Generation)
		}
		return ""
	}}); err != nil {
		t.Fatal(err)
	}
	progress(ctx, t, w, 200, time.Minute)
	// The new hub moves the ring to a peer port for peers only (the peer
	// name in every certificate, then required: two rolls a member, the
	// leader last; hub/etcdcluster/peerport.go). That, and nothing else,
	// may restart a legacy member.
	if err := waitForPeerNameRequired(ctx, topo, hub, legacy, uid); err != nil {
		t.Fatal(err)
	}
	got, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: legacy.Namespace, Name: legacy.Name, Replicas: 3, Tolerant: true})
	if err != nil {
		t.Fatal(err)
	}
	podsAfter, err := RingPods(ctx, topo, uid)
	if err != nil {
		t.Fatal(err)
	}
	rolled := upgradeRolls(ctx, t, hub, legacy, upgraded)
	restartedOnlyByRolls(t, podsBefore, podsAfter, rolled)
	idsAfter, err := memberIDs(ctx, legacy.Client)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(idsBefore, idsAfter) {
		t.Errorf("etcd member IDs %v, now %v", idsBefore, idsAfter)
	}
	if names, err := RingObjectNames(ctx, topo, uid); err != nil || !slices.Equal(names, oldNames) {
		t.Errorf("EtcdMembers %v (%v), want the old names %v kept", names, err, oldNames)
	}
	t.Logf("after both upgrades: %d pods, restarted only by the peer-port rolls %v, member IDs unchanged, Available (%s)", len(podsAfter), rolled, got.Status.MemberSummary)

	// 3. The new hub grows the ring: new members get the new names.
	if err := SetReplicas(ctx, hub, legacy, 5); err != nil {
		t.Fatal(err)
	}
	grown, err := WaitForEtcdClusterReady(ctx, WaitForEtcdClusterInput{Hub: hub, Namespace: legacy.Namespace, Name: legacy.Name, Replicas: 5, Tolerant: true, Timeout: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	names, err := RingObjectNames(ctx, topo, uid)
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, n := range names {
		if !slices.Contains(oldNames, n) {
			added = append(added, n)
		}
	}
	for _, m := range grown.Status.Members {
		if slices.Contains(oldNames, m.Cluster+"/"+m.Name) {
			continue
		}
		if want := m.Cluster + "/" + legacy.ObjectName(m.Name); !slices.Contains(added, want) {
			t.Errorf("%s added as %v, want %s", m.Name, added, want)
		}
	}
	t.Logf("scaled to 5: new EtcdMembers %v beside the old %v", added, oldNames)
	samePods(t, "the legacy members while the ring grew", podsAfter, mustPods(ctx, t, topo, uid))

	// 4. A ring of the same name in another namespace forms beside it.
	twin := EtcdClusterSpec(ctx, EtcdClusterSpecInput{T: t, Topology: topo, Namespace: "legacy-twin", Name: "main", Domain: "main.legacy-twin.test", Replicas: 3, WantZones: "1/1/1"})
	w.Stop()
	gap, gapAt := w.MaxWriteGapAt()
	t.Logf("longest gap between acknowledged writes %s, began %.1fs after the hub's upgrade; the upgrade's rolls began at %v s after it",
		gap.Round(time.Millisecond), gapAt.Sub(upgraded).Seconds(), rollEventTimes(ctx, t, hub, legacy, upgraded))
	checkWorkload(ctx, t, w)
	DeleteEtcdClusterSpec(ctx, t, topo, twin)
	DeleteEtcdClusterSpec(ctx, t, topo, legacy)
}

func mustPods(ctx context.Context, t *testing.T, topo *Topology, uid string) map[string]podState {
	t.Helper()
	p, err := RingPods(ctx, topo, uid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// upgradeHardening are the member fields a hub upgrade may roll a legacy
// ring for: the peer port for peers only (spec.tls.peerName, then
// spec.tls.requirePeerName) and the revocation lists etcd reads. Anything
// else in a roll's reason is a change the upgrade should not have made.
var upgradeHardening = []string{"spec.tls.peerName", "spec.tls.requirePeerName", "spec.tls.revocationList", "spec.tls.peerRevocationList"}

// rollNote reads a MemberRoll event's note, "rolling main-1 to the new
// spec (2 of 3 members to go): spec.tls.peerName unset -> x, ...; it
// leads, ...": the member and the fields its roll changes.
func rollNote(note string) (member string, fields []string, ok bool) {
	rest, found := strings.CutPrefix(note, "rolling ")
	if !found {
		return "", nil, false
	}
	member, rest, _ = strings.Cut(rest, " ")
	_, changes, found := strings.Cut(rest, "): ")
	if !found {
		return member, nil, true // no field named: fails the allowlist below
	}
	changes, _, _ = strings.Cut(changes, "; ")
	for _, c := range strings.Split(changes, ", ") {
		f, _, _ := strings.Cut(c, " ")
		fields = append(fields, f)
	}
	return member, fields, true
}

// upgradeRolls checks the hub's MemberRoll events on m since the upgrade:
// each names only upgradeHardening fields, and no member rolls more than
// twice (the peer name, then its requirement). It returns the rolls per
// member.
func upgradeRolls(ctx context.Context, t *testing.T, hub *Cluster, m *ManagedEtcd, since time.Time) map[string]int {
	t.Helper()
	evs, err := ListHubEvents(ctx, hub, m, EventQuery{Reasons: []string{etcdfedv1.EventMemberRoll}, RecordedSince: since})
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string][]string{}
	for _, e := range evs {
		member, fields, ok := rollNote(e.Note)
		if !ok || len(fields) == 0 {
			t.Errorf("the hub upgrade rolled a member for no named hardening field: %q", e.Note)
			continue
		}
		for _, f := range fields {
			if !slices.Contains(upgradeHardening, f) {
				t.Errorf("the hub upgrade rolled %s for %s, which is not one of %v: %q", member, f, upgradeHardening, e.Note)
			}
		}
		if !slices.Contains(notes[member], e.Note) {
			notes[member] = append(notes[member], e.Note)
		}
	}
	rolls := map[string]int{}
	for member, ns := range notes {
		rolls[member] = len(ns)
		if len(ns) > 2 {
			t.Errorf("the hub upgrade rolled %s %d times, want at most 2 (the peer name, then its requirement): %q", member, len(ns), ns)
		}
	}
	return rolls
}

// rollEventTimes are the MemberRoll events on m since the hub's upgrade, as
// "member@seconds after it", oldest first.
func rollEventTimes(ctx context.Context, t *testing.T, hub *Cluster, m *ManagedEtcd, since time.Time) []string {
	t.Helper()
	evs, err := ListHubEvents(ctx, hub, m, EventQuery{Reasons: []string{etcdfedv1.EventMemberRoll}, RecordedSince: since})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		member, _, _ := rollNote(e.Note)
		out = append(out, fmt.Sprintf("%s@%.1f", member, e.First.Sub(since).Seconds()))
	}
	return out
}

// restartedOnlyByRolls fails t when a pod of before is gone, or restarted
// in after without a roll of its member.
func restartedOnlyByRolls(t *testing.T, before, after map[string]podState, rolled map[string]int) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		member := name[strings.LastIndex(name, "/")+1:]
		switch {
		case !ok:
			t.Errorf("pod %s is gone (had %s)", name, b)
		case a != b && rolled[member] == 0:
			t.Errorf("pod %s restarted without a roll of %s: %s, now %s", name, member, b, a)
		}
	}
	if len(after) != len(before) {
		t.Errorf("pods %v after the upgrades, want the same as before %v", slices.Sorted(maps.Keys(after)), slices.Sorted(maps.Keys(before)))
	}
}

// waitForPeerNameRequired waits until every EtcdMember of the ring (by
// UID) carries the peer name and requires it, each run by its spoke
// (observedGeneration), with no operation in flight on the EtcdCluster.
func waitForPeerNameRequired(ctx context.Context, topo *Topology, hub *Cluster, m *ManagedEtcd, uid string) error {
	return poll(ctx, 6*time.Minute, "every member of "+m.Name+" requiring the peer name", func(ctx context.Context) (string, error) {
		for _, c := range topo.Members {
			var list etcdfedv1.EtcdMemberList
			if err := c.Client.List(ctx, &list, client.InNamespace(etcdfedv1.DefaultRingNamespace), client.MatchingLabels{etcdfedv1.LabelClusterUID: uid}); err != nil {
				return "", err
			}
			for _, em := range list.Items {
				switch {
				case em.Spec.TLS.PeerName == "" || !em.Spec.TLS.RequirePeerName:
					return fmt.Sprintf("%s/%s: peerName %q, requirePeerName %v", c.Name, em.Name, em.Spec.TLS.PeerName, em.Spec.TLS.RequirePeerName), nil
				case em.Status.ObservedGeneration != em.Generation:
					return fmt.Sprintf("%s/%s: spoke observed generation %d of %d", c.Name, em.Name, em.Status.ObservedGeneration, em.Generation), nil
				}
			}
		}
		ec, err := m.Get(ctx, hub)
		if err != nil {
			return "", err
		}
		if op := ec.Status.Operation; op != nil {
			return fmt.Sprintf("operation %s on %s in flight", op.Type, op.Member), nil
		}
		return "", nil
	})
}

func TestRollNote(t *testing.T) {
	for _, c := range []struct {
		note, member string
		fields       []string
		ok           bool
	}{
		{"rolling main-1 to the new spec (3 of 3 members to go): spec.tls.peerName unset -> etcdfed-peer.main.legacy.test", "main-1", []string{"spec.tls.peerName"}, true},
		{"rolling main-0 to the new spec (1 of 3 members to go): spec.tls.peerName unset -> p, spec.tls.revocationList unset -> true; it leads, so leadership moves away first", "main-0", []string{"spec.tls.peerName", "spec.tls.revocationList"}, true},
		{"rolling main-2 to the new spec (1 of 3 members to go)", "main-2", nil, true},
		{"restarting main-2 on the ring's changed CA trust (1 of 3 members to go)", "", nil, false},
	} {
		member, fields, ok := rollNote(c.note)
		if member != c.member || !slices.Equal(fields, c.fields) || ok != c.ok {
			t.Errorf("rollNote(%q) = %q, %q, %v; want %q, %q, %v", c.note, member, fields, ok, c.member, c.fields, c.ok)
		}
	}
}
