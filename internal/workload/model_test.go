package workload

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, in KVInput, out KVOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Return: ret, Output: out}
}

func put(k, v string) KVInput { return KVInput{Op: OpPut, Key: k, Value: v} }
func get(k string) KVInput    { return KVInput{Op: OpGet, Key: k} }
func val(v string) KVOutput   { return KVOutput{Value: v, Found: true} }

// The model accepts what a linearizable store may answer and rejects what
// it may not, including around puts whose outcome is unknown.
func TestKVModel(t *testing.T) {
	inf := int64(math.MaxInt64)
	for _, tc := range []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read your write", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), KVOutput{}),
			op(1, 20, 30, get("a"), val("1")),
		}, true},
		{"stale read after acknowledged write", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), KVOutput{}),
			op(0, 11, 20, put("a", "2"), KVOutput{}),
			op(1, 30, 40, get("a"), val("1")),
		}, false},
		{"lost acknowledged write", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), KVOutput{}),
			op(1, 20, 30, get("a"), KVOutput{}),
		}, false},
		{"concurrent read may see either", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), KVOutput{}),
			op(0, 11, 30, put("a", "2"), KVOutput{}),
			op(1, 12, 20, get("a"), val("1")),
			op(2, 21, 29, get("a"), val("2")),
		}, true},
		{"unknown put may have happened", []porcupine.Operation{
			op(0, 0, inf, put("a", "1"), KVOutput{Unknown: true}),
			op(1, 20, 30, get("a"), val("1")),
		}, true},
		{"unknown put may not have happened", []porcupine.Operation{
			op(0, 0, inf, put("a", "1"), KVOutput{Unknown: true}),
			op(1, 20, 30, get("a"), KVOutput{}),
		}, true},
		{"unknown put cannot happen before its call", []porcupine.Operation{
			op(1, 0, 10, get("a"), val("1")),
			op(0, 20, inf, put("a", "1"), KVOutput{Unknown: true}),
		}, false},
		{"keys are independent", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), KVOutput{}),
			op(1, 20, 30, get("b"), KVOutput{}),
		}, true},
	} {
		got := porcupine.CheckOperationsTimeout(KVModel, tc.ops, 10*time.Second) == porcupine.Ok
		if got != tc.want {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The recorder's check reports a bad history and leaves a visualization.
func TestRecorderReportsViolation(t *testing.T) {
	r := NewRecorder()
	r.ops = []porcupine.Operation{
		op(0, 0, 10, put("a", "1"), KVOutput{}),
		op(1, 20, 30, get("a"), KVOutput{}),
	}
	dir := t.TempDir()
	err := r.CheckLinearizable(10*time.Second, dir)
	if err == nil {
		t.Fatal("lost write not reported")
	}
	t.Log(err)
}
