#include "policy.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <system_error>

#include "error.hpp"
#include "host_pattern.hpp"

namespace dsh {

bool is_absolute_path(std::string_view path) {
#if defined(_WIN32)
    const auto separator = [](char c) { return c == '\\' || c == '/'; };
    if (path.size() >= 3 && std::isalpha(static_cast<unsigned char>(path[0])) && path[1] == ':' && separator(path[2]))
        return true;
    return path.size() >= 3 && separator(path[0]) && separator(path[1]) && !separator(path[2]);
#else
    return !path.empty() && path.front() == '/';
#endif
}

namespace {

// Whether some existing ancestor of PATH is not a directory.
bool through_a_file(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (fs::path at = fs::path(path).parent_path(); !at.empty(); at = at.parent_path()) {
        const fs::file_status status = fs::status(at, ec);
        if (fs::exists(status)) return !fs::is_directory(status);
        if (at == at.parent_path()) break;
    }
    return false;
}

// Well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t extra = 0;
        std::uint32_t point = 0;
        if (c < 0x80) {
            ++i;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) extra = 1, point = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) extra = 2, point = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) extra = 3, point = c & 0x07;
        else return false;
        if (i + extra >= text.size()) return false;  // truncated
        for (std::size_t k = 1; k <= extra; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) return false;
            point = (point << 6) | (next & 0x3F);
        }
        if ((extra == 2 && (point < 0x800 || (point >= 0xD800 && point <= 0xDFFF))) || (extra == 3 && (point < 0x10000 || point > 0x10FFFF)))
            return false;
        i += extra + 1;
    }
    return true;
}

}  // namespace

std::string canonical_directory(const std::string& path, const std::string& what) {
    namespace fs = std::filesystem;
    const std::string shown = what + " '" + path + "'";
    if (!is_absolute_path(path)) throw Error(code::WorkspaceRoot, shown + " is not an absolute path");
    std::error_code ec;
    fs::path resolved = fs::canonical(path, ec);
    if (ec) {
        if (ec == std::errc::too_many_symbolic_link_levels)
            throw Error(code::WorkspaceRoot, shown + " is a symlink loop");
        std::error_code lec;
        if (ec == std::errc::no_such_file_or_directory && fs::is_symlink(fs::symlink_status(path, lec)))
            throw Error(code::WorkspaceRoot, shown + " is a dangling symlink");
        // Windows answers "not found" for a path through a file, where POSIX says ENOTDIR.
        if (ec == std::errc::no_such_file_or_directory && !through_a_file(path))
            throw Error(code::WorkspaceRoot, shown + " does not exist");
        if (ec == std::errc::not_a_directory || ec == std::errc::no_such_file_or_directory)
            throw Error(code::WorkspaceRoot, shown + " has a component that is not a directory");
        throw Error(code::WorkspaceRoot, shown + " cannot be resolved: " + ec.message());
    }
    if (!fs::is_directory(resolved, ec)) throw Error(code::WorkspaceRoot, shown + " is not a directory");
    // Policies, plans and reports are JSON, which holds UTF-8 text only: a root named otherwise
    // could not be shown, recorded or checked faithfully.
    if (!valid_utf8(resolved.string()))
        throw Error(code::WorkspaceRoot, what + ": its path is not valid UTF-8, which dsh-confine's JSON (policies, plans, "
                                                "sessions) cannot carry; use a directory whose path is UTF-8");
    return resolved.string();
}

std::vector<std::string> paths_within(const std::vector<std::string>& paths, const std::string& root) {
    std::vector<std::string> out;
    const std::string prefix = root == "/" ? root : root + "/";
    for (const auto& path : paths)
        if (path == root || path.rfind(prefix, 0) == 0) out.push_back(path);
    return out;
}

