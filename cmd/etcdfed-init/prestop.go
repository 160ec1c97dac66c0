package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdfed/etcdfed/pkg/topology"
)

func init() {
	var in prestopInput
	cmd := &cobra.Command{
		Use:   "prestop --endpoint URL [--ca FILE --cert FILE --key FILE]",
		Short: "Move leadership off this member before it stops (the etcd container's preStop hook)",
		Long: `prestop runs as the etcd container's preStop hook, before the member's etcd
receives SIGTERM (a pod deletion, a node drain, a roll, a CA rotation step, a
move). When this member leads, it hands leadership to another voter with
etcd's MoveLeader and waits (at most --timeout) until another member leads,
so that etcd's own shutdown never has to transfer leadership while it stops
serving clients. The new leader is the started voter whose applied index is
the highest, the one answering fastest among equals (the nearest).

A member that does not lead, a single-member ring, or an etcd that does not
answer: nothing to do. It never fails the stop: every error is reported and
the exit status is 0, so SIGTERM follows at once.`,
		Args:          cobra.NoArgs,
		SilenceErrors: true, // main prints the error
		RunE: func(cmd *cobra.Command, _ []string) error {
			report := func(format string, args ...any) {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s prestop: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), in.timeout)
			defer cancel()
			if err := prestop(ctx, in, report); err != nil {
				report("%v; etcd's own shutdown follows", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&in.endpoint, "endpoint", "", "This member's client URL (its advertised one: the DNS name matches its certificate).")
	f.StringVar(&in.ca, "ca", "", "CA file verifying the members (TLS rings).")
	f.StringVar(&in.cert, "cert", "", "Client certificate file (the member's own).")
	f.StringVar(&in.key, "key", "", "Client key file.")
	f.DurationVar(&in.timeout, "timeout", 10*time.Second, "Give up after this long (keep it below the pod's termination grace).")
	root.AddCommand(cmd)
}

type prestopInput struct {
	endpoint, ca, cert, key string
	timeout                 time.Duration
}

// prestop moves leadership off the member at in.endpoint when it leads.
func prestop(ctx context.Context, in prestopInput, report func(string, ...any)) error {
	if in.endpoint == "" {
		return errors.New("--endpoint is required")
	}
	tc, err := prestopTLS(in)
	if err != nil {
		return err
	}
	self, err := newClient(in.endpoint, tc)
	if err != nil {
		return err
	}
	defer self.Close()
	// A member that cannot say within statusTimeout whether it leads (its
	// DNS name already gone, as when the whole ring is deleted) is left to
	// etcd's own shutdown: waiting longer only delays the stop.
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	st, err := self.Status(sctx, in.endpoint)
	cancel()
	if err != nil {
		return fmt.Errorf("read status: %w", err)
	}
	id := st.Header.MemberId
	if st.Leader != id {
		report("member %x does not lead (leader %x): nothing to move", id, st.Leader)
		return nil
	}
	ml, err := self.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	var cands []candidate
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range ml.Members {
		if m.ID == id || m.IsLearner || m.Name == "" || len(m.ClientURLs) == 0 {
			continue // not started, a learner, or this member
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := candidate{id: m.ID, name: m.Name}
			c.applied, c.rtt, c.err = probe(ctx, m.ClientURLs, tc)
			mu.Lock()
			cands = append(cands, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	to, ok := chooseSuccessor(cands)
	if !ok {
		return fmt.Errorf("no voter to hand leadership to (%d candidates, none answered)", len(cands))
	}
	start := time.Now()
	report("member %x leads: moving leadership to %s (%x, applied %d, %s away)", id, to.name, to.id, to.applied, to.rtt.Round(time.Microsecond))
	if _, err := self.MoveLeader(ctx, to.id); err != nil {
		return fmt.Errorf("move leadership to %s: %w", to.name, err)
	}
	// MoveLeader returns once the target leads as this member sees it;
	// confirm from here so that SIGTERM finds a follower.
	for {
		st, err := self.Status(ctx, in.endpoint)
		if err == nil && st.Leader != id && st.Leader != 0 {
			report("leadership moved to %x in %s", st.Leader, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the move to %s: %w", to.name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// statusTimeout bounds the first question to this member (does it lead?).
// A ring deleted whole stopped every member's pod 10 s late (the hook's
// whole --timeout) while the members' names no longer resolved.
const statusTimeout = 2 * time.Second

// candidate is a voter leadership may go to.
type candidate struct {
	id, applied uint64
	name        string
	rtt         time.Duration
	err         error
}

// chooseSuccessor picks, among the voters that answered, the one to hand
// leadership to (topology.ChooseSuccessor: the most up to date, then the
// fastest answer, the nearest to this member, then the lowest ID): the
// same choice the hub makes when it moves leadership off a member.
func chooseSuccessor(cands []candidate) (candidate, bool) {
	byID := map[uint64]candidate{}
	var succ []topology.Successor
	for _, c := range cands {
		if c.err == nil {
			byID[c.id] = c
			succ = append(succ, topology.Successor{ID: c.id, Applied: c.applied, Away: c.rtt})
		}
	}
	s, ok := topology.ChooseSuccessor(succ)
	return byID[s.ID], ok
}

// probe reads a member's applied index and how long its status took.
func probe(ctx context.Context, urls []string, tc *tls.Config) (applied uint64, rtt time.Duration, err error) {
	cli, err := newClient(urls[0], tc)
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	st, err := cli.Status(ctx, urls[0])
	if err != nil {
		return 0, 0, fmt.Errorf("status of %s: %w", urls[0], err)
	}
	return st.RaftAppliedIndex, time.Since(start), nil
}

func newClient(endpoint string, tc *tls.Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 2 * time.Second,
		TLS:         tc,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", endpoint, err)
	}
	return cli, nil
}

func prestopTLS(in prestopInput) (*tls.Config, error) {
	if in.ca == "" && in.cert == "" {
		return nil, nil
	}
	read := func(path string) ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read TLS file: %w", err)
		}
		defer f.Close()
		return io.ReadAll(f)
	}
	ca, err := read(in.ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("read TLS file: %s holds no PEM certificate", in.ca)
	}
	pair, err := tls.LoadX509KeyPair(in.cert, in.key)
	if err != nil {
		return nil, fmt.Errorf("read client key pair: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}
