#include "restricted_token.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <aclapi.h>
#include <sddl.h>

#include "../posix/process.hpp"
#include "command_line.hpp"
#include "win32.hpp"

namespace dsh::restricted_token {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCode = "dsh-confine: error: RESTRICTED_TOKEN: ";

// One line on stderr, then the runner's failure status.
int fail(const std::string& message) {
    std::fprintf(stderr, "%s%s\n", kCode, message.c_str());
    std::fflush(stderr);
    return 125;
}

struct LocalFreer {
    void operator()(void* p) const {
        if (p) LocalFree(p);
    }
};
using SidPtr = std::unique_ptr<void, LocalFreer>;

SidPtr sid_from_string(const std::string& text) {
    PSID sid = nullptr;
    const std::optional<std::wstring> wide = win32::widen(text);
    if (!wide || !ConvertStringSidToSidW(wide->c_str(), &sid)) return SidPtr();
    return SidPtr(sid);
}

std::string sid_to_string(PSID sid) {
    LPWSTR text = nullptr;
    if (!ConvertSidToStringSidW(sid, &text)) return "";
    std::string out = win32::narrow(text);
    LocalFree(text);
    return out;
}

std::string random_sid() {
    std::random_device entropy;
    return format_sid({entropy(), entropy(), entropy(), entropy()});
}

// A SID out of the token's groups or user, copied so the buffer can go.
std::vector<unsigned char> token_information(HANDLE token, TOKEN_INFORMATION_CLASS which) {
    DWORD size = 0;
    GetTokenInformation(token, which, nullptr, 0, &size);
    std::vector<unsigned char> buffer(size);
    if (size == 0 || !GetTokenInformation(token, which, buffer.data(), size, &size)) return {};
    return buffer;
}

std::string logon_sid(HANDLE token) {
    const std::vector<unsigned char> buffer = token_information(token, TokenGroups);
    if (buffer.empty()) return "";
    const auto* groups = reinterpret_cast<const TOKEN_GROUPS*>(buffer.data());
    for (DWORD i = 0; i < groups->GroupCount; ++i)
        if ((groups->Groups[i].Attributes & SE_GROUP_LOGON_ID) == SE_GROUP_LOGON_ID) return sid_to_string(groups->Groups[i].Sid);
    return "";
}

std::string user_sid(HANDLE token) {
    const std::vector<unsigned char> buffer = token_information(token, TokenUser);
    if (buffer.empty()) return "";
    return sid_to_string(reinterpret_cast<const TOKEN_USER*>(buffer.data())->User.Sid);
}

BYTE ace_flags(Scope scope) {
    switch (scope) {
        case Scope::Object: return 0;
        case Scope::Children: return OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE;
        case Scope::ObjectAndChildren: return OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;
    }
    return 0;
}

// Whether `dacl` already holds `entry` as an explicit ACE: the standing grant is made once,
// so later calls neither rewrite the ACL nor walk the tree again.
bool has_entry(PACL dacl, const AclEntry& entry, PSID sid) {
    ACL_SIZE_INFORMATION info{};
    if (!dacl || !GetAclInformation(dacl, &info, sizeof info, AclSizeInformation)) return false;
    const BYTE type = entry.type == AceType::Allow ? ACCESS_ALLOWED_ACE_TYPE : ACCESS_DENIED_ACE_TYPE;
    for (DWORD i = 0; i < info.AceCount; ++i) {
        void* raw = nullptr;
        if (!GetAce(dacl, i, &raw)) continue;
        const auto* header = static_cast<const ACE_HEADER*>(raw);
        if (header->AceType != type || (header->AceFlags & INHERITED_ACE)) continue;
        const auto* ace = static_cast<const ACCESS_ALLOWED_ACE*>(raw);  // same layout as a denied ACE
        if (ace->Mask == entry.mask && (header->AceFlags & ~INHERITED_ACE) == ace_flags(entry.scope) &&
            EqualSid(const_cast<DWORD*>(&ace->SidStart), sid))
            return true;
    }
    return false;
}

// Adds the missing entries for one path, in canonical order: new denies first, the existing
// explicit ACEs, new allows, then the inherited ones (which Windows derives again anyway).
std::string apply_entries(const std::string& path, const std::vector<const AclEntry*>& entries) {
    const std::optional<std::wstring> wide = win32::widen(path);
    if (!wide) return path + ": not valid UTF-8";
    PACL dacl = nullptr;
    PSECURITY_DESCRIPTOR descriptor = nullptr;
    DWORD status = GetNamedSecurityInfoW(wide->c_str(), SE_FILE_OBJECT, DACL_SECURITY_INFORMATION, nullptr, nullptr,
                                         &dacl, nullptr, &descriptor);
    if (status != ERROR_SUCCESS) return "reading the ACL of " + path + ": " + win32::error_text(status);
    std::unique_ptr<void, LocalFreer> own_descriptor(descriptor);
    if (!dacl) return path + " has a NULL DACL (everyone has every right): refusing to replace it";
    std::vector<SidPtr> sids;
    std::vector<const AclEntry*> missing;
    std::vector<PSID> missing_sids;
    DWORD extra = 0;
    for (const AclEntry* entry : entries) {
        SidPtr sid = sid_from_string(entry->sid);
        if (!sid) return "invalid SID " + entry->sid;
        if (!has_entry(dacl, *entry, sid.get())) {
            missing.push_back(entry);
            missing_sids.push_back(sid.get());
            extra += sizeof(ACCESS_ALLOWED_ACE) - sizeof(DWORD) + GetLengthSid(sid.get());
        }
        sids.push_back(std::move(sid));
    }
    if (missing.empty()) return "";
    ACL_SIZE_INFORMATION info{};
    GetAclInformation(dacl, &info, sizeof info, AclSizeInformation);
    const DWORD size = info.AclBytesInUse + extra;
    std::vector<unsigned char> storage((size + 3) & ~3u);
    auto* acl = reinterpret_cast<PACL>(storage.data());
    const DWORD revision = dacl->AclRevision > ACL_REVISION ? dacl->AclRevision : ACL_REVISION;
    if (!InitializeAcl(acl, static_cast<DWORD>(storage.size()), revision)) return "InitializeAcl: " + win32::error_text(GetLastError());
    for (std::size_t i = 0; i < missing.size(); ++i)
        if (missing[i]->type == AceType::Deny &&
            !AddAccessDeniedAceEx(acl, revision, ace_flags(missing[i]->scope), missing[i]->mask, missing_sids[i]))
            return "AddAccessDeniedAceEx: " + win32::error_text(GetLastError());
    for (int pass = 0; pass < 2; ++pass) {
        for (DWORD i = 0; i < info.AceCount; ++i) {
            void* raw = nullptr;
            if (!GetAce(dacl, i, &raw)) continue;
            const auto* header = static_cast<const ACE_HEADER*>(raw);
            const bool inherited = (header->AceFlags & INHERITED_ACE) != 0;
            if (inherited != (pass == 1)) continue;
            if (!AddAce(acl, revision, MAXDWORD, raw, header->AceSize)) return "AddAce: " + win32::error_text(GetLastError());
        }
        if (pass == 0)
            for (std::size_t i = 0; i < missing.size(); ++i)
                if (missing[i]->type == AceType::Allow &&
                    !AddAccessAllowedAceEx(acl, revision, ace_flags(missing[i]->scope), missing[i]->mask, missing_sids[i]))
                    return "AddAccessAllowedAceEx: " + win32::error_text(GetLastError());
    }
    SECURITY_DESCRIPTOR_CONTROL control = 0;
    DWORD revision_out = 0;
    GetSecurityDescriptorControl(descriptor, &control, &revision_out);
    const SECURITY_INFORMATION which = DACL_SECURITY_INFORMATION | ((control & SE_DACL_PROTECTED)
                                                                        ? PROTECTED_DACL_SECURITY_INFORMATION
                                                                        : UNPROTECTED_DACL_SECURITY_INFORMATION);
    // This also carries inheritable entries down to what the directory already contains.
    status = SetNamedSecurityInfoW(const_cast<wchar_t*>(wide->c_str()), SE_FILE_OBJECT, which, nullptr, nullptr, acl, nullptr);
    if (status != ERROR_SUCCESS) return "granting on " + path + ": " + win32::error_text(status);
    return "";
}

std::string apply_plan(const std::vector<AclEntry>& acl) {
    std::vector<std::string> order;
    for (const auto& entry : acl)
        if (std::find(order.begin(), order.end(), entry.path) == order.end()) order.push_back(entry.path);
    for (const auto& path : order) {
        std::vector<const AclEntry*> entries;
        for (const auto& entry : acl)
            if (entry.path == path) entries.push_back(&entry);
        if (std::string error = apply_entries(path, entries); !error.empty()) return error;
    }
    return "";
}

bool is_directory(const std::string& path) {
    const std::optional<std::wstring> wide = win32::widen(path);
    if (!wide) return false;
    const DWORD attributes = GetFileAttributesW(wide->c_str());
    return attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY);
}

