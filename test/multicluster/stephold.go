package multicluster

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdfedv1 "github.com/etcdfed/etcdfed/api/v1alpha1"
)

// stepHold is the hub-kill drill's hook, installed in the hub's apiserver
// and nowhere in the hub: a validating admission webhook on the status
// writes of one EtcdCluster. The hub takes an operation's step and then
// records it in the status; while the hook is armed, every status write
// that carries the operation waits in the webhook until the drill has
// looked at it (next). The drill kills the hub while the write that
// records the step it drills is held, and then refuses that write: the
// hub dies after the step's effect and before anything that follows it
// (its record, the next step), because its one reconcile of the ring is
// blocked in that write. The first write the restarted hub makes is held
// the same way, and says where the new hub resumed.
//
// The hook never slows an unarmed hub by more than a local HTTPS round
// trip, and with failurePolicy Fail a dead drill blocks only its own
// ring's status writes (the configuration is deleted by stop).
type stepHold struct {
	hub      *Cluster
	ns, name string
	srv      *httptest.Server
	config   string
	armed    bool
	mu       sync.Mutex
	writes   chan *heldWrite
}

// heldWrite is one status write of the hub that carries an operation,
// held until decide is called.
type heldWrite struct {
	At     time.Time
	Op     etcdfedv1.OperationType
	Member string
	// Step is "" in the write that ends the operation.
	Step string
	// Message is the operation's: what the step does, or what it waits
	// for (a step's record may be a wait for it: AddLearner waits for the
	// spoke to expose the new member, Promote for the learner to start).
	Message string
	// Begin: the write that records a new operation (its step a
	// placeholder; a Replace's reads CreateObjects before its
	// RemoveMember).
	Begin bool
	// Moved: the write changes the operation's record (a new step, a new
	// message for it, a new member ID) or begins one. A write that carries
	// the stored record unchanged (one of conditions, say) is not a record
	// of the hub's: the Begin record's placeholder step read as a step
	// would look like a jump two steps on, and an Add's first step,
	// CreateObjects, differs from its Begin record only in its message.
	Moved  bool
	answer chan bool // true: allow
}

func (w *heldWrite) String() string {
	s := fmt.Sprintf("%s %s@%s", w.Op, w.Member, orText(w.Step, "(finished)"))
	if w.Begin {
		s += " (begin)"
	}
	if w.Message != "" {
		s += fmt.Sprintf(" %q", w.Message)
	}
	return s
}

// allow lets the write through; refuse fails it (the hub is dead).
func (w *heldWrite) allow()  { w.answer <- true }
func (w *heldWrite) refuse() { w.answer <- false }

// startStepHold serves the webhook and registers it for the status writes
// of the EtcdCluster ns/name in the hub's apiserver. It starts unarmed.
func startStepHold(ctx context.Context, hub *Cluster, ns, name string) (*stepHold, error) {
	h := &stepHold{hub: hub, ns: ns, name: name, config: "etcdfed-drill-step-hold-" + ns + "-" + name, writes: make(chan *heldWrite)}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(h.serve))
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	url := h.srv.URL + "/validate"
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(10)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: h.config},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "step-hold.drill.etcdfed.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "the-drilled-ring", Expression: fmt.Sprintf("object.metadata.name == %q", name)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{etcdfedv1.GroupVersion.Group}, APIVersions: []string{etcdfedv1.GroupVersion.Version},
					Resources: []string{"etcdclusters/status"}},
			}},
		}},
	}
	api := hub.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if err := api.Delete(ctx, h.config, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		h.srv.Close()
		return nil, err
	}
	if _, err := api.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		h.srv.Close()
		return nil, fmt.Errorf("register the step hold: %w", err)
	}
	return h, nil
}

// stop deletes the webhook's registration and stops its server.
func (h *stepHold) stop() {
	h.setArmed(false)
	_ = h.hub.Clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), h.config, metav1.DeleteOptions{})
	h.srv.Close()
}

// setArmed starts or stops holding the writes that carry an operation.
func (h *stepHold) setArmed(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = on
}

// next returns the next held write, or an error after timeout. The
// caller must allow or refuse it at once: the hub gives up a status
// write after 5 s.
func (h *stepHold) next(ctx context.Context, timeout time.Duration) (*heldWrite, error) {
	select {
	case w := <-h.writes:
		return w, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no status write with an operation in %s", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (h *stepHold) serve(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	review := &admissionv1.AdmissionReview{}
	if err == nil {
		err = json.Unmarshal(body, review)
	}
	if err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("bad admission review: %v", err), http.StatusBadRequest)
		return
	}
	allowed, msg := h.review(r.Context(), review.Request)
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: allowed}
	if !allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	out := &admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// review holds a write that carries an operation while armed, until the
// drill answers it.
func (h *stepHold) review(ctx context.Context, req *admissionv1.AdmissionRequest) (bool, string) {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if !armed || req.Namespace != h.ns || req.Name != h.name {
		return true, ""
	}
	var obj, old etcdfedv1.EtcdCluster
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return true, ""
	}
	_ = json.Unmarshal(req.OldObject.Raw, &old)
	op, prev := obj.Status.Operation, old.Status.Operation
	var w *heldWrite
	switch {
	case op != nil:
		begin := prev == nil || prev.Type != op.Type || prev.Member != op.Member || prev.Incarnation != op.Incarnation || !prev.StartedAt.Equal(&op.StartedAt)
		w = &heldWrite{Op: op.Type, Member: op.Member, Step: op.Step, Message: op.Message, Begin: begin, Moved: begin || !reflect.DeepEqual(prev, op)}
	case prev != nil:
		// The write that ends the operation: no step.
		w = &heldWrite{Op: prev.Type, Member: prev.Member, Moved: true}
	default:
		return true, ""
	}
	w.At, w.answer = time.Now(), make(chan bool, 1)
	select {
	case h.writes <- w:
	case <-time.After(2 * time.Second):
		return true, "" // the drill is not listening
	case <-ctx.Done():
		return true, ""
	}
	select {
	case ok := <-w.answer:
		if !ok {
			return false, "etcdfed drill: the hub that made this write was killed while it was held"
		}
		return true, ""
	case <-ctx.Done():
		return true, ""
	}
}
