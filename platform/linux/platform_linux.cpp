#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <algorithm>
#include <utility>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../platform.hpp"
#include "../../lib/error.hpp"
#include "../posix/process.hpp"
#include "../posix/safe_path.hpp"
#include "../posix/state_store.hpp"
#include "bwrap.hpp"
#include "proxy_companion.hpp"
#include "../../lib/host_pattern.hpp"
#include "bwrap_stage.hpp"
#include "cgroup.hpp"
#include "git_front.hpp"
#include "landlock.hpp"
#include "raw_syscall.hpp"

namespace dsh::platform {

// bubblewrap first: it governs every promised effect (full); Landlock, which cannot govern
// metadata changes (partial), is the fallback where user namespaces are unavailable.
std::vector<std::string> default_backend_chain() { return {"bwrap", "landlock"}; }

std::string system_name() { return "Linux"; }

std::vector<std::string> private_temp_bases() {
    std::vector<std::string> bases = {landlock::private_temp_base(geteuid())};
    if (auto nested = landlock::nested_temp_base()) bases.push_back(*nested);
    return bases;
}

std::shared_ptr<const Backend> make_backend(const std::string& name, const Config& config, const HostContext& host) {
    if (name == "bwrap") return std::make_shared<bwrap::BwrapBackend>(config.bwrap, host.cwd);
    if (name == "landlock")
        return std::make_shared<landlock::LandlockBackend>(posix::self_executable(), config.landlock);
    return nullptr;
}

namespace {

// The arguments the printed plan passes to its runner, so the same ruleset and checks; then, as
// the argv gives them, the printed plan's, or `run`'s with the area it made and the proof's fd
// in place of the base (prepare_for_run).
landlock::RunnerArgs landlock_args(const ConfinedArgv& confined, const SandboxPolicy& policy, const Config& config) {
    landlock::RunnerArgs args = landlock::runner_args(policy, geteuid(), config.landlock.maxAbi);
    args.writableRoots.clear();
    args.tempDir.reset();
    args.privateTempBase.reset();
    for (std::size_t i = 0; i + 1 < confined.argv.size() && confined.argv[i] != "--"; ++i) {
        if (confined.argv[i] == "--workspace-root-id") args.workspaceRootId = confined.argv[i + 1];
        if (confined.argv[i] == "--temp-dir-id") args.tempDirId = confined.argv[i + 1];
        if (confined.argv[i] == "--writable-root") args.writableRoots.push_back(confined.argv[i + 1]);
        if (confined.argv[i] == "--private-temp-base") args.privateTempBase = confined.argv[i + 1];
        if (confined.argv[i] == "--temp-dir") args.tempDir = confined.argv[i + 1];
        if (confined.argv[i] == "--status-fd") args.statusFd = std::stoi(confined.argv[i + 1]);
        if (confined.argv[i] == "--refusals-fd") args.refusalsFd = std::stoi(confined.argv[i + 1]);
    }
    return args;
}

// A bubblewrap plan, exec'd: bubblewrap in this process's place.
int exec_bwrap(const ConfinedArgv& confined, const SandboxPolicy& policy) {
    // The hosts network: the plan's launcher (`dsh-confine net-proxy ... --`) done here, then bubblewrap.
    if (confined.argv.size() > 2 && confined.argv[1] == "net-proxy") {
        const auto separator = std::find(confined.argv.begin(), confined.argv.end(), "--");
        return net_proxy_exec(policy.allowHosts, std::vector<std::string>(separator + 1, confined.argv.end()));
    }
    // bubblewrap waits for its children and hangs when they are reaped unseen: a SIGCHLD the
    // caller ignored (which survives execve) is the default for it, and for the command under it.
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(SIGCHLD, &fallback, nullptr);
    posix::exec_argv(confined.argv.front(), confined.argv);
    std::fprintf(stderr, "dsh-confine: error: RUNNER_EXEC: cannot execute %s: %s\n", confined.argv.front().c_str(),
                 std::strerror(errno));
    return 125;
}

class GitEndCheck : public EndCheck {
public:
    explicit GitEndCheck(const std::vector<std::string>& gitdirs) : backstop_(gitdirs) {}
    // Nothing ends this process in the middle of the check: a signal waits until it is done
    // (then acts as it would have; 32 and 33 too, by the kernel's mask).
    void finish() const override {
        sigset_t all, was;
        sigfillset(&all);
        all.__val[0] = ~0UL;
        linux_sys::call_with(SYS_rt_sigprocmask, SIG_BLOCK, &all, &was, sizeof all.__val[0]);
        backstop_.finish();
        linux_sys::call_with(SYS_rt_sigprocmask, SIG_SETMASK, &was, nullptr, sizeof was.__val[0]);
    }

private:
    git_front::Backstop backstop_;
};

}  // namespace

int exec_plan(const ConfinedArgv& confined, const SandboxPolicy& policy, const std::vector<std::string>& argv,
              const Config& config) {
    std::fflush(stdout);
    if (confined.backend == "landlock") return landlock::exec_confined(landlock_args(confined, policy, config), argv);
    // With git directories to check at the end, dsh-confine stays in front of bubblewrap to check
    // them again whatever ends the sandbox (git_front.hpp).
    if (!confined.git.checkedAtEnd.empty()) {
        git_front::Launcher launcher;
        if (confined.argv.size() > 2 && confined.argv[1] == "net-proxy")
            launcher = [&policy](const std::vector<std::string>& plan) {
                const auto separator = std::find(plan.begin(), plan.end(), "--");
                return net_proxy_exec(policy.allowHosts, std::vector<std::string>(separator + 1, plan.end()));
            };
        git_front::hold(git_front::Backstop(confined.git.checkedAtEnd), confined.argv, launcher);
    }
    return exec_bwrap(confined, policy);
}

std::unique_ptr<EndCheck> record_end_check(const ConfinedArgv& confined) {
    if (confined.backend != "bwrap" || confined.git.checkedAtEnd.empty()) return nullptr;
    return std::make_unique<GitEndCheck>(confined.git.checkedAtEnd);
}

posix::Launch prepare_plan(const ConfinedArgv& confined, const SandboxPolicy& policy, const std::vector<std::string>& argv,
                           const Config& config) {
    // Whatever the preparation throws becomes the runner's failure, reported by the runner's
    // process as an exec'd runner would report it.
    const auto prepared = [&] {
        try {
            if (confined.backend != "landlock")
                throw Error(code::Internal, "the " + confined.backend + " backend's runner is not this program");
            return landlock::prepare_confined(landlock_args(confined, policy, config), argv);
        } catch (const Error& e) {
            return linux_runner::Launch::failed(e.code().c_str(), e.what());
        } catch (const std::exception& e) {
            return linux_runner::Launch::failed(code::Internal, e.what());
        }
    };
    auto launch = std::make_shared<const linux_runner::Launch>(prepared());
    return [launch] { return launch->run(); };
}

StartProofPlan prepare_for_run(std::vector<std::string>& argv, const std::string& backend, int refusals) {
    if (backend == "bwrap") {
        StartProofPlan plan;
        // The hosts network: the plan's launcher, `dsh-confine net-proxy --allow-host P... --`,
        // done here (see platform.hpp) and taken off argv.
        if (argv.size() > 2 && argv[1] == "net-proxy") {
            const auto separator = std::find(argv.begin(), argv.end(), "--");
            std::vector<std::string> allow;
            for (auto at = argv.begin() + 2; at != separator && at + 1 != separator; ++at)
                if (*at == "--allow-host") allow.push_back(*++at);
            std::vector<std::string> bwrap_argv(separator == argv.end() ? argv.end() : separator + 1, argv.end());
            std::string why;
            plan.passFd = proxy::start_bwrap_proxy(allow, bwrap_argv, refusals, why);
            if (plan.passFd < 0) throw Error(code::Proxy, why);
            argv = std::move(bwrap_argv);
            plan.reportsRefusals = refusals >= 0;
        }
        // The stage's proof of start, which alone says whether the command was reached.
        const auto stage = std::find(argv.begin(), argv.end(), "bwrap-stage");
        if (stage == argv.end()) throw Error(code::RunnerExec, "the bubblewrap plan names no stage");
        const auto at = argv.insert(stage + 1, {"--status-fd", "-1"});
        plan.proof = posix::StartProof::ExecMarker;
        plan.fdSlot = static_cast<int>(at - argv.begin()) + 1;
        plan.commandIsGrandchild = true;
        // bubblewrap's pid 1 dies with bubblewrap, and everything in its pid namespace with it:
        // what the command leaves cannot outlive the runner, nor the runner dsh-confine.
        const auto options_end = std::find(argv.begin(), argv.end(), "--");
        plan.runnerEndsTree = std::find(argv.begin(), options_end, "--unshare-pid") != options_end &&
                              std::find(argv.begin(), options_end, "--die-with-parent") != options_end;
        return plan;
    }
    if (backend == "landlock") {
        StartProofPlan plan;
        plan.proof = posix::StartProof::ExecMarker;
        plan.fdSlot = 3;
        plan.runnerIsSelf = true;  // LandlockBackend's runner is this binary
        const auto separator = std::find(argv.begin(), argv.end(), "--");
        const auto base = std::find(argv.begin(), separator, "--private-temp-base");
        if (base != separator && base + 1 != separator) {
            std::string why;
            plan.tempDir = landlock::make_call_temp_dir(*(base + 1), why);
            if (!plan.tempDir && landlock::nested_temp_base()) plan.tempDir = landlock::make_call_temp_dir(*landlock::nested_temp_base(), why);
            if (!plan.tempDir) throw Error(code::Landlock, why);
            const auto id = posix::directory_identity(*plan.tempDir, why);
            if (!id) throw Error(code::Landlock, "the temp area " + why);
            *base = "--temp-dir";
            *(base + 1) = *plan.tempDir;
            argv.insert(base + 2, {"--temp-dir-id", id->text()});
        }
        argv.insert(argv.begin() + 2, {"--status-fd", "-1"});
        // The hosts network: the proxy, started by the runner's preparation in this process
        // (run's prepareHere), reports its refusals.
        const auto options_end = std::find(argv.begin(), argv.end(), "--");
        for (auto at = argv.begin(); at != options_end && at + 1 != options_end; ++at)
            if (*at == "--network" && *(at + 1) == "hosts" && refusals >= 0) {
                argv.insert(argv.begin() + 4, {"--refusals-fd", std::to_string(refusals)});
                plan.reportsRefusals = true;
                break;
            }
        return plan;
    }
    return {};
}

void remove_run_temp_dir(const std::string& dir) {
    const std::size_t slash = dir.rfind('/');
    const int parent = posix::open_no_symlinks(dir.substr(0, slash), O_RDONLY | O_DIRECTORY);
    if (parent < 0) return;
    posix::remove_tree_at(parent, dir.substr(slash + 1));
    close(parent);
}

namespace {

class CgroupLimits : public RunLimitsOnHost {
public:
    explicit CgroupLimits(cgroup::CallGroup group) : group_(std::move(group)) {}
    std::optional<std::uint64_t> tree_cpu_ns() const override { return group_.cpu_time_ns(); }
    std::optional<LimitName> reached() const override { return group_.reached(); }
    const cgroup::CallGroup& group() const { return group_; }

private:
    cgroup::CallGroup group_;
};

}  // namespace

std::unique_ptr<RunLimitsOnHost> prepare_run_limits(const RunLimits& limits) {
    auto out = std::make_unique<CgroupLimits>(cgroup::CallGroup::make(limits, cgroup::host_sources()));
    out->enforcement = decide_limits(limits, out->group().offer(), RlimitSupport{true, true, true});
    out->joinFds = out->group().procs_fds();
    out->rlimits = posix::rlimits_for(out->enforcement);
    return out;
}

int bwrap_stage(const BwrapStageRequest& request, const std::vector<std::string>& argv) {
    return bwrap::run_stage(request, argv);
}

int net_proxy_exec(const std::vector<std::string>& allow_hosts, const std::vector<std::string>& bwrap_argv) {
    std::vector<std::string> canonical;
    for (const auto& text : allow_hosts) {
        auto pattern = parse_host_pattern(text);
        if (!pattern) {
            std::fprintf(stderr, "dsh-confine: error: PROXY: net-proxy: %s\n", pattern.reason().c_str());
            return 125;
        }
        canonical.push_back(to_string(*pattern));
    }
    // bubblewrap waits for its children (exec_plan says why SIGCHLD is reset for it).
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(SIGCHLD, &fallback, nullptr);
    return proxy::exec_with_proxy(canonical, bwrap_argv);
}

int serve_proxy(int argc, char** argv) { return proxy::serve_proxy(argc, argv); }

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
    if (!request.workspaceRootId.empty()) args.workspaceRootId = request.workspaceRootId;
    if (!request.tempDir.empty()) args.tempDir = request.tempDir;
    if (!request.tempDirId.empty()) args.tempDirId = request.tempDirId;
    args.keepFds = request.keepFds;
    args.writableRoots = request.writableRoots;
    args.denyNetwork = request.denyNetwork;
    if (request.hostsNetwork) {
        if (request.allowHosts.empty()) {
            std::fprintf(stderr, "dsh-confine: error: LANDLOCK: landlock-exec: --network hosts needs --allow-host\n");
            return 125;
        }
        args.allowHosts = request.allowHosts;
    }
    if (!request.privateTempBase.empty()) args.privateTempBase = request.privateTempBase;
    args.statusFd = request.statusFd;
    if (request.maxAbi > 0) args.maxAbi = request.maxAbi;
    return landlock::exec_confined(std::move(args), argv);
}

}  // namespace dsh::platform
