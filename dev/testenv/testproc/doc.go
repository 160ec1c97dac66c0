// Package testproc starts the processes of tests so that none outlives the
// test binary that started it, and keeps a record of each, so that what a
// dead test binary left behind can be found and, where the record proves
// it, stopped. Two mechanisms, because either alone can miss.
//
// The kernel: Start gives every child a parent-death signal (SIGKILL).
// Linux sends it when the parent THREAD that forked the child exits, not
// only when the process does, and Go retires an OS thread whenever a
// goroutine locked to it returns (any library may do that). So every fork
// happens on a goroutine locked to an OS thread that never exits
// (OnFixedThread). Programs started by code we do not control (envtest)
// go through the pdeathsig command (dev/testenv/pdeathsig).
//
// A record: every test binary that starts processes owns one directory,
//
//	<Root()>/<owner pid>-<owner start ticks>/
//	    procs/<pid>.json     one proc.PIDRecord per process started (pid + kernel start time)
//	    ...                  whatever else the owner keeps there (envtest data, wrappers)
//
// A pid and its start time name one process for the life of the machine,
// so a record is proof: the process it names is the one the test started,
// not an unrelated process that reused the pid. An owner directory whose
// owner is gone belongs to an earlier run; Sweep reports (and, asked to,
// stops) the processes in it that still run and removes it. Directories
// of live owners (concurrent test runs, other worktrees) are never touched.
//
// The package has no dependency beyond the standard library and
// dev/localenv/proc, so that every test helper can use it and the
// pdeathsig command and hack/leftovers link quickly.
package testproc
