package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcdfed/etcdfed/dev/localenv"
	"github.com/etcdfed/etcdfed/dev/localenv/proc"
)

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func metav1GetOptions() metav1.GetOptions { return metav1.GetOptions{} }

func testLivePIDs(state string) ([]int, error) {
	recs, err := proc.LivePIDFiles(localenv.PIDDir(state))
	var pids []int
	for _, r := range recs {
		pids = append(pids, r.PID)
	}
	return pids, err
}
