package nodeagent

import (
	"sort"
	"strings"
)

// expand replaces $(VAR) in s with vars[VAR] the way kubelet does: $$ is an
// escaped $, a reference to an undefined variable is left as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// pathMap maps container paths (mountPaths) to host directories.
type pathMap struct {
	from []string // longest first
	to   map[string]string
}

func newPathMap(m map[string]string) pathMap {
	pm := pathMap{to: map[string]string{}}
	for k, v := range m {
		k = strings.TrimRight(k, "/")
		if k == "" {
			continue
		}
		pm.from = append(pm.from, k)
		pm.to[k] = v
	}
	sort.Slice(pm.from, func(i, j int) bool {
		if len(pm.from[i]) != len(pm.from[j]) {
			return len(pm.from[i]) > len(pm.from[j])
		}
		return pm.from[i] < pm.from[j]
	})
	return pm
}

// isBefore and isAfter say which characters may surround a path for it to
// be rewritten: "--data-dir=/var/lib/etcd/data", "a:/x,/y", "/x".
func isBefore(c byte) bool { return strings.IndexByte("=,:; \t\"'", c) >= 0 }
func isAfter(c byte) bool  { return strings.IndexByte("/,:; \t\"'", c) >= 0 }

// rewrite replaces every occurrence of a mapped container path in s, at a
// path boundary, with its host directory. "file://" URLs are rewritten too.
func (pm pathMap) rewrite(s string) string {
	if len(pm.from) == 0 || !strings.Contains(s, "/") {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		matched := false
		if i == 0 || isBefore(s[i-1]) || strings.HasSuffix(s[:i], "file://") {
			for _, from := range pm.from {
				if strings.HasPrefix(s[i:], from) {
					j := i + len(from)
					if j == len(s) || isAfter(s[j]) {
						b.WriteString(pm.to[from])
						i = j
						matched = true
						break
					}
				}
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}
