// Package allowlist reads the allow lists operators give etcdfed's
// components as flags (--allowed-pod-annotations and the like): the hub's
// tenancy policy and the spoke's own pod policy read them the same way.
package allowlist

import (
	"slices"
	"strings"
)

// Any, in an allow list, allows every value.
const Any = "*"

// Allows says whether list allows value: value is in list, or list holds
// Any.
func Allows(list []string, value string) bool {
	return slices.Contains(list, Any) || slices.Contains(list, value)
}

// AllowsKey says whether list allows the key of a map such as annotations:
// as Allows, or key starts with an entry of list that ends in '/' or '.'
// (prometheus.io/ allows prometheus.io/scrape).
func AllowsKey(list []string, key string) bool {
	return Allows(list, key) || slices.ContainsFunc(list, func(e string) bool {
		return (strings.HasSuffix(e, "/") || strings.HasSuffix(e, ".")) && strings.HasPrefix(key, e)
	})
}

// String is list for a message: "allowed: " and its entries, or "none
// allowed".
func String(list []string) string {
	if len(list) == 0 {
		return "none allowed"
	}
	return "allowed: " + strings.Join(list, ", ")
}
