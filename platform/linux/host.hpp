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

}  // namespace dsh::linux_host