SandboxExecutionPolicy resolve_policy(const SandboxPolicyRequest& request,
                                      const std::optional<SessionPolicyView>& session,
                                      const Config& config, const std::string& process_cwd) {
    SandboxExecutionPolicy policy;
    if (request.mode) policy.mode = *request.mode;
    else if (session && session->lastMode) policy.mode = *session->lastMode;
    else if (config.defaultMode) policy.mode = *config.defaultMode;
    else policy.mode = SandboxMode::ReadOnly;

    if (session) {
        policy.workspaceRoot = canonical_directory(session->cwd, "the session's cwd");
        policy.workspaceRootId = session->cwdId;
        if (request.workspaceRoot) {
            const std::string given = canonical_directory(*request.workspaceRoot, "--workspace-root");
            if (given != policy.workspaceRoot)
                throw Error(code::WorkspaceRoot, "--workspace-root '" + given + "' contradicts session '" +
                                                     request.sessionId.value_or("") + "' whose cwd is '" +
                                                     policy.workspaceRoot + "'");
        }
    } else if (request.workspaceRoot) {
        policy.workspaceRoot = canonical_directory(*request.workspaceRoot, "--workspace-root");
    } else if (config.workspaceRoot) {
        policy.workspaceRoot = canonical_directory(*config.workspaceRoot, config.source + ": [sandbox] workspace_root");
    } else {
        policy.workspaceRoot = canonical_directory(process_cwd, "the current directory");
    }
    policy.sessionId = request.sessionId;

    const auto expand = [&](const std::string& path, const std::string& what) {
        if (path.rfind("~/", 0) != 0) return path;
        if (!request.home || !is_absolute_path(*request.home))
            throw Error(code::Config, what + " '" + path + "': ~/ needs $HOME, which is not an absolute path");
        return (std::filesystem::path(*request.home) / path.substr(2)).string();
    };
    if (request.writableRoots) {
        for (const auto& root : *request.writableRoots) policy.writableRoots.push_back(canonical_directory(root, "--writable-root"));
    } else if (session && !session->writableRoots.empty()) {
        for (const auto& root : session->writableRoots)
            policy.writableRoots.push_back(canonical_directory(root, "the session's writable root"));
    } else if (config.writableRoots) {
        const std::string what = config.source + ": [sandbox] writable_roots";
        for (const auto& root : *config.writableRoots) policy.writableRoots.push_back(canonical_directory(expand(root, what), what));
    }
    std::sort(policy.writableRoots.begin(), policy.writableRoots.end());
    policy.writableRoots.erase(std::unique(policy.writableRoots.begin(), policy.writableRoots.end()), policy.writableRoots.end());

    if (config.protectedPaths) policy.protectedPaths = *config.protectedPaths;

    std::vector<std::string> unreadable;
    if (request.unreadablePaths) {
        for (const auto& path : *request.unreadablePaths) {
            if (!is_absolute_path(path)) throw Error(code::Usage, "--deny-read '" + path + "' is not an absolute path");
            unreadable.push_back(path);
        }
    } else if (config.denyRead) {
        for (const auto& path : *config.denyRead) unreadable.push_back(expand(path, config.source + ": [sandbox] deny_read"));
    }
    for (const auto& path : unreadable) {
        std::error_code ec;
        const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
        policy.unreadablePaths.push_back(ec ? std::filesystem::path(path).lexically_normal().string() : canonical.string());
    }
    std::sort(policy.unreadablePaths.begin(), policy.unreadablePaths.end());
    policy.unreadablePaths.erase(std::unique(policy.unreadablePaths.begin(), policy.unreadablePaths.end()),
                                 policy.unreadablePaths.end());

    // The network and, with `hosts`, its patterns: both from the first source that sets them.
    const auto canonical_hosts = [](const std::vector<std::string>& patterns, const std::string& what) {
        std::vector<std::string> out;
        out.reserve(patterns.size());
        for (const auto& text : patterns) {
            auto pattern = parse_host_pattern(text);
            if (!pattern) throw Error(code::Usage, what + ": " + pattern.reason());
            out.push_back(to_string(*pattern));
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    };
    if (!request.allowHosts.empty()) {
        if (request.network && *request.network != NetworkPolicy::Hosts)
            throw Error(code::Usage, "--allow-host names hosts to reach, and --network " +
                                         std::string(to_string(*request.network)) +
                                         " says otherwise: give one or the other (--allow-host alone puts the network in "
                                         "its hosts state)");
        policy.network = NetworkPolicy::Hosts;
        policy.allowHosts = canonical_hosts(request.allowHosts, "--allow-host");
    } else if (request.network) {
        policy.network = *request.network;
        if (policy.network == NetworkPolicy::Hosts) {
            if (session && session->lastNetwork == NetworkPolicy::Hosts) policy.allowHosts = session->lastAllowHosts;
            else if (config.allowHosts) policy.allowHosts = *config.allowHosts;
            if (policy.allowHosts.empty())
                throw Error(code::Usage, "--network hosts needs hosts to allow: give --allow-host PATTERN (or [network] "
                                         "allow_hosts in the config, or a session's hosts event)");
        }
    } else if (session && session->lastNetwork) {
        policy.network = *session->lastNetwork;
        if (policy.network == NetworkPolicy::Hosts) policy.allowHosts = session->lastAllowHosts;
    } else if (config.network) {
        policy.network = *config.network;
        if (policy.network == NetworkPolicy::Hosts && config.allowHosts) policy.allowHosts = *config.allowHosts;
    }
    if (request.git) policy.git = *request.git;
    else if (config.git) policy.git = *config.git;
    return policy;
}

}  // namespace dsh
