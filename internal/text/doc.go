// Package text holds the small string helpers that production code and
// the test harness share. It imports only the standard library, so any
// binary may link it (hack/proddeps).
package text
