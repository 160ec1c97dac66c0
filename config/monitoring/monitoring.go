// Package monitoring holds etcdfed's shipped alerts and dashboard:
//
//   - prometheus-rules.yaml: Prometheus alerting rules for every ring, from
//     the hub's metrics alone;
//   - prometheus-rules_test.yaml: their unit tests (`promtool test rules`);
//   - grafana-dashboard.json: a Grafana dashboard, one row per ring;
//
// and, generated from the rules (go generate), the PrometheusRule of
// config/components/prometheus-operator. MetricNames reads the metric
// names a PromQL expression uses, for the tests that check every one is
// exported by the hub.
package monitoring

//go:generate go run ./cmd/prometheusrule ../components/prometheus-operator/prometheusrule.yaml

import (
	_ "embed"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Rules is prometheus-rules.yaml.
//
//go:embed prometheus-rules.yaml
var Rules []byte

// RuleTests is prometheus-rules_test.yaml.
//
//go:embed prometheus-rules_test.yaml
var RuleTests []byte

// Dashboard is grafana-dashboard.json.
//
//go:embed grafana-dashboard.json
var Dashboard []byte

// RuleFile is the part of a Prometheus rule file the tests read.
type RuleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert  string `json:"alert,omitempty"`
			Record string `json:"record,omitempty"`
			Expr   string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// ParseRules reads a rule file.
func ParseRules(data []byte) (*RuleFile, error) {
	f := &RuleFile{}
	if err := yaml.Unmarshal(data, f); err != nil {
		return nil, fmt.Errorf("rule file: %w", err)
	}
	return f, nil
}

// PrometheusRule wraps the rules into the Prometheus Operator's
// PrometheusRule (its spec is a rule file's groups).
func PrometheusRule() ([]byte, error) {
	var groups map[string]any
	if err := yaml.Unmarshal(Rules, &groups); err != nil {
		return nil, err
	}
	obj := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "etcdfed",
			"namespace": "etcdfed-system",
			"labels":    map[string]any{"app.kubernetes.io/name": "etcdfed-hub"},
		},
		"spec": groups,
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return append([]byte("# Generated from config/monitoring/prometheus-rules.yaml by go generate\n# ./config/monitoring (make generate). Do not edit.\n"), out...), nil
}

var (
	stringsRE  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	bracesRE   = regexp.MustCompile(`\{[^{}]*\}`)
	rangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	groupingRE = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	identRE    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	keywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
)

// MetricNames returns the metric names a PromQL expression selects,
// sorted: every identifier that is not a function, a keyword, a label
// (inside braces or a grouping clause) or a duration.
func MetricNames(expr string) []string {
	s := stringsRE.ReplaceAllString(expr, `""`)
	for {
		t := bracesRE.ReplaceAllString(s, " ")
		if t == s {
			break
		}
		s = t
	}
	s = rangeRE.ReplaceAllString(s, " ")
	s = groupingRE.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	for _, m := range identRE.FindAllStringSubmatch(s, -1) {
		name := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(m[0]), "("))
		if m[1] != "" || keywords[name] {
			continue // a function, or a keyword
		}
		seen[name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RuleMetrics maps each metric name the shipped rules use to the alerts
// that use it.
func RuleMetrics() (map[string][]string, error) {
	f, err := ParseRules(Rules)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			for _, n := range MetricNames(r.Expr) {
				out[n] = append(out[n], r.Alert)
			}
		}
	}
	return out, nil
}

// Series is one input series of the rules' promtool tests.
type Series struct {
	Name string
	// Labels are its label names (the scrape's job and instance aside).
	Labels []string
}

// TestSeries returns the input series of prometheus-rules_test.yaml.
func TestSeries() ([]Series, error) {
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(RuleTests, &tests); err != nil {
		return nil, fmt.Errorf("rule tests: %w", err)
	}
	var out []Series
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			name, rest, _ := strings.Cut(in.Series, "{")
			s := Series{Name: name}
			for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
				if k, _, ok := strings.Cut(kv, "="); ok && k != "job" && k != "instance" {
					s.Labels = append(s.Labels, strings.TrimSpace(k))
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}
