package multicluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Prometheus text read by tests: the hub's /metrics (reconciles, etcd
// clients) beside the apiservers' own counters.

type metricSample struct {
	labels map[string]string
	value  float64
}

type metricSet map[string][]metricSample

func (m metricSet) has(name string) bool { return len(m[name]) > 0 }

// sum adds the samples of name whose labels match the name/value pairs.
func (m metricSet) sum(name string, match ...string) float64 {
	total := 0.0
next:
	for _, s := range m[name] {
		for i := 0; i+1 < len(match); i += 2 {
			if s.labels[match[i]] != match[i+1] {
				continue next
			}
		}
		total += s.value
	}
	return total
}

func parseMetrics(text string) metricSet {
	out := metricSet{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest := line, map[string]string{}, ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			end := strings.LastIndexByte(line, '}')
			if end < i {
				continue
			}
			name, labels, rest = line[:i], parseLabels(line[i+1:end]), line[end+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], metricSample{labels: labels, value: v})
	}
	return out
}

func scrape(ctx context.Context, url string) (metricSet, error) {
	body, err := getMetrics(ctx, http.DefaultClient, url, "")
	if err != nil {
		return nil, err
	}
	return parseMetrics(body), nil
}

// getMetrics is the text url serves through client, with token as a
// bearer token when set; an answer other than 200 is an error that
// carries what was said.
func getMetrics(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}
