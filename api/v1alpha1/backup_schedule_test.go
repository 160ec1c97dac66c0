package v1alpha1_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"

	"github.com/etcdfed/etcdfed/config/crd"
)

// scheduleRegexps returns the regular expressions of the CRD's schedule
// rule, as the apiserver evaluates them (CEL's matches() is RE2, like Go's
// regexp).
func scheduleRegexps(t *testing.T) []*regexp.Regexp {
	t.Helper()
	crds, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range crds {
		if c.Spec.Names.Kind != "EtcdCluster" {
			continue
		}
		sched := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["backup"].Properties["schedule"]
		rule := sched.XValidations[0].Rule
		var out []*regexp.Regexp
		for _, m := range regexp.MustCompile(`matches\('([^']*)'\)`).FindAllStringSubmatch(rule, -1) {
			out = append(out, regexp.MustCompile(m[1]))
		}
		if len(out) != 3 {
			t.Fatalf("schedule rule has %d regexps, want 3: %s", len(out), rule)
		}
		return out
	}
	t.Fatal("no EtcdCluster CRD")
	return nil
}

func admitted(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// TestScheduleRuleAgreesWithParser: every schedule the apiserver admits
// the hub's parser (robfig/cron ParseStandard) accepts, except a range
// written backwards ("5-1"), which the rule cannot see and the hub
// reports as InvalidSpec; and the rule refuses only what it documents
// refusing (time zone prefixes, tabs) and lists with empty items such as
// ",", which the parser lets through, among what the parser accepts.
// Random schedules from the cron alphabet probe the corners.
func TestScheduleRuleAgreesWithParser(t *testing.T) {
	res := scheduleRegexps(t)
	backwards := regexp.MustCompile(`([0-9]+)-([0-9]+)`)
	isBackwards := func(s string) bool {
		for _, m := range backwards.FindAllStringSubmatch(s, -1) {
			if len(m[1]) > 0 && len(m[2]) > 0 && atoi(m[1]) > atoi(m[2]) {
				return true
			}
		}
		return false
	}
	check := func(s string) {
		_, perr := cron.ParseStandard(s)
		switch adm := admitted(res, s); {
		case adm && perr != nil && !isBackwards(s):
			t.Errorf("%q admitted by the CRD but refused by the hub: %v", s, perr)
		case !adm && perr == nil && !strings.Contains(s, "TZ=") && !strings.Contains(s, "\t") && !strings.HasPrefix(s, "@every"):
			if !emptyListItem(s) {
				t.Errorf("%q refused by the CRD but valid for the hub", s)
			}
		}
	}
	for _, s := range []string{
		"0 */6 * * *", "60 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 32 * *", "0 0 1 13 *", "0 0 * * 7",
		"*/0 * * * *", "5-1 * * * *", "0 0 1 JAN-MAR mon", "0 0 1 jan-mar MON", "? ? ? ? ?", "1,2,3-5/2 * * * *",
		"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually", "@reboot", "@every 1h",
		"CRON_TZ=UTC 0 * * * *", "0\t* * * *", " 0 * * * * ", "00 00 01 01 0", "0 0 1 1 * *",
	} {
		check(s)
	}
	tokens := []string{"0", "5", "7", "12", "23", "24", "31", "32", "59", "60", "*", "?", "-", ",", "/", "/0", "/5", "jan", "DEC", "mon", "SUN", "foo", "L", "W"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		fields := make([]string, 5)
		for i := range fields {
			var b strings.Builder
			for range 1 + r.IntN(3) {
				b.WriteString(tokens[r.IntN(len(tokens))])
			}
			fields[i] = b.String()
		}
		check(strings.Join(fields, " "))
	}
}

func emptyListItem(s string) bool {
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, ",") || strings.HasSuffix(f, ",") || strings.Contains(f, ",,") {
			return true
		}
	}
	return false
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
