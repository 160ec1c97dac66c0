package etcdops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdfed/etcdfed/hub/planner"
)

// observeVersions sets the cluster version (the leader's /version, the one
// place etcd reports it) and the downgrade state the leader reported in its
// status. Both stay empty when the leader did not answer.
func (c *Client) observeVersions(ctx context.Context, out *planner.Etcd, downgrades []planner.Downgrade) {
	for i, m := range out.Members {
		if m.ID != out.LeaderID || m.Version == "" {
			continue
		}
		out.Downgrade = downgrades[i]
		sctx, cancel := context.WithTimeout(ctx, StatusTimeout)
		defer cancel()
		for _, u := range m.ClientURLs {
			if v, err := c.versions(sctx, u); err == nil {
				out.ClusterVersion = v.Cluster
				return
			}
		}
	}
}

// versions reads GET <clientURL>/version.
func (c *Client) versions(ctx context.Context, clientURL string) (version.Versions, error) {
	var v version.Versions
	tr := &http.Transport{TLSClientConfig: c.cfg.TLS.Clone(), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(clientURL, "/")+"/version", nil)
	if err != nil {
		return v, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return v, fmt.Errorf("read %s/version: %w", clientURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return v, fmt.Errorf("read %s/version: %w", clientURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("read %s/version: %s", clientURL, resp.Status)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("read %s/version: %w", clientURL, err)
	}
	return v, nil
}

// CancelDowngrade ends the downgrade etcd has enabled (downgrade cancel):
// etcd raises its cluster version again once every member runs the higher
// version.
func (c *Client) CancelDowngrade(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if _, err := c.c.Downgrade(ctx, clientv3.DowngradeCancel, ""); err != nil {
		return fmt.Errorf("downgrade cancel: %w", classify(err))
	}
	return nil
}

// EnableDowngrade follows etcd's downgrade procedure to minor (such as
// 3.5): downgrade validate, then downgrade enable. etcd refuses a target
// that is not exactly one minor below the cluster version, or a downgrade
// already enabled to another target; the error quotes it.
func (c *Client) EnableDowngrade(ctx context.Context, minor string) error {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	if _, err := c.c.Downgrade(ctx, clientv3.DowngradeValidate, minor); err != nil {
		return fmt.Errorf("%w: downgrade validate %s: %w", ErrDowngradeRefused, minor, classify(err))
	}
	if _, err := c.c.Downgrade(ctx, clientv3.DowngradeEnable, minor); err != nil {
		return fmt.Errorf("%w: downgrade enable %s: %w", ErrDowngradeRefused, minor, classify(err))
	}
	return nil
}
