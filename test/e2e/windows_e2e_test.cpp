// The restricted-token backend end to end on Windows: the real dsh-confine.exe confines
// cmd.exe, and each test proves from the host's side that a write was really blocked (the
// file outside is untouched) or really allowed (the file is there), never by the exit status
// alone. Tests skip where the mechanism cannot work (wine, a token without a logon SID); CI
// sets DSH_MUST_WORK=1 to turn every skip into a failure.
//
// The test binary doubles as a probe program: `e2e_windows_tests --print-argv ARG...` prints
// the argv Windows split its command line into, one JSON array, to check quoting end to end.
#define NOMINMAX
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <shellapi.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "platform/windows/command_line.hpp"

namespace {

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

#define E2E_REQUIRE(condition, reason)                                              \
    do {                                                                            \
        if (!(condition)) {                                                         \
            if (std::getenv("DSH_MUST_WORK")) FAIL() << "must work: " << (reason); \
            GTEST_SKIP() << (reason);                                               \
        }                                                                           \
    } while (0)

std::wstring wide(const std::string& text) {
    const auto out = dsh::win32::utf8_to_utf16(text);
    return out ? std::wstring(out->begin(), out->end()) : std::wstring();
}

std::string narrow(const std::wstring& text) { return dsh::win32::utf16_to_utf8(std::u16string(text.begin(), text.end())); }

fs::path u8(const std::string& text) { return fs::path(std::u8string(text.begin(), text.end())); }

std::string self_path() {
    wchar_t buffer[32768];
    const DWORD n = GetModuleFileNameW(nullptr, buffer, 32768);
    return narrow(std::wstring(buffer, n));
}

struct Result {
    DWORD status = 0;
    std::string out, err;
};

std::string drain(HANDLE pipe) {
    std::string text;
    char buffer[4096];
    DWORD n = 0;
    while (ReadFile(pipe, buffer, sizeof buffer, &n, nullptr) && n > 0) text.append(buffer, n);
    return text;
}

// Runs `program args...` with stdout and stderr captured, the environment extended by `env`.
Result run(const Argv& argv, const std::vector<std::pair<std::string, std::string>>& env = {}) {
    Result result;
    SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
    HANDLE out_read, out_write, err_read, err_write;
    CreatePipe(&out_read, &out_write, &inherit, 0);
    CreatePipe(&err_read, &err_write, &inherit, 0);
    SetHandleInformation(out_read, HANDLE_FLAG_INHERIT, 0);
    SetHandleInformation(err_read, HANDLE_FLAG_INHERIT, 0);
    HANDLE null_in = CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inherit, OPEN_EXISTING, 0, nullptr);
    for (const auto& [name, value] : env) SetEnvironmentVariableW(wide(name).c_str(), wide(value).c_str());
    STARTUPINFOW info{};
    info.cb = sizeof info;
    info.dwFlags = STARTF_USESTDHANDLES;
    info.hStdInput = null_in;
    info.hStdOutput = out_write;
    info.hStdError = err_write;
    PROCESS_INFORMATION process{};
    std::wstring line = wide(*dsh::win32::build_command_line(argv));
    const BOOL created = CreateProcessW(wide(argv.front()).c_str(), line.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr,
                                        &info, &process);
    for (const auto& [name, value] : env) SetEnvironmentVariableW(wide(name).c_str(), nullptr);
    CloseHandle(out_write);
    CloseHandle(err_write);
    CloseHandle(null_in);
    if (!created) {
        CloseHandle(out_read);
        CloseHandle(err_read);
        result.status = 0xFFFFFFFF;
        result.err = "CreateProcess failed";
        return result;
    }
    std::thread err_thread([&] { result.err = drain(err_read); });
    result.out = drain(out_read);
    err_thread.join();
    WaitForSingleObject(process.hProcess, 120000);
    GetExitCodeProcess(process.hProcess, &result.status);
    CloseHandle(process.hProcess);
    CloseHandle(process.hThread);
    CloseHandle(out_read);
    CloseHandle(err_read);
    return result;
}

std::string cmd_exe() {
    wchar_t buffer[MAX_PATH];
    const UINT n = GetSystemDirectoryW(buffer, MAX_PATH);
    return narrow(std::wstring(buffer, n)) + "\\cmd.exe";
}

