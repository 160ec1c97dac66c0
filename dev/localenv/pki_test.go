package localenv

import (
	"crypto/tls"
	"sync"
	"testing"
)

// TestKubeletClientCertIssuedOnce: control planes start side by side and
// ask for the shared kubelet client certificate at once. Every caller gets
// files that exist and form one pair. Unserialized, the writers raced on
// one temporary file ("rename ... .tmp: no such file or directory", seen in
// a CI run) and could pair one's certificate with another's key.
func TestKubeletClientCertIssuedOnce(t *testing.T) {
	for range 20 {
		p, err := loadOrCreatePKI(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				cert, key, err := p.kubeletClientCert()
				if err == nil {
					_, err = tls.LoadX509KeyPair(cert, key)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
