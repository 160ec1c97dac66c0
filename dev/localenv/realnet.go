package localenv

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"

	"github.com/etcdfed/etcdfed/dev/localenv/addr"
	"github.com/etcdfed/etcdfed/dev/localenv/realnode"
)

// Environment variables a program re-run by EnterOwnNetwork finds.
const (
	envNetns  = "ETCDFED_NETNS"
	envSlot   = "ETCDFED_SLOT"
	envSlotFD = "ETCDFED_SLOT_FD"
)

// NetnsName is the network namespace of the real-node environment on slot.
func NetnsName(slot int) string { return fmt.Sprintf("etcdfed-%d", slot) }

// nodeNetnsPrefix prefixes the node namespaces of the environment on slot.
func nodeNetnsPrefix(slot int) string { return NetnsName(slot) + "-" }

// EnterOwnNetwork makes this program run in a network namespace of its
// own, which real nodes need: their apiservers, nodes, pods and load
// balancers have addresses that must never appear on the machine's own
// network. The first call acquires an address slot (the state
// directory's, when stateDir holds one), creates the namespace
// etcdfed-<slot> (`ip netns exec etcdfed-<slot> CMD` enters it) and
// re-runs this program in it: same pid, arguments and environment, plus
// the slot. It does not return then. In the re-run program it returns the
// namespace's name at once. Needs root.
func EnterOwnNetwork(stateDir string) (string, error) {
	if name := os.Getenv(envNetns); name != "" && realnode.SameNetns(name) {
		return name, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("real nodes need root (network namespaces, mounts, cgroups)")
	}
	want := 0
	if stateDir != "" {
		if st, err := LoadState(stateDir); err == nil {
			want = st.Slot
		}
	}
	slot, err := addr.Acquire(want)
	if err != nil {
		return "", err
	}
	name := NetnsName(slot.Slot)
	// What a crashed run on this slot left: its node namespaces.
	for _, n := range realnode.ListNetns(nodeNetnsPrefix(slot.Slot)) {
		_ = realnode.DeleteNetns(n)
	}
	if err := realnode.CreateNetns(name); err != nil {
		slot.Release()
		return "", err
	}
	f, err := slot.File()
	if err != nil {
		slot.Release()
		return "", err
	}
	if err := realnode.KeepFDOnExec(f.Fd()); err != nil {
		slot.Release()
		return "", err
	}
	env := append(os.Environ(), envNetns+"="+name, envSlot+"="+strconv.Itoa(slot.Slot), envSlotFD+"="+strconv.Itoa(int(f.Fd())))
	err = realnode.ExecInNetns(name, os.Args, env)
	slot.Release()
	return "", fmt.Errorf("re-run in network namespace %s: %w", name, err)
}

// inherited is the slot EnterOwnNetwork passed down, taken once.
var inherited struct {
	once sync.Once
	slot *addr.Slot
	err  error
}

// inheritedSlot returns the slot the parent of a re-run program held (nil
// when this program was not re-run by EnterOwnNetwork).
func inheritedSlot() (*addr.Slot, error) {
	inherited.once.Do(func() {
		s, fd := os.Getenv(envSlot), os.Getenv(envSlotFD)
		if s == "" || fd == "" {
			return
		}
		n, err1 := strconv.Atoi(s)
		f, err2 := strconv.Atoi(fd)
		if err := errors.Join(err1, err2); err != nil {
			inherited.err = fmt.Errorf("localenv: %s/%s: %w", envSlot, envSlotFD, err)
			return
		}
		inherited.slot, inherited.err = addr.Inherit(n, os.NewFile(uintptr(f), "slot"))
	})
	return inherited.slot, inherited.err
}

// ownNetwork returns the environment's network namespace when this
// process runs in the one EnterOwnNetwork made for slot, and why not
// otherwise.
func ownNetwork(slot int) (string, error) {
	name := NetnsName(slot)
	if os.Getenv(envNetns) != name || !realnode.SameNetns(name) {
		return "", fmt.Errorf("real nodes run in a network namespace of their own (%s): start through localenv.EnterOwnNetwork (`etcdfed dev up --nodes real` does)", name)
	}
	return name, nil
}

// JoinNetwork re-runs this program in the network namespace of the
// real-node environment in stateDir, when there is one and this program
// runs outside it (the CLI's commands that reach its clusters or pods do
// this first). It returns nil without doing anything otherwise; it does
// not return when it re-runs the program.
func JoinNetwork(stateDir string) error {
	st, err := LoadState(stateDir)
	if err != nil || !st.Real() {
		return nil //nolint:nilerr // no real-node environment there: nothing to join
	}
	name := NetnsName(st.Slot)
	if realnode.SameNetns(name) || !realnode.NetnsExists(name) {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the environment in %s runs real nodes in network namespace %s: entering it needs root", stateDir, name)
	}
	return realnode.ExecInNetns(name, os.Args, append(os.Environ(), envNetns+"="+name))
}

// cleanupReal removes what an environment of real nodes leaves when its
// supervisor is gone: every process in its cgroups (containers, shims)
// and the cgroups in every hierarchy, the node namespaces and its own.
func cleanupReal(st *State) error {
	errs := []error{realnode.RemoveCgroup(fmt.Sprintf("etcdfed-%d", st.Slot))}
	for _, n := range realnode.ListNetns(nodeNetnsPrefix(st.Slot)) {
		errs = append(errs, realnode.DeleteNetns(n))
	}
	errs = append(errs, realnode.DeleteNetns(NetnsName(st.Slot)))
	return errors.Join(errs...)
}

// ServiceAddress returns address i of the environment's own services
// (real nodes only): put on the environment's network, reachable from
// every pod of every cluster and from this process, for a server a test
// runs beside the clusters (an S3 store).
func (e *Env) ServiceAddress(i int) (netip.Addr, error) {
	if !e.state.Real() {
		return netip.Addr{}, errors.New("localenv: service addresses exist with real nodes only")
	}
	a := e.plan.RealService(i)
	return a, realnode.AddLocalAddr(a)
}
