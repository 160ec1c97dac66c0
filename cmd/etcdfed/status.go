package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/internal/clusterstatus"
)

func init() {
	var hub hubFlags
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show an EtcdCluster's members (cluster, zone, role, readiness, address, etcd ID) and conditions",
		Long: `status reads EtcdCluster objects from the hub cluster and prints, for each,
its members with their member cluster, zone, role, readiness, address and
etcd ID, its conditions, the membership change in progress and the client
endpoints. Without NAME it shows every EtcdCluster of the namespace.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := hub.client()
			if err != nil {
				return err
			}
			var items []etcdfedv1.EtcdCluster
			if len(args) == 1 {
				ec := etcdfedv1.EtcdCluster{}
				if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, &ec); err != nil {
					return fmt.Errorf("get EtcdCluster %s/%s: %w", ns, args[0], err)
				}
				items = append(items, ec)
			} else {
				var list etcdfedv1.EtcdClusterList
				if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
					return fmt.Errorf("list EtcdClusters in %s: %w", ns, err)
				}
				items = list.Items
				if len(items) == 0 {
					_, err := fmt.Fprintf(cmd.OutOrStdout(), "No EtcdCluster in namespace %s.\n", ns)
					return err
				}
			}
			for i := range items {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if err := clusterstatus.Render(cmd.OutOrStdout(), &items[i], time.Now()); err != nil {
					return err
				}
			}
			return nil
		},
	}
	hub.bind(cmd.Flags())
	root.AddCommand(cmd)
}
