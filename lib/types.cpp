#include "types.hpp"

namespace dsh {

std::string_view to_string(SandboxMode mode) {
    switch (mode) {
        case SandboxMode::ReadOnly: return "read-only";
        case SandboxMode::WorkspaceWrite: return "workspace-write";
        case SandboxMode::DangerFullAccess: return "danger-full-access";
    }
    return "read-only";
}

std::string_view to_string(ConfinedSandboxMode mode) {
    return mode == ConfinedSandboxMode::ReadOnly ? "read-only" : "workspace-write";
}

std::string_view to_string(SandboxEnforcement enforcement) {
    return enforcement == SandboxEnforcement::Full ? "full" : "partial";
}

std::string_view to_string(NetworkPolicy network) {
    switch (network) {
        case NetworkPolicy::Allow: return "allow";
        case NetworkPolicy::Deny: return "deny";
        case NetworkPolicy::Hosts: return "hosts";
    }
    return "allow";
}

std::optional<NetworkPolicy> parse_network_policy(std::string_view text) {
    if (text == "allow") return NetworkPolicy::Allow;
    if (text == "deny") return NetworkPolicy::Deny;
    if (text == "hosts") return NetworkPolicy::Hosts;
    return std::nullopt;
}

std::string_view to_string(GitMode mode) {
    switch (mode) {
        case GitMode::Protect: return "protect";
        case GitMode::ReadOnly: return "read-only";
        case GitMode::Writable: return "writable";
    }
    return "protect";
}

std::optional<GitMode> parse_git_mode(std::string_view text) {
    if (text == "protect") return GitMode::Protect;
    if (text == "read-only") return GitMode::ReadOnly;
    if (text == "writable") return GitMode::Writable;
    return std::nullopt;
}

std::optional<SandboxMode> parse_sandbox_mode(std::string_view text) {
    if (text == "read-only") return SandboxMode::ReadOnly;
    if (text == "workspace-write") return SandboxMode::WorkspaceWrite;
    if (text == "danger-full-access") return SandboxMode::DangerFullAccess;
    return std::nullopt;
}

std::optional<ConfinedSandboxMode> confined(SandboxMode mode) {
    switch (mode) {
        case SandboxMode::ReadOnly: return ConfinedSandboxMode::ReadOnly;
        case SandboxMode::WorkspaceWrite: return ConfinedSandboxMode::WorkspaceWrite;
        case SandboxMode::DangerFullAccess: return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace dsh
