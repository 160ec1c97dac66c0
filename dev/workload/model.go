package workload

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// Operation kinds of KVInput.
const (
	OpPut = "put"
	OpGet = "get"
)

// KVInput is one operation on the key-value model.
type KVInput struct {
	Op    string // OpPut or OpGet
	Key   string
	Value string // put
}

// KVOutput is what the operation returned.
type KVOutput struct {
	// Value and Found are a get's answer.
	Value string
	Found bool
	// Unknown marks a put whose outcome is unknown (error or timeout): it
	// may have taken effect at any time after its call, or never.
	Unknown bool
	// Revision is the revision an acknowledged put was applied at (its
	// response header's revision).
	Revision int64
	// Initial marks the value a key held before the workload began (an
	// earlier run with the same prefix left it): Recorder.Initial.
	Initial bool
}

type kvState struct {
	value string
	found bool
}

// KVModel is a linearizable register per key: a get returns the value of
// the latest put. The history is partitioned by key.
var KVModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(KVInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(kvState), input.(KVInput), output.(KVOutput)
		switch in.Op {
		case OpPut:
			return true, kvState{value: in.Value, found: true}
		case OpGet:
			return out.Found == st.found && out.Value == st.value, st
		}
		return false, st
	},
	Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(KVInput), output.(KVOutput)
		if in.Op == OpPut {
			if out.Unknown {
				return fmt.Sprintf("put(%s, %s) -> ?", in.Key, in.Value)
			}
			if out.Initial {
				return fmt.Sprintf("initially %s = %s @%d", in.Key, in.Value, out.Revision)
			}
			return fmt.Sprintf("put(%s, %s) @%d", in.Key, in.Value, out.Revision)
		}
		if !out.Found {
			return fmt.Sprintf("get(%s) -> <none>", in.Key)
		}
		return fmt.Sprintf("get(%s) -> %s", in.Key, out.Value)
	},
	DescribeState: func(state any) string {
		st := state.(kvState)
		if !st.found {
			return "<none>"
		}
		return st.value
	},
}
