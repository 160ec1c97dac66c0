package backupstore_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/dev/s3test"
	"github.com/etcdfed/etcdfed/pkg/backupstore"
)

// hubIdentity gives this process (standing in for the hub, or a member
// node) ambient credentials for every store kind: the S3 server's root
// account in the environment, a Google service account file, an Azure
// storage account name. Each is what the SDKs' default chains pick up.
func hubIdentity(t *testing.T, srv *s3test.Server) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	sa := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(sa, serviceAccountJSON(t, ""), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", sa)
	t.Setenv(etcdfedv1.BackupSecretAzureAccount, "hubaccount")
}

// serviceAccountJSON is a Google service account key (a fresh RSA key;
// nothing accepts it), with tokenURI when set.
func serviceAccountJSON(t *testing.T, tokenURI string) []byte {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "hub@p.iam.gserviceaccount.com", "client_id": "1",
	}
	if tokenURI != "" {
		m["token_uri"] = tokenURI
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestNamedSecretWithoutKeysDoesNotUseAmbientCredentials: a spec that
// names a credentials Secret gets that Secret's credentials or an error,
// never the process's own identity. Before, a Secret without the keys the
// store expects (any Secret a tenant owns) made every driver fall back to
// the SDK's default chain: against the real S3 server below, the hub's
// environment credentials opened and listed a bucket the tenant holds no
// key for. The same fall-back existed for gs:// (the hub's service
// account) and azblob:// (the hub's managed identity, and the hub's
// storage account name when the Secret had none).
func TestNamedSecretWithoutKeysDoesNotUseAmbientCredentials(t *testing.T) {
	srv := s3test.StartT(t, "hub-only")
	hubIdentity(t, srv)
	s3store := srv.Store("hub-only", "", "tenant-secret")
	for _, tc := range []struct {
		name  string
		spec  etcdfedv1.BackupStore
		creds map[string][]byte
	}{
		{"s3, unrelated keys", s3store, map[string][]byte{"password": []byte("x")}},
		{"s3, empty Secret", s3store, nil},
		{"s3, session token only", s3store, map[string][]byte{etcdfedv1.BackupSecretAWSSessionToken: []byte("t")}},
		{"gs, unrelated keys", etcdfedv1.BackupStore{URL: "gs://hub-only", CredentialsSecretName: "tenant-secret"}, map[string][]byte{"password": []byte("x")}},
		{"azblob, account only", etcdfedv1.BackupStore{URL: "azblob://hub-only", CredentialsSecretName: "tenant-secret"}, map[string][]byte{etcdfedv1.BackupSecretAzureAccount: []byte("tenantaccount")}},
		{"azblob, key without account", etcdfedv1.BackupStore{URL: "azblob://hub-only", CredentialsSecretName: "tenant-secret"}, map[string][]byte{etcdfedv1.BackupSecretAzureKey: []byte("a2V5")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := backupstore.Open(context.Background(), tc.spec, tc.creds)
			if err == nil {
				defer s.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				t.Fatalf("opened %s with the process's own identity (check: %v); want ErrCredentials", tc.spec.URL, s.Check(ctx))
			}
			if !errors.Is(err, backupstore.ErrCredentials) {
				t.Fatalf("open: %v, want ErrCredentials", err)
			}
		})
	}
	// Without a Secret the process's identity is what the spec asked for
	// (the hub's policy decides whether a spec may ask): it still works.
	ambient := srv.Store("hub-only", "", "")
	s, err := backupstore.Open(context.Background(), ambient, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("ambient store: %v", err)
	}
}

// TestAzureAccountNameCannotPointAtAnotherHost: the storage account name
// is the first label of the container's host name. Before, an account
// name such as "127.0.0.1:PORT/" (or "attacker.example/") made the
// container URL https://127.0.0.1:PORT/.blob.core.windows.net/..., and the
// store dialled that host with whatever credential it held (a managed
// identity's bearer token on the SDK's challenge). The listener below
// stands for the foreign host: it must see no connection.
func TestAzureAccountNameCannotPointAtAnotherHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var dialled atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			_ = c.Close()
		}
	}()
	for _, account := range []string{ln.Addr().String() + "/", ln.Addr().String() + "#", "attacker.example/", "UPPER", "ab", "with-dash"} {
		t.Run(account, func(t *testing.T) {
			spec := etcdfedv1.BackupStore{URL: "azblob://c0ntainer", CredentialsSecretName: "tenant-secret"}
			creds := map[string][]byte{etcdfedv1.BackupSecretAzureAccount: []byte(account), etcdfedv1.BackupSecretAzureSASToken: []byte("sv=2022-11-02&sig=x")}
			s, err := backupstore.Open(context.Background(), spec, creds)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				cerr := s.Check(ctx)
				_ = s.Close()
				t.Fatalf("account %q opened (check: %v); want ErrCredentials", account, cerr)
			}
			if !errors.Is(err, backupstore.ErrCredentials) {
				t.Fatalf("open: %v, want ErrCredentials", err)
			}
		})
	}
	if n := dialled.Load(); n > 0 {
		t.Fatalf("the foreign host was dialled %d times", n)
	}
}

// TestStoreEndpointsValidated: an S3 endpoint is http(s)://HOST[:PORT],
// nothing else, and never a cloud metadata address (169.254.169.254 hands
// its instance's identity to whoever asks, and the store's error text
// lands in the tenant's status); a Google service account key sends its signed assertion
// only to Google's token endpoint. Before, a service account whose
// token_uri named any host made the hub post there and use what came
// back, and an endpoint with a path, query or user passed Open.
func TestStoreEndpointsValidated(t *testing.T) {
	for _, ep := range []string{"ftp://h", "https://", "https://u:p@h", "https://h/path", "https://h?x=1", "https://h#f", "h:9000", "https://h:99999",
		"http://169.254.169.254", "http://[fe80::1]:80", "http://[fd00:ec2::254]", "http://0.0.0.0:9000"} {
		spec := etcdfedv1.BackupStore{URL: "s3://bucket", CredentialsSecretName: "s", S3: &etcdfedv1.S3StoreOptions{Endpoint: ep}}
		creds := map[string][]byte{etcdfedv1.BackupSecretAWSAccessKeyID: []byte("id"), etcdfedv1.BackupSecretAWSSecretAccessKey: []byte("s")}
		if _, err := backupstore.Open(context.Background(), spec, creds); !errors.Is(err, backupstore.ErrInvalidStore) {
			t.Errorf("endpoint %q: %v, want ErrInvalidStore", ep, err)
		}
	}
	for _, uri := range []string{"https://127.0.0.1:1/token", "http://oauth2.googleapis.com/token"} {
		spec := etcdfedv1.BackupStore{URL: "gs://bucket", CredentialsSecretName: "s"}
		creds := map[string][]byte{etcdfedv1.BackupSecretGCPServiceAccount: serviceAccountJSON(t, uri)}
		if _, err := backupstore.Open(context.Background(), spec, creds); !errors.Is(err, backupstore.ErrCredentials) {
			t.Errorf("token_uri %q: %v, want ErrCredentials", uri, err)
		}
	}
	spec := etcdfedv1.BackupStore{URL: "gs://bucket", CredentialsSecretName: "s"}
	creds := map[string][]byte{etcdfedv1.BackupSecretGCPServiceAccount: serviceAccountJSON(t, "https://oauth2.googleapis.com/token")}
	s, err := backupstore.Open(context.Background(), spec, creds)
	if err != nil {
		t.Fatalf("Google's own token endpoint: %v", err)
	}
	_ = s.Close()
}
