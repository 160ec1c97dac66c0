// Package multicluster is the end-to-end harness: scenarios written as
// XSpec(ctx, input) functions over shared WaitForX helpers. Disruptive
// scenarios run the recorded client workload of dev/workload and check
// it in one call (checkWorkload): linearizable (porcupine), no acknowledged
// write lost, every watch complete and in order.
//
// The harness reaches clusters only through kubeconfigs (Cluster) and etcd
// only through its client endpoints (EtcdClient), resolving member names
// through the ring's DNS servers when the Topology names them. A Topology
// comes from the local environment (LocalTopology) or from any set of
// kubeconfigs (NewTopology), for example kind clusters; fault injection and
// DNS publishing are callbacks of the Topology, so the same scenarios run
// on both.
package multicluster
