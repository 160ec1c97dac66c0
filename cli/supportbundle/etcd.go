package supportbundle

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
	"github.com/etcdfed/etcdfed/hub/pki"
)

// etcd asks every endpoint of the ring for its status, the member list and
// the alarms, with the hub's client certificate (read, used in memory,
// never written).
func (b *bundle) etcd(ctx context.Context, hub client.Client, ec *etcdfedv1.EtcdCluster, o Options) {
	if len(ec.Status.Endpoints) == 0 {
		b.fail("etcd", fmt.Errorf("the EtcdCluster has no endpoints in its status yet"))
		return
	}
	cfg := clientv3.Config{Endpoints: ec.Status.Endpoints, DialTimeout: o.Timeout}
	if ec.Spec.TLS.Mode.Enabled() {
		sec := &corev1.Secret{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: ec.Namespace, Name: pki.HubClientSecretName(ec)}, sec); err != nil {
			b.fail("etcd: the hub's client certificate", err)
			return
		}
		b.keep(sec)
		tlsCfg, err := pki.ClientTLS(sec.Data[pki.KeyCA], &pki.Leaf{CertPEM: sec.Data[pki.KeyCert], KeyPEM: sec.Data[pki.KeyKey]})
		if err != nil {
			b.fail("etcd: the hub's client certificate", err)
			return
		}
		cfg.TLS = tlsCfg
	}
	cl, err := clientv3.New(cfg)
	if err != nil {
		b.fail("etcd", err)
		return
	}
	defer cl.Close()
	type status struct {
		Endpoint  string   `json:"endpoint"`
		Error     string   `json:"error,omitempty"`
		ID        string   `json:"id,omitempty"`
		Version   string   `json:"version,omitempty"`
		DBSize    int64    `json:"dbSize,omitempty"`
		DBInUse   int64    `json:"dbSizeInUse,omitempty"`
		Leader    string   `json:"leader,omitempty"`
		IsLearner bool     `json:"isLearner,omitempty"`
		RaftIndex uint64   `json:"raftIndex,omitempty"`
		RaftTerm  uint64   `json:"raftTerm,omitempty"`
		Errors    []string `json:"errors,omitempty"`
	}
	var out []status
	for _, ep := range ec.Status.Endpoints {
		sctx, cancel := context.WithTimeout(ctx, o.Timeout)
		r, err := cl.Status(sctx, ep)
		cancel()
		st := status{Endpoint: ep}
		if err != nil {
			st.Error = err.Error()
		} else {
			st.ID, st.Version, st.DBSize, st.DBInUse = fmt.Sprintf("%x", r.Header.MemberId), r.Version, r.DbSize, r.DbSizeInUse
			st.Leader, st.IsLearner, st.RaftIndex, st.RaftTerm, st.Errors = fmt.Sprintf("%x", r.Leader), r.IsLearner, r.RaftIndex, r.RaftTerm, r.Errors
		}
		out = append(out, st)
	}
	data, _ := json.MarshalIndent(out, "", "  ")
	b.add("etcd/endpoint-status.json", data)
	sctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if ml, err := cl.MemberList(sctx); err != nil {
		b.fail("etcd member list", err)
	} else {
		data, _ := json.MarshalIndent(ml.Members, "", "  ")
		b.add("etcd/member-list.json", data)
	}
	if al, err := cl.AlarmList(sctx); err != nil {
		b.fail("etcd alarms", err)
	} else {
		data, _ := json.MarshalIndent(al.Alarms, "", "  ")
		b.add("etcd/alarms.json", data)
	}
}
