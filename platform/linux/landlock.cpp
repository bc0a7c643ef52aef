#include "landlock.hpp"

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../posix/process.hpp"
#include "../posix/safe_path.hpp"
#include "../posix/state_store.hpp"
#include "../../lib/error.hpp"
#include "../../lib/git_protection.hpp"
#include "../../lib/policy.hpp"
#include "host.hpp"
#include "landlock_abi.hpp"
#include "proxy_companion.hpp"
#include "runner.hpp"
#include "tty_guard.hpp"


namespace dsh::landlock {
namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

std::optional<std::string> nested_temp_base() {
    const char* tmpdir = std::getenv("TMPDIR");
    if (tmpdir == nullptr || tmpdir[0] != '/') return std::nullopt;
    struct stat st {};
    if (lstat(tmpdir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
        return std::nullopt;
    const std::string base = std::string(tmpdir) + "/dsh-confine-" + std::to_string(geteuid());
    if (base == private_temp_base(geteuid())) return std::nullopt;
    return base;
}

std::optional<std::string> make_call_temp_dir(const std::string& base, std::string& why) {
    const int fd = linux_runner::open_private_base(base, why);
    if (fd < 0) return std::nullopt;
    DIR* entries = fdopendir(fd);  // owns fd; everything below is relative to it, never by path
    if (!entries) {
        why = errno_text(("reading " + base).c_str());
        close(fd);
        return std::nullopt;
    }
    std::vector<std::string> stale;
    while (dirent* entry = readdir(entries))
        if (linux_host::owner_ended(entry->d_name, "call-")) stale.push_back(entry->d_name);
    // Most areas are empty or nearly so when their command ends: one rmdir, never following a
    // symlink (unlinkat does not), and the whole tree only when that fails.
    for (const auto& name : stale)
        if (unlinkat(fd, name.c_str(), AT_REMOVEDIR) != 0) posix::remove_tree_at(fd, name);
    std::optional<std::string> made;
    for (int attempt = 0; attempt < 100 && !made; ++attempt) {
        const std::string name = linux_host::owned_name("call-");
        if (name.empty()) {
            why = errno_text("getrandom");
            break;
        }
        if (mkdirat(fd, name.c_str(), 0700) == 0) made = base + "/" + name;
        else if (errno != EEXIST) {
            why = errno_text(("mkdir " + base + "/" + name).c_str());
            break;
        }
    }
    closedir(entries);
    if (!made && why.empty()) why = base + ": no unused name for a temp area";
    return made;
}

namespace {

// A ruleset handling what `attr` says, for `abi` (the attribute's size grew with the ABIs).
int create_ruleset(const landlock_uapi::RulesetAttr& attr, int abi, std::string& why) {
    const int ruleset =
        static_cast<int>(syscall(SYS_landlock_create_ruleset, &attr, landlock_uapi::ruleset_attr_size(abi), 0));
    if (ruleset < 0) why = errno_text("landlock_create_ruleset");
    return ruleset;
}

// Opens a granted path without following any symlink on it (a canonical path has none, so one
// there was planted), and checks the directory is still the one the plan named when it says.
int open_grant(const std::string& path, const std::optional<std::string>& expected, std::string& why) {
    const int fd = posix::open_no_symlinks(path, O_PATH);
    if (fd < 0) {
        why = path + (errno == ELOOP ? ": a component is a symlink (refused: the plan named no symlink)"
                                     : std::string(": ") + std::strerror(errno));
        return -1;
    }
    if (expected && posix::identity_of(fd) != posix::FileIdentity::parse(*expected)) {
        close(fd);
        why = path + " is no longer the directory the plan named (it was replaced since); nothing ran";
        return -1;
    }
    return fd;
}

}  // namespace

linux_runner::Launch prepare_confined(const RunnerArgs& args, const std::vector<std::string>& argv) {
    const auto fail = [](const std::string& message) { return linux_runner::Launch::failed("LANDLOCK", message); };
    if (argv.empty()) return fail("no command to run");
    std::string why;
    const int kernel_abi = linux_host::landlock_abi(&why);
    if (kernel_abi < 1) return fail("Landlock is unavailable: " + why);
    const int abi = effective_abi(kernel_abi, args.maxAbi);

    std::optional<std::string> temp_dir = args.tempDir;
    std::optional<std::string> temp_id = args.tempDirId;
    if (args.privateTempBase) {
        // No process stays behind to remove this call's area: the next call removes those whose
        // owner has ended (docs/backends/linux.md says how long one may stay).
        temp_dir = make_call_temp_dir(*args.privateTempBase, why);
        // A nested call: the enclosing sandbox lets it write neither the base nor /tmp, but its
        // own private $TMPDIR.
        if (!temp_dir && nested_temp_base()) temp_dir = make_call_temp_dir(*nested_temp_base(), why);
        if (!temp_dir) return fail(why);
        temp_id.reset();
    }
    if (temp_dir) setenv("TMPDIR", temp_dir->c_str(), 1);

    SandboxPolicy policy{args.mode, args.workspaceRoot, std::nullopt, std::nullopt};
    std::map<std::string, std::optional<std::string>> root_ids;  // writable roots: path -> expected identity
    for (const auto& root : args.writableRoots) {
        const std::size_t at = root.find('@');
        const std::string path = at == std::string::npos ? root : root.substr(at + 1);
        if (path.empty() || path.front() != '/') return fail("--writable-root '" + root + "' is not [DEV:INO@]/ABSOLUTE/PATH");
        policy.writableRoots.push_back(path);
        root_ids[path] = at == std::string::npos ? std::nullopt : std::optional<std::string>(root.substr(0, at));
    }
    // The allow-list: the proxy on a loopback port of the host's, started now (it lives as long as
    // this process and the command it becomes), and reached at that port alone.
    const bool hosts = !args.allowHosts.empty();
    std::uint16_t proxy_port = 0;
    if (hosts) {
        if (abi < kTcpAbi)
            return fail("the hosts network needs Landlock's TCP rules (ABI " + std::to_string(kTcpAbi) + "); this kernel has ABI " +
                        std::to_string(abi));
        const int listener = proxy::loopback_listener(AF_INET, 0, why);
        if (listener < 0) return fail(why);
        proxy_port = proxy::listening_port(listener);
        const bool started = proxy::start_proxy(args.allowHosts, {listener}, -1, args.refusalsFd, why,
                                                args.execsHere ? proxy::ProxyStart::CallersImage : proxy::ProxyStart::OwnImage);
        close(listener);
        if (!started) return fail(why);
        proxy::set_proxy_environment(proxy_port);
    }
    const bool confined_network = args.denyNetwork || hosts;
    const int ruleset = create_ruleset(
        {handled_access(abi), handled_net_access(abi, confined_network), scoped(abi, confined_network)}, abi, why);
    if (ruleset < 0) return fail(why);
    if (hosts) {
        landlock_uapi::NetPortAttr port{net_access::ConnectTcp, proxy_port};
        if (syscall(SYS_landlock_add_rule, ruleset, landlock_uapi::kRuleNetPort, &port, 0) != 0) {
            const std::string message = errno_text("landlock_add_rule (the proxy's port)");
            close(ruleset);
            return fail(message);
        }
    }
    const auto fail_closing = [&](const std::string& message) {
        close(ruleset);
        return fail(message);
    };
    for (const Grant& grant : grants(policy, temp_dir, posix_shell_sinks(), abi)) {
        std::optional<std::string> expected;
        const bool is_root = args.mode == ConfinedSandboxMode::WorkspaceWrite && grant.path == args.workspaceRoot;
        const bool is_temp = temp_dir && grant.path == *temp_dir;
        const auto extra = args.mode == ConfinedSandboxMode::WorkspaceWrite ? root_ids.find(grant.path) : root_ids.end();
        const bool expected_directory = is_root || is_temp || extra != root_ids.end();
        if (is_root) expected = args.workspaceRootId;
        if (is_temp) expected = temp_id;
        if (extra != root_ids.end()) expected = extra->second;
        const int fd = open_grant(grant.path, expected, why);
        if (fd < 0) {
            // A device this host lacks, or links elsewhere in /dev (/dev/ptmx -> pts/ptmx: the
            // /dev/pts rule covers it).
            if ((errno == ENOENT || errno == ELOOP) && grant.path.rfind("/dev/", 0) == 0) continue;
            return fail_closing(why);
        }
        struct stat st {};
        fstat(fd, &st);
        std::uint64_t allowed = grant.access;
        if (!S_ISDIR(st.st_mode)) allowed &= access::FileRights;
        if (!S_ISDIR(st.st_mode) && expected_directory) {
            close(fd);
            return fail_closing(grant.path + " is not a directory");
        }
        landlock_uapi::PathBeneathAttr rule{allowed, fd};
        const long added = syscall(SYS_landlock_add_rule, ruleset, landlock_uapi::kRulePathBeneath, &rule, 0);
        const int error = errno;
        close(fd);
        if (added != 0) {
            errno = error;
            return fail_closing(errno_text(("landlock_add_rule " + grant.path).c_str()));
        }
    }
    linux_guard::GuardOptions guard;
    guard.metadataIoctls = true;
    guard.callersChild = true;  // the runner is the process its caller started: the command's parent is the caller
    // The host's network namespace: its daemons' sockets by path and by abstract name, its
    // netlink. The guard's socket rules refuse every socket that could reach them; TCP is also
    // refused by the ruleset where the ABI has it.
    if (args.denyNetwork) guard.sockets = linux_guard::SocketRules::Local;
    if (hosts) guard.sockets = linux_guard::SocketRules::ProxiedOnHost;
    return linux_runner::prepare_launch(argv, args.statusFd, args.keepFds, "LANDLOCK", guard, ruleset);
}

int scope_ruleset(bool deny_network, std::string& why) {
    const int abi = linux_host::landlock_abi(&why);
    if (abi < kScopeAbi) {
        if (abi >= 1) why = "Landlock ABI " + std::to_string(abi) + " has no scopes (they came with ABI 6)";
        else why = "Landlock is unavailable: " + why;
        return -1;
    }
    // No access right handled: the command's file access is bubblewrap's business; only what it
    // may signal or reach by an abstract name is restricted.
    return create_ruleset({0, 0, scoped(abi, deny_network)}, abi, why);
}

int exec_confined(RunnerArgs args, const std::vector<std::string>& argv) {
    // Behind a process in front, the command is another process: a proxy cannot keep this image.
    const bool in_front = linux_runner::stands_in_front();
    args.execsHere = !in_front;
    const linux_runner::Launch launch = prepare_confined(args, argv);
    return in_front ? linux_runner::run_in_front(launch) : launch.run();
}

LandlockBackend::LandlockBackend(std::string runner, BackendConfig config)
    : runner_(std::move(runner)), config_(std::move(config)) {}

Expected<Usable> LandlockBackend::check() const {
    std::string why;
    if (linux_host::landlock_abi(&why) < 1) return Expected<Usable>::failure(why);
    if (runner_.empty() || ::access(runner_.c_str(), X_OK) != 0)
        return Expected<Usable>::failure("the runner '" + runner_ + "' (this binary) cannot be executed");
    return Usable{};
}

Expected<Usable> LandlockBackend::probe(int timeout_ms) const {
    const posix::ProgramLookup truth = posix::resolve_program("true");
    if (truth.status != posix::Lookup::Found) return Expected<Usable>::failure("no 'true' on PATH to probe with");
    RunnerArgs args;
    args.mode = ConfinedSandboxMode::ReadOnly;
    args.workspaceRoot = "/";
    const posix::SpawnOutcome outcome = posix::spawn_with_timeout(build_argv(runner_, args, {truth.path}), timeout_ms);
    if (!outcome.started) return Expected<Usable>::failure(outcome.error);
    if (outcome.timedOut) return Expected<Usable>::failure("the probe did not finish within " + std::to_string(timeout_ms) + " ms");
    if (outcome.exitCode == 0) return Usable{};
    std::string first = outcome.output.substr(0, outcome.output.find('\n'));
    return Expected<Usable>::failure("the probe exited with " + std::to_string(outcome.exitCode) +
                                     (first.empty() ? "" : ": " + first));
}

std::string LandlockBackend::probe_identity() const {
    return "runner=" + runner_ + "\nrunner-id=" + linux_host::file_identity(runner_) + "\n" + linux_host::host_identity();
}

Expected<ConfinedArgv> LandlockBackend::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    const int abi = effective_abi(linux_host::landlock_abi(), config_.maxAbi);
    if (abi < 1) return Expected<ConfinedArgv>::failure("Landlock is unavailable");
    if (policy.network == NetworkPolicy::Hosts && abi < kTcpAbi)
        return Expected<ConfinedArgv>::failure("the hosts network needs Landlock's TCP rules (ABI " + std::to_string(kTcpAbi) +
                                               "); this kernel has ABI " + std::to_string(abi));
    RunnerArgs args = runner_args(policy, static_cast<unsigned>(geteuid()), config_.maxAbi);
    std::string why;
    // A printed plan runs this binary by its path: it must be one no confined command can replace.
    std::optional<std::string> trusted = posix::trusted_executable(runner_, why);
    if (!trusted) return Expected<ConfinedArgv>::failure("the runner (dsh-confine itself) is refused: " + why);
    std::vector<std::optional<std::string>> places = {policy.sessionTempDir, private_temp_base(geteuid())};
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        places.push_back(policy.workspaceRoot);
        places.insert(places.end(), policy.writableRoots.begin(), policy.writableRoots.end());
    }
    for (const auto& place : places)
        if (place && !paths_within({*trusted}, *place).empty())
            return Expected<ConfinedArgv>::failure("the runner " + *trusted + " lies inside " + *place +
                                                   ", which a confined command may write: it could be replaced there");
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        // A call brings the identity it resolved (the runner checks it); only a policy made
        // without one (doctor --verify) has it taken here.
        if (!args.workspaceRootId) {
            const auto root = posix::directory_identity(policy.workspaceRoot, why);
            if (!root) return Expected<ConfinedArgv>::failure("the workspace root " + why);
            args.workspaceRootId = root->text();
        }
        if (args.tempDir) {
            const auto temp = posix::directory_identity(*args.tempDir, why);
            if (!temp) throw Error(code::State, "the temp area " + why);
            args.tempDirId = temp->text();
        }
    }
    for (auto& root : args.writableRoots) {
        const auto id = posix::directory_identity(root, why);
        if (!id) throw Error(code::WorkspaceRoot, "the writable root " + why);  // a race, not an unusable backend
        root = id->text() + "@" + root;
    }
    ConfinedArgv out;
    out.argv = build_argv(*trusted, args, argv);
    out.backend = name();
    out.enforcementGaps = enforcement_gaps(abi, policy);
    out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    out.denialSignatures = landlock::denial_signatures(policy);
    out.runnerFailureRules = dialect().runnerFailureRules;
    out.writableRoots = writable_roots(args);
    out.passedFds = {0, 1, 2};
    out.passedFds.insert(out.passedFds.end(), policy.keepFds.begin(), policy.keepFds.end());
    out.protectedPaths = policy.protectedPaths;
    out.unreadablePaths = policy.unreadablePaths;
    out.network = policy.network;
    out.allowHosts = policy.allowHosts;
    out.git = git_plan_unenforced(policy.git);
    return out;
}

