#include "seatbelt.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../posix/process.hpp"
#include "seatbelt_argv.hpp"

namespace dsh::seatbelt {
namespace {

constexpr const char* kRunner = "/usr/bin/sandbox-exec";

std::string real_path(const std::string& path) {
    char resolved[PATH_MAX];
    if (!realpath(path.c_str(), resolved)) return path;
    return resolved;
}

std::string file_identity(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return "missing";
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
           std::to_string(st.st_mtimespec.tv_sec) + ":" + std::to_string(st.st_mode);
}

// Whether this process already runs inside a sandbox, where sandbox-exec cannot apply another
// profile. sandbox_check() is libsystem_sandbox's, undeclared in the SDK: looked up at run
// time, "unknown" where it is missing.
std::string sandboxed() {
    using Check = int (*)(pid_t, const char*, int, ...);
    auto check = reinterpret_cast<Check>(dlsym(RTLD_DEFAULT, "sandbox_check"));
    if (!check) return "unknown";
    return check(getpid(), nullptr, 0) ? "yes" : "no";
}

std::string os_release() {
    utsname name{};
    if (uname(&name) != 0) return "unknown";
    return std::string(name.sysname) + " " + name.release + " " + name.machine;
}

// Seatbelt matches resolved paths: every path handed to the profile is made canonical.
std::vector<std::string> canonical_all(const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const auto& path : paths) out.push_back(real_path(path));
    return out;
}

}  // namespace

Expected<std::string> user_temp_dir() {
    char buffer[PATH_MAX];
    const size_t n = confstr(_CS_DARWIN_USER_TEMP_DIR, buffer, sizeof buffer);
    if (n == 0 || n > sizeof buffer) return Expected<std::string>::failure("confstr(_CS_DARWIN_USER_TEMP_DIR) failed");
    std::string base = real_path(buffer);
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    const std::string dir = base + "/dsh-confine";
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return Expected<std::string>::failure(dir + ": " + std::strerror(errno));
    struct stat st {};
    if (lstat(dir.c_str(), &st) != 0) return Expected<std::string>::failure(dir + ": " + std::strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return Expected<std::string>::failure(dir + ": not a private directory of this user (mode 0700, no symlink)");
    return dir;
}

SeatbeltBackend::SeatbeltBackend(BackendConfig config, std::vector<std::string> protected_paths)
    : config_(std::move(config)), protected_(canonical_all(protected_paths)), runner_(config_.path.value_or(kRunner)) {}

Expected<Usable> SeatbeltBackend::check() const {
    if (access(runner_.c_str(), X_OK) != 0) {
        if (config_.path) return Expected<Usable>::failure("[backend.seatbelt] path " + runner_ + " is not an executable file");
        return Expected<Usable>::failure(std::string(kRunner) + " is missing: " + std::strerror(errno));
    }
    return Usable{};
}

Expected<Usable> SeatbeltBackend::probe(int timeout_ms) const {
    if (auto present = check(); !present) return present;
    const SandboxPolicy probe_policy{ConfinedSandboxMode::ReadOnly, "/", std::nullopt, std::nullopt};
    const posix::SpawnOutcome outcome =
        posix::spawn_with_timeout(build_argv({runner_, ""}, {"/usr/bin/true"}, probe_policy), timeout_ms);
    if (!outcome.started) return Expected<Usable>::failure(outcome.error);
    if (outcome.timedOut) return Expected<Usable>::failure("the probe did not finish within " + std::to_string(timeout_ms) + " ms");
    if (outcome.exitCode == 0) return Usable{};
    const std::string first = outcome.output.substr(0, outcome.output.find('\n'));
    return Expected<Usable>::failure("the probe exited with " + std::to_string(outcome.exitCode) +
                                     (first.empty() ? "" : ": " + first));
}

std::string SeatbeltBackend::probe_identity() const {
    return "runner=" + runner_ + "\nrunner-id=" + file_identity(runner_) + "\nos=" + os_release() +
           "\nuid=" + std::to_string(geteuid()) + "\nsandboxed=" + sandboxed();
}

Expected<ConfinedArgv> SeatbeltBackend::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    if (auto present = check(); !present) return Expected<ConfinedArgv>::failure(present.reason());
    Layout layout{runner_, "", protected_};
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        if (policy.sessionTempDir) {
            layout.tempDir = real_path(*policy.sessionTempDir);
        } else {
            Expected<std::string> temp = user_temp_dir();
            if (!temp) return Expected<ConfinedArgv>::failure(temp.reason());
            layout.tempDir = *temp;
        }
    }
    SandboxPolicy canonical = policy;
    canonical.workspaceRoot = real_path(policy.workspaceRoot);
    ConfinedArgv out;
    out.argv = build_argv(layout, argv, canonical);
    out.backend = name();
    out.enforcementGaps = seatbelt::enforcement_gaps(policy);
    out.enforcement = out.enforcementGaps.empty() ? SandboxEnforcement::Full : SandboxEnforcement::Partial;
    const Dialect rules = dialect();
    out.denialSignatures = rules.denialSignatures;
    out.runnerFailureRules = rules.runnerFailureRules;
    out.writableRoots = writable_roots(layout, canonical);
    out.protectedPaths = policy.protectedPaths;
    out.unreadablePaths = policy.unreadablePaths;
    out.network = policy.network;
    out.passedFds = {0, 1, 2};
    out.passedFds.insert(out.passedFds.end(), policy.keepFds.begin(), policy.keepFds.end());
    return out;
}

Dialect SeatbeltBackend::dialect() const { return seatbelt::dialect(config_.informationalLines); }

BackendReport SeatbeltBackend::report() const {
    BackendReport out;
    out.name = name();
    out.facts.push_back({"runner", runner_});
    out.facts.push_back({"os", os_release()});
    out.facts.push_back({"alreadySandboxed", sandboxed()});
    const Expected<Usable> present = check();
    out.usable = present.has_value();
    if (!present) out.reason = present.reason();
    out.enforcement = SandboxEnforcement::Full;
    return out;
}

}  // namespace dsh::seatbelt
