// The guard's rules (tty_guard.hpp says what they refuse and why), built into seccomp programs
// with libseccomp. Only the generator that embeds the programs in dsh-confine
// (tty_guard_gen.cpp) and the unit tests use this: dsh-confine itself links no libseccomp.
#pragma once

#include <string>
#include <vector>

#include <linux/filter.h>

#include "tty_guard.hpp"

namespace dsh::linux_guard {

// The program for `options` on the architecture libseccomp calls `arch` ("x86_64",
// "aarch64"); empty, with `why`, where libseccomp refuses something.
std::vector<sock_filter> build_guard_program(const GuardOptions& options, const std::string& arch, std::string& why);

// The audit architecture token of `arch`, as the filter compares it (seccomp_data.arch); 0
// when libseccomp does not know the name.
unsigned audit_arch(const std::string& arch);

}  // namespace dsh::linux_guard
