package backupstore

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// Names in store URLs, as the API's validation describes them. A store
// spec stored before a CRD rule existed, or one that reaches a spoke
// through an EtcdMember, is held to the same rules here.
var (
	bucketName    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$`)
	prefixSegment = regexp.MustCompile(`^[A-Za-z0-9._~=+@-]+$`)
	// azureAccount: Azure storage account names are 3 to 24 lowercase
	// letters and digits. The name becomes the first label of the
	// container's host, ACCOUNT.blob.core.windows.net, so nothing else
	// may pass: a '/', ':', '#', '@' or '.' would move the host elsewhere.
	azureAccount = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
)

// AzureBlobSuffix is the host suffix of every Azure Blob Storage account
// (the public cloud).
const AzureBlobSuffix = ".blob.core.windows.net"

// AzureContainerURL is the URL of container in storage account, after
// checking that account is an Azure storage account name, so the URL's
// host is always ACCOUNT.blob.core.windows.net.
func AzureContainerURL(account, container string) (string, error) {
	if !azureAccount.MatchString(account) {
		return "", fmt.Errorf("%w: %s %q is not an Azure storage account name (3-24 lowercase letters and digits)", ErrCredentials, etcdfedv1.BackupSecretAzureAccount, account)
	}
	if !bucketName.MatchString(container) {
		return "", fmt.Errorf("%w: container %q is not a container name", ErrInvalidStore, container)
	}
	return "https://" + account + AzureBlobSuffix + "/" + container, nil
}

// awsMetadataV6 is the instance metadata service's IPv6 address on AWS.
var awsMetadataV6 = netip.MustParseAddr("fd00:ec2::254")

// ParseEndpoint checks an S3-compatible endpoint (spec s3.endpoint):
// http or https, a host with an optional port, nothing else (no user, no
// path, no query, no fragment).
func ParseEndpoint(raw string) (*url.URL, error) {
	bad := func(why string) (*url.URL, error) {
		return nil, fmt.Errorf("%w: s3.endpoint %q: %s; it must be http(s)://HOST[:PORT]", ErrInvalidStore, raw, why)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return bad(err.Error())
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("scheme is not http or https")
	case u.Opaque != "" || u.Hostname() == "":
		return bad("no host")
	case u.User != nil:
		return bad("it carries a user or password")
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.Contains(raw, "#"):
		return bad("it has a path, query or fragment")
	case strings.ContainsAny(u.Hostname(), "%/@ "):
		return bad("the host has characters no host name has")
	}
	// 169.254.169.254 and fd00:ec2::254 answer for the cloud identity of
	// whoever asks, and the store's error text lands in the spec author's
	// status: the hub is never pointed there.
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && (ip.IsLinkLocalUnicast() || ip.IsUnspecified() || ip.IsMulticast() || ip == awsMetadataV6) {
		return bad("a link-local, unspecified or multicast address, such as a cloud metadata service's")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return bad("port out of range")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return bad("empty port")
	}
	return u, nil
}

// Google's token endpoints: a service account key's signed assertion goes
// to one of these or nowhere.
var googleTokenURIs = map[string]bool{
	"":                                    true, // the library's default, Google's own
	"https://oauth2.googleapis.com/token": true,
	"https://accounts.google.com/o/oauth2/token": true,
}

// checkServiceAccount refuses a service account key whose token_uri (where
// the signed assertion is posted, and whose answer becomes the bearer
// token) or universe_domain is not Google's.
func checkServiceAccount(key []byte) error {
	var f struct {
		Type           string `json:"type"`
		TokenURI       string `json:"token_uri"`
		UniverseDomain string `json:"universe_domain"`
	}
	if err := json.Unmarshal(key, &f); err != nil {
		return fmt.Errorf("%w: %s is not a service account key: %w", ErrCredentials, etcdfedv1.BackupSecretGCPServiceAccount, err)
	}
	if !googleTokenURIs[f.TokenURI] {
		return fmt.Errorf("%w: %s: token_uri %q is not Google's token endpoint (https://oauth2.googleapis.com/token)", ErrCredentials, etcdfedv1.BackupSecretGCPServiceAccount, f.TokenURI)
	}
	if f.UniverseDomain != "" && f.UniverseDomain != "googleapis.com" {
		return fmt.Errorf("%w: %s: universe_domain %q is not googleapis.com", ErrCredentials, etcdfedv1.BackupSecretGCPServiceAccount, f.UniverseDomain)
	}
	return nil
}
