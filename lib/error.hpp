// The one exception type for failures a caller cannot handle. It is caught once, at the top
// of the CLI, and printed as `dsh-confine: error: CODE: message` with exit status 125.
// Outcomes a caller can act on (a backend that is unusable, a verdict) are values instead.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace dsh {

// The stable codes listed in docs/exit-codes.md.
namespace code {
inline constexpr const char* Usage = "USAGE";
inline constexpr const char* Config = "CONFIG";
inline constexpr const char* Session = "SESSION";
inline constexpr const char* SessionCwdChanged = "SESSION_CWD_CHANGED";
inline constexpr const char* State = "STATE";
inline constexpr const char* WorkspaceRoot = "WORKSPACE_ROOT";
inline constexpr const char* OwnStateInRoot = "OWN_STATE_IN_ROOT";
inline constexpr const char* BroadRoot = "BROAD_ROOT";
inline constexpr const char* SandboxUnavailable = "SANDBOX_UNAVAILABLE";
inline constexpr const char* EnforcementPartial = "ENFORCEMENT_PARTIAL";
inline constexpr const char* Plan = "PLAN";
inline constexpr const char* Input = "INPUT";
inline constexpr const char* Report = "REPORT";
inline constexpr const char* RunnerExec = "RUNNER_EXEC";
inline constexpr const char* Landlock = "LANDLOCK";
inline constexpr const char* BwrapStage = "BWRAP_STAGE";
inline constexpr const char* Proxy = "PROXY";
inline constexpr const char* Internal = "INTERNAL";
// Exit 127 / 126, not 125: PROGRAM is not on PATH / is not executable (as env(1)).
inline constexpr const char* CommandNotFound = "COMMAND_NOT_FOUND";
inline constexpr const char* CommandNotExecutable = "COMMAND_NOT_EXECUTABLE";
}  // namespace code

class Error : public std::runtime_error {
public:
    Error(std::string code, const std::string& message)
        : std::runtime_error(message), code_(std::move(code)) {}
    const std::string& code() const { return code_; }

private:
    std::string code_;
};

// A value or the reason there is none: the shape of "usable or why not".
template <typename T>
class Expected {
public:
    Expected(T value) : data_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
    static Expected failure(std::string reason) { return Expected(Reason{std::move(reason)}); }

    bool has_value() const { return data_.index() == 0; }
    explicit operator bool() const { return has_value(); }
    const T& value() const& { return std::get<0>(data_); }
    T& value() & { return std::get<0>(data_); }
    T&& value() && { return std::get<0>(std::move(data_)); }
    const T* operator->() const { return &value(); }
    const T& operator*() const& { return value(); }
    const std::string& reason() const { return std::get<1>(data_).text; }

private:
    struct Reason {
        std::string text;
    };
    explicit Expected(Reason reason) : data_(std::move(reason)) {}
    std::variant<T, Reason> data_;
};

}  // namespace dsh
