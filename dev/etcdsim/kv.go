package etcdsim

import (
	"bytes"
	"context"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// store is a ring's keys: the latest version of each, no history (a read
// at an older revision reads the latest), shared by all members (no
// replication to simulate).
type store struct {
	rev       int64
	compacted int64
	kvs       map[string]*mvccpb.KeyValue
}

func cloneKV(kv *mvccpb.KeyValue) *mvccpb.KeyValue {
	return &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
}

func newStore() *store { return &store{rev: 1, kvs: map[string]*mvccpb.KeyValue{}} }

// inRange: etcd's key ranges: end empty is the key alone, "\x00" every
// key from key on.
func inRange(k, key, end []byte) bool {
	switch {
	case len(end) == 0:
		return bytes.Equal(k, key)
	case len(end) == 1 && end[0] == 0:
		return bytes.Compare(k, key) >= 0
	}
	return bytes.Compare(k, key) >= 0 && bytes.Compare(k, end) < 0
}

func (s *store) keys(key, end []byte) []string {
	var out []string
	for k := range s.kvs {
		if inRange([]byte(k), key, end) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (s *store) rangeKeys(q *pb.RangeRequest) *pb.RangeResponse {
	ks := s.keys(q.Key, q.RangeEnd)
	resp := &pb.RangeResponse{Count: int64(len(ks))}
	if q.CountOnly {
		return resp
	}
	if q.SortOrder == pb.RangeRequest_DESCEND {
		slices.Reverse(ks)
	}
	if q.Limit > 0 && int64(len(ks)) > q.Limit {
		ks, resp.More = ks[:q.Limit], true
	}
	for _, k := range ks {
		kv := cloneKV(s.kvs[k])
		if q.KeysOnly {
			kv.Value = nil
		}
		resp.Kvs = append(resp.Kvs, kv)
	}
	return resp
}

func (s *store) put(q *pb.PutRequest, rev int64) *pb.PutResponse {
	resp := &pb.PutResponse{}
	prev := s.kvs[string(q.Key)]
	kv := &mvccpb.KeyValue{Key: slices.Clone(q.Key), Value: slices.Clone(q.Value), CreateRevision: rev, ModRevision: rev, Version: 1, Lease: q.Lease}
	if prev != nil {
		kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
		if q.IgnoreValue {
			kv.Value = prev.Value
		}
		if q.PrevKv {
			resp.PrevKv = cloneKV(prev)
		}
	}
	s.kvs[string(q.Key)] = kv
	return resp
}

func (s *store) deleteRange(q *pb.DeleteRangeRequest) *pb.DeleteRangeResponse {
	resp := &pb.DeleteRangeResponse{}
	for _, k := range s.keys(q.Key, q.RangeEnd) {
		if q.PrevKv {
			resp.PrevKvs = append(resp.PrevKvs, cloneKV(s.kvs[k]))
		}
		delete(s.kvs, k)
		resp.Deleted++
	}
	return resp
}

func (s *store) compare(c *pb.Compare) bool {
	ks := s.keys(c.Key, c.RangeEnd)
	if len(ks) == 0 {
		// A missing key has version, create and mod revision 0 and no
		// value: a value comparison fails.
		if c.Target == pb.Compare_VALUE {
			return false
		}
		return cmpInt(0, targetInt(c), c.Result)
	}
	for _, k := range ks {
		kv := s.kvs[k]
		var ok bool
		switch c.Target {
		case pb.Compare_VERSION:
			ok = cmpInt(kv.Version, targetInt(c), c.Result)
		case pb.Compare_CREATE:
			ok = cmpInt(kv.CreateRevision, targetInt(c), c.Result)
		case pb.Compare_MOD:
			ok = cmpInt(kv.ModRevision, targetInt(c), c.Result)
		case pb.Compare_LEASE:
			ok = cmpInt(kv.Lease, targetInt(c), c.Result)
		case pb.Compare_VALUE:
			ok = cmpInt(int64(bytes.Compare(kv.Value, c.GetValue())), 0, c.Result)
		}
		if !ok {
			return false
		}
	}
	return true
}

func targetInt(c *pb.Compare) int64 {
	switch c.Target {
	case pb.Compare_VERSION:
		return c.GetVersion()
	case pb.Compare_CREATE:
		return c.GetCreateRevision()
	case pb.Compare_MOD:
		return c.GetModRevision()
	case pb.Compare_LEASE:
		return c.GetLease()
	}
	return 0
}

func cmpInt(a, b int64, r pb.Compare_CompareResult) bool {
	switch r {
	case pb.Compare_EQUAL:
		return a == b
	case pb.Compare_NOT_EQUAL:
		return a != b
	case pb.Compare_GREATER:
		return a > b
	case pb.Compare_LESS:
		return a < b
	}
	return false
}

// writes reports whether a transaction branch writes (a nested
// transaction: either of its branches).
func writes(ops []*pb.RequestOp) bool {
	for _, op := range ops {
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestPut, *pb.RequestOp_RequestDeleteRange:
			return true
		case *pb.RequestOp_RequestTxn:
			if writes(o.RequestTxn.Success) || writes(o.RequestTxn.Failure) {
				return true
			}
		}
	}
	return false
}

func (s *store) compareAll(cs []*pb.Compare) bool {
	for _, c := range cs {
		if !s.compare(c) {
			return false
		}
	}
	return true
}

// txn runs a transaction at revision rev (the one its writes get).
func (s *store) txn(q *pb.TxnRequest, rev int64) *pb.TxnResponse {
	ok := s.compareAll(q.Compare)
	ops := q.Failure
	if ok {
		ops = q.Success
	}
	resp := &pb.TxnResponse{Succeeded: ok}
	for _, op := range ops {
		switch o := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: s.rangeKeys(o.RequestRange)}})
		case *pb.RequestOp_RequestPut:
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: s.put(o.RequestPut, rev)}})
		case *pb.RequestOp_RequestDeleteRange:
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: s.deleteRange(o.RequestDeleteRange)}})
		case *pb.RequestOp_RequestTxn:
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: s.txn(o.RequestTxn, rev)}})
		}
	}
	return resp
}

