package backupstore

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// hasAny: creds holds at least one of keys (a Secret meant for this store).
func hasAny(creds map[string][]byte, keys ...string) bool {
	for _, k := range keys {
		if len(creds[k]) > 0 {
			return true
		}
	}
	return false
}

func value(creds map[string][]byte, key string) string {
	return strings.TrimSpace(string(creds[key]))
}

func openS3(ctx context.Context, loc Location, opts *etcdfedv1.S3StoreOptions, creds map[string][]byte) (*blob.Bucket, error) {
	if opts == nil {
		opts = &etcdfedv1.S3StoreOptions{}
	}
	region := opts.Region
	if region == "" {
		region = etcdfedv1.DefaultS3Region
	}
	var cfg aws.Config
	if hasAny(creds, etcdfedv1.BackupSecretAWSAccessKeyID, etcdfedv1.BackupSecretAWSSecretAccessKey) {
		id, secret := value(creds, etcdfedv1.BackupSecretAWSAccessKeyID), value(creds, etcdfedv1.BackupSecretAWSSecretAccessKey)
		if id == "" || secret == "" {
			return nil, fmt.Errorf("%w: an s3 store needs both %s and %s", ErrCredentials, etcdfedv1.BackupSecretAWSAccessKeyID, etcdfedv1.BackupSecretAWSSecretAccessKey)
		}
		cfg = aws.Config{
			Region:      region,
			Credentials: credentials.NewStaticCredentialsProvider(id, secret, value(creds, etcdfedv1.BackupSecretAWSSessionToken)),
		}
	} else {
		var err error
		if cfg, err = awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region)); err != nil {
			return nil, fmt.Errorf("%w: AWS default credentials: %w", ErrCredentials, err)
		}
	}
	cfg.RetryMaxAttempts = 3
	// S3-compatible stores: only the checksums S3 itself requires. The SDK's
	// default (a CRC trailer on every upload) is not supported by many of
	// them; integrity is still checked with Content-MD5 and our own sha256.
	checksums := aws.RequestChecksumCalculationWhenSupported
	if opts.Endpoint != "" {
		checksums = aws.RequestChecksumCalculationWhenRequired
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(strings.TrimSuffix(opts.Endpoint, "/"))
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
		o.RequestChecksumCalculation = checksums
		o.UsePathStyle = opts.ForcePathStyle
	})
	b, err := s3blob.OpenBucket(ctx, client, loc.Bucket, &s3blob.Options{RequestChecksumCalculation: checksums})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStore, err)
	}
	return b, nil
}

func openGCS(ctx context.Context, loc Location, creds map[string][]byte) (*blob.Bucket, error) {
	var ts gcp.TokenSource
	if key := creds[etcdfedv1.BackupSecretGCPServiceAccount]; len(key) > 0 {
		c, err := google.CredentialsFromJSONWithType(ctx, key, google.ServiceAccount, "https://www.googleapis.com/auth/devstorage.read_write")
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCredentials, etcdfedv1.BackupSecretGCPServiceAccount, err)
		}
		ts = c.TokenSource
	} else {
		c, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: Google default credentials: %w", ErrCredentials, err)
		}
		ts = gcp.CredentialsTokenSource(c)
	}
	client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), ts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStore, err)
	}
	b, err := gcsblob.OpenBucket(ctx, client, loc.Bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStore, err)
	}
	return b, nil
}

func openAzure(ctx context.Context, loc Location, creds map[string][]byte) (*blob.Bucket, error) {
	account := value(creds, etcdfedv1.BackupSecretAzureAccount)
	if account == "" {
		account = os.Getenv(etcdfedv1.BackupSecretAzureAccount)
	}
	if account == "" {
		return nil, fmt.Errorf("%w: an azblob store needs %s (in the credentials Secret or the hub's environment)", ErrCredentials, etcdfedv1.BackupSecretAzureAccount)
	}
	containerURL := fmt.Sprintf("https://%s.blob.core.windows.net/%s", account, loc.Bucket)
	var (
		c   *container.Client
		err error
	)
	switch key, sas := value(creds, etcdfedv1.BackupSecretAzureKey), value(creds, etcdfedv1.BackupSecretAzureSASToken); {
	case key != "":
		var cred *azblob.SharedKeyCredential
		if cred, err = azblob.NewSharedKeyCredential(account, key); err == nil {
			c, err = container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
		}
	case sas != "":
		c, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), nil)
	default:
		var cred *azidentity.DefaultAzureCredential
		if cred, err = azidentity.NewDefaultAzureCredential(nil); err == nil {
			c, err = container.NewClient(containerURL, cred, nil)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: Azure storage account %s: %w", ErrCredentials, account, err)
	}
	b, err := azureblob.OpenBucket(ctx, c, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStore, err)
	}
	return b, nil
}

func openFile(loc Location) (*blob.Bucket, error) {
	b, err := fileblob.OpenBucket(loc.Dir, &fileblob.Options{CreateDir: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, loc.Dir, err)
	}
	return b, nil
}
