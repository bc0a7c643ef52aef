// The Landlock UAPI this project needs, defined here where the system headers are older than
// the kernel (Debian 12's headers stop at ABI 2; this host's kernel reports ABI 7). Values
// are the kernel's ABI and never change once released.
#pragma once

#include <cstdint>

#include <linux/landlock.h>
#include <sys/syscall.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)  // ABI 2
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#endif

namespace dsh::landlock_uapi {

// struct landlock_ruleset_attr grew over ABIs (net in 4, scoped in 6); the kernel accepts the
// prefix an ABI knows, so the size passed is the one of the fields used.
struct RulesetAttr {
    std::uint64_t handled_access_fs;
    std::uint64_t handled_access_net;  // ABI 4
    std::uint64_t scoped;              // ABI 6
};
inline constexpr std::size_t ruleset_attr_size(int abi) {
    return abi >= 6 ? sizeof(RulesetAttr) : abi >= 4 ? 2 * sizeof(std::uint64_t) : sizeof(std::uint64_t);
}

struct PathBeneathAttr {
    std::uint64_t allowed_access;
    std::int32_t parent_fd;
} __attribute__((packed));

inline constexpr int kRulePathBeneath = 1;  // LANDLOCK_RULE_PATH_BENEATH
inline constexpr int kRuleNetPort = 2;      // LANDLOCK_RULE_NET_PORT (ABI 4)

// struct landlock_net_port_attr (ABI 4): a TCP port, in host order, and what is allowed on it.
struct NetPortAttr {
    std::uint64_t allowed_access;
    std::uint64_t port;
};

}  // namespace dsh::landlock_uapi
