package etcdcluster

import (
	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// requests are what the ring's annotations ask of the hub, each read once
// per decision: the recovery request (etcdfed.dev/recover), the fencing
// confirmation (etcdfed.dev/fenced) and the CA rotation request
// (etcdfed.dev/rotate-ca). A request is nil when its annotation is absent;
// one that does not parse keeps its error.
type requests struct {
	recover    *etcdfedv1.RecoveryRequest
	recoverErr error
	fenced     *etcdfedv1.FencingConfirmation
	fencedErr  error
	// rotateCA is nil also when the value does not parse: the CLI writes
	// it, and such a value is no request.
	rotateCA *etcdfedv1.CARotationRequest
}

// readRequests parses ec's request annotations.
func readRequests(ec *etcdfedv1.EtcdCluster) *requests {
	q := &requests{}
	if v, ok := ec.Annotations[etcdfedv1.AnnotationRecover]; ok {
		r, err := etcdfedv1.ParseRecoveryRequest(v)
		if q.recoverErr = err; err == nil {
			q.recover = &r
		}
	}
	if v, ok := ec.Annotations[etcdfedv1.AnnotationFenced]; ok {
		f, err := etcdfedv1.ParseFencingConfirmation(v)
		if q.fencedErr = err; err == nil {
			q.fenced = &f
		}
	}
	if v, ok := ec.Annotations[etcdfedv1.AnnotationRotateCA]; ok {
		if r, err := etcdfedv1.ParseCARotationRequest(v); err == nil {
			q.rotateCA = &r
		}
	}
	return q
}

// requests is what the ring's annotations ask: decide reads them once,
// first (s.asks), for itself and for the status; a function reached
// without decide (a test's) reads them itself.
func (s *snapshot) requests() *requests {
	if s.asks != nil {
		return s.asks
	}
	return readRequests(s.ec)
}
