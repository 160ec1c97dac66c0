package nodeagent

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
)

func TestContainerRun(t *testing.T) {
	h := func(n int) string {
		return "--- 2026-01-02T03:04:05Z: start " + string(rune('0'+n)) + " (/bin/etcd --name a) ---\n"
	}
	tests := []struct {
		name     string
		log      string
		previous bool
		want     string
		ok       bool
	}{
		{"empty", "", false, "", true},
		{"no header: one run", "a\nb\n", false, "a\nb\n", true},
		{"no header, previous", "a\n", true, "", false},
		{"one run", h(0) + "a\nb\n", false, "a\nb\n", true},
		{"one run, previous", h(0) + "a\n", true, "", false},
		{"current of three", h(0) + "a\n" + h(1) + "b\n" + h(2) + "c\nd", false, "c\nd", true},
		{"previous of three", h(0) + "a\n" + h(1) + "b\nb2\n" + h(2) + "c\n", true, "b\nb2\n", true},
		{"just started", h(0) + "a\n" + h(1), false, "", true},
		{"a line like a header but not one", h(0) + "--- not a header ---\n", false, "--- not a header ---\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := containerRun([]byte(tt.log), tt.previous)
			if string(got) != tt.want || ok != tt.ok {
				t.Errorf("containerRun = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		log  string
		n    int64
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 10, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"", 5, ""},
		{"\n\n", 1, "\n"},
	}
	for _, tt := range tests {
		if got := tailLines([]byte(tt.log), tt.n); string(got) != tt.want {
			t.Errorf("tailLines(%q, %d) = %q, want %q", tt.log, tt.n, got, tt.want)
		}
	}
}

func TestParseLogQuery(t *testing.T) {
	tests := []struct {
		query   string
		wantErr string
		check   func(logQuery) bool
	}{
		{"", "", func(q logQuery) bool { return !q.follow && !q.previous && q.tailLines == nil && q.limitBytes == nil }},
		{"follow=true&previous=false&tailLines=20&limitBytes=1024", "", func(q logQuery) bool {
			return q.follow && !q.previous && *q.tailLines == 20 && *q.limitBytes == 1024
		}},
		{"previous=1", "", func(q logQuery) bool { return q.previous }},
		{"stream=All", "", func(logQuery) bool { return true }},
		{"tailLines=-1", "tailLines", nil},
		{"limitBytes=x", "limitBytes", nil},
		{"follow=maybe", "follow", nil},
		{"timestamps=true", "timestamps", nil},
		{"timestamps=false", "", func(logQuery) bool { return true }},
		{"sinceSeconds=10", "sinceSeconds", nil},
		{"sinceTime=2026-01-01T00:00:00Z", "sinceTime", nil},
		{"stream=Stderr", "stream", nil},
	}
	for _, tt := range tests {
		v, _ := url.ParseQuery(tt.query)
		q, err := parseLogQuery(v)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want one about %s", tt.query, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.query, err)
		case !tt.check(q):
			t.Errorf("%q: parsed %+v", tt.query, q)
		}
	}
}

func TestWriteBudget(t *testing.T) {
	var b bytes.Buffer
	budget := int64(5)
	if !writeBudget(&b, []byte("abc"), &budget) || budget != 2 {
		t.Fatalf("first write: budget %d", budget)
	}
	if writeBudget(&b, []byte("defg"), &budget) || b.String() != "abcde" || budget != 0 {
		t.Fatalf("second write: %q, budget %d", b.String(), budget)
	}
	unlimited := int64(-1)
	b.Reset()
	if !writeBudget(&b, []byte("xyz"), &unlimited) || b.String() != "xyz" || unlimited != -1 {
		t.Fatalf("unlimited: %q, %d", b.String(), unlimited)
	}
}

func TestHeaderIndex(t *testing.T) {
	data := "a\nb\n--- 2026-01-02T03:04:05Z: start 1 (etcd) ---\nc\n"
	if got := headerIndex([]byte(data)); got != 4 {
		t.Errorf("headerIndex = %d, want 4", got)
	}
	if got := headerIndex([]byte("a\nb\n")); got != -1 {
		t.Errorf("headerIndex without header = %d", got)
	}
}