class Scratch {
public:
    Scratch() {
        std::random_device entropy;
        root_ = fs::temp_directory_path() / ("dsh-confine-e2e-" + std::to_string(entropy()));
        fs::create_directories(root_ / "ws");
        fs::create_directories(root_ / "outside");
        fs::create_directories(root_ / "state");
        std::ofstream(root_ / "outside" / "victim.txt") << "original\n";
    }
    ~Scratch() {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    std::string ws() const { return narrow((root_ / "ws").wstring()); }
    std::string outside() const { return narrow((root_ / "outside").wstring()); }
    std::string state() const { return narrow((root_ / "state").wstring()); }

private:
    fs::path root_;
};

// dsh-confine, confining cmd /d /c SCRIPT.
Result confined(const Scratch& s, const std::string& mode, const std::string& script, const Argv& extra = {}) {
    Argv argv = {DSH_CONFINE_BINARY, "--mode", mode, "--workspace-root", s.ws()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"--", cmd_exe(), "/d", "/c", script});
    return run(argv, {{"DSH_CONFINE_STATE_DIR", s.state()}, {"XDG_CACHE_HOME", ""}});
}

std::string read(const std::string& path) {
    std::ifstream in(u8(path), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Wine runs the binary but enforces no ACL: nothing here would prove anything there.
bool real_windows() {
    HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
    return ntdll && GetProcAddress(ntdll, "wine_get_version") == nullptr;
}

class RestrictedToken : public ::testing::Test {
protected:
    void SetUp() override {
        E2E_REQUIRE(real_windows(), "wine does not enforce Windows ACLs");
        const Result doctor = run({DSH_CONFINE_BINARY, "doctor", "--json"});
        const auto report = nlohmann::json::parse(doctor.out, nullptr, false);
        E2E_REQUIRE(report.is_object() && report.value("selected", nlohmann::json()) == "restricted-token",
                    "the restricted-token backend is not usable here: " + doctor.out + doctor.err);
    }
    Scratch s;
};

TEST_F(RestrictedToken, AWriteOutsideTheWorkspaceIsDenied) {
    const std::string target = s.outside() + "\\new.txt";
    const Result r = confined(s, "workspace-write", "echo x> \"" + target + "\"");
    EXPECT_NE(r.status, 0u) << r.err;
    EXPECT_FALSE(fs::exists(u8(target))) << "the write outside the workspace took place";
    EXPECT_NE(r.err.find("denied"), std::string::npos) << r.err;
}

TEST_F(RestrictedToken, OverwritingAndDeletingOutsideAreDenied) {
    const std::string victim = s.outside() + "\\victim.txt";
    confined(s, "workspace-write", "echo overwritten> \"" + victim + "\"");
    confined(s, "workspace-write", "del /f /q \"" + victim + "\"");
    confined(s, "workspace-write", "ren \"" + victim + "\" moved.txt");
    EXPECT_EQ(read(victim), "original\n");
}

TEST_F(RestrictedToken, AWriteInTheWorkspaceIsAllowed) {
    const std::string target = s.ws() + "\\made.txt";
    const Result r = confined(s, "workspace-write", "echo inside> \"" + target + "\"");
    EXPECT_EQ(r.status, 0u) << r.err;
    EXPECT_EQ(read(target), "inside\r\n");
}

TEST_F(RestrictedToken, RenameAndDeleteInTheWorkspaceAreAllowed) {
    std::ofstream(u8(s.ws() + "\\a.txt")) << "a";
    const Result r = confined(s, "workspace-write", "ren \"" + s.ws() + "\\a.txt\" b.txt && del \"" + s.ws() + "\\b.txt\"");
    EXPECT_EQ(r.status, 0u) << r.err;
    EXPECT_FALSE(fs::exists(u8(s.ws() + "\\a.txt")));
    EXPECT_FALSE(fs::exists(u8(s.ws() + "\\b.txt")));
}

TEST_F(RestrictedToken, APrivateTempDirectoryIsWritable) {
    const Result r = confined(s, "workspace-write", "echo t> \"%TEMP%\\t.txt\" && type \"%TEMP%\\t.txt\" && echo TEMP=%TEMP%");
    EXPECT_EQ(r.status, 0u) << r.err;
    EXPECT_NE(r.out.find("t"), std::string::npos);
    EXPECT_NE(r.out.find("dsh-confine\\call-"), std::string::npos) << r.out;
}

TEST_F(RestrictedToken, ThePerCallTempDirectoryIsRemovedAfterTheCall) {
    const Result r = confined(s, "workspace-write", "echo %TEMP%");
    ASSERT_EQ(r.status, 0u) << r.err;
    std::string temp = r.out.substr(0, r.out.find_first_of("\r\n"));
    while (!temp.empty() && temp.back() == ' ') temp.pop_back();
    EXPECT_FALSE(fs::exists(u8(temp))) << temp;
}

TEST_F(RestrictedToken, ASessionsTempDirectoryIsWritable) {
    const std::vector<std::pair<std::string, std::string>> env = {{"DSH_CONFINE_STATE_DIR", s.state()}};
    ASSERT_EQ(run({DSH_CONFINE_BINARY, "session", "start", "s1", "--cwd", s.ws()}, env).status, 0u);
    const Result r = run({DSH_CONFINE_BINARY, "--session", "s1", "--mode", "workspace-write", "--", cmd_exe(), "/d", "/c",
                          "echo s> \"%TEMP%\\s.txt\" && echo TEMP=%TEMP%"},
                         env);
    EXPECT_EQ(r.status, 0u) << r.err;
    EXPECT_NE(r.out.find("sessions\\s1\\tmp"), std::string::npos) << r.out;
    EXPECT_EQ(run({DSH_CONFINE_BINARY, "session", "end", "s1"}, env).status, 0u);
}

TEST_F(RestrictedToken, ReadOnlyDeniesTheWorkspaceToo) {
    const std::string target = s.ws() + "\\made.txt";
    const Result r = confined(s, "read-only", "echo x> \"" + target + "\"");
    EXPECT_NE(r.status, 0u);
    EXPECT_FALSE(fs::exists(u8(target)));
}

TEST_F(RestrictedToken, NulIsTheSinkInReadOnly) {
    const Result r = confined(s, "read-only", "echo x> NUL && echo ok");
    EXPECT_EQ(r.status, 0u) << r.err;
    EXPECT_NE(r.out.find("ok"), std::string::npos);
}

TEST_F(RestrictedToken, TheExitCodeIsPassedThrough) {
    EXPECT_EQ(confined(s, "read-only", "exit 42").status, 42u);
    EXPECT_EQ(confined(s, "workspace-write", "exit 0").status, 0u);
}

TEST_F(RestrictedToken, ArgumentsArriveAsGiven) {
    const Argv args = {"two words", "", "quote\"inside", "trailing\\", "back\\\\\"slash", "ünïcødé 日本"};
    Argv argv = {DSH_CONFINE_BINARY, "--mode", "read-only", "--workspace-root", s.ws(), "--", self_path(),
                 "--print-argv"};
    argv.insert(argv.end(), args.begin(), args.end());
    const Result r = run(argv);
    ASSERT_EQ(r.status, 0u) << r.err;
    const auto printed = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(printed.is_array()) << r.out;
    Argv expected = {self_path(), "--print-argv"};
    expected.insert(expected.end(), args.begin(), args.end());
    EXPECT_EQ(Argv(printed.begin() + 1, printed.end()), Argv(expected.begin() + 1, expected.end()));
}

TEST_F(RestrictedToken, APrintedPlanConfinesLikeTheExecPath) {
    const Result plan = run({DSH_CONFINE_BINARY, "--print", "--mode", "workspace-write", "--workspace-root",
                             s.ws(), "--", cmd_exe(), "/d", "/c", "echo x> \"" + s.outside() + "\\p.txt\""});
    ASSERT_EQ(plan.status, 0u) << plan.err;
    const auto json = nlohmann::json::parse(plan.out);
    EXPECT_EQ(json["backend"], "restricted-token");
    EXPECT_EQ(json["enforcement"], "partial");
    const Argv argv = json["argv"].get<Argv>();
    const Result r = run(argv);
    EXPECT_NE(r.status, 0u);
    EXPECT_FALSE(fs::exists(u8(s.outside() + "\\p.txt")));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--print-argv") {
        int count = 0;
        LPWSTR* args = CommandLineToArgvW(GetCommandLineW(), &count);
        nlohmann::json out = nlohmann::json::array();
        for (int i = 0; i < count; ++i) out.push_back(narrow(args[i]));
        LocalFree(args);
        std::fputs((out.dump() + "\n").c_str(), stdout);
        return 0;
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