struct TempArea {
    std::optional<std::string> dir;
    std::string sid;
    bool removeAfter = false;
};

// A session's temp directory keeps its random SID beside it (tmp.sid), for as long as the
// session lives; an agentless call gets a fresh directory and SID, removed after the call.
std::string prepare_temp(const RunnerArgs& args, TempArea& area) {
    if (args.mode != ConfinedSandboxMode::WorkspaceWrite) return "";
    std::error_code ec;
    if (args.tempDir) {
        fs::create_directories(win32::to_path(*args.tempDir), ec);
        if (!is_directory(*args.tempDir)) return "--temp-dir " + *args.tempDir + " is not a directory";
        area.dir = *args.tempDir;
        const fs::path sid_file = win32::to_path(*args.tempDir + ".sid");
        std::string sid;
        std::getline(std::ifstream(sid_file), sid);
        if (sid.rfind("S-1-5-21-", 0) != 0 || !sid_from_string(sid)) {
            sid = random_sid();
            std::ofstream(sid_file, std::ios::trunc) << sid << "\n";
        }
        area.sid = sid;
        return "";
    }
    if (!args.privateTempBase) return "workspace-write needs --temp-dir or --private-temp-base";
    fs::create_directories(win32::to_path(*args.privateTempBase), ec);
    if (!is_directory(*args.privateTempBase)) return "--private-temp-base " + *args.privateTempBase + " is not a directory";
    std::random_device entropy;
    for (int attempt = 0; attempt < 16 && !area.dir; ++attempt) {
        char name[32];
        std::snprintf(name, sizeof name, "call-%08x%08x", entropy(), entropy());
        const std::string dir = *args.privateTempBase + "\\" + name;
        if (CreateDirectoryW(win32::widen(dir)->c_str(), nullptr)) area.dir = dir;
        else if (GetLastError() != ERROR_ALREADY_EXISTS) return "creating " + dir + ": " + win32::error_text(GetLastError());
    }
    if (!area.dir) return "no free name for a private temp directory in " + *args.privateTempBase;
    area.sid = random_sid();
    area.removeAfter = true;
    return "";
}

