package escrow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// Format is the bundle format written by this version.
const Format = "etcdfed.dev/hub-escrow/v1"

// What a Secret of the bundle is.
const (
	WhatCA          = "ca"           // a ring's CA (certificate and key)
	WhatSnapshotKey = "snapshot-key" // a ring's snapshot signing key
	WhatGossipKey   = "gossip-key"   // the spokes' gossip key
)

// Item is one Secret of the bundle as the manifest lists it.
type Item struct {
	What      string `json:"what"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ring is the EtcdCluster (namespace/name) the Secret is for; empty
	// for the gossip key.
	Ring string `json:"ring,omitempty"`
	// Keys are the Secret's data keys; SHA256 digests its data (keys
	// sorted, each key and value length-prefixed).
	Keys   []string `json:"keys"`
	SHA256 string   `json:"sha256"`
}

// Manifest says what a bundle holds.
type Manifest struct {
	Format    string    `json:"format"`
	CreatedAt time.Time `json:"createdAt"`
	// Source is the hub cluster's apiserver the bundle was read from.
	Source string `json:"source,omitempty"`
	Items  []Item `json:"items"`
	// Missing lists what was looked for and not found (a ring whose CA
	// the hub has not created yet, a ring that never took a backup).
	Missing []string `json:"missing,omitempty"`
}

// Secret is a Secret as the bundle carries it: no UID, owner or
// resourceVersion, and without the label naming the old EtcdCluster's
// UID (the EtcdCluster applied in the new hub has another).
type Secret struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Type        corev1.SecretType `json:"type,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Data        map[string][]byte `json:"data"`
}

// Bundle is the decrypted content of an escrow file.
type Bundle struct {
	Manifest Manifest `json:"manifest"`
	Secrets  []Secret `json:"secrets"`
}

// Collect reads the escrowed Secrets from a hub cluster: for every
// EtcdCluster its CA Secret and its snapshot key, every other snapshot
// key (label etcdfed.dev/component=snapshot-key: rings deleted since, whose
// backups may still be restored), and the gossip key in hubNamespace.
func Collect(ctx context.Context, c client.Reader, hubNamespace, source string) (*Bundle, error) {
	b := &Bundle{Manifest: Manifest{Format: Format, CreatedAt: time.Now().UTC().Truncate(time.Second), Source: source}}
	seen := map[client.ObjectKey]bool{}
	add := func(what, ring string, key client.ObjectKey, optional bool) error {
		if seen[key] {
			return nil
		}
		sec := &corev1.Secret{}
		if err := c.Get(ctx, key, sec); err != nil {
			if apierrors.IsNotFound(err) {
				if !optional {
					b.Manifest.Missing = append(b.Manifest.Missing, fmt.Sprintf("%s %s: no Secret %s", what, ringOr(ring), key))
				}
				return nil
			}
			return fmt.Errorf("read Secret %s: %w", key, err)
		}
		seen[key] = true
		b.add(what, ring, sec)
		return nil
	}

	rings := &etcdfedv1.EtcdClusterList{}
	if err := c.List(ctx, rings); err != nil {
		return nil, fmt.Errorf("list EtcdClusters: %w", err)
	}
	for i := range rings.Items {
		ec := &rings.Items[i]
		ring := ec.Namespace + "/" + ec.Name
		if err := add(WhatCA, ring, client.ObjectKey{Namespace: ec.Namespace, Name: pki.CASecretName(ec)}, false); err != nil {
			return nil, err
		}
		if err := add(WhatSnapshotKey, ring, client.ObjectKey{Namespace: ec.Namespace, Name: backupstore.KeySecretName(ec.Name)}, ec.Spec.Backup == nil); err != nil {
			return nil, err
		}
	}
	keys := &corev1.SecretList{}
	if err := c.List(ctx, keys, client.MatchingLabels{etcdfedv1.LabelComponent: "snapshot-key"}); err != nil {
		return nil, fmt.Errorf("list snapshot key Secrets: %w", err)
	}
	for i := range keys.Items {
		sec := &keys.Items[i]
		if key := client.ObjectKeyFromObject(sec); !seen[key] {
			seen[key] = true
			ring := sec.Labels[etcdfedv1.LabelClusterNamespace] + "/" + sec.Labels[etcdfedv1.LabelClusterName]
			b.add(WhatSnapshotKey, ring, sec)
		}
	}
	if err := add(WhatGossipKey, "", client.ObjectKey{Namespace: hubNamespace, Name: etcdfedv1.GossipSecretName}, false); err != nil {
		return nil, err
	}
	sort.Slice(b.Secrets, func(i, j int) bool {
		return less(b.Secrets[i].Namespace, b.Secrets[i].Name, b.Secrets[j].Namespace, b.Secrets[j].Name)
	})
	sort.Slice(b.Manifest.Items, func(i, j int) bool {
		x, y := b.Manifest.Items[i], b.Manifest.Items[j]
		return less(x.Namespace, x.Name, y.Namespace, y.Name)
	})
	return b, nil
}

