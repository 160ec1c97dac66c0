//go:build tools

// Tools module for promtool (`promtool test rules` runs the unit tests of
// the shipped alerts, config/monitoring), built from the Go module proxy.
// Kept apart from the main go.mod so the project does not depend on
// Prometheus itself.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