// Objects the command creates without an inherited ACL (pipes, events, its own processes)
// get this default DACL: the user (first check) and the logon session (restricted check)
// may use them, and SYSTEM; no other user.
std::string set_default_dacl(HANDLE token, const std::vector<PSID>& sids) {
    DWORD size = sizeof(ACL);
    for (PSID sid : sids) size += sizeof(ACCESS_ALLOWED_ACE) - sizeof(DWORD) + GetLengthSid(sid);
    std::vector<unsigned char> storage((size + 3) & ~3u);
    auto* acl = reinterpret_cast<PACL>(storage.data());
    if (!InitializeAcl(acl, static_cast<DWORD>(storage.size()), ACL_REVISION)) return "InitializeAcl: " + win32::error_text(GetLastError());
    for (PSID sid : sids)
        if (!AddAccessAllowedAce(acl, ACL_REVISION, GENERIC_ALL, sid)) return "AddAccessAllowedAce: " + win32::error_text(GetLastError());
    TOKEN_DEFAULT_DACL dacl{acl};
    if (!SetTokenInformation(token, TokenDefaultDacl, &dacl, sizeof dacl))
        return "SetTokenInformation(TokenDefaultDacl): " + win32::error_text(GetLastError());
    return "";
}

BOOL WINAPI ignore_console_event(DWORD) { return TRUE; }

