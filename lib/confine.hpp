// The confine step: from a resolved policy and an argv to the plan, or to the reason there is
// none. It picks the chain, has the host look PROGRAM up, asks the provider, and applies
// --require-full. What needs the host (PATH lookup, the session's temp area, the backends'
// view of the call, the probe cache on disk) comes in through ConfineHost, which cli/ fills
// from platform/ and the unit tests from fakes.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "plan.hpp"
#include "provider.hpp"
#include "session.hpp"
#include "types.hpp"

namespace dsh {

// Builds the backends a chain names: platform::make_backend in production.
class BackendFactory {
public:
    virtual ~BackendFactory() = default;
    // The backend `name` of this system for a call under `policy`, or nullptr when `name`
    // belongs to another system (a config shared between machines may name one).
    virtual std::shared_ptr<const Backend> make(const std::string& name, const SandboxPolicy& policy) = 0;
    // This system's name, for the reason another system's backend is passed over.
    virtual std::string system_name() const = 0;
};

// Where PROGRAM is, by execvp's rules (a name with a slash as is, else each PATH entry).
enum class ProgramStatus { Found, NotFound, NotExecutable };
struct ProgramLocation {
    ProgramStatus status = ProgramStatus::NotFound;
    std::string path;  // the file found (also when it is not executable)
};

// The host's side of one confining call.
struct ConfineHost {
    BackendFactory& backends;
    std::vector<std::string> defaultChain;  // when neither --backend nor [provider] backends names one
    std::function<ProgramLocation(const std::string&)> findProgram;
    SessionStorage* sessions = nullptr;  // the session's temp area is made through it; null: no session
    ProbeCache* probeCache = nullptr;    // null: every probe runs
    // dsh-confine's own paths (state, cache and config directories, the config file, the
    // private temp bases), asked for in workspace-write only: a root that contains one is
    // OWN_STATE_IN_ROOT. Null: none.
    std::function<std::vector<std::string>()> ownPaths = nullptr;
    // The caller's home directory (canonical), for the broad-root rule; absent: only `/` is broad.
    std::optional<std::string> home = std::nullopt;
};

struct ConfineRequest {
    SandboxExecutionPolicy policy;        // resolved (SandboxPolicyService)
    std::vector<std::string> argv;        // PROGRAM [ARG...], not empty
    std::optional<std::string> backend;   // --backend: this one alone, no chain
    bool requireFull = false;             // --require-full: refuse partial enforcement
    std::vector<int> keepFds = {};        // --keep-fd: descriptors above 2 passed on
    bool allowBroadRoots = false;         // --allow-broad-root or [sandbox] allow_broad_roots
};

// Whether `root` is too broad to be writable: `/`, the home directory, or one of its ancestors.
bool broad_root(const std::string& root, const std::optional<std::string>& home);

// Why a canonical directory may not be a writable root in workspace-write. `Broad` (`/`, the home
// directory or above) and `System` (the operating system's own directories) are accepted with the
// opt-in (--allow-broad-root, [sandbox] allow_broad_roots); `Kernel` (/proc, /sys, /dev and below)
// never is. `why` completes "the writable root ROOT ..." in BROAD_ROOT's message.
struct RootRefusal {
    enum class Kind { Broad, System, Kernel };
    Kind kind;
    std::string why;
};
std::optional<RootRefusal> refused_root(const std::string& root, const std::optional<std::string>& home);

// Why nothing will run. `code` is the stable code: COMMAND_NOT_FOUND, COMMAND_NOT_EXECUTABLE,
// SANDBOX_UNAVAILABLE or ENFORCEMENT_PARTIAL; the caller picks the exit status.
struct ConfineFailure {
    std::string code;
    std::string message;
    // SANDBOX_UNAVAILABLE: each candidate and why it was passed over (another system's names
    // first, then the chain's own in order).
    std::vector<CandidateRejection> candidates;
};

// COMMAND_NOT_FOUND or COMMAND_NOT_EXECUTABLE (env(1)'s 127 and 126) for a PROGRAM that
// cannot be run; nullopt when it can.
std::optional<ConfineFailure> unrunnable_program(const std::string& program, const ProgramLocation& location);

struct ConfineOutcome {
    std::optional<Plan> plan;                     // what runs, or
    std::optional<ConfineFailure> failure;        // why nothing does
    std::optional<SandboxPolicy> providerPolicy;  // what the backend was asked for (confined plans)
};

// The chain a call tries: `forced` alone, else [provider] backends, else `default_chain`. A
// forced name no system knows is USAGE (one of another system is not: it is rejected later,
// with its reason, like any other candidate).
std::vector<std::string> backend_chain(const std::optional<std::string>& forced, const Config& config,
                                       const std::vector<std::string>& default_chain);

// In order: the chain (a bad --backend is USAGE in every mode), PROGRAM on PATH (before
// anything is confined, so every backend gives the same answer), danger-full-access (the
// original argv, no backend), in workspace-write every root neither refused by refused_root
// (BROAD_ROOT) nor holding dsh-confine's own paths (OWN_STATE_IN_ROOT), the session's temp area (workspace-write), the provider, and
// --require-full. Hopeless errors (USAGE, SESSION, STATE) are thrown as dsh::Error.
ConfineOutcome confine_call(const ConfineRequest& request, const Config& config, const ConfineHost& host);

}  // namespace dsh
