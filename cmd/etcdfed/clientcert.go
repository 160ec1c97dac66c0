package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

func init() {
	var hub hubFlags
	var out, commonName string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "client-cert NAME --out DIR",
		Short: "Issue an etcd client certificate for an EtcdCluster",
		Long: `client-cert issues a client certificate from the EtcdCluster's CA and writes
ca.crt, client.crt and client.key into DIR (created with mode 0700), then
prints the ETCDCTL_* variables that use them. It reads the CA Secret from the
hub, so it needs read access to Secrets in the EtcdCluster's namespace: it is
an administrator's command. The certificate is valid for --duration
(default 24h, at most 168h: etcd's root user cannot be revoked by deleting
it, so a short life bounds what a lost certificate gives away; issue a new
one when it expires) and, by default, is etcd's root user (--common-name).
For a consumer, with a narrower role and a certificate the hub renews and
can revoke (remove the entry: its etcd user goes with it), declare it in
spec.clients instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			if err := checkClientCertDuration(duration); err != nil {
				return err
			}
			c, ns, err := hub.client()
			if err != nil {
				return err
			}
			ec := &etcdfedv1.EtcdCluster{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, ec); err != nil {
				return fmt.Errorf("get EtcdCluster %s/%s: %w", ns, args[0], err)
			}
			if ec.Spec.TLS.Mode == etcdfedv1.TLSDisabled {
				return fmt.Errorf("EtcdCluster %s/%s runs without TLS: no certificate needed", ns, args[0])
			}
			// The bundle: during a CA rotation members serve certificates
			// of either CA.
			a, err := pki.ReadAuthority(cmd.Context(), c, ec)
			if err != nil {
				return err
			}
			leaf, err := a.Signer.IssueClientFor(commonName, duration, time.Now())
			if err != nil {
				return err
			}
			if err := pki.WriteClientFiles(out, a.Bundle(), leaf); err != nil {
				return err
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "export ETCDCTL_CACERT=%s\n", filepath.Join(abs, pki.FileCA))
			fmt.Fprintf(w, "export ETCDCTL_CERT=%s\n", filepath.Join(abs, pki.FileClientCert))
			fmt.Fprintf(w, "export ETCDCTL_KEY=%s\n", filepath.Join(abs, pki.FileClientKey))
			if len(ec.Status.Endpoints) > 0 {
				fmt.Fprintf(w, "export ETCDCTL_ENDPOINTS=%s\n", strings.Join(ec.Status.Endpoints, ","))
			}
			return nil
		},
	}
	hub.bind(cmd.Flags())
	cmd.Flags().StringVar(&out, "out", "", "Directory to write ca.crt, client.crt and client.key into.")
	cmd.Flags().StringVar(&commonName, "common-name", etcdfedv1.EtcdRootUser, "Common name of the certificate: the etcd user (with etcd authentication on, spec.tls.auth, root may do anything, the user of a spec.clients entry has its role, any other reads and writes nothing).")
	cmd.Flags().DurationVar(&duration, "duration", pki.DefaultAdminClientValidity, fmt.Sprintf("How long the certificate is valid, at most %s.", pki.MaxAdminClientValidity))
	root.AddCommand(cmd)
}

// checkClientCertDuration refuses a --duration client-cert does not issue,
// before anything is read or written.
func checkClientCertDuration(d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("--duration %s: must be positive", d)
	case d > pki.MaxAdminClientValidity:
		return fmt.Errorf("--duration %s is beyond the bound of %s: client-cert issues short-lived administrator certificates (etcd's root user cannot be revoked); for a long-lived consumer declare it in spec.clients, whose certificates the hub renews", d, pki.MaxAdminClientValidity)
	}
	return nil
}