std::string windows_version() {
    using RtlGetVersionFn = LONG(WINAPI*)(OSVERSIONINFOW*);
    OSVERSIONINFOW info{};
    info.dwOSVersionInfoSize = sizeof info;
    if (HMODULE ntdll = GetModuleHandleW(L"ntdll.dll"))
        if (auto get = reinterpret_cast<RtlGetVersionFn>(reinterpret_cast<void*>(GetProcAddress(ntdll, "RtlGetVersion"))))
            if (get(&info) == 0)
                return std::to_string(info.dwMajorVersion) + "." + std::to_string(info.dwMinorVersion) + "." +
                       std::to_string(info.dwBuildNumber);
    return "unknown";
}

std::string current_user_sid() {
    HANDLE token = nullptr;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token)) return "unknown";
    win32::Handle own(token);
    return user_sid(token);
}

std::string file_identity(const std::string& path) {
    WIN32_FILE_ATTRIBUTE_DATA data{};
    const std::optional<std::wstring> wide = win32::widen(path);
    if (!wide || !GetFileAttributesExW(wide->c_str(), GetFileExInfoStandard, &data)) return "missing";
    return std::to_string(data.nFileSizeLow) + ":" + std::to_string(data.ftLastWriteTime.dwHighDateTime) + "." +
           std::to_string(data.ftLastWriteTime.dwLowDateTime);
}

std::string system_directory() {
    wchar_t buffer[MAX_PATH + 1];
    const UINT n = GetSystemDirectoryW(buffer, MAX_PATH + 1);
    return n ? win32::narrow(std::wstring_view(buffer, n)) : std::string("C:\\Windows\\System32");
}

}  // namespace

std::string private_temp_base() {
    wchar_t buffer[MAX_PATH + 1];
    DWORD n = GetTempPathW(MAX_PATH + 1, buffer);
    if (n == 0 || n > MAX_PATH) return "C:\\Windows\\Temp\\dsh-confine";
    // The long form, so the path shown in writableRoots is the one the user knows.
    wchar_t long_form[32768];
    const DWORD m = GetLongPathNameW(buffer, long_form, 32768);
    std::string dir = m && m < 32768 ? win32::narrow(std::wstring_view(long_form, m)) : win32::narrow(std::wstring_view(buffer, n));
    while (!dir.empty() && (dir.back() == '\\' || dir.back() == '/')) dir.pop_back();
    return dir + "\\dsh-confine";
}

