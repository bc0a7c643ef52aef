#include <cerrno>
#include <cstdio>
#include <cstring>

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

#include "../platform.hpp"
#include "../../lib/error.hpp"
#include "../posix/process.hpp"
#include "../posix/state_store.hpp"
#include "bwrap.hpp"
#include "landlock.hpp"
#include "tty_guard.hpp"

namespace dsh::platform {

// bubblewrap first: it governs every promised effect (full); Landlock, which cannot govern
// metadata changes (partial), is the fallback where user namespaces are unavailable.
std::vector<std::string> default_backend_chain() { return {"bwrap", "landlock"}; }

std::string system_name() { return "Linux"; }

std::shared_ptr<const Backend> make_backend(const std::string& name, const Config& config, const HostContext& host) {
    if (name == "bwrap") return std::make_shared<bwrap::BwrapBackend>(config.bwrap, host.cwd, host.protectedPaths);
    if (name == "landlock")
        return std::make_shared<landlock::LandlockBackend>(posix::self_executable(), config.landlock, host.protectedPaths);
    return nullptr;
}

namespace {

bool has_controlling_terminal() {
    const int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (tty < 0) return false;
    close(tty);
    return true;
}

// A printed bubblewrap plan detaches the terminal (`--new-session`) because a printed line
// cannot carry a file descriptor. Where dsh-confine spawns bwrap itself and the caller has a
// controlling terminal, the terminal guard (a seccomp filter refusing TIOCSTI and TIOCLINUX)
// takes its place instead, so the command keeps the terminal and job control works. Returns
// the filter's fd (close-on-exec), or -1 when the argv is left as it was.
int guard_terminal_instead_of_new_session(std::vector<std::string>& argv) {
    const auto separator = std::find(argv.begin(), argv.end(), "--");
    const auto new_session = std::find(argv.begin(), separator, "--new-session");
    if (new_session == separator || !has_controlling_terminal()) return -1;
    std::string why;
    const int fd = linux_guard::tty_guard_fd(why);
    if (fd < 0) return -1;  // --new-session stays: just as safe, only without job control
    *new_session = std::to_string(fd);
    argv.insert(new_session, "--seccomp");
    return fd;
}

}  // namespace

int exec_plan(const ConfinedArgv& confined, const SandboxPolicy& policy, const std::vector<std::string>& argv,
              const Config& config) {
    std::fflush(stdout);
    if (confined.backend == "landlock") {
        // The same arguments a printed plan passes to its runner, so the same ruleset.
        return landlock::exec_confined(landlock::runner_args(policy, geteuid(), config.landlock.maxAbi), argv);
    }
    std::vector<std::string> wrapped = confined.argv;
    if (confined.backend == "bwrap") {
        const int guard = guard_terminal_instead_of_new_session(wrapped);
        if (guard >= 0) fcntl(guard, F_SETFD, 0);  // bwrap reads it, then the command never sees it
    }
    posix::exec_argv(wrapped.front(), wrapped);
    std::fprintf(stderr, "dsh-confine: error: RUNNER_EXEC: cannot execute %s: %s\n", confined.argv.front().c_str(),
                 std::strerror(errno));
    return 125;
}

StartProofPlan prepare_for_run(std::vector<std::string>& argv, const std::string& backend) {
    if (backend == "bwrap") {
        argv.insert(argv.begin() + 1, {"--json-status-fd", "-1"});
        StartProofPlan plan{posix::StartProof::BwrapStatus, 2, "bwrap: execvp ", std::nullopt};
        plan.passFd = guard_terminal_instead_of_new_session(argv);
        return plan;
    }
    if (backend == "landlock") {
        StartProofPlan plan{posix::StartProof::ExecMarker, 3, "", std::nullopt};
        const auto separator = std::find(argv.begin(), argv.end(), "--");
        const auto base = std::find(argv.begin(), separator, "--private-temp-base");
        if (base != separator && base + 1 != separator) {
            std::string why;
            plan.tempDir = landlock::make_call_temp_dir(*(base + 1), why);
            if (!plan.tempDir) throw Error(code::Landlock, why);
            *base = "--temp-dir";
            *(base + 1) = *plan.tempDir;
        }
        argv.insert(argv.begin() + 2, {"--status-fd", "-1"});
        return plan;
    }
    return {};
}

void remove_run_temp_dir(const std::string& dir) {
    const std::size_t slash = dir.rfind('/');
    const int parent = open(dir.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (parent < 0) return;
    posix::remove_tree_at(parent, dir.substr(slash + 1));
    close(parent);
}

int landlock_exec(const LandlockExecRequest& request, const std::vector<std::string>& argv) {
    landlock::RunnerArgs args;
    if (request.mode == "read-only") args.mode = ConfinedSandboxMode::ReadOnly;
    else if (request.mode == "workspace-write") args.mode = ConfinedSandboxMode::WorkspaceWrite;
    else {
        std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: --mode must be read-only or workspace-write, not '%s'\n",
                     request.mode.c_str());
        return 125;
    }
    if (request.workspaceRoot.empty() || request.workspaceRoot.front() != '/') {
        std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: --workspace-root must be an absolute path\n");
        return 125;
    }
    args.workspaceRoot = request.workspaceRoot;
    if (!request.tempDir.empty()) args.tempDir = request.tempDir;
    if (!request.privateTempBase.empty()) args.privateTempBase = request.privateTempBase;
    args.statusFd = request.statusFd;
    if (request.maxAbi > 0) args.maxAbi = request.maxAbi;
    return landlock::exec_confined(args, argv);
}

}  // namespace dsh::platform
