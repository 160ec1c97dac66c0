package localenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki holds the environment's CA and the files every apiserver uses. One
// CA signs every serving certificate and the admin client certificate, so
// one admin identity works in every cluster.
type pki struct {
	// mu serializes issuing: control planes start side by side and share
	// the kubelet client certificate, whose first issue must happen once
	// (two writers would race on its files and could pair one's
	// certificate with the other's key).
	mu              sync.Mutex
	dir             string
	caCert          *x509.Certificate
	caKey           *ecdsa.PrivateKey
	caPEM           []byte
	adminCertPEM    []byte
	adminKeyPEM     []byte
	saKey, saPub    string // paths
	caFile          string
	certValidity    time.Duration
	adminCommonName string
}

func loadOrCreatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, certValidity: 5 * 365 * 24 * time.Hour, adminCommonName: "etcdfed-admin",
		caFile: filepath.Join(dir, "ca.crt"), saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub")}
	caKeyFile := filepath.Join(dir, "ca.key")
	if _, err := os.Stat(p.caFile); errors.Is(err, os.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: "etcdfed-local-ca"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(p.certValidity),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, err
		}
		if err := writePEM(caKeyFile, "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
			return nil, err
		}
		if err := writePEM(p.caFile, "CERTIFICATE", der, 0o644); err != nil {
			return nil, err
		}
	}
	var err error
	if p.caPEM, err = os.ReadFile(p.caFile); err != nil {
		return nil, err
	}
	if p.caCert, err = parseCert(p.caPEM); err != nil {
		return nil, fmt.Errorf("pki: %s: %w", p.caFile, err)
	}
	keyPEM, err := os.ReadFile(caKeyFile)
	if err != nil {
		return nil, err
	}
	if p.caKey, err = parseECKey(keyPEM); err != nil {
		return nil, fmt.Errorf("pki: %s: %w", caKeyFile, err)
	}
	// Service-account signing key.
	if _, err := os.Stat(p.saKey); errors.Is(err, os.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
		if err != nil {
			return nil, err
		}
		if err := writePEM(p.saKey, "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
			return nil, err
		}
		if err := writePEM(p.saPub, "PUBLIC KEY", pub, 0o644); err != nil {
			return nil, err
		}
	}
	// Admin client certificate.
	adminCert, adminKey := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if _, err := os.Stat(adminCert); errors.Is(err, os.ErrNotExist) {
		if err := p.issue(adminCert, adminKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: p.adminCommonName, Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}); err != nil {
			return nil, err
		}
	}
	if p.adminCertPEM, err = os.ReadFile(adminCert); err != nil {
		return nil, err
	}
	if p.adminKeyPEM, err = os.ReadFile(adminKey); err != nil {
		return nil, err
	}
	return p, nil
}

// servingCert returns the apiserver serving certificate files of a cluster,
// creating them when absent.
func (p *pki) servingCert(cluster string, ip net.IP) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(p.dir, cluster+"-apiserver.crt"), filepath.Join(p.dir, cluster+"-apiserver.key")
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	err = p.issue(certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-" + cluster},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{ip, net.ParseIP("10.0.0.1"), net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return certFile, keyFile, err
}

// kubeletServingCert returns the files of the certificate a cluster's node
// agent serves its kubelet endpoint with, naming every node IP, creating
// them when absent or when the node IPs changed.
func (p *pki) kubeletServingCert(cluster string, nodeIPs []net.IP) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(p.dir, cluster+"-kubelet.crt"), filepath.Join(p.dir, cluster+"-kubelet.key")
	if certNamesIPs(certFile, nodeIPs) {
		return certFile, keyFile, nil
	}
	err = p.issue(certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kubelet-" + cluster},
		IPAddresses: nodeIPs,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return certFile, keyFile, err
}

// kubeletClientUser is the apiservers' user name towards kubelets.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// kubeletClientCert returns the files of the client certificate every
// apiserver presents to the node agents' kubelet endpoints, creating them
// when absent.
func (p *pki) kubeletClientCert() (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(p.dir, "apiserver-kubelet-client.crt"), filepath.Join(p.dir, "apiserver-kubelet-client.key")
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := os.Stat(certFile); err == nil {
		return certFile, keyFile, nil
	}
	err = p.issue(certFile, keyFile, &x509.Certificate{
		Subject:     pkix.Name{CommonName: kubeletClientUser},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return certFile, keyFile, err
}

// certNamesIPs reports whether the certificate in file exists and names
// every one of ips.
func certNamesIPs(file string, ips []net.IP) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	cert, err := parseCert(data)
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if cert.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

func (p *pki) issue(certFile, keyFile string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(p.certValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", mustMarshalEC(key), 0o600); err != nil {
		return err
	}
	return writePEM(certFile, "CERTIFICATE", der, 0o644)
}

// restConfig is an admin config for the apiserver at url.
func (p *pki) restConfig(url string) *rest.Config {
	return &rest.Config{
		Host: url,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: p.caPEM, CertData: p.adminCertPEM, KeyData: p.adminKeyPEM,
		},
		QPS: 50, Burst: 100,
	}
}

// kubeconfig renders a self-contained admin kubeconfig whose context,
// cluster and user are all named after the cluster.
func (p *pki) kubeconfig(cluster, url string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[cluster] = &clientcmdapi.Cluster{Server: url, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos[cluster] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminCertPEM, ClientKeyData: p.adminKeyPEM}
	cfg.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: cluster}
	cfg.CurrentContext = cluster
	return clientcmd.Write(*cfg)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func mustMarshalEC(k *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err)
	}
	return der
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	err = errors.Join(err, f.Chmod(mode), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func parseCert(data []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseECKey(data []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseECPrivateKey(b.Bytes)
}