int run_confined(const RunnerArgs& args, const std::vector<std::string>& argv) {
    std::fflush(stdout);
    if (argv.empty()) return fail("restricted-token-exec: no PROGRAM given");
    if (!is_directory(args.workspaceRoot)) return fail("the workspace root " + args.workspaceRoot + " is not a directory");
    const posix::ProgramLookup found = posix::resolve_program(argv.front());
    if (found.status == posix::Lookup::NotFound) {
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_FOUND: %s: not found\n", argv.front().c_str());
        return 127;
    }
    if (found.status == posix::Lookup::NotExecutable) {
        std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: permission denied\n", found.path.c_str());
        return 126;
    }

    HANDLE raw_token = nullptr;
    if (!OpenProcessToken(GetCurrentProcess(),
                          TOKEN_DUPLICATE | TOKEN_QUERY | TOKEN_ASSIGN_PRIMARY | TOKEN_ADJUST_DEFAULT | TOKEN_ADJUST_SESSIONID,
                          &raw_token))
        return fail("OpenProcessToken: " + win32::error_text(GetLastError()));
    win32::Handle base(raw_token);
    const std::string logon = logon_sid(base.get());
    const std::string user = user_sid(base.get());
    if (logon.empty()) return fail("this process's token has no logon SID (a service or batch context?)");

    TempArea temp;
    if (std::string error = prepare_temp(args, temp); !error.empty()) return fail(error);
    struct Cleanup {
        const TempArea& area;
        ~Cleanup() {
            // Never through a junction the command planted: only what lies in the directory.
            if (area.removeAfter && area.dir) win32::remove_tree(*area.dir);
        }
    } cleanup{temp};

    const TokenPlan plan = token_plan(args, temp.dir, temp.sid);
    if (std::string error = apply_plan(plan.acl); !error.empty()) return fail(error);

    std::vector<SidPtr> owned;
    std::vector<SID_AND_ATTRIBUTES> restricting;
    for (const auto& entry : plan.restrictingSids) {
        SidPtr sid = sid_from_string(entry.sid == kLogonSid ? logon : entry.sid);
        if (!sid) return fail("invalid restricting SID " + entry.sid);
        restricting.push_back({sid.get(), 0});
        owned.push_back(std::move(sid));
    }
    HANDLE raw_restricted = nullptr;
    if (!CreateRestrictedToken(base.get(), DISABLE_MAX_PRIVILEGE | LUA_TOKEN | WRITE_RESTRICTED, 0, nullptr, 0, nullptr,
                               static_cast<DWORD>(restricting.size()), restricting.data(), &raw_restricted))
        return fail("CreateRestrictedToken: " + win32::error_text(GetLastError()));
    win32::Handle restricted(raw_restricted);
    SidPtr user_psid = sid_from_string(user), logon_psid = sid_from_string(logon), system_psid = sid_from_string("S-1-5-18");
    if (!user_psid || !logon_psid || !system_psid) return fail("cannot read this process's user and logon SIDs");
    if (std::string error = set_default_dacl(restricted.get(), {user_psid.get(), logon_psid.get(), system_psid.get()});
        !error.empty())
        return fail(error);

    std::string error;
    win32::Handle job = win32::make_kill_on_close_job(&error);
    if (!job) return fail(error);
    const std::wstring environment = win32::environment_block(plan.environment);
    win32::ChildStart start;
    start.program = found.path;
    start.argv = argv;
    start.stdinHandle = GetStdHandle(STD_INPUT_HANDLE);
    start.stdoutHandle = GetStdHandle(STD_OUTPUT_HANDLE);
    start.stderrHandle = GetStdHandle(STD_ERROR_HANDLE);
    start.token = restricted.get();
    start.environment = &environment;
    start.job = job.get();
    SetConsoleCtrlHandler(ignore_console_event, TRUE);  // the command gets Ctrl+C; we wait for its status
    win32::Started started = win32::start_child(start);
    if (!started.process) {
        if (started.errorCode == ERROR_FILE_NOT_FOUND || started.errorCode == ERROR_PATH_NOT_FOUND) {
            std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_FOUND: %s: %s\n", argv.front().c_str(), started.error.c_str());
            return 127;
        }
        if (started.errorCode == ERROR_BAD_EXE_FORMAT || started.errorCode == ERROR_ACCESS_DENIED) {
            std::fprintf(stderr, "dsh-confine: error: COMMAND_NOT_EXECUTABLE: %s: %s\n", argv.front().c_str(), started.error.c_str());
            return 126;
        }
        return fail(started.error);
    }
    WaitForSingleObject(started.process.get(), INFINITE);
    DWORD code = 1;
    GetExitCodeProcess(started.process.get(), &code);
    job.reset();  // closing the job kills whatever the command left running
    return static_cast<int>(code);
}

