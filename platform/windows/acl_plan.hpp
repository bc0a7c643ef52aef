// The restricted-token backend's plan as data: which SIDs restrict the token, which SID gets
// which rights on which path, the runner argv, the writable roots, the named gaps and the
// dialect. Pure code, compiled and unit-tested on every system; restricted_token.cpp carries
// it out with CreateRestrictedToken and SetEntriesInAcl.
//
// The mechanism: the command runs on a write-restricted token (WRITE_RESTRICTED), so every
// write access check is made twice, once with the caller's SIDs and once with the token's
// restricting SIDs, and both must grant. The restricting SIDs are:
//   - a per-workspace SID, derived from the canonical root, with a standing inherited grant
//     on the root (made once, kept for later calls: no tree walk on every call);
//   - per live session/workspace pair (or per call, agentless) a random SID with a grant on
//     the pair's private temp directory;
//   - the logon SID and Everyone, without which no process starts (desktop, console, named
//     objects) and NUL, the sink, cannot be written.
// What this does not govern, named in every plan (enforcement is `partial`):
//   - files and directories whose ACL grants Everyone (or the logon session) write access
//     stay writable, since those SIDs must restrict the token;
//   - hard links: the workspace grant is inherited by every file under the root, and a file
//     there that is also linked from outside carries the grant to its other names;
//   - alternate data streams share their file's ACL: the streams of every file the grant
//     reaches, and of the root directory itself, are writable and invisible to most tools;
//   - writes by other processes on the command's behalf (services, COM servers, brokers),
//     handles inherited already open, the registry only as far as its ACLs go (Everyone-
//     writable keys stay writable), the network and process visibility.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../lib/types.hpp"

namespace dsh::restricted_token {

// Access-mask bits, as winnt.h numbers them, so the plan compiles where winnt.h does not.
namespace rights {
inline constexpr std::uint32_t WriteData = 0x0002;       // FILE_WRITE_DATA, FILE_ADD_FILE
inline constexpr std::uint32_t AppendData = 0x0004;      // FILE_APPEND_DATA, FILE_ADD_SUBDIRECTORY
inline constexpr std::uint32_t WriteEa = 0x0010;         // FILE_WRITE_EA
inline constexpr std::uint32_t DeleteChild = 0x0040;     // FILE_DELETE_CHILD
inline constexpr std::uint32_t WriteAttributes = 0x0100; // FILE_WRITE_ATTRIBUTES
inline constexpr std::uint32_t Delete = 0x00010000;
inline constexpr std::uint32_t WriteDac = 0x00040000;
inline constexpr std::uint32_t WriteOwner = 0x00080000;
// icacls's M: read, write, execute and delete; not WRITE_DAC or WRITE_OWNER, so the command
// cannot rewrite an ACL, and not FILE_DELETE_CHILD, so a child's own deny holds.
inline constexpr std::uint32_t Modify = 0x001301BF;
// Everything that changes a file or a directory, for deny entries (no SYNCHRONIZE or
// READ_CONTROL: reading stays possible).
inline constexpr std::uint32_t AnyWrite =
    WriteData | AppendData | WriteEa | DeleteChild | WriteAttributes | Delete | WriteDac | WriteOwner;
}  // namespace rights

enum class AceType { Allow, Deny };

// Where an entry applies: the object itself, what it contains (inherit-only), or both.
enum class Scope { Object, Children, ObjectAndChildren };

struct AclEntry {
    std::string path;
    std::string sid;  // S-1-... text
    AceType type = AceType::Allow;
    std::uint32_t mask = 0;
    Scope scope = Scope::Object;
    std::string why;

    bool operator==(const AclEntry&) const = default;
};

// A restricting SID of the token. `sid` is "logon" for the caller's logon SID, which only the
// host knows.
struct RestrictingSid {
    std::string sid;
    std::string why;

    bool operator==(const RestrictingSid&) const = default;
};

inline constexpr const char* kLogonSid = "logon";
inline constexpr const char* kEveryoneSid = "S-1-1-0";

// What the runner (`dsh-confine restricted-token-exec`) is told.
struct RunnerArgs {
    ConfinedSandboxMode mode = ConfinedSandboxMode::ReadOnly;
    std::string workspaceRoot;
    std::optional<std::string> tempDir;          // a session's temp area, used as is
    std::optional<std::string> privateTempBase;  // make a per-call directory in here
    std::vector<std::string> protectedPaths;     // dsh-confine's own files

    bool operator==(const RunnerArgs&) const = default;
};

// `<runner> restricted-token-exec --mode M --workspace-root R [--temp-dir D |
//  --private-temp-base B] [--protect P]... -- argv`
std::vector<std::string> build_argv(const std::string& runner, const RunnerArgs& args,
                                    const std::vector<std::string>& argv);
// The runner args and the command back out of build_argv's output (the exec path runs the
// plan's own argv in-process); nullopt for anything build_argv does not produce.
struct ParsedRunner {
    RunnerArgs args;
    std::vector<std::string> argv;
};
std::optional<ParsedRunner> parse_argv(const std::vector<std::string>& runner_argv);
// `private_temp_base`: the per-user base for agentless calls (%TEMP%\dsh-confine).
RunnerArgs runner_args(const SandboxPolicy& policy, const std::string& private_temp_base,
                       const std::vector<std::string>& protected_paths);
std::vector<std::string> writable_roots(const RunnerArgs& args);

// S-1-5-21-A-B-C-D from four 32-bit values, as ConvertStringSidToSid reads it.
std::string format_sid(const std::array<std::uint32_t, 4>& parts);
// The workspace's SID: the first 128 bits of SHA-256 over the root's case-folded, backslash
// form, so every spelling of one directory shares one standing grant and no chosen path can
// be made to share another workspace's SID.
std::string workspace_sid(std::string_view root);
// The lowercase-hex SHA-256 of `data` (the digest behind workspace_sid, exposed for tests).
std::string sha256_hex(std::string_view data);

// Windows path semantics: `path` is `root` or lies below it, compared case-insensitively
// (ASCII), with '/' and '\' alike.
bool path_within(std::string_view path, std::string_view root);

struct TokenPlan {
    std::vector<RestrictingSid> restrictingSids;
    std::vector<AclEntry> acl;                                  // applied in order
    std::vector<std::pair<std::string, std::string>> environment;  // set for the command
};

// The plan for one run. `temp_dir` and `temp_sid` are the pair's (or the call's) private temp
// directory and its random SID, in workspace-write; read-only has neither and no grant at all.
TokenPlan token_plan(const RunnerArgs& args, const std::optional<std::string>& temp_dir, const std::string& temp_sid);

// The named gaps of the mode; never empty, so enforcement is always partial.
std::vector<std::string> enforcement_gaps(ConfinedSandboxMode mode);
// The mode's gaps, then the policy's own: the network (a restricted token cannot take it away
// without administrator rights), protected and unreadable paths (the workspace's ACL grant is
// inherited below it; reads are not taken away).
std::vector<std::string> enforcement_gaps(const SandboxPolicy& policy);

// ERROR_ACCESS_DENIED as Win32, the C runtime and .NET spell it; the runner's own failures
// carry `dsh-confine: error: RESTRICTED_TOKEN:` and exit 125 before the command starts.
Dialect dialect(const std::vector<std::string>& extra_informational_lines);

}  // namespace dsh::restricted_token
