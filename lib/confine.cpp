#include "confine.hpp"

#include <algorithm>
#include <array>
#include <filesystem>
#include <utility>

#include "error.hpp"
#include "git_protection.hpp"
#include "policy.hpp"

namespace dsh {

std::vector<std::string> backend_chain(const std::optional<std::string>& forced, const Config& config,
                                       const std::vector<std::string>& default_chain) {
    if (forced) {
        const auto& known = known_backend_names();
        if (std::find(known.begin(), known.end(), *forced) == known.end()) {
            std::string message = "unknown backend '" + *forced + "'";
            if (auto close = did_you_mean(*forced, known)) message += " (did you mean '" + *close + "'?)";
            throw Error(code::Usage, message + "; backends: bwrap, landlock, seatbelt, restricted-token");
        }
        return {*forced};
    }
    return config.backends.value_or(default_chain);
}

std::optional<ConfineFailure> unrunnable_program(const std::string& program, const ProgramLocation& location) {
    if (location.status == ProgramStatus::NotFound) return ConfineFailure{code::CommandNotFound, program + ": not found", {}};
    if (location.status == ProgramStatus::NotExecutable)
        return ConfineFailure{code::CommandNotExecutable, location.path + ": permission denied", {}};
    return std::nullopt;
}

namespace {

ConfineOutcome failed(std::string code, std::string message, std::vector<CandidateRejection> candidates = {}) {
    ConfineOutcome out;
    out.failure = ConfineFailure{std::move(code), std::move(message), std::move(candidates)};
    return out;
}

}  // namespace

bool broad_root(const std::string& root, const std::optional<std::string>& home) {
    if (root == "/") return true;
    return home && !paths_within({*home}, root).empty();
}

namespace {

// The kernel's own file systems: writing there changes the running system (/proc/sys, /sys's
// knobs, device nodes), never a build's files.
constexpr std::array kKernelTrees = {"/proc", "/sys", "/dev"};  // portability: compared, not opened
// The operating system's directories that are refused themselves (every file there would be
// writable), and those refused with everything under them: programs, libraries, settings and the
// state of the system and its services, which processes outside the sandbox run or read. What is
// left (/var/tmp/x, /srv/x, /opt/x, /home/user/project) is where builds live.
constexpr std::array kSystemDirectories = {"/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/usr",
                                           "/var", "/opt",  "/srv", "/run", "/root",  "/home",  "/mnt",    "/media"};
constexpr std::array kSystemTrees = {"/bin",      "/boot",     "/etc",      "/lib",       "/lib32",      "/lib64",
                                     "/libx32",   "/sbin",     "/usr",      "/var/lib",   "/var/log",    "/var/cache",
                                     "/var/spool", "/var/mail", "/var/backups", "/run"};

// The entry of `trees` that holds `root` (or is it), or nullptr.
template <std::size_t N>
const char* tree_holding(const std::string& root, const std::array<const char*, N>& trees) {
    for (const char* tree : trees)
        if (!paths_within({root}, tree).empty()) return tree;
    return nullptr;
}

}  // namespace

std::optional<RootRefusal> refused_root(const std::string& root, const std::optional<std::string>& home) {
    // "is one of ..." for the directory itself, "lies in /usr, one of ..." below it.
    const auto where = [&](const std::string& tree) { return root == tree ? std::string("is") : "lies in " + tree + ","; };
    if (const char* tree = tree_holding(root, kKernelTrees))
        return RootRefusal{RootRefusal::Kind::Kernel,
                           where(tree) +
                               " one of the kernel's own file systems (/proc, /sys, /dev), not a directory a build writes: "
                               "writing there changes the running system, so it is refused even with --allow-broad-root"};
    if (broad_root(root, home))
        return RootRefusal{RootRefusal::Kind::Broad,
                           "is " + (root == "/" ? std::string("the whole file system")
                                                : "the home directory or above it (" + home.value_or("") + ")") +
                               ": every file there would be writable"};
    if (const char* tree = tree_holding(root, kSystemTrees))
        return RootRefusal{RootRefusal::Kind::System,
                           where(tree) +
                               " one of the operating system's own directories, holding its programs, settings or state: "
                               "a command could change what processes outside the sandbox run or read"};
    if (std::find(kSystemDirectories.begin(), kSystemDirectories.end(), root) != kSystemDirectories.end())
        return RootRefusal{RootRefusal::Kind::System,
                           "is one of the operating system's own directories: every file there would be writable"};
    return std::nullopt;
}

ConfineOutcome confine_call(const ConfineRequest& request, const Config& config, const ConfineHost& host) {
    if (request.argv.empty()) throw Error(code::Usage, "no PROGRAM given");
    const std::vector<std::string> chain = backend_chain(request.backend, config, host.defaultChain);

    if (auto unrunnable = unrunnable_program(request.argv.front(), host.findProgram(request.argv.front()))) {
        ConfineOutcome out;
        out.failure = std::move(*unrunnable);
        return out;
    }

    const std::optional<ConfinedSandboxMode> mode = confined(request.policy.mode);
    if (!mode) {
        ConfineOutcome out;
        out.plan = unconfined_plan(request.policy, request.argv);
        return out;
    }

    SandboxPolicy policy{*mode, request.policy.workspaceRoot, request.policy.sessionId, std::nullopt};
    policy.workspaceRootId = request.policy.workspaceRootId;
    policy.keepFds = request.keepFds;
    std::sort(policy.keepFds.begin(), policy.keepFds.end());
    policy.keepFds.erase(std::unique(policy.keepFds.begin(), policy.keepFds.end()), policy.keepFds.end());
    if (*mode == ConfinedSandboxMode::WorkspaceWrite) {
        policy.writableRoots = request.policy.writableRoots;
        std::vector<std::string> roots = {policy.workspaceRoot};
        roots.insert(roots.end(), policy.writableRoots.begin(), policy.writableRoots.end());
        for (const auto& root : roots) {
            const auto refusal = refused_root(root, host.home);
            if (!refusal || (request.allowBroadRoots && refusal->kind != RootRefusal::Kind::Kernel)) continue;
            throw Error(code::BroadRoot,
                        (root == policy.workspaceRoot ? "the workspace root " : "the writable root ") + root + " " + refusal->why +
                            (refusal->kind == RootRefusal::Kind::Kernel
                                 ? std::string()
                                 : "; choose a narrower root, or opt in with --allow-broad-root ([sandbox] "
                                   "allow_broad_roots = true)"));
        }
        // dsh-confine's own files decide the policy of later calls (the session log, the probe
        // cache, the config) and hold the private temp areas: a root the command may write must
        // not contain them, whether they exist yet or not. Refusing beats guarding them inside.
        if (host.ownPaths)
            for (const auto& path : host.ownPaths())
                for (const auto& root : roots)
                    if (!paths_within({path}, root).empty())
                        throw Error(code::OwnStateInRoot,
                                    (root == policy.workspaceRoot ? "the workspace root " : "the writable root ") + root +
                                        " contains " + path +
                                        ", dsh-confine's own state or configuration, which a confined command must not be "
                                        "able to write; choose a root that does not contain it, or keep the state elsewhere "
                                        "($DSH_CONFINE_STATE_DIR, $XDG_CACHE_HOME, $XDG_CONFIG_HOME)");
        policy.git = plan_git_protection(roots, request.policy.git, request.policy.protectedPaths);
        for (const auto* list : {&policy.git.readOnly, &policy.git.madeDirectories, &policy.git.madeFiles})
            policy.protectedPaths.insert(policy.protectedPaths.end(), list->begin(), list->end());
        std::sort(policy.protectedPaths.begin(), policy.protectedPaths.end());
    } else {
        policy.git.mode = request.policy.git;
    }
    for (const auto& path : request.policy.unreadablePaths) {
        std::error_code ec;
        if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) policy.unreadablePaths.push_back(path);
    }
    policy.network = request.policy.network;
    policy.allowHosts = request.policy.allowHosts;
    if (request.policy.sessionId && *mode == ConfinedSandboxMode::WorkspaceWrite) {
        // The session's temp area is made on its first confined use (not by `policy`).
        if (host.sessions == nullptr)
            throw Error(code::Internal, "session '" + *request.policy.sessionId + "' confined without session storage");
        policy.sessionTempDir = Sessions(*host.sessions).temp_dir(*request.policy.sessionId);
    }

