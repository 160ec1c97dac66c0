package supportbundle

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcdfed/etcdfed/hub/registry"
)

// registrations lists the hub's registration Secrets, keeping their
// values to scrub and a REST config of each, and writes their metadata.
func (b *bundle) registrations(ctx context.Context, hub client.Client, ns string) map[string]*rest.Config {
	var list corev1.SecretList
	if err := hub.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{registry.KubeconfigSecretLabel: "true"}); err != nil {
		b.fail("registrations in the hub's "+ns, err)
		return nil
	}
	out := map[string]*rest.Config{}
	for i := range list.Items {
		sec := &list.Items[i]
		b.keep(sec)
		if cfg, err := registry.RESTConfig(sec); err == nil {
			out[sec.Name] = cfg
		} else {
			b.fail("registration "+sec.Name, err)
		}
	}
	return out
}

// keep records a Secret's values for scrubbing.
func (b *bundle) keep(sec *corev1.Secret) {
	for _, v := range sec.Data {
		if len(v) >= 8 {
			b.secrets = append(b.secrets, v)
		}
	}
}

// secretsOf writes the Secrets of a namespace (matching opts) as keys and
// sizes only, and keeps their values for scrubbing.
func (b *bundle) secretsOf(ctx context.Context, c client.Client, file, ns string, labels client.MatchingLabels) {
	var list corev1.SecretList
	opts := []client.ListOption{client.InNamespace(ns)}
	if labels != nil {
		opts = append(opts, labels)
	}
	if err := c.List(ctx, &list, opts...); err != nil {
		b.fail("Secrets in "+ns, err)
		return
	}
	b.add(file, b.redactedSecrets(list.Items))
}

func (b *bundle) redactedSecrets(items []corev1.Secret) []byte {
	type redacted struct {
		Name        string            `json:"name"`
		Type        corev1.SecretType `json:"type"`
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Keys        map[string]string `json:"keys"`
	}
	out := make([]redacted, 0, len(items))
	for i := range items {
		s := &items[i]
		b.keep(s)
		r := redacted{Name: s.Name, Type: s.Type, Labels: s.Labels, Annotations: s.Annotations, Keys: map[string]string{}}
		for k, v := range s.Data {
			r.Keys[k] = fmt.Sprintf("<redacted, %d bytes>", len(v))
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	data, _ := yaml.Marshal(out)
	return data
}

var (
	pemKeyRE = regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----`)
	jwtRE    = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+`)
	bearerRE = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`)
)

// scrub removes private keys, JWTs, bearer tokens and every known Secret
// value (raw and base64) from data.
func (b *bundle) scrub(data []byte) []byte {
	data = pemKeyRE.ReplaceAll(data, []byte("<private key redacted>"))
	data = jwtRE.ReplaceAll(data, []byte("<token redacted>"))
	data = bearerRE.ReplaceAll(data, []byte("${1}<token redacted>"))
	for _, v := range b.secrets {
		for _, form := range [][]byte{v, []byte(base64.StdEncoding.EncodeToString(v)), bytes.TrimSpace(v)} {
			if len(form) >= 8 {
				data = bytes.ReplaceAll(data, form, []byte("<secret redacted>"))
			}
		}
		// A PEM certificate or key appears in files line by line too.
		for _, line := range bytes.Split(v, []byte("\n")) {
			if line = bytes.TrimSpace(line); len(line) >= 40 && !bytes.HasPrefix(line, []byte("-----")) {
				data = bytes.ReplaceAll(data, line, []byte("<secret redacted>"))
			}
		}
	}
	return data
}
