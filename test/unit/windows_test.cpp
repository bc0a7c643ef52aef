// The restricted-token builders: command-line quoting by the CommandLineToArgvW rules, the
// UTF-8 <-> UTF-16 conversion, the workspace SID, the ACL plan, runner argv, gaps, dialect.
// On Windows the quoting is also checked against the system's own CommandLineToArgvW.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/classify.hpp"
#include "platform/windows/acl_plan.hpp"
#include "platform/windows/command_line.hpp"

#ifdef _WIN32
#include <windows.h>
#include <shellapi.h>
#endif

namespace dsh {
namespace {

using Argv = std::vector<std::string>;
namespace rt = restricted_token;

TEST(WindowsQuoting, PlainWordsStayBare) {
    EXPECT_EQ(win32::quote_argument("hello"), "hello");
    EXPECT_EQ(win32::quote_argument("C:\\path\\to\\file.txt"), "C:\\path\\to\\file.txt");
    EXPECT_EQ(win32::quote_argument("a\\\\b\\"), "a\\\\b\\");  // backslashes without a quote are literal
}

TEST(WindowsQuoting, EmptyArgumentIsTwoQuotes) { EXPECT_EQ(win32::quote_argument(""), "\"\""); }

TEST(WindowsQuoting, SpacesAndTabsAreQuoted) {
    EXPECT_EQ(win32::quote_argument("a b"), "\"a b\"");
    EXPECT_EQ(win32::quote_argument("a\tb"), "\"a\tb\"");
    EXPECT_EQ(win32::quote_argument("line\nbreak"), "\"line\nbreak\"");
}

TEST(WindowsQuoting, QuotesAreEscapedWithABackslash) {
    EXPECT_EQ(win32::quote_argument("say \"hi\""), "\"say \\\"hi\\\"\"");
    EXPECT_EQ(win32::quote_argument("\""), "\"\\\"\"");
}

TEST(WindowsQuoting, BackslashesBeforeAQuoteAreDoubled) {
    EXPECT_EQ(win32::quote_argument("a\\\"b"), "\"a\\\\\\\"b\"");  // a\"b -> "a\\\"b"
}

TEST(WindowsQuoting, TrailingBackslashesAreDoubledBeforeTheClosingQuote) {
    EXPECT_EQ(win32::quote_argument("C:\\Program Files\\"), "\"C:\\Program Files\\\\\"");
    EXPECT_EQ(win32::quote_argument("dir with space\\\\"), "\"dir with space\\\\\\\\\"");
}

TEST(WindowsCommandLine, ProgramNameIsQuotedWithoutEscapes) {
    EXPECT_EQ(win32::build_command_line({"C:\\Program Files\\Git\\bin\\git.exe", "status"}),
              "\"C:\\Program Files\\Git\\bin\\git.exe\" status");
    EXPECT_EQ(win32::build_command_line({"cmd.exe", "/c", "echo a b"}), "cmd.exe /c \"echo a b\"");
    EXPECT_EQ(win32::build_command_line({"x", ""}), "x \"\"");
}

TEST(WindowsCommandLine, AProgramNameWithAQuoteCannotBeExpressed) {
    EXPECT_FALSE(win32::build_command_line({"a\"b.exe"}));
    EXPECT_FALSE(win32::build_command_line({}));
}

const std::vector<Argv> kRoundTrips = {
    {"prog", "simple"},
    {"C:\\Program Files\\prog.exe", "two words", "", "tab\there"},
    {"prog", "\"", "\"\"", "a\"b", "\\\"", "\\\\\"", "end\\", "end\\\\", "mid\\dle", "\\\\server\\share\\"},
    {"prog", "ünïcødé", "日本語 パス", "emoji 😀", "C:\\Users\\Zoë\\ws\\"},
    {"prog", " leading", "trailing ", "  ", "\t", "x\ny", "a\vb", "--", "-D", "%PATH%", "^&|<>"},
};

TEST(WindowsCommandLine, SplitsBackIntoTheSameArgv) {
    for (const auto& argv : kRoundTrips) {
        const auto line = win32::build_command_line(argv);
        ASSERT_TRUE(line);
        EXPECT_EQ(win32::split_command_line(*line), argv) << *line;
    }
}

TEST(WindowsCommandLine, SplitFollowsTheDocumentedExamples) {
    // The examples of Microsoft's "Parsing C command-line arguments" table.
    EXPECT_EQ(win32::split_command_line("\"a b c\" d e", false), (Argv{"a b c", "d", "e"}));
    EXPECT_EQ(win32::split_command_line("\"ab\\\"c\" \"\\\\\" d", false), (Argv{"ab\"c", "\\", "d"}));
    EXPECT_EQ(win32::split_command_line("a\\\\\\b d\"e f\"g h", false), (Argv{"a\\\\\\b", "de fg", "h"}));
    EXPECT_EQ(win32::split_command_line("a\\\\\\\"b c d", false), (Argv{"a\\\"b", "c", "d"}));
    EXPECT_EQ(win32::split_command_line("a\\\\\\\\\"b c\" d e", false), (Argv{"a\\\\b c", "d", "e"}));
    EXPECT_EQ(win32::split_command_line("a\"b\"\" c d", false), (Argv{"ab\" c d"}));
}

#ifdef _WIN32
// The system's own parser agrees with ours on everything we emit.
TEST(WindowsCommandLine, CommandLineToArgvWAgrees) {
    for (const auto& argv : kRoundTrips) {
        const auto line = win32::build_command_line(argv);
        ASSERT_TRUE(line);
        const std::u16string wide = *win32::utf8_to_utf16(*line);
        int count = 0;
        LPWSTR* parsed = CommandLineToArgvW(reinterpret_cast<const wchar_t*>(wide.c_str()), &count);
        ASSERT_NE(parsed, nullptr);
        Argv back;
        for (int i = 0; i < count; ++i)
            back.push_back(win32::utf16_to_utf8(reinterpret_cast<const char16_t*>(parsed[i])));
        LocalFree(parsed);
        EXPECT_EQ(back, argv) << *line;
    }
}
#endif

TEST(WindowsUtf, AsciiAndNonAsciiConvert) {
    EXPECT_EQ(win32::utf8_to_utf16("abc"), u"abc");
    EXPECT_EQ(win32::utf8_to_utf16("Zoë"), u"Zo\u00eb");
    EXPECT_EQ(win32::utf8_to_utf16("日本"), u"\u65e5\u672c");
    EXPECT_EQ(win32::utf8_to_utf16("😀"), std::u16string({char16_t(0xD83D), char16_t(0xDE00)}));
    EXPECT_EQ(win32::utf8_to_utf16(""), u"");
}

TEST(WindowsUtf, MalformedUtf8IsRefused) {
    EXPECT_FALSE(win32::utf8_to_utf16("\xC0\xAF"));          // overlong '/'
    EXPECT_FALSE(win32::utf8_to_utf16("\xE0\x80\xAF"));      // overlong, three bytes
    EXPECT_FALSE(win32::utf8_to_utf16("\xED\xA0\x80"));      // a surrogate
    EXPECT_FALSE(win32::utf8_to_utf16("\xF4\x90\x80\x80"));  // above U+10FFFF
    EXPECT_FALSE(win32::utf8_to_utf16("\xE6\x97"));          // truncated
    EXPECT_FALSE(win32::utf8_to_utf16("\x80"));              // a lone continuation byte
    EXPECT_FALSE(win32::utf8_to_utf16("a\xFF"));
}

TEST(WindowsUtf, RoundTripsAndReplacesUnpairedSurrogates) {
    for (const std::string text : {"plain", "ünïcødé 日本語 😀", "C:\\Users\\Zoë"})
        EXPECT_EQ(win32::utf16_to_utf8(*win32::utf8_to_utf16(text)), text);
    EXPECT_EQ(win32::utf16_to_utf8(std::u16string({u'a', char16_t(0xD800), u'b'})), "a\xEF\xBF\xBD" "b");
}

TEST(WindowsSid, Sha256MatchesKnownVectors) {
    EXPECT_EQ(rt::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(rt::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(rt::sha256_hex(std::string(1000, 'a')), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(WindowsSid, WorkspaceSidIsStableAndSharedBySpellings) {
    const std::string sid = rt::workspace_sid("C:\\Users\\u\\ws");
    EXPECT_EQ(sid.rfind("S-1-5-21-", 0), 0u);
    EXPECT_EQ(std::count(sid.begin(), sid.end(), '-'), 7);
    EXPECT_EQ(rt::workspace_sid("c:/users/U/WS/"), sid);
    EXPECT_NE(rt::workspace_sid("C:\\Users\\u\\ws2"), sid);
    EXPECT_EQ(rt::format_sid({1, 2, 3, 4294967295u}), "S-1-5-21-1-2-3-4294967295");
}

TEST(WindowsPaths, WithinIsCaseInsensitiveAndSeparatorBlind) {
    EXPECT_TRUE(rt::path_within("C:\\ws", "c:\\WS"));
    EXPECT_TRUE(rt::path_within("C:/ws/a/b", "C:\\ws"));
    EXPECT_FALSE(rt::path_within("C:\\ws2\\a", "C:\\ws"));
    EXPECT_TRUE(rt::path_within("C:\\a", "C:\\"));
}

rt::RunnerArgs args_of(ConfinedSandboxMode mode, std::vector<std::string> protected_paths = {}) {
    SandboxPolicy policy;
    policy.mode = mode;
    policy.workspaceRoot = "C:\\Users\\u\\my ws";
    return rt::runner_args(policy, "C:\\Users\\u\\AppData\\Local\\Temp\\dsh-confine", protected_paths);
}

TEST(WindowsAclPlan, ReadOnlyGrantsNothing) {
    const rt::TokenPlan plan = rt::token_plan(args_of(ConfinedSandboxMode::ReadOnly), std::nullopt, "");
    EXPECT_TRUE(plan.acl.empty());
    EXPECT_TRUE(plan.environment.empty());
    ASSERT_EQ(plan.restrictingSids.size(), 2u);
    EXPECT_EQ(plan.restrictingSids[0].sid, rt::kLogonSid);
    EXPECT_EQ(plan.restrictingSids[1].sid, rt::kEveryoneSid);
    EXPECT_TRUE(rt::writable_roots(args_of(ConfinedSandboxMode::ReadOnly)).empty());
}

TEST(WindowsAclPlan, WorkspaceWriteGrantsTheRootAndTheTempDirectory) {
    const std::string temp = "C:\\Users\\u\\AppData\\Local\\Temp\\dsh-confine\\call-1";
    const std::string temp_sid = "S-1-5-21-9-9-9-9";
    const rt::TokenPlan plan = rt::token_plan(args_of(ConfinedSandboxMode::WorkspaceWrite), temp, temp_sid);
    const std::string ws = rt::workspace_sid("C:\\Users\\u\\my ws");
    ASSERT_EQ(plan.restrictingSids.size(), 4u);
    EXPECT_EQ(plan.restrictingSids[0].sid, ws);
    EXPECT_EQ(plan.restrictingSids[1].sid, temp_sid);
    ASSERT_EQ(plan.acl.size(), 3u);
    EXPECT_EQ(plan.acl[0], (rt::AclEntry{"C:\\Users\\u\\my ws", ws, rt::AceType::Allow, rt::rights::Modify & ~rt::rights::Delete,
                                         rt::Scope::Object, plan.acl[0].why}));
    EXPECT_EQ(plan.acl[1], (rt::AclEntry{"C:\\Users\\u\\my ws", ws, rt::AceType::Allow, rt::rights::Modify,
                                         rt::Scope::Children, plan.acl[1].why}));
    EXPECT_EQ(plan.acl[2], (rt::AclEntry{temp, temp_sid, rt::AceType::Allow, rt::rights::Modify, rt::Scope::ObjectAndChildren,
                                         plan.acl[2].why}));
    EXPECT_EQ(plan.environment, (std::vector<std::pair<std::string, std::string>>{{"TEMP", temp}, {"TMP", temp}}));
    for (const auto& entry : plan.acl) EXPECT_FALSE(entry.why.empty());
}

TEST(WindowsAclPlan, NoGrantLetsTheCommandRewriteAnAcl) {
    const rt::TokenPlan plan = rt::token_plan(args_of(ConfinedSandboxMode::WorkspaceWrite), "C:\\t", "S-1-5-21-1-1-1-1");
    for (const auto& entry : plan.acl) {
        if (entry.type == rt::AceType::Allow) {
            EXPECT_EQ(entry.mask & (rt::rights::WriteDac | rt::rights::WriteOwner), 0u);
        }
    }
    EXPECT_EQ(rt::rights::Modify, 0x1301BFu);  // icacls (M)
}

TEST(WindowsAclPlan, OwnFilesInsideTheWorkspaceAreDeniedWithTheirAnchors) {
    const rt::RunnerArgs args = args_of(ConfinedSandboxMode::WorkspaceWrite,
                                        {"C:\\Users\\u\\my ws\\.state\\dsh-confine", "D:\\elsewhere\\state"});
    EXPECT_EQ(args.protectedPaths, (Argv{"C:\\Users\\u\\my ws\\.state\\dsh-confine"}));
    const rt::TokenPlan plan = rt::token_plan(args, "C:\\t", "S-1-5-21-1-1-1-1");
    const std::string ws = rt::workspace_sid("C:\\Users\\u\\my ws");
    const auto deny = std::find_if(plan.acl.begin(), plan.acl.end(), [](const rt::AclEntry& e) {
        return e.type == rt::AceType::Deny && e.path == "C:\\Users\\u\\my ws\\.state\\dsh-confine";
    });
    ASSERT_NE(deny, plan.acl.end());
    EXPECT_EQ(deny->sid, ws);
    EXPECT_EQ(deny->mask, rt::rights::AnyWrite);
    EXPECT_EQ(deny->scope, rt::Scope::ObjectAndChildren);
    const auto anchor = std::find_if(plan.acl.begin(), plan.acl.end(), [](const rt::AclEntry& e) {
        return e.type == rt::AceType::Deny && e.path == "C:\\Users\\u\\my ws\\.state";
    });
    ASSERT_NE(anchor, plan.acl.end());
    EXPECT_EQ(anchor->mask, rt::rights::Delete);
    EXPECT_EQ(anchor->scope, rt::Scope::Object);
}

TEST(WindowsRunnerArgv, AgentlessWorkspaceWriteUsesThePrivateTempBase) {
    const Argv argv = rt::build_argv("C:\\bin\\dsh-confine.exe", args_of(ConfinedSandboxMode::WorkspaceWrite), {"cmd", "/c", "x"});
    EXPECT_EQ(argv, (Argv{"C:\\bin\\dsh-confine.exe", "restricted-token-exec", "--mode", "workspace-write",
                          "--workspace-root", "C:\\Users\\u\\my ws", "--private-temp-base",
                          "C:\\Users\\u\\AppData\\Local\\Temp\\dsh-confine", "--", "cmd", "/c", "x"}));
    EXPECT_EQ(rt::writable_roots(args_of(ConfinedSandboxMode::WorkspaceWrite)),
              (Argv{"C:\\Users\\u\\my ws", "C:\\Users\\u\\AppData\\Local\\Temp\\dsh-confine"}));
}

TEST(WindowsRunnerArgv, ASessionUsesItsTempDirectory) {
    SandboxPolicy policy;
    policy.mode = ConfinedSandboxMode::WorkspaceWrite;
    policy.workspaceRoot = "C:\\ws";
    policy.sessionTempDir = "C:\\state\\sessions\\s1\\tmp";
    const rt::RunnerArgs args = rt::runner_args(policy, "C:\\base", {});
    EXPECT_EQ(args.tempDir, policy.sessionTempDir);
    EXPECT_FALSE(args.privateTempBase);
    const Argv argv = rt::build_argv("dsh-confine.exe", args, {"x"});
    const Argv option = {"--temp-dir", *policy.sessionTempDir};
    EXPECT_NE(std::search(argv.begin(), argv.end(), option.begin(), option.end()), argv.end());
    EXPECT_EQ(rt::writable_roots(args), (Argv{"C:\\ws", *policy.sessionTempDir}));
}

TEST(WindowsRunnerArgv, ReadOnlyNamesNoTempArea) {
    const Argv argv = rt::build_argv("dsh-confine.exe", args_of(ConfinedSandboxMode::ReadOnly), {"x"});
    EXPECT_EQ(argv, (Argv{"dsh-confine.exe", "restricted-token-exec", "--mode", "read-only", "--workspace-root",
                          "C:\\Users\\u\\my ws", "--", "x"}));
}

TEST(WindowsGaps, AlwaysPartialWithTheGapsNamed) {
    const Argv ro = rt::enforcement_gaps(ConfinedSandboxMode::ReadOnly);
    const Argv ww = rt::enforcement_gaps(ConfinedSandboxMode::WorkspaceWrite);
    ASSERT_FALSE(ro.empty());
    EXPECT_EQ(ro.front().rfind("everyone-writable:", 0), 0u);
    auto named = [&](const char* key) {
        return std::any_of(ww.begin(), ww.end(), [&](const std::string& gap) { return gap.rfind(key, 0) == 0; });
    };
    EXPECT_TRUE(named("everyone-writable:"));
    EXPECT_TRUE(named("hard links:"));
    EXPECT_TRUE(named("alternate data streams:"));
}

Verdict verdict(const std::string& text, int exit_code) { return classify(rt::dialect({}), text, exit_code).verdict; }

TEST(WindowsDialect, IsValidAndClassifies) {
    EXPECT_NO_THROW(validate_dialect(rt::dialect({})));
    EXPECT_EQ(verdict("dsh-confine: error: RESTRICTED_TOKEN: CreateRestrictedToken: error 5\n", 125), Verdict::RunnerFailure);
    EXPECT_EQ(verdict("dsh-confine: error: RESTRICTED_TOKEN: x\n", 1), Verdict::Failure);
    EXPECT_EQ(verdict("Access is denied.\r\n", 1), Verdict::Denial);
    EXPECT_EQ(verdict("Out-File : Access to the path 'C:\\x' is denied.\n", 1), Verdict::Denial);
    EXPECT_EQ(verdict("x: Permission denied\n", 1), Verdict::Denial);
    EXPECT_EQ(verdict("error: something else\n", 1), Verdict::Failure);
}

}  // namespace
}  // namespace dsh

namespace dsh {
namespace {

TEST(WindowsRunnerArgv, ParsesBackWhatItBuilds) {
    rt::RunnerArgs args = args_of(ConfinedSandboxMode::WorkspaceWrite, {"C:\\Users\\u\\my ws\\.s"});
    const Argv command = {"cmd", "--", "--mode", ""};
    const auto parsed = rt::parse_argv(rt::build_argv("C:\\d.exe", args, command));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->args, args);
    EXPECT_EQ(parsed->argv, command);
    EXPECT_FALSE(rt::parse_argv({"C:\\d.exe", "landlock-exec", "--mode", "read-only", "--workspace-root", "C:\\", "--", "x"}));
    EXPECT_FALSE(rt::parse_argv({"C:\\d.exe", "restricted-token-exec", "--mode", "bogus", "--workspace-root", "C:\\", "--"}));
    EXPECT_FALSE(rt::parse_argv({"C:\\d.exe", "restricted-token-exec", "--workspace-root", "C:\\", "--", "x"}));
}

}  // namespace
}  // namespace dsh

namespace dsh {
namespace {

TEST(RestrictedTokenGaps, TheNetworkProtectedAndUnreadablePathsAreNamedWhenAsked) {
    SandboxPolicy policy;
    policy.mode = ConfinedSandboxMode::WorkspaceWrite;
    policy.workspaceRoot = "C:/src/app";
    const std::size_t base = restricted_token::enforcement_gaps(policy).size();
    policy.network = NetworkPolicy::Deny;
    policy.protectedPaths = {"C:/src/app/.git/hooks"};
    policy.unreadablePaths = {"C:/Users/u/.ssh"};
    const std::vector<std::string> gaps = restricted_token::enforcement_gaps(policy);
    ASSERT_EQ(gaps.size(), base + 3);
    EXPECT_EQ(gaps[base].rfind("network:", 0), 0u);
    EXPECT_NE(gaps[base + 1].find("C:/src/app/.git/hooks"), std::string::npos);
    EXPECT_NE(gaps[base + 2].find("C:/Users/u/.ssh"), std::string::npos);
}

TEST(RestrictedTokenGaps, TheHostsNetworkIsNamedAsOpen) {
    SandboxPolicy policy;
    policy.mode = ConfinedSandboxMode::ReadOnly;
    policy.workspaceRoot = "C:/src/app";
    const std::size_t base = restricted_token::enforcement_gaps(policy).size();
    policy.network = NetworkPolicy::Hosts;
    policy.allowHosts = {"example.org"};
    const std::vector<std::string> gaps = restricted_token::enforcement_gaps(policy);
    ASSERT_EQ(gaps.size(), base + 1);
    EXPECT_EQ(gaps[base].rfind("network: the hosts network has no allow-list proxy here", 0), 0u) << gaps[base];
}

}  // namespace
}  // namespace dsh