    std::vector<std::shared_ptr<const Backend>> backends;
    std::vector<CandidateRejection> rejected;  // another system's names, then the provider's rejections
    for (const auto& name : chain) {
        if (auto backend = host.backends.make(name, policy)) backends.push_back(std::move(backend));
        else rejected.push_back({name, "not available on " + host.backends.system_name()});
    }
    const SandboxProvider provider(std::move(backends), host.probeCache, config.probeTimeoutMs);
    ProviderResult result = provider.confine(request.argv, policy);
    if (!result.confined) {
        rejected.insert(rejected.end(), result.rejected.begin(), result.rejected.end());
        std::string message = describe_rejections(rejected);
        return failed(code::SandboxUnavailable, std::move(message), std::move(rejected));
    }
    if (request.requireFull && result.confined->enforcement == SandboxEnforcement::Partial) {
        std::string gaps;
        for (const auto& gap : result.confined->enforcementGaps) gaps += (gaps.empty() ? "" : "; ") + gap;
        return failed(code::EnforcementPartial, "--require-full: backend " + result.confined->backend +
                                                    " enforces this policy only partially: " + gaps);
    }
    ConfineOutcome out;
    out.plan = confined_plan(request.policy, std::move(*result.confined));
    out.providerPolicy = std::move(policy);
    return out;
}

}  // namespace dsh
