// The stage: the program bubblewrap starts inside the sandbox, which makes the writable mounts
// and then execs the command (dsh-confine itself, as `dsh-confine bwrap-stage ...`).
//
// Why it exists: bubblewrap creates and mounts onto destination paths in the new root while the
// old root is still reachable, and it follows symlinks on the way (its mkdir, its creat with
// O_TRUNC for a file mount point, its mount and remount). A destination inside a directory that
// a confined command can write (this call's workspace, an earlier call's temp area, another
// session's workspace that contains this one) could thus be turned into a create, a truncation
// or a mount anywhere on the host. So bubblewrap is given only destinations nobody else can
// write: the fixed `/`, `/dev`, `/proc`, and staging points in its own fresh /dev tmpfs, where
// it binds each writable root. The stage then moves each staged mount onto its real path by
// file descriptor (open_tree + move_mount), having reached that path without following any
// symlink and checked that both the staged directory and the target are the one dsh-confine
// planned (device and inode). Nothing is created, nothing is followed, and a directory that was
// replaced since the plan stops the call before the command runs.
//
// Unprivileged, bubblewrap's sandbox lives in a second user namespace that may not mount, so
// the stage enters a user and mount namespace of its own (mapping only its own uid and gid):
// the mounts it inherits become locked there, as they are for the command. As root, bubblewrap
// keeps CAP_SYS_ADMIN for the stage alone (--cap-add), and the stage drops it with the rest.
// The stage also does what the Landlock runner does last: no_new_privs, the terminal guard,
// every capability dropped, descriptors above 2 closed unless kept, proof of start, execve;
// and where the plan asks (the kernel has Landlock ABI 6), a Landlock ruleset that only scopes
// signals (a process group spans PID namespaces: kill(0, ...) would reach the caller's group).
#pragma once

#include <string>
#include <vector>

#include "bwrap_argv.hpp"

namespace dsh::bwrap {

// Returns only on failure, with the exit status to use (125: the message already printed as
// `dsh-confine: error: BWRAP_STAGE: ...`; 126/127 when the command cannot be run).
int run_stage(const StageRequest& request, const std::vector<std::string>& argv);

}  // namespace dsh::bwrap
