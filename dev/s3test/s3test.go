// Package s3test runs a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw, built into bin/ by hack/tools.sh at a
// pinned version) with its posix backend over a temporary directory, on
// 127.0.0.1 and a free port. Test-only: production code never imports it.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/testenv"
)

// A test process, and every hub it starts, never asks a cloud metadata
// address (169.254.169.254) for credentials: tests talk to loopback only.
// The AWS SDK reads this variable; a store opened without credentials then
// fails at once instead.
func init() { _ = os.Setenv("AWS_EC2_METADATA_DISABLED", "true") }

// ErrNoBinary says bin/versitygw is missing.
var ErrNoBinary = errors.New("s3test: bin/versitygw not found; run `hack/tools.sh versitygw` (or make tools)")

// Credentials of the server's root account.
const (
	AccessKey = "etcdfed-test"
	SecretKey = "etcdfed-test-secret-key"
	Region    = etcdfedv1.DefaultS3Region
)

// Server is one running versitygw.
type Server struct {
	// Endpoint is http://127.0.0.1:PORT (or the host StartOn was given).
	Endpoint string
	// Dir is the posix backend's root: each bucket is a directory in it.
	Dir     string
	cmd     *exec.Cmd
	log     string
	exited  chan struct{} // closed when the process has exited
	waitErr error         // its exit status, once exited is closed
	stopped bool
}

// Start runs versitygw over dir (created when missing) and waits until it
// answers S3 requests. The process gets SIGKILL when the test binary dies
// (parent-death signal), so it never outlives the test.
func Start(ctx context.Context, dir string) (*Server, error) { return StartOn(ctx, dir, "127.0.0.1") }

// StartOn is Start listening on host (an address of this machine's
// network namespace, e.g. one pods of the local environment's real nodes
// reach) instead of 127.0.0.1.
func StartOn(ctx context.Context, dir, host string) (*Server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	var lastErr error
	for range 3 { // a free port can be taken between probe and listen
		s, err := start(ctx, bin, dir, host)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func binary() (string, error) {
	dir, err := testenv.BinDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoBinary, err)
	}
	return bin, nil
}

func start(ctx context.Context, bin, dir, host string) (*Server, error) {
	port, err := testenv.FreePortOn(host)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	logPath := filepath.Join(dir, fmt.Sprintf(".versitygw-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
		"--port", addr, "--quiet", "posix", dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s := &Server{Endpoint: "http://" + addr, Dir: dir, cmd: cmd, log: logPath}
	s.exited = make(chan struct{})
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.Client().ListBuckets(cctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("versitygw on %s exited (%w): %s", addr, s.waitErr, out)
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			s.kill()
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			s.kill()
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("versitygw on %s not answering after 30s: %w; log: %s", addr, err, out)
		}
	}
}

// StartT starts a server for one test over a temporary directory and
// stops it when the test ends. Buckets are created up front.
func StartT(t testing.TB, buckets ...string) *Server {
	t.Helper()
	return StartOnT(t, "127.0.0.1", buckets...)
}

// StartOnT is StartT listening on host (see StartOn).
func StartOnT(t testing.TB, host string, buckets ...string) *Server {
	t.Helper()
	testenv.SkipIfShort(t, "versitygw (an S3-compatible server)")
	s, err := StartOn(context.Background(), t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, b := range buckets {
		if err := s.CreateBucket(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Client is an S3 client for the server's root account.
func (s *Server) Client() *s3.Client {
	return s3.NewFromConfig(aws.Config{
		Region:      Region,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, ""),
	}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

// Credentials is the data of a credentials Secret for this server.
func (s *Server) Credentials() map[string][]byte {
	return map[string][]byte{
		etcdfedv1.BackupSecretAWSAccessKeyID:     []byte(AccessKey),
		etcdfedv1.BackupSecretAWSSecretAccessKey: []byte(SecretKey),
	}
}

// Store is a backup store spec for bucket/prefix on this server.
func (s *Server) Store(bucket, prefix, secretName string) etcdfedv1.BackupStore {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	return etcdfedv1.BackupStore{
		URL:                   u,
		CredentialsSecretName: secretName,
		// The server listens on loopback, without TLS.
		S3: &etcdfedv1.S3StoreOptions{Endpoint: s.Endpoint, Insecure: true, Region: Region, ForcePathStyle: true},
	}
}

// Pid is the server's process ID.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop stops the server by its pid: SIGTERM, then SIGKILL after 5s.
func (s *Server) Stop() error {
	if s.stopped {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.kill()
	}
	s.stopped = true
	return nil
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}
