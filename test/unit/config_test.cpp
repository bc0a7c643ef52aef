// The configuration schema, its error messages (positions, "did you mean") and the lookup
// order of load_config.
#include "lib/config.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "temp_dir.hpp"

#include "lib/error.hpp"

namespace dsh {
namespace {

namespace fs = std::filesystem;

using unit::TempDir;

// The Error parse_config throws for `text`, which must be a CONFIG error.
Error config_error(const std::string& text, const std::string& source = "cfg.toml") {
    try {
        parse_config(text, source);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG") << e.what();
        return e;
    }
    ADD_FAILURE() << "parse_config accepted:\n" << text;
    return Error("NONE", "");
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Every key set. The paths are absolute by the host's rules (a drive letter on Windows), in
// TOML literal strings so a backslash stays as it is.
#if defined(_WIN32)
const std::string kRoot = R"(C:\srv\ws)";
const std::string kBwrapPath = R"(C:\opt\bin\bwrap)";
#else
const std::string kRoot = "/srv/ws";
const std::string kBwrapPath = "/opt/bin/bwrap";
#endif
const std::string kEveryKey = R"(
[sandbox]
default_mode = "workspace-write"
workspace_root = ')" + kRoot + R"('

[provider]
backends = ["landlock", "bwrap"]
probe_timeout_ms = 1234
probe_cache = false

[backend.bwrap]
path = ')" + kBwrapPath + R"('
informational_lines = ["bwrap: benign one", "bwrap: benign two"]

[backend.landlock]
informational_lines = ["landlock: benign"]
)";

TEST(ParseConfig, ReadsDefaultMode) {
    EXPECT_EQ(parse_config(kEveryKey, "every.toml").defaultMode, SandboxMode::WorkspaceWrite);
}

TEST(ParseConfig, ReadsWorkspaceRoot) {
    EXPECT_EQ(parse_config(kEveryKey, "every.toml").workspaceRoot, kRoot);
}

TEST(ParseConfig, ReadsBackendChainInOrder) {
    EXPECT_EQ(parse_config(kEveryKey, "every.toml").backends, (std::vector<std::string>{"landlock", "bwrap"}));
}

TEST(ParseConfig, ReadsProbeTimeout) { EXPECT_EQ(parse_config(kEveryKey, "every.toml").probeTimeoutMs, 1234); }

TEST(ParseConfig, ReadsProbeCache) { EXPECT_FALSE(parse_config(kEveryKey, "every.toml").probeCache); }

TEST(ParseConfig, ReadsBwrapPath) {
    EXPECT_EQ(parse_config(kEveryKey, "every.toml").bwrap.path, kBwrapPath);
}

TEST(ParseConfig, ReadsBwrapInformationalLines) {
    EXPECT_EQ(parse_config(kEveryKey, "every.toml").bwrap.informationalLines,
              (std::vector<std::string>{"bwrap: benign one", "bwrap: benign two"}));
}

TEST(ParseConfig, ReadsLandlockInformationalLines) {
    const Config config = parse_config(kEveryKey, "every.toml");
    EXPECT_EQ(config.landlock.informationalLines, std::vector<std::string>{"landlock: benign"});
    EXPECT_EQ(config.backend("landlock").informationalLines, std::vector<std::string>{"landlock: benign"});
}

// Non-ASCII text: toml++ 3.3.0 has undefined behaviour on some of these code points (the
// Latin-1 supplement, Cyrillic, U+2C5E-U+3057, U+FB26-U+FEFE) where it checks for whitespace;
// parse_config moves them out of its way and back. These cases reach those checks.
TEST(ParseConfig, NonAsciiTextComesBackAsWritten) {
    const std::string text =
        "# Réglages: écrire où l'on veut — Привет\n"
        "[backend.bwrap]\n"
        "informational_lines = [\"bwrap: déjà vu\", \"Ошибка ⸰ אּﭐ\", '''literal ©''', \"\"\"one \\\n"
        "    élan\"\"\"]\n";
    const Config config = parse_config(text, "text.toml");
    EXPECT_EQ(config.bwrap.informationalLines,
              (std::vector<std::string>{"bwrap: déjà vu", "Ошибка ⸰ אּﭐ", "literal ©", "one élan"}));
}

TEST(ParseConfig, NonAsciiWhereAValueShouldBeIsAnErrorWithItsPosition) {
    // After `=`, toml++ asks whether 'é' is whitespace: the case that was undefined behaviour.
    const Error e = config_error("[sandbox]\ndefault_mode = é\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:16: ")) << e.what();
    EXPECT_EQ(std::string(e.what()).find("\xf3\xb0"), std::string::npos) << "a moved code point leaked: " << e.what();
}

TEST(ParseConfig, NonAsciiValuesInMessagesAreAsWritten) {
    const Error e = config_error("[sandbox]\ndefault_mode = \"lecture-séule\"\n");
    EXPECT_TRUE(contains(e.what(), "'lecture-séule' is not a mode")) << e.what();
    const Error key = config_error("[sandbox]\n\"modé\" = 1\n");
    EXPECT_TRUE(contains(key.what(), "unknown key 'modé'")) << key.what();
}

TEST(ParseConfig, ColumnsCountTheSameAfterNonAsciiText) {
    // The error is the stray `x` after the string; moving 'é' must not shift its column.
    const auto where = [](const Error& e) { return std::string(e.what()).substr(0, std::string(e.what()).find(": ")); };
    const Error moved = config_error("[sandbox]\ndefault_mode = \"ééé\" x\n");
    const Error kept = config_error("[sandbox]\ndefault_mode = \"ÿÿÿ\" x\n");  // U+00FF is moved too
    const Error other = config_error("[sandbox]\ndefault_mode = \"ㄱㄱㄱ\" x\n");  // U+3131: never moved
    EXPECT_EQ(where(moved), where(other)) << moved.what() << " | " << other.what();
    EXPECT_EQ(where(kept), where(other)) << kept.what() << " | " << other.what();
}

TEST(ParseConfig, PlaneFifteenTogetherWithMovedCodePointsIsRefused) {
    // U+F00E9: what the shield makes of 'é'.
    const Error e = config_error("# é \xf3\xb0\x83\xa9\n");
    EXPECT_TRUE(contains(e.what(), "plane 15")) << e.what();
    // Other plane-15 code points are never moved home, so they can stand beside 'é'.
    EXPECT_NO_THROW(parse_config("# é \xf3\xb0\x80\x80\n", "cfg.toml"));
    // An escape beside 'é' is refused too: it could make U+F00E9, which would come back as 'é'.
    const Error escape = config_error("# é\n[backend.bwrap]\ninformational_lines = [\"\\U000F00E9\"]\n");
    EXPECT_TRUE(contains(escape.what(), "plane 15")) << escape.what();
    // Alone, a plane-15 code point is ordinary text, escaped or not.
    EXPECT_NO_THROW(parse_config("# \xf3\xb0\x80\x80\n", "cfg.toml"));
    EXPECT_EQ(parse_config("[backend.bwrap]\ninformational_lines = [\"\\U000F00E9\"]\n", "cfg.toml").bwrap.informationalLines,
              std::vector<std::string>{"\xf3\xb0\x83\xa9"});
}

TEST(ParseConfig, RecordsItsSource) { EXPECT_EQ(parse_config(kEveryKey, "every.toml").source, "every.toml"); }

TEST(ParseConfig, EmptyDocumentGivesDefaults) {
    const Config config = parse_config("", "empty.toml");
    EXPECT_FALSE(config.defaultMode.has_value());
    EXPECT_FALSE(config.workspaceRoot.has_value());
    EXPECT_FALSE(config.backends.has_value());
    EXPECT_EQ(config.probeTimeoutMs, 5000);
    EXPECT_TRUE(config.probeCache);
    EXPECT_FALSE(config.bwrap.path.has_value());
}

TEST(ParseConfig, UnknownTopLevelKeyIsAnError) {
    const Error e = config_error("# a comment\n\nfrobnicate = 1\n[sandbox]\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:3:1: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "unknown key 'frobnicate' in the top level")) << e.what();
    EXPECT_TRUE(contains(e.what(), "known keys: sandbox, network, provider, backend")) << e.what();
}

TEST(ParseConfig, UnknownSandboxKeyNamesPositionAndSuggestion) {
    const Error e = config_error("[sandbox]\nworkspace_root = \"/ws\"\ndefault_mod = \"read-only\"\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:3:1: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "unknown key 'default_mod' in [sandbox]")) << e.what();
    EXPECT_TRUE(contains(e.what(), "did you mean 'default_mode'?")) << e.what();
}

TEST(ParseConfig, UnknownKeyListsTheKnownKeys) {
    const Error e = config_error("[sandbox]\nxyzzy = 1\n");
    EXPECT_TRUE(contains(e.what(), "known keys: default_mode, workspace_root")) << e.what();
    EXPECT_FALSE(contains(e.what(), "did you mean")) << e.what();
}

TEST(ParseConfig, UnknownKeyInBackendTableIsAnError) {
    const Error e = config_error("[backend.landlock]\npath = \"/x\"\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:1: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "unknown key 'path' in [backend.landlock]")) << e.what();
}

TEST(ParseConfig, IntegerDefaultModeIsAWrongType) {
    const Error e = config_error("[sandbox]\ndefault_mode = 3\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:16: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "default_mode must be a string, not an integer")) << e.what();
}

TEST(ParseConfig, StringBackendsIsAWrongType) {
    const Error e = config_error("[provider]\nbackends = \"bwrap\"\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:12: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "backends must be an array of strings, not a string")) << e.what();
}

TEST(ParseConfig, NonStringInBackendsIsAWrongType) {
    const Error e = config_error("[provider]\nbackends = [\"bwrap\", 7]\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:22: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "not an integer")) << e.what();
}

TEST(ParseConfig, StringProbeCacheIsAWrongType) {
    const Error e = config_error("[provider]\nprobe_cache = \"yes\"\n");
    EXPECT_TRUE(contains(e.what(), "probe_cache must be a boolean, not a string")) << e.what();
}

TEST(ParseConfig, SandboxThatIsNotATableIsAWrongType) {
    const Error e = config_error("sandbox = \"read-only\"\n");
    EXPECT_TRUE(contains(e.what(), "sandbox must be a table, not a string")) << e.what();
}

TEST(ParseConfig, UnknownModeValueIsAnError) {
    const Error e = config_error("[sandbox]\ndefault_mode = \"read-write\"\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:16: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "'read-write' is not a mode")) << e.what();
}

TEST(ParseConfig, RelativeWorkspaceRootIsAnError) {
    const Error e = config_error("[sandbox]\nworkspace_root = \"ws/project\"\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:18: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "workspace_root must be an absolute path")) << e.what();
}

TEST(ParseConfig, RelativeBwrapPathIsAnError) {
    const Error e = config_error("[backend.bwrap]\npath = \"bin/bwrap\"\n");
    EXPECT_TRUE(contains(e.what(), "path must be an absolute path")) << e.what();
}

TEST(ParseConfig, UnknownBackendInChainSuggestsTheClosest) {
    const Error e = config_error("[provider]\nbackends = [\"bwrap\", \"landlok\"]\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:12: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "unknown backend 'landlok'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "did you mean 'landlock'?")) << e.what();
}

TEST(ParseConfig, EmptyChainIsAnError) {
    const Error e = config_error("[provider]\nbackends = []\n");
    EXPECT_TRUE(contains(e.what(), "backends must name at least one backend")) << e.what();
}

TEST(ParseConfig, ZeroProbeTimeoutIsAnError) {
    const Error e = config_error("[provider]\nprobe_timeout_ms = 0\n");
    EXPECT_TRUE(contains(e.what(), "probe_timeout_ms must be between 1 and 600000")) << e.what();
}

TEST(ParseConfig, EmptyInformationalLineIsAnError) {
    const Error e = config_error("[backend.bwrap]\ninformational_lines = [\"\"]\n");
    EXPECT_TRUE(contains(e.what(), "must not contain an empty line")) << e.what();
}

TEST(ParseConfig, SyntaxErrorNamesFileLineAndColumn) {
    const Error e = config_error("[sandbox]\ndefault_mode = \n", "broken.toml");
    EXPECT_TRUE(starts_with(e.what(), "broken.toml:2:16: ")) << e.what();
}

// --- the dimensions beside the mode ---------------------------------------------------------

TEST(ParseConfig, TheDimensionKeysAreRead) {
    const Config config = parse_config("[sandbox]\nwritable_roots = ['" + kRoot + "', '~/cache']\n"
                                       "protected_paths = ['.git/hooks', '.envrc']\ndeny_read = ['~/.ssh']\n"
                                       "network = 'deny'\nallow_broad_roots = true\n",
                                       "cfg.toml");
    EXPECT_EQ(config.writableRoots, (std::vector<std::string>{kRoot, "~/cache"}));
    EXPECT_EQ(config.protectedPaths, (std::vector<std::string>{".git/hooks", ".envrc"}));
    EXPECT_EQ(config.denyRead, std::vector<std::string>{"~/.ssh"});
    EXPECT_EQ(config.network, NetworkPolicy::Deny);
    EXPECT_TRUE(config.allowBroadRoots);
    const Config none = parse_config("", "cfg.toml");
    EXPECT_FALSE(none.writableRoots || none.protectedPaths || none.denyRead || none.network || none.allowBroadRoots);
    EXPECT_EQ(parse_config("[sandbox]\nprotected_paths = []\n", "cfg.toml").protectedPaths, std::vector<std::string>{});
}

TEST(ParseConfig, ARelativeWritableRootOrDeniedPathIsAnError) {
    Error e = config_error("[sandbox]\nwritable_roots = [\"build\"]\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:")) << e.what();
    EXPECT_TRUE(contains(e.what(), "'build' must be an absolute path or start with ~/")) << e.what();
    e = config_error("[sandbox]\ndeny_read = [\"~user/.ssh\"]\n");
    EXPECT_TRUE(contains(e.what(), "deny_read: '~user/.ssh' must be an absolute path or start with ~/")) << e.what();
}

TEST(ParseConfig, AProtectedPathMustStayInsideEachRoot) {
    for (const char* path : {"../x", ".git/../../x", "/etc/passwd", "~/x", ""}) {
        const Error e = config_error(std::string("[sandbox]\nprotected_paths = [\"") + path + "\"]\n");
        EXPECT_TRUE(contains(e.what(), "must be a relative path inside each writable root")) << path << ": " << e.what();
    }
}

TEST(ParseConfig, TheNetworkIsAllowOrDeny) {
    const Error e = config_error("[sandbox]\nnetwork = \"off\"\n");
    EXPECT_TRUE(starts_with(e.what(), "cfg.toml:2:11: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "network 'off' must be allow, deny or hosts")) << e.what();
    EXPECT_TRUE(contains(config_error("[sandbox]\nnetwork = false\n").what(), "must be a string")) ;
    EXPECT_TRUE(contains(config_error("[sandbox]\nallow_broad_roots = \"yes\"\n").what(), "must be a boolean"));
    EXPECT_TRUE(contains(config_error("[sandbox]\nwritable_roots = \"/srv\"\n").what(), "must be an array of strings"));
}

TEST(LoadConfig, NoFileGivesBuiltInDefaults) {
    const Config config = load_config(ConfigLookup{});
    EXPECT_EQ(config.source, "<built-in>");
    EXPECT_FALSE(config.defaultMode.has_value());
    EXPECT_FALSE(config.workspaceRoot.has_value());
    EXPECT_FALSE(config.backends.has_value());
    EXPECT_EQ(config.probeTimeoutMs, 5000);
    EXPECT_TRUE(config.probeCache);
}

TEST(LoadConfig, MissingExplicitFileIsAConfigError) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.explicitFile = dir.path("absent.toml");
    try {
        load_config(lookup);
        FAIL() << "a missing --config file was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG");
        EXPECT_TRUE(contains(e.what(), "absent.toml")) << e.what();
    }
}

TEST(LoadConfig, MissingEnvFileIsAConfigError) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.envFile = dir.path("absent.toml");
    lookup.candidates = {dir.file("present.toml", "[sandbox]\ndefault_mode = \"workspace-write\"\n")};
    try {
        load_config(lookup);
        FAIL() << "a missing $DSH_CONFINE_CONFIG file was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG");
        EXPECT_TRUE(contains(e.what(), "DSH_CONFINE_CONFIG")) << e.what();
    }
}

TEST(LoadConfig, ExplicitFileThatIsADirectoryIsAConfigError) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.explicitFile = dir.path("");
    try {
        load_config(lookup);
        FAIL() << "a directory was accepted as --config";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG");
    }
}

TEST(LoadConfig, ExplicitFileOutranksEnvFile) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.explicitFile = dir.file("explicit.toml", "[sandbox]\ndefault_mode = \"danger-full-access\"\n");
    lookup.envFile = dir.file("env.toml", "[sandbox]\ndefault_mode = \"workspace-write\"\n");
    const Config config = load_config(lookup);
    EXPECT_EQ(config.defaultMode, SandboxMode::DangerFullAccess);
    EXPECT_EQ(config.source, *lookup.explicitFile);
}

TEST(LoadConfig, EnvFileOutranksCandidates) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.envFile = dir.file("env.toml", "[sandbox]\ndefault_mode = \"workspace-write\"\n");
    lookup.candidates = {dir.file("xdg.toml", "[sandbox]\ndefault_mode = \"danger-full-access\"\n")};
    EXPECT_EQ(load_config(lookup).defaultMode, SandboxMode::WorkspaceWrite);
}

TEST(LoadConfig, FirstExistingCandidateIsUsed) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.candidates = {dir.file("xdg.toml", "[sandbox]\ndefault_mode = \"workspace-write\"\n"),
                         dir.file("etc.toml", "[sandbox]\ndefault_mode = \"danger-full-access\"\n")};
    const Config config = load_config(lookup);
    EXPECT_EQ(config.defaultMode, SandboxMode::WorkspaceWrite);
    EXPECT_EQ(config.source, lookup.candidates[0]);
}

TEST(LoadConfig, MissingCandidatesAreSkipped) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.candidates = {dir.path("absent-xdg.toml"),
                         dir.file("etc.toml", "[sandbox]\ndefault_mode = \"danger-full-access\"\n")};
    const Config config = load_config(lookup);
    EXPECT_EQ(config.defaultMode, SandboxMode::DangerFullAccess);
    EXPECT_EQ(config.source, lookup.candidates[1]);
}

