package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
prints the ETCDCTL_* variables that use them and, as a comment, the
certificate's serial number (what 'client-cert revoke' takes). It reads the CA Secret from the
hub, so it needs read access to Secrets in the EtcdCluster's namespace: it is
an administrator's command. The certificate is valid for --duration
(default 24h, at most 168h: a short life bounds what a lost certificate
gives away; issue a new one when it expires; revoke a lost one with
'etcdfed client-cert revoke NAME --serial S') and, by default, is etcd's root user (--common-name).
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
			if serial, ok := pki.Serial(leaf.CertPEM); ok {
				fmt.Fprintf(w, "# serial %s (valid until %s; revoke it with: etcdfed client-cert revoke %s -n %s --serial %s)\n",
					pki.FormatSerial(serial), time.Now().Add(duration).UTC().Format(time.RFC3339), ec.Name, ec.Namespace, pki.FormatSerial(serial))
			}
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
	cmd.AddCommand(revokeCommand())
	root.AddCommand(cmd)
}

// revokeCommand is `etcdfed client-cert revoke`: it adds serial numbers to
// spec.tls.revokedCertificates, which the hub turns into the revocation
// list every member's etcd checks.
func revokeCommand() *cobra.Command {
	var hub hubFlags
	var serials, certs []string
	cmd := &cobra.Command{
		Use:   "revoke NAME (--serial S | --cert FILE)...",
		Short: "Revoke client certificates of an EtcdCluster's CA",
		Long: `revoke adds the serial numbers of client certificates to the EtcdCluster's
spec.tls.revokedCertificates: --serial as 'client-cert' prints it (hex; upper
case and openssl's colons are taken too), or --cert, a PEM certificate file.
The hub signs a revocation list of them with the ring's CA and writes it into
every member's Secret; etcd (--client-crl-file) refuses a listed certificate
on its next connection, once the kubelet has copied the Secret into the
member's pod (about a minute). A connection the certificate opened before
stays open until it closes. Follow it in status.revocation (membersCurrent
of membersTotal). Undo it by removing the serial from the spec.

It is what revokes a root certificate (etcdfed client-cert's, the hub's):
etcd cannot delete its root user while authentication is on. A spec.clients
entry is revoked by removing the entry. It needs update access to the
EtcdCluster.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Repeatable flags append to what an earlier run in the same
			// process parsed (tests run root several times).
			defer func() {
				for _, name := range []string{"serial", "cert"} {
					if v, ok := cmd.Flags().Lookup(name).Value.(pflag.SliceValue); ok {
						_ = v.Replace(nil)
					}
				}
			}()
			add, err := revokedSerials(serials, certs)
			if err != nil {
				return err
			}
			c, ns, err := hub.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ec := &etcdfedv1.EtcdCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, ec); err != nil {
				return fmt.Errorf("get EtcdCluster %s/%s: %w", ns, args[0], err)
			}
			if ec.Spec.TLS.Mode == etcdfedv1.TLSDisabled {
				return fmt.Errorf("EtcdCluster %s/%s runs without TLS: it asks no client for a certificate, so there is nothing to revoke", ns, args[0])
			}
			before := ec.DeepCopy()
			var added []string
			for _, s := range add {
				if !slices.Contains(ec.Spec.TLS.RevokedCertificates, s) {
					ec.Spec.TLS.RevokedCertificates = append(ec.Spec.TLS.RevokedCertificates, s)
					added = append(added, s)
				}
			}
			w := cmd.OutOrStdout()
			if len(added) == 0 {
				fmt.Fprintf(w, "EtcdCluster %s/%s revokes %s already\n", ns, ec.Name, strings.Join(add, ", "))
				return nil
			}
			if err := c.Patch(ctx, ec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
				return fmt.Errorf("add %s to spec.tls.revokedCertificates of EtcdCluster %s/%s: %w", strings.Join(added, ", "), ns, ec.Name, err)
			}
			fmt.Fprintf(w, "EtcdCluster %s/%s revokes %s (%d serials in spec.tls.revokedCertificates)\n", ns, ec.Name, strings.Join(added, ", "), len(ec.Spec.TLS.RevokedCertificates))
			fmt.Fprintf(w, "follow it: kubectl -n %s get etcdcluster %s -o jsonpath='{.status.revocation}'\n", ns, ec.Name)
			return nil
		},
	}
	hub.bind(cmd.Flags())
	cmd.Flags().StringArrayVar(&serials, "serial", nil, "Serial number of a certificate to revoke, in hex (as client-cert prints it; openssl's AB:CD:... too). Repeatable.")
	cmd.Flags().StringArrayVar(&certs, "cert", nil, "PEM file of a certificate to revoke (its serial number is taken). Repeatable.")
	return cmd
}

// revokedSerials are the serials --serial and --cert name, spelled as
// spec.tls.revokedCertificates takes them; an error for bad input, before
// anything is read.
func revokedSerials(serials, certs []string) ([]string, error) {
	var out []string
	for _, s := range serials {
		n, err := pki.ParseSerial(s)
		if err != nil {
			return nil, fmt.Errorf("--serial: %w", err)
		}
		out = append(out, pki.FormatSerial(n))
	}
	for _, f := range certs {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--cert: %w", err)
		}
		n, ok := pki.Serial(b)
		if !ok {
			return nil, fmt.Errorf("--cert %s: no PEM certificate in it", f)
		}
		out = append(out, pki.FormatSerial(n))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("name a certificate to revoke: --serial S or --cert FILE")
	}
	return out, nil
}

// checkClientCertDuration refuses a --duration client-cert does not issue,
// before anything is read or written.
func checkClientCertDuration(d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("--duration %s: must be positive", d)
	case d > pki.MaxAdminClientValidity:
		return fmt.Errorf("--duration %s is beyond the bound of %s: client-cert issues short-lived administrator certificates (a lost one is root until it expires or its serial is revoked); for a long-lived consumer declare it in spec.clients, whose certificates the hub renews", d, pki.MaxAdminClientValidity)
	}
	return nil
}
