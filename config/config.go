// Package config embeds etcdfed's install packages: the kustomize bases
// (crd, rbac/*, hub, spoke), the components that switch their options on
// (components/*), the install samples and the monitoring files. `etcdfed
// hub install` and `etcdfed cluster join` render these same files with
// kustomize's Go API, so what they apply is what `kubectl apply -k` of the
// same overlay applies (cli/install).
package config

import "embed"

// FS holds the install packages under their paths in this directory
// (crd/kustomization.yaml, spoke/deployment.yaml, components/..., ...).
//
//go:embed crd/*.yaml rbac/hub/*.yaml rbac/hub-member/*.yaml rbac/spoke/*.yaml hub/*.yaml spoke/*.yaml components samples/install
var FS embed.FS