TEST(LoadConfig, OnlyMissingCandidatesGiveDefaults) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.candidates = {dir.path("absent-xdg.toml"), dir.path("absent-etc.toml")};
    EXPECT_EQ(load_config(lookup).source, "<built-in>");
}

TEST(LoadConfig, CandidateErrorsNameTheFile) {
    TempDir dir;
    ConfigLookup lookup;
    lookup.candidates = {dir.file("bad.toml", "[sandbox]\ndefault_mod = \"read-only\"\n")};
    try {
        load_config(lookup);
        FAIL() << "a typo in a candidate file was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), "CONFIG");
        EXPECT_TRUE(starts_with(e.what(), lookup.candidates[0] + ":2:1: ")) << e.what();
    }
}

TEST(DidYouMean, SuggestsAOneLetterTypo) {
    EXPECT_EQ(did_you_mean("default_mod", {"default_mode", "workspace_root"}), "default_mode");
}

TEST(DidYouMean, SuggestsTheClosestOfSeveral) {
    EXPECT_EQ(did_you_mean("bwarp", known_backend_names()), "bwrap");
}

TEST(DidYouMean, SuggestsNothingForAnUnrelatedWord) {
    EXPECT_EQ(did_you_mean("zzzzzzzz", {"default_mode", "workspace_root"}), std::nullopt);
}

TEST(DidYouMean, SuggestsNothingWhenEveryLetterDiffers) {
    // Distance 2 is within the limit, but replacing the whole word is no typo.
    EXPECT_EQ(did_you_mean("ab", {"cd"}), std::nullopt);
}

TEST(DidYouMean, SuggestsNothingWithoutCandidates) { EXPECT_EQ(did_you_mean("bwrap", {}), std::nullopt); }

}  // namespace
}  // namespace dsh