RestrictedTokenBackend::RestrictedTokenBackend(std::string runner, BackendConfig config, std::vector<std::string> protected_paths)
    : runner_(std::move(runner)), config_(std::move(config)), protected_(std::move(protected_paths)) {}

Expected<Usable> RestrictedTokenBackend::check() const {
    if (runner_.empty() || file_identity(runner_) == "missing")
        return Expected<Usable>::failure("the runner (dsh-confine.exe itself) cannot be found: " + runner_);
    return Usable{};
}

Expected<Usable> RestrictedTokenBackend::probe(int timeout_ms) const {
    if (auto present = check(); !present) return present;
    RunnerArgs args;
    args.mode = ConfinedSandboxMode::ReadOnly;
    args.workspaceRoot = system_directory();
    const posix::SpawnOutcome outcome =
        posix::spawn_with_timeout(build_argv(runner_, args, {system_directory() + "\\cmd.exe", "/d", "/c", "exit 0"}), timeout_ms);
    if (!outcome.started) return Expected<Usable>::failure(outcome.error);
    if (outcome.timedOut) return Expected<Usable>::failure("the probe did not finish within " + std::to_string(timeout_ms) + " ms");
    if (outcome.exitCode == 0) return Usable{};
    const std::string first = outcome.output.substr(0, outcome.output.find('\n'));
    return Expected<Usable>::failure("the probe exited with " + std::to_string(outcome.exitCode) +
                                     (first.empty() ? "" : ": " + first));
}

std::string RestrictedTokenBackend::probe_identity() const {
    return "runner=" + runner_ + "\nrunner-id=" + file_identity(runner_) + "\nwindows=" + windows_version() +
           "\nuser=" + current_user_sid();
}

Expected<ConfinedArgv> RestrictedTokenBackend::confine(const std::vector<std::string>& argv, const SandboxPolicy& policy) const {
    if (auto present = check(); !present) return Expected<ConfinedArgv>::failure(present.reason());
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite && !policy.writableRoots.empty())
        return Expected<ConfinedArgv>::failure("extra writable roots are not granted by the restricted-token backend yet");
    const RunnerArgs args = runner_args(policy, private_temp_base(), protected_);
    ConfinedArgv out;
    out.argv = build_argv(runner_, args, argv);
    out.backend = name();
    out.enforcement = SandboxEnforcement::Partial;
    out.enforcementGaps = enforcement_gaps(policy);
    out.protectedPaths = policy.protectedPaths;
    out.unreadablePaths = policy.unreadablePaths;
    out.network = policy.network;
    const Dialect rules = dialect();
    out.denialSignatures = rules.denialSignatures;
    out.runnerFailureRules = rules.runnerFailureRules;
    out.writableRoots = writable_roots(args);
    return out;
}

Dialect RestrictedTokenBackend::dialect() const { return restricted_token::dialect(config_.informationalLines); }

BackendReport RestrictedTokenBackend::report() const {
    BackendReport out;
    out.name = name();
    out.facts.push_back({"runner", runner_.empty() ? "-" : runner_});
    out.facts.push_back({"windowsVersion", windows_version()});
    const Expected<Usable> present = check();
    out.usable = present.has_value();
    if (!present) out.reason = present.reason();
    out.enforcement = SandboxEnforcement::Partial;
    out.enforcementGaps = enforcement_gaps(ConfinedSandboxMode::WorkspaceWrite);
    return out;
}

}  // namespace dsh::restricted_token