func ringOr(ring string) string {
	if ring == "" {
		return "of the hub"
	}
	return "of EtcdCluster " + ring
}

func less(ns1, n1, ns2, n2 string) bool {
	if ns1 != ns2 {
		return ns1 < ns2
	}
	return n1 < n2
}

func (b *Bundle) add(what, ring string, sec *corev1.Secret) {
	labels := maps.Clone(sec.Labels)
	delete(labels, etcdfedv1.LabelClusterUID)
	b.Secrets = append(b.Secrets, Secret{Namespace: sec.Namespace, Name: sec.Name, Type: sec.Type,
		Labels: labels, Annotations: keepAnnotations(sec.Annotations), Data: sec.Data})
	b.Manifest.Items = append(b.Manifest.Items, Item{What: what, Namespace: sec.Namespace, Name: sec.Name, Ring: ring,
		Keys: slices.Sorted(maps.Keys(sec.Data)), SHA256: Digest(sec.Data)})
}

// keepAnnotations drops kubectl's last-applied copy (the data again).
func keepAnnotations(a map[string]string) map[string]string {
	out := maps.Clone(a)
	delete(out, corev1.LastAppliedConfigAnnotation)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Digest is the SHA-256 of a Secret's data: keys sorted, each key and
// value prefixed with its length.
func Digest(data map[string][]byte) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s%d:", len(k), k, len(data[k]))
		h.Write(data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// String is the manifest for a reader: one line per Secret, then what is
// missing.
func (m Manifest) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s, %d Secrets, read from %s at %s\n", m.Format, len(m.Items), m.Source, m.CreatedAt.Format(time.RFC3339))
	for _, it := range m.Items {
		fmt.Fprintf(&sb, "  %-12s %s/%s", it.What, it.Namespace, it.Name)
		if it.Ring != "" {
			fmt.Fprintf(&sb, " (EtcdCluster %s)", it.Ring)
		}
		fmt.Fprintf(&sb, " keys %s sha256 %s\n", strings.Join(it.Keys, ","), it.SHA256[:16])
	}
	for _, s := range m.Missing {
		fmt.Fprintf(&sb, "  missing: %s\n", s)
	}
	return sb.String()
}

// ParseRecipients parses age X25519 recipients ("age1...").
func ParseRecipients(s []string) ([]age.Recipient, error) {
	if len(s) == 0 {
		return nil, errors.New("no recipient: give the public key (age1...) of an identity you hold, for example from `age-keygen`")
	}
	var out []age.Recipient
	for _, r := range s {
		x, err := age.ParseX25519Recipient(strings.TrimSpace(r))
		if err != nil {
			return nil, fmt.Errorf("recipient %q: %w", r, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// ParseIdentities parses an age identity file (AGE-SECRET-KEY-1... lines,
// comments allowed).
func ParseIdentities(r io.Reader) ([]age.Identity, error) {
	ids, err := age.ParseIdentities(r)
	if err != nil {
		return nil, fmt.Errorf("parse age identities: %w", err)
	}
	return ids, nil
}

// Seal writes b encrypted to recipients, ASCII armored.
func Seal(w io.Writer, b *Bundle, recipients ...age.Recipient) error {
	raw, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("encode bundle: %w", err)
	}
	aw := armor.NewWriter(w)
	ew, err := age.Encrypt(aw, recipients...)
	if err != nil {
		return fmt.Errorf("encrypt bundle: %w", err)
	}
	if _, err := ew.Write(raw); err != nil {
		return fmt.Errorf("encrypt bundle: %w", err)
	}
	if err := ew.Close(); err != nil {
		return fmt.Errorf("encrypt bundle: %w", err)
	}
	if err := aw.Close(); err != nil {
		return fmt.Errorf("armor bundle: %w", err)
	}
	return nil
}

// ErrWrongIdentity says that none of the identities given opens the
// bundle.
var ErrWrongIdentity = errors.New("escrow: none of the identities given opens this bundle: it was encrypted to other recipients (use the identity whose public key was given to `etcdfed hub export --recipient`)")

// Open decrypts and decodes a bundle (armored or binary).
func Open(r io.Reader, ids ...age.Identity) (*Bundle, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	var in io.Reader = bytes.NewReader(data)
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte(armor.Header)) {
		in = armor.NewReader(bytes.NewReader(bytes.TrimSpace(data)))
	}
	dr, err := age.Decrypt(in, ids...)
	if err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, ErrWrongIdentity
		}
		return nil, fmt.Errorf("decrypt bundle: %w", err)
	}
	raw, err := io.ReadAll(dr)
	if err != nil {
		return nil, fmt.Errorf("decrypt bundle: %w", err)
	}
	b := &Bundle{}
	if err := json.Unmarshal(raw, b); err != nil {
		return nil, fmt.Errorf("decode bundle: %w", err)
	}
	if b.Manifest.Format != Format {
		return nil, fmt.Errorf("bundle format %q: this etcdfed reads %q", b.Manifest.Format, Format)
	}
	for _, s := range b.Secrets {
		if !slices.ContainsFunc(b.Manifest.Items, func(it Item) bool {
			return it.Namespace == s.Namespace && it.Name == s.Name && it.SHA256 == Digest(s.Data)
		}) {
			return nil, fmt.Errorf("bundle: Secret %s/%s does not match its manifest entry", s.Namespace, s.Name)
		}
	}
	return b, nil
}

// ImportResult says what Import did (or, dry, would do) with each Secret.
type ImportResult struct {
	Created, Unchanged, Overwritten []string
	// Namespaces created for Secrets whose namespace did not exist.
	Namespaces []string
}

// ConflictError lists the Secrets that exist with other content.
type ConflictError struct{ Secrets []string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("escrow: %d Secrets exist in this cluster with other content, nothing written: %s; they are not the ones escrowed (a hub that already created its own keys?). Overwrite them with --force only if no ring uses them yet",
		len(e.Secrets), strings.Join(e.Secrets, ", "))
}

// Import writes the bundle's Secrets into a hub cluster: a missing one is
// created (and its namespace), an identical one left alone, one with
// other content refused (ConflictError, before anything is written)
// unless force, which overwrites its data. dry reports without writing.
func Import(ctx context.Context, c client.Client, b *Bundle, force, dry bool) (*ImportResult, error) {
	res := &ImportResult{}
	type op struct {
		s   Secret
		cur *corev1.Secret
	}
	var ops []op
	var conflicts []string
	nsSeen := map[string]bool{}
	for _, s := range b.Secrets {
		name := s.Namespace + "/" + s.Name
		if !nsSeen[s.Namespace] {
			nsSeen[s.Namespace] = true
			if err := c.Get(ctx, client.ObjectKey{Name: s.Namespace}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
				res.Namespaces = append(res.Namespaces, s.Namespace)
			} else if err != nil {
				return nil, fmt.Errorf("read namespace %s: %w", s.Namespace, err)
			}
		}
		cur := &corev1.Secret{}
		err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, cur)
		switch {
		case apierrors.IsNotFound(err):
			ops = append(ops, op{s: s})
			res.Created = append(res.Created, name)
		case err != nil:
			return nil, fmt.Errorf("read Secret %s: %w", name, err)
		case Digest(cur.Data) == Digest(s.Data):
			res.Unchanged = append(res.Unchanged, name)
		case cur.Type != s.Type && s.Type != "":
			return nil, fmt.Errorf("escrow: Secret %s exists with type %s, the bundle's is %s: delete it first", name, cur.Type, s.Type)
		default:
			conflicts = append(conflicts, name)
			ops = append(ops, op{s: s, cur: cur})
			res.Overwritten = append(res.Overwritten, name)
		}
	}
	if len(conflicts) > 0 && !force {
		return nil, &ConflictError{Secrets: conflicts}
	}
	if dry {
		return res, nil
	}
	for _, ns := range res.Namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	for _, o := range ops {
		if o.cur == nil {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.s.Namespace, Name: o.s.Name, Labels: o.s.Labels, Annotations: o.s.Annotations},
				Type: o.s.Type, Data: o.s.Data}
			if err := c.Create(ctx, sec); err != nil {
				return nil, fmt.Errorf("create Secret %s/%s: %w", o.s.Namespace, o.s.Name, err)
			}
			continue
		}
		sec := o.cur.DeepCopy()
		sec.Data = o.s.Data
		sec.StringData = nil
		if err := c.Update(ctx, sec); err != nil {
			return nil, fmt.Errorf("overwrite Secret %s/%s: %w", o.s.Namespace, o.s.Name, err)
		}
	}
	return res, nil
}
