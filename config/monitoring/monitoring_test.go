package monitoring_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/etcdfed/etcdfed/config/monitoring"
	"github.com/etcdfed/etcdfed/internal/repo"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`etcdfed_cluster_condition{type="Available"} == 0`, []string{"etcdfed_cluster_condition"}},
		{`max by (namespace, name, member_cluster) (etcdfed_member_info) and on(member_cluster) (max by (member_cluster) (time() - etcdfed_hub_spoke_last_seen_timestamp_seconds) > 60)`,
			[]string{"etcdfed_hub_spoke_last_seen_timestamp_seconds", "etcdfed_member_info"}},
		{`histogram_quantile(0.99, sum by (member_cluster, le) (rate(x_bucket[5m])))`, []string{"x_bucket"}},
		{`a{l="b or c"} > on(namespace, name) group_left() floor(b / 2) + 1 or absent(c{name="x"})`, []string{"a", "b", "c"}},
		{`(time() - m{n=~"$namespace", name="$ring"}) and on(namespace, name, member) (r == 0)`, []string{"m", "r"}},
	} {
		if got := monitoring.MetricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestPrometheusRuleIsGenerated(t *testing.T) {
	want, err := monitoring.PrometheusRule()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../components/prometheus-operator/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("config/components/prometheus-operator/prometheusrule.yaml is stale: run go generate ./config/monitoring (make generate)")
	}
}

// declared are the metric names the hub's code registers (their Name:
// fields, histograms with their series suffixes), and the
// controller-runtime metrics the rules and dashboard use.
func declared(t *testing.T) map[string]bool {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`Name:\s*"(etcdfed_[a-z_]+)"`)
	out := map[string]bool{"leader_election_master_status": true}
	err = filepath.WalkDir(filepath.Join(root, "hub"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(data, -1) {
			n := string(m[1])
			out[n] = true
			if bytes.Contains(data, []byte("NewHistogramVec")) {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					out[n+s] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEveryNameIsTheHubs: the rules, their tests' input series and the
// dashboard use only metrics the hub's code declares. (A test against a
// live hub, in test/multicluster, finds each of the rules' metrics in its
// /metrics.)
func TestEveryNameIsTheHubs(t *testing.T) {
	hub := declared(t)
	rules, err := monitoring.RuleMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for n, alerts := range rules {
		if !hub[n] {
			t.Errorf("rules %v use %s, which the hub does not export", alerts, n)
		}
	}
	series, err := monitoring.TestSeries()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range series {
		if !hub[s.Name] {
			t.Errorf("rule test input series %s: the hub exports no such metric", s.Name)
		}
	}
	for _, expr := range dashboardExprs(t) {
		for _, n := range monitoring.MetricNames(expr) {
			if !hub[n] {
				t.Errorf("dashboard query %q uses %s, which the hub does not export", expr, n)
			}
		}
	}
}

type panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Repeat  string  `json:"repeat"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

func parseDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(monitoring.Dashboard))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	return d
}

func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var out []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out = append(out, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(parseDashboard(t).Panels)
	return out
}

// TestDashboardHasARowPerRing: valid JSON, a ring variable, a row repeated
// per ring whose panels select that ring, and queries everywhere.
func TestDashboardHasARowPerRing(t *testing.T) {
	d := parseDashboard(t)
	if !json.Valid(monitoring.Dashboard) || d.UID == "" {
		t.Fatal("grafana-dashboard.json is not a dashboard")
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "ring") || !slices.Contains(vars, "datasource") {
		t.Errorf("template variables %v, want ring and datasource", vars)
	}
	inRing, repeated := false, false
	for _, p := range d.Panels {
		if p.Type == "row" {
			inRing = p.Repeat == "ring"
			repeated = repeated || inRing
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if inRing && !strings.Contains(tg.Expr, `name="$ring"`) {
				t.Errorf("panel %q of the ring row: query %q does not select the ring", p.Title, tg.Expr)
			}
		}
	}
	if !repeated {
		t.Error("no row repeats per ring")
	}
}

// TestPromtoolTestRules runs the rules' unit tests with promtool, built
// pinned from the Go module proxy by hack/tools.sh promtool.
func TestPromtoolTestRules(t *testing.T) {
	bin, err := repo.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	promtool := filepath.Join(bin, "promtool")
	if _, err := os.Stat(promtool); err != nil {
		if testing.Short() {
			t.Skip("bin/promtool is not built (hack/tools.sh promtool; make test builds it)")
		}
		t.Fatalf("bin/promtool missing: run hack/tools.sh promtool (make test-alerts does)")
	}
	out, err := exec.Command(promtool, "check", "rules", "prometheus-rules.yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(promtool, "test", "rules", "prometheus-rules_test.yaml").CombinedOutput()
	t.Logf("promtool test rules:\n%s", out)
	if err != nil {
		t.Fatalf("promtool test rules: %v", err)
	}
}
