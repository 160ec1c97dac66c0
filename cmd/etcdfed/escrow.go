package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdfed/etcdfed/cli/escrow"
	"github.com/etcdfed/etcdfed/cli/install"
	"github.com/etcdfed/etcdfed/internal/scheme"
)

func init() {
	export, imp := newExportCommand(), newImportCommand()
	for _, c := range root.Commands() {
		if c.Name() == "hub" {
			c.AddCommand(export, imp)
			c.Short = "Install the hub, export and import its keys"
			return
		}
	}
	panic("etcdfed: no hub command to add export and import to")
}

// exportCmd holds the flags of `etcdfed hub export`.
type exportCmd struct {
	hub                               kubeFlags
	recipients                        []string
	recipientsFile, out, hubNamespace string
}

func newExportCommand() *cobra.Command {
	var x exportCmd
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the keys a rebuilt hub needs, encrypted to a key you hold",
		Long: `export reads from the hub cluster what exists only there and a new hub
cluster needs to carry on with the same rings and backups:

  ca            each EtcdCluster's CA Secret (certificate and key)
  snapshot-key  each ring's snapshot signing key (<ring>-snapshot-key), also of
                rings deleted since: without it a backup cannot be verified
                for a restore
  gossip-key    the spokes' gossip key (` + install.Namespace + `/etcdfed-gossip)

and writes them as one file encrypted with age (https://age-encryption.org)
to the X25519 recipients given (age1..., from age-keygen). Keep the file
anywhere; keep the identity (AGE-SECRET-KEY-1...) apart from it. The manifest
(what is in the file, with a SHA-256 of each Secret) is printed.

Not in the file: rings' status and ledger, consumers' client certificates
(reissued from the CA), member clusters' kubeconfig Secrets (written again by
etcdfed cluster join). See docs/disaster-recovery.md.`,
		Example: `  age-keygen -o hub-escrow.key     # prints the public key age1...
  etcdfed hub export --recipient age1... -o hub-escrow.age`,
		Args: cobra.NoArgs,
		RunE: x.run,
	}
	f := cmd.Flags()
	x.hub.bindHub(f)
	f.StringArrayVar(&x.recipients, "recipient", nil, "age X25519 recipient (age1...) to encrypt to; repeatable.")
	f.StringVar(&x.recipientsFile, "recipients-file", "", "File of age recipients, one a line.")
	f.StringVarP(&x.out, "output", "o", "", "File to write (created; an existing file is not overwritten).")
	f.StringVar(&x.hubNamespace, "hub-namespace", install.Namespace, "The hub's namespace (its gossip key).")

	return cmd
}

// run collects the hub's keys and writes them, encrypted, to a new file.
func (x *exportCmd) run(cmd *cobra.Command, _ []string) error {
	recipients, err := x.allRecipients()
	if err != nil {
		return err
	}
	rs, err := escrow.ParseRecipients(recipients)
	if err != nil {
		return err
	}
	if x.out == "" {
		return fmt.Errorf("-o is required: the file to write")
	}
	cfg, err := x.hub.config("hub")
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	b, err := escrow.Collect(cmd.Context(), c, x.hubNamespace, cfg.Host)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(x.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", x.out, err)
	}
	if err := escrow.Seal(f, b, rs...); err != nil {
		f.Close()
		os.Remove(x.out)
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", x.out, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "wrote %s, encrypted to %d recipients:\n%s", x.out, len(rs), b.Manifest)
	return nil
}

// allRecipients are the --recipient flags and the lines of
// --recipients-file (blank lines and # comments skipped).
func (x *exportCmd) allRecipients() ([]string, error) {
	recipients := x.recipients
	if x.recipientsFile == "" {
		return recipients, nil
	}
	raw, err := os.ReadFile(x.recipientsFile)
	if err != nil {
		return nil, fmt.Errorf("read recipients: %w", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			recipients = append(recipients, l)
		}
	}
	return recipients, nil
}

// importCmd holds the flags of `etcdfed hub import`.
type importCmd struct {
	hub           kubeFlags
	identity, in  string
	force, dryRun bool
}

func newImportCommand() *cobra.Command {
	var m importCmd
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Write the keys of an export into a new hub cluster",
		Long: `import opens a file written by etcdfed hub export with your age identity
and writes its Secrets into the hub cluster: each missing one is created (with
its namespace), one that exists with the same content is left alone. One that
exists with other content stops the import before anything is written (a hub
that generated its own keys, or the wrong file); --force overwrites it. Run it
after etcdfed hub install and before the EtcdCluster manifests are applied, so
the hub finds the rings' CAs instead of creating new ones.`,
		Example: `  etcdfed hub import -i hub-escrow.age --identity hub-escrow.key`,
		Args:    cobra.NoArgs,
		RunE:    m.run,
	}
	f := cmd.Flags()
	m.hub.bindHub(f)
	f.StringVar(&m.identity, "identity", "", "age identity file (AGE-SECRET-KEY-1...) whose recipient the export was encrypted to.")
	f.StringVarP(&m.in, "input", "i", "", "File written by etcdfed hub export.")
	f.BoolVar(&m.force, "force", false, "Overwrite Secrets that exist with other content.")
	f.BoolVar(&m.dryRun, "dry-run", false, "Say what would be written, and write nothing.")

	return cmd
}

// run opens an export with the identity and writes its Secrets into the
// hub cluster.
func (m *importCmd) run(cmd *cobra.Command, _ []string) error {
	if m.identity == "" || m.in == "" {
		return fmt.Errorf("--identity and -i are required: the age identity file and the exported file")
	}
	idf, err := os.Open(m.identity)
	if err != nil {
		return fmt.Errorf("open identity: %w", err)
	}
	ids, err := escrow.ParseIdentities(idf)
	idf.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", m.identity, err)
	}
	bf, err := os.Open(m.in)
	if err != nil {
		return fmt.Errorf("open bundle: %w", err)
	}
	b, err := escrow.Open(bf, ids...)
	bf.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", m.in, err)
	}
	fmt.Fprint(cmd.OutOrStdout(), b.Manifest)
	cfg, err := m.hub.config("hub")
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	res, err := escrow.Import(cmd.Context(), c, b, m.force, m.dryRun)
	if err != nil {
		return err
	}
	verb := "imported into"
	if m.dryRun {
		verb = "would import into (dry run)"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s: %d created, %d unchanged, %d overwritten, namespaces created: %s\n",
		verb, cfg.Host, len(res.Created), len(res.Unchanged), len(res.Overwritten), orNone(res.Namespaces))
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
