package nodeagent

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_IP": "127.1.17.10", "NAME": "main-0", "EMPTY": ""}
	for _, tc := range []struct{ in, want string }{
		{"--listen-peer-urls=http://$(POD_IP):2380", "--listen-peer-urls=http://127.1.17.10:2380"},
		{"$(NAME)=$(POD_IP)", "main-0=127.1.17.10"},
		{"$(UNDEFINED) stays", "$(UNDEFINED) stays"},
		{"$$(POD_IP) is escaped", "$(POD_IP) is escaped"},
		{"a$(EMPTY)b", "ab"},
		{"cost $5", "cost $5"},
		{"trailing $", "trailing $"},
		{"unterminated $(POD_IP", "unterminated $(POD_IP"},
		{"$$$(NAME)", "$main-0"},
	} {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPathMapRewrite(t *testing.T) {
	pm := newPathMap(map[string]string{
		"/var/lib/etcd":     "/state/volumes/pvc-1",
		"/etc/etcd/tls/":    "/state/pods/p/volumes/tls",
		"/etc/etcd/tls/sub": "/state/pods/p/volumes/sub",
	})
	for _, tc := range []struct{ in, want string }{
		{"--data-dir=/var/lib/etcd/data", "--data-dir=/state/volumes/pvc-1/data"},
		{"/var/lib/etcd", "/state/volumes/pvc-1"},
		{"--cert-file=/etc/etcd/tls/tls.crt", "--cert-file=/state/pods/p/volumes/tls/tls.crt"},
		{"/etc/etcd/tls/sub/x", "/state/pods/p/volumes/sub/x"},
		{"/var/lib/etcdfoo", "/var/lib/etcdfoo"},
		{"/other/var/lib/etcd", "/other/var/lib/etcd"},
		{"a:/var/lib/etcd,/etc/etcd/tls", "a:/state/volumes/pvc-1,/state/pods/p/volumes/tls"},
		{"file:///var/lib/etcd/x", "file:///state/volumes/pvc-1/x"},
		{"http://main-0.etcd.test:2380", "http://main-0.etcd.test:2380"},
	} {
		if got := pm.rewrite(tc.in); got != tc.want {
			t.Errorf("rewrite(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