type kvService struct {
	pb.UnimplementedKVServer
}

func (kvService) Range(ctx context.Context, req *pb.RangeRequest) (*pb.RangeResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.Serializable {
		r.mu.Lock()
	} else if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if err := r.auth.permitted(ci.commonName, req.Key, req.RangeEnd, false); err != nil {
		return nil, err
	}
	if req.Revision > r.kv.rev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	if req.Revision > 0 && req.Revision <= r.kv.compacted {
		return nil, rpctypes.ErrGRPCCompacted
	}
	resp := r.kv.rangeKeys(req)
	resp.Header = r.header(m)
	return resp, nil
}

// writeLocked: etcd refuses writes while a NOSPACE alarm is raised.
func (r *Ring) noSpaceLocked() bool {
	for _, a := range r.alarms {
		if a.Alarm == pb.AlarmType_NOSPACE {
			return true
		}
	}
	return false
}

func (kvService) Put(ctx context.Context, req *pb.PutRequest) (*pb.PutResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(req.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if err := r.auth.permitted(ci.commonName, req.Key, nil, true); err != nil {
		return nil, err
	}
	if r.noSpaceLocked() {
		return nil, rpctypes.ErrGRPCNoSpace
	}
	if (req.IgnoreValue || req.IgnoreLease) && r.kv.kvs[string(req.Key)] == nil {
		return nil, rpctypes.ErrGRPCKeyNotFound
	}
	r.kv.rev++
	resp := r.kv.put(req, r.kv.rev)
	r.commitLocked()
	resp.Header = r.header(m)
	return resp, nil
}

func (kvService) DeleteRange(ctx context.Context, req *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if len(req.Key) == 0 {
		return nil, rpctypes.ErrGRPCEmptyKey
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if err := r.auth.permitted(ci.commonName, req.Key, req.RangeEnd, true); err != nil {
		return nil, err
	}
	resp := r.kv.deleteRange(req)
	if resp.Deleted > 0 {
		r.kv.rev++
	}
	r.commitLocked()
	resp.Header = r.header(m)
	return resp, nil
}

func (kvService) Txn(ctx context.Context, req *pb.TxnRequest) (*pb.TxnResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	for _, c := range req.Compare {
		if err := r.auth.permitted(ci.commonName, c.Key, c.RangeEnd, false); err != nil {
			return nil, err
		}
	}
	w := writes(req.Failure)
	if r.kv.compareAll(req.Compare) {
		w = writes(req.Success)
	}
	if w && r.noSpaceLocked() {
		return nil, rpctypes.ErrGRPCNoSpace
	}
	rev := r.kv.rev
	if w {
		rev++
	}
	resp := r.kv.txn(req, rev)
	r.kv.rev = rev
	r.commitLocked()
	resp.Header = r.header(m)
	return resp, nil
}

func (kvService) Compact(ctx context.Context, req *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	r, m, ci, err := begin(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := r.waitQuorum(ctx, m); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	if err := r.auth.adminPermitted(ci.commonName); err != nil {
		return nil, err
	}
	switch {
	case req.Revision <= r.kv.compacted:
		return nil, rpctypes.ErrGRPCCompacted
	case req.Revision > r.kv.rev:
		return nil, rpctypes.ErrGRPCFutureRev
	}
	r.kv.compacted = req.Revision
	r.commitLocked()
	return &pb.CompactionResponse{Header: r.header(m)}, nil
}
