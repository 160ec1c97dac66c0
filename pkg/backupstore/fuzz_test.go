package backupstore

import (
	"encoding/json"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseURL: a store URL that parses names a bucket as the API
// describes one and a prefix without '.' or '..' segments, and prints
// back to a URL that parses to the same Location.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://bucket", "s3://bucket/a/b/", "gs://bkt/p", "azblob://cnt/p", "file:///var/backups",
		"s3://bucket:443/p", "s3://user@bucket", "s3://bucket/a/%2e%2e/b", "azblob://[::1]/p", "file://host/x", "s3://bucket/p?x=1#f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := ParseURL(raw)
		if err != nil {
			return
		}
		switch loc.Scheme {
		case "file":
			if !strings.HasPrefix(loc.Dir, "/") || loc.Bucket != "" || loc.Prefix != "" {
				t.Fatalf("%q: file location %+v", raw, loc)
			}
		case "s3", "gs", "azblob":
			if !bucketName.MatchString(loc.Bucket) {
				t.Fatalf("%q: bucket %q", raw, loc.Bucket)
			}
			if loc.Prefix != "" {
				for _, seg := range strings.Split(loc.Prefix, "/") {
					if seg == "" || seg == "." || seg == ".." || !prefixSegment.MatchString(seg) {
						t.Fatalf("%q: prefix segment %q", raw, seg)
					}
				}
			}
		default:
			t.Fatalf("%q: scheme %q", raw, loc.Scheme)
		}
		again, err := ParseURL(loc.String())
		if err != nil || again != loc {
			t.Fatalf("%q: String() %q parses to %+v, %v", raw, loc.String(), again, err)
		}
	})
}

// FuzzParseEndpoint: an endpoint that passes is http(s)://HOST[:PORT]:
// the host the SDK dials is the one the URL shows, with no user, path,
// query or fragment.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"https://minio.example.com:9000", "http://127.0.0.1:9000/", "https://u:p@h", "https://h/p", "https://h?x", "https://h#f",
		"https://[::1]:9000", "http://169.254.169.254", "http://[fe80::1%25eth0]:80", "https://h:0", "https://h:", "ftp://h", "https:h", "https://%68"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseEndpoint(raw)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(u.Host, "/@#?% ") {
			t.Fatalf("%q passed as %#v", raw, u)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && (ip.IsLinkLocalUnicast() || ip.IsUnspecified()) {
			t.Fatalf("%q passed: %s is a metadata-service-class address", raw, ip)
		}
		again, err := url.Parse(strings.TrimSuffix(raw, "/"))
		if err != nil || again.Host != u.Host {
			t.Fatalf("%q: the endpoint without its slash dials %v (%v), not %q", raw, again, err, u.Host)
		}
	})
}

// FuzzAzureContainerURL: whatever the account name and container, the
// container URL's host is ACCOUNT.blob.core.windows.net and its path the
// container, or the name is refused.
func FuzzAzureContainerURL(f *testing.F) {
	for _, s := range [][2]string{{"acct", "cnt"}, {"attacker.example/", "cnt"}, {"127.0.0.1:1#", "cnt"}, {"a@b", "cnt"}, {"acct", "c/../x"}, {"acct", "c?x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, account, container string) {
		raw, err := AzureContainerURL(account, container)
		if err != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if u.Scheme != "https" || u.Host != account+AzureBlobSuffix || u.User != nil || u.Path != "/"+container || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("account %q, container %q: %s", account, container, raw)
		}
		if strings.Count(u.Host, ".") != strings.Count(AzureBlobSuffix, ".") {
			t.Fatalf("account %q adds a label to the host %s", account, u.Host)
		}
	})
}

// FuzzCheckServiceAccount: a key that passes posts its assertion to
// Google's token endpoint (or the library's default, Google's).
func FuzzCheckServiceAccount(f *testing.F) {
	f.Add([]byte(`{"type":"service_account","token_uri":"https://oauth2.googleapis.com/token"}`))
	f.Add([]byte(`{"type":"service_account","token_uri":"https://attacker.example/token"}`))
	f.Add([]byte(`{"token_uri":"https://oauth2.googleapis.com/token","token_uri":"https://x"}`))
	f.Add([]byte(`{"universe_domain":"attacker.example"}`))
	f.Fuzz(func(t *testing.T, key []byte) {
		if checkServiceAccount(key) != nil {
			return
		}
		var f struct {
			TokenURI       string `json:"token_uri"`
			UniverseDomain string `json:"universe_domain"`
		}
		// The library reads the key with encoding/json too: what it sees
		// is what was checked.
		if err := json.Unmarshal(key, &f); err != nil {
			t.Fatalf("%q passed but does not decode: %v", key, err)
		}
		if !googleTokenURIs[f.TokenURI] || (f.UniverseDomain != "" && f.UniverseDomain != "googleapis.com") {
			t.Fatalf("%q passed with token_uri %q, universe_domain %q", key, f.TokenURI, f.UniverseDomain)
		}
	})
}
