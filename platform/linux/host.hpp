// Facts about this Linux host that decide whether a backend works and how completely:
// the kernel release, the Landlock ABI, the sysctls that govern user namespaces, and the
// identity of files (runners) whose change must invalidate a cached probe.
#pragma once

#include <string>

namespace dsh::linux_host {

std::string kernel_release();
// The Landlock ABI the kernel reports, or 0 with `why` set when it has none.
int landlock_abi(std::string* why = nullptr);
// The first line of a /proc/sys file, or "-" when it is absent.
std::string sysctl(const std::string& name);
// dev:ino:size:mtime:mode of a file, or "missing".
std::string file_identity(const std::string& path);
// Everything about the host a probe's answer can depend on, besides the runner itself.
std::string host_identity();
// What an enclosing sandbox leaves on this process (no_new_privs, seccomp filters): part of
// host_identity, so a nested call probes again rather than trust an answer taken outside.
std::string confinement_context();

// Names of things a process makes for itself and a later call removes once it has ended (a
// Landlock call's temp area, `run`'s cgroup): PREFIX + PIDNS-PID-XXXXXX, its PID namespace (the
// inode number in /proc/self/ns/pid's link: pids name processes only within one), its pid and a
// random suffix (getrandom, as mkdtemp's); "" when the kernel gives no random bytes.
std::string owned_name(const char* prefix);
// Whether the owner a name of owned_name's shape names has ended: no process of this PID
// namespace has its pid. Only names of this PID namespace are judged; one that does not parse
// is left alone. A pid taken since by another process keeps the name until that one ends too:
// nothing is removed while a process with its owner's pid runs.
bool owner_ended(const char* name, const char* prefix);

}  // namespace dsh::linux_host
