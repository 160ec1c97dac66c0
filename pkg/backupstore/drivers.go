package backupstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
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

// present lists the keys creds holds (never their values), for messages.
func present(creds map[string][]byte) string {
	var keys []string
	for k, v := range creds {
		if len(v) > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "no keys"
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

func value(creds map[string][]byte, key string) string {
	return strings.TrimSpace(string(creds[key]))
}

func openS3(ctx context.Context, loc Location, opts *etcdfedv1.S3StoreOptions, fromSecret bool, creds map[string][]byte) (*blob.Bucket, error) {
	if opts == nil {
		opts = &etcdfedv1.S3StoreOptions{}
	}
	if opts.Endpoint != "" {
		if _, err := ParseEndpoint(opts.Endpoint); err != nil {
			return nil, err
		}
	}
	region := opts.Region
	if region == "" {
		region = etcdfedv1.DefaultS3Region
	}
	var cfg aws.Config
	if fromSecret {
		id, secret := value(creds, etcdfedv1.BackupSecretAWSAccessKeyID), value(creds, etcdfedv1.BackupSecretAWSSecretAccessKey)
		if id == "" || secret == "" {
			return nil, fmt.Errorf("%w: an s3 store's credentials Secret needs both %s and %s (it has %s); a named Secret is never completed with the process's own identity", ErrCredentials, etcdfedv1.BackupSecretAWSAccessKeyID, etcdfedv1.BackupSecretAWSSecretAccessKey, present(creds))
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

func openGCS(ctx context.Context, loc Location, fromSecret bool, creds map[string][]byte) (*blob.Bucket, error) {
	var ts gcp.TokenSource
	if fromSecret {
		key := creds[etcdfedv1.BackupSecretGCPServiceAccount]
		if len(key) == 0 {
			return nil, fmt.Errorf("%w: a gs store's credentials Secret needs %s (it has %s); a named Secret is never completed with the process's own identity", ErrCredentials, etcdfedv1.BackupSecretGCPServiceAccount, present(creds))
		}
		if err := checkServiceAccount(key); err != nil {
			return nil, err
		}
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

func openAzure(ctx context.Context, loc Location, fromSecret bool, creds map[string][]byte) (*blob.Bucket, error) {
	account := value(creds, etcdfedv1.BackupSecretAzureAccount)
	key, sas := value(creds, etcdfedv1.BackupSecretAzureKey), value(creds, etcdfedv1.BackupSecretAzureSASToken)
	switch {
	case fromSecret && (account == "" || key == "" && sas == ""):
		return nil, fmt.Errorf("%w: an azblob store's credentials Secret needs %s with %s or %s (it has %s); a named Secret is never completed with the process's own identity or account", ErrCredentials, etcdfedv1.BackupSecretAzureAccount, etcdfedv1.BackupSecretAzureKey, etcdfedv1.BackupSecretAzureSASToken, present(creds))
	case !fromSecret:
		account = os.Getenv(etcdfedv1.BackupSecretAzureAccount)
		if account == "" {
			return nil, fmt.Errorf("%w: an azblob store without a credentials Secret needs %s in the process's environment", ErrCredentials, etcdfedv1.BackupSecretAzureAccount)
		}
	}
	containerURL, err := AzureContainerURL(account, loc.Bucket)
	if err != nil {
		return nil, err
	}
	if sas != "" {
		if _, err := url.ParseQuery(strings.TrimPrefix(sas, "?")); err != nil || strings.ContainsAny(sas, "#/ ") {
			return nil, fmt.Errorf("%w: %s is not a SAS query string (key=value&...)", ErrCredentials, etcdfedv1.BackupSecretAzureSASToken)
		}
	}
	var c *container.Client
	switch {
	case key != "":
		var cred *azblob.SharedKeyCredential
		if cred, err = azblob.NewSharedKeyCredential(account, key); err == nil {
			c, err = container.NewClientWithSharedKeyCredential(containerURL, cred, nil)
		}
	case sas != "":
		c, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), nil)
	default: // no Secret (a Secret without a key or SAS token was refused above)
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