Dialect LandlockBackend::dialect() const { return landlock::dialect(config_.informationalLines); }

BackendReport LandlockBackend::report() const {
    BackendReport out;
    out.name = name();
    std::string why;
    const int kernel_abi = linux_host::landlock_abi(&why);
    const int abi = effective_abi(kernel_abi, config_.maxAbi);
    out.facts.push_back({"landlockAbi", std::to_string(kernel_abi)});
    if (config_.maxAbi) out.facts.push_back({"landlockAbiUsed", std::to_string(abi)});
    out.facts.push_back({"runner", runner_});
    Expected<Usable> present = check();
    out.usable = present.has_value();
    if (!present) out.reason = present.reason();
    if (abi >= 1) {
        out.enforcementGaps = enforcement_gaps(abi);
        out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    }
    out.hostsNetwork.mechanism =
        "the proxy on a loopback port of the host's; Landlock's TCP rule lets the command connect to that port alone "
        "and bind none; the seccomp filter refuses UDP, raw and every socket family but netlink and TCP";
    if (abi >= kTcpAbi) {
        out.hostsNetwork.available = true;
        out.hostsNetwork.reason.clear();
        out.hostsNetwork.enforcement = SandboxEnforcement::Partial;
        out.hostsNetwork.gaps = hosts_network_gaps();
    } else {
        out.hostsNetwork.reason = "needs Landlock's TCP rules (ABI " + std::to_string(kTcpAbi) + "); this kernel has ABI " +
                                  std::to_string(abi);
    }
    return out;
}

}  // namespace dsh::landlock
