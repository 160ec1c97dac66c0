// Command prometheusrule writes the PrometheusRule of
// config/components/prometheus-operator from config/monitoring's rules
// (go generate ./config/monitoring).
package main

import (
	"fmt"
	"os"

	"github.com/etcdfed/etcdfed/config/monitoring"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: prometheusrule OUT.yaml")
		os.Exit(2)
	}
	data, err := monitoring.PrometheusRule()
	if err == nil {
		err = os.WriteFile(os.Args[1], data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "prometheusrule:", err)
		os.Exit(1)
	}
}
