package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdfed/etcdfed/hub/pki"
)

// Endpoints are the client URLs of all members.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, m.ClientURL)
	}
	return out
}

// NewClient returns a client of the given endpoints (all members when
// none), closed when the test ends.
func (c *Cluster) NewClient(endpoints ...string) *clientv3.Client {
	c.t.Helper()
	if len(endpoints) == 0 {
		endpoints = c.Endpoints()
	}
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()}
	if c.maxRequestBytes > 0 {
		// clientv3 refuses to send more than 2 MiB by default, whatever the
		// server takes; etcd itself accepts max-request-bytes plus 512 KiB
		// of gRPC overhead.
		cfg.MaxCallSendMsgSize = c.maxRequestBytes + 512*1024
	}
	if c.CA != nil {
		tlsCfg, err := pki.ClientTLS(c.CA.CertPEM, c.Client)
		if err != nil {
			c.t.Fatal(err)
		}
		cfg.TLS = tlsCfg
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// WaitHealthy waits until every running member answers a status call with
// a leader.
func (c *Cluster) WaitHealthy(ctx context.Context, timeout time.Duration) error {
	cl := c.NewClient()
	deadline := time.Now().Add(timeout)
	for {
		var errs []error
		for _, m := range c.Members {
			if m.Stopped() {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cl.Status(sctx, m.ClientURL)
			cancel()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
			case st.Leader == 0:
				errs = append(errs, fmt.Errorf("%s: no leader", m.Name))
			}
		}
		if len(errs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd not healthy after %s: %w", timeout, errors.Join(errs...))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Leader is the member that leads, by asking each one.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	cl := c.NewClient()
	for _, m := range c.Members {
		if m.Stopped() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cl.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return m, nil
		}
	}
	return nil, errors.New("no member says it leads")
}

// MakeFollower waits for a leader and, when m leads, hands leadership to
// another running member, so that stopping or freezing m next costs the
// ring no election (the first election, under load, can go to any member).
func (c *Cluster) MakeFollower(ctx context.Context, m *Member) error {
	if err := c.WaitHealthy(ctx, 30*time.Second); err != nil {
		return err
	}
	leader, err := c.Leader(ctx)
	if err != nil || leader != m {
		return err
	}
	cl := c.NewClient(m.ClientURL)
	for _, o := range c.Members {
		if o == m || o.Stopped() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := cl.Status(sctx, o.ClientURL)
		if err == nil {
			_, err = cl.MoveLeader(sctx, st.Header.MemberId)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("etcdtest: move leadership from %s to %s: %w", m.Name, o.Name, err)
		}
		return c.WaitHealthy(ctx, 30*time.Second)
	}
	return fmt.Errorf("etcdtest: %s leads and no other member runs", m.Name)
}

// EnableAuth turns etcd authentication on in a TLS cluster as an
// administrator does: user root (no password: a client certificate's
// common name names the user) with the root role, then auth enable. From
// then on c.Client, and so NewClient, is root's client certificate, which
// it returns; the certificate it replaces (etcdtest-client, a user etcd
// does not know) reads and writes nothing.
func (c *Cluster) EnableAuth(ctx context.Context) (*pki.Leaf, error) {
	if c.CA == nil {
		return nil, errors.New("etcdtest: authentication needs TLS (Options.CA)")
	}
	cl := c.NewClient()
	if _, err := cl.UserAddWithOptions(ctx, "root", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		return nil, fmt.Errorf("etcdtest: add user root: %w", err)
	}
	if _, err := cl.UserGrantRole(ctx, "root", "root"); err != nil {
		return nil, fmt.Errorf("etcdtest: grant root the root role: %w", err)
	}
	if _, err := cl.AuthEnable(ctx); err != nil {
		return nil, fmt.Errorf("etcdtest: auth enable: %w", err)
	}
	leaf, err := c.CA.IssueClient("root", time.Now())
	if err != nil {
		return nil, err
	}
	c.Client = leaf
	return leaf, nil
}
