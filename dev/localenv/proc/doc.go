// Package proc starts and stops the local environment's processes so that
// none outlives the environment: every process gets its own process group
// (stopping it signals the group), SIGKILL when its parent dies (Pdeathsig,
// set from one OS thread that never exits, because Linux ties Pdeathsig to
// the thread that forked), an optional cgroup v2 it is started into (clone3
// CLONE_INTO_CGROUP, so its very first socket already belongs to the
// cgroup), and a pid file naming it by pid and kernel start time so that
// another process (`etcdfed dev down` from another shell) can find and kill
// it later without ever killing an unrelated process that reused the pid.
package proc
