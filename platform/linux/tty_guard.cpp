#include "tty_guard.hpp"

#include <cstdint>

#include <linux/audit.h>

namespace dsh::linux_guard {
namespace {

// kProgramsArch, kProgram0..N and kPrograms: written at build time by tty_guard_gen.cpp.
#include "tty_guard_programs.inc"

#if defined(__x86_64__)
static_assert(kProgramsArch == AUDIT_ARCH_X86_64, "the guard's programs were built for another architecture");
#elif defined(__aarch64__)
static_assert(kProgramsArch == AUDIT_ARCH_AARCH64, "the guard's programs were built for another architecture");
#else
#error "the guard's programs are built for x86_64 and aarch64 only"
#endif
static_assert(std::size(kPrograms) == kGuardVariants, "the generator wrote another number of variants");

}  // namespace

std::span<const sock_filter> guard_program(const GuardOptions& options) { return kPrograms[variant_index(options)]; }

}  // namespace dsh::linux_guard
