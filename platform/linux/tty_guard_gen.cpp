// Writes every variant of the guard's seccomp program (tty_guard_rules.cpp, built with
// libseccomp) as C++ arrays, which tty_guard.cpp embeds: dsh-confine then spends no time on
// building a filter, and links no libseccomp. Run by the build:
//
//   dsh_guard_gen ARCH OUTPUT      ARCH as libseccomp names it (CMAKE_SYSTEM_PROCESSOR)
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <seccomp.h>

#include "tty_guard_rules.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s ARCH OUTPUT\n", argv[0]);
        return 2;
    }
    const std::string arch = argv[1];
    const unsigned token = dsh::linux_guard::audit_arch(arch);
    if (token == 0) {
        std::fprintf(stderr, "dsh_guard_gen: libseccomp knows no architecture '%s'\n", arch.c_str());
        return 1;
    }
    std::ostringstream text;
    text << "// Written by dsh_guard_gen (platform/linux/tty_guard_gen.cpp) with libseccomp " << SCMP_VER_MAJOR << "."
         << SCMP_VER_MINOR << "." << SCMP_VER_MICRO << ", for " << arch << ". Do not edit.\n";
    text << "inline constexpr std::uint32_t kProgramsArch = 0x" << std::hex << token << std::dec << "U;\n";
    for (std::size_t i = 0; i < dsh::linux_guard::kGuardVariants; ++i) {
        std::string why;
        const auto program = dsh::linux_guard::build_guard_program(dsh::linux_guard::variant_options(i), arch, why);
        if (program.empty()) {
            std::fprintf(stderr, "dsh_guard_gen: variant %zu: %s\n", i, why.c_str());
            return 1;
        }
        text << "inline constexpr sock_filter kProgram" << i << "[] = {\n";
        for (const sock_filter& op : program)
            text << "    {0x" << std::hex << op.code << ", " << std::dec << unsigned(op.jt) << ", " << unsigned(op.jf) << ", 0x"
                 << std::hex << op.k << std::dec << "U},\n";
        text << "};\n";
    }
    text << "inline constexpr std::span<const sock_filter> kPrograms[] = {";
    for (std::size_t i = 0; i < dsh::linux_guard::kGuardVariants; ++i) text << (i ? ", " : "") << "kProgram" << i;
    text << "};\n";
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out << text.str();
    return out.good() ? 0 : 1;
}
