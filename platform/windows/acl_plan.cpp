#include "acl_plan.hpp"


namespace dsh::restricted_token {
namespace {

// FIPS 180-4 SHA-256: small enough to keep here rather than pull in a crypto library.
std::array<std::uint8_t, 32> sha256(std::string_view data) {
    static constexpr std::uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::string message(data);
    const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
    message.push_back(static_cast<char>(0x80));
    while (message.size() % 64 != 56) message.push_back('\0');
    for (int shift = 56; shift >= 0; shift -= 8) message.push_back(static_cast<char>((bits >> shift) & 0xff));
    auto rotr = [](std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
    for (std::size_t block = 0; block < message.size(); block += 64) {
        std::uint32_t w[64];
        for (int i = 0; i < 16; ++i) {
            w[i] = 0;
            for (int b = 0; b < 4; ++b)
                w[i] = (w[i] << 8) | static_cast<std::uint8_t>(message[block + static_cast<std::size_t>(i * 4 + b)]);
        }
        for (int i = 16; i < 64; ++i) {
            const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            const std::uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
            const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
    }
    std::array<std::uint8_t, 32> out{};
    for (int i = 0; i < 8; ++i)
        for (int b = 0; b < 4; ++b) out[static_cast<std::size_t>(i * 4 + b)] = static_cast<std::uint8_t>(h[i] >> (24 - 8 * b));
    return out;
}

// The form two spellings of one directory share: backslashes, ASCII case folded, no trailing
// separator (except a drive root's).
std::string path_key(std::string_view path) {
    std::string out;
    for (const char c : path) out.push_back(c == '/' ? '\\' : (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c);
    while (out.size() > 3 && out.back() == '\\') out.pop_back();
    return out;
}

// The directories strictly between `root` and `path`, outermost first.
std::vector<std::string> anchors(const std::string& root, const std::string& path) {
    std::vector<std::string> out;
    for (std::size_t at = path.find_first_of("\\/", root.size() + 1); at != std::string::npos;
         at = path.find_first_of("\\/", at + 1))
        out.push_back(path.substr(0, at));
    return out;
}

}  // namespace

std::string sha256_hex(std::string_view data) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (const std::uint8_t byte : sha256(data)) {
        out.push_back(digits[byte >> 4]);
        out.push_back(digits[byte & 0xf]);
    }
    return out;
}

std::string format_sid(const std::array<std::uint32_t, 4>& parts) {
    std::string out = "S-1-5-21";
    for (const std::uint32_t part : parts) out += "-" + std::to_string(part);
    return out;
}

std::string workspace_sid(std::string_view root) {
    const std::array<std::uint8_t, 32> digest = sha256("dsh-confine workspace\n" + path_key(root));
    std::array<std::uint32_t, 4> parts{};
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t b = 0; b < 4; ++b) parts[i] = (parts[i] << 8) | digest[i * 4 + b];
    return format_sid(parts);
}

bool path_within(std::string_view path, std::string_view root) {
    const std::string p = path_key(path), r = path_key(root);
    if (p == r) return true;
    const std::string prefix = r.back() == '\\' ? r : r + "\\";
    return p.rfind(prefix, 0) == 0;
}

std::vector<std::string> build_argv(const std::string& runner, const RunnerArgs& args,
                                    const std::vector<std::string>& argv) {
    std::vector<std::string> out = {runner, "restricted-token-exec", "--mode", std::string(to_string(args.mode)),
                                    "--workspace-root", args.workspaceRoot};
    if (args.tempDir) out.insert(out.end(), {"--temp-dir", *args.tempDir});
    if (args.privateTempBase) out.insert(out.end(), {"--private-temp-base", *args.privateTempBase});
    for (const auto& path : args.protectedPaths) out.insert(out.end(), {"--protect", path});
    out.push_back("--");
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

std::optional<ParsedRunner> parse_argv(const std::vector<std::string>& runner_argv) {
    if (runner_argv.size() < 2 || runner_argv[1] != "restricted-token-exec") return std::nullopt;
    ParsedRunner out;
    bool mode = false, root = false;
    std::size_t i = 2;
    for (; i < runner_argv.size() && runner_argv[i] != "--"; i += 2) {
        if (i + 1 >= runner_argv.size()) return std::nullopt;
        const std::string& option = runner_argv[i];
        const std::string& value = runner_argv[i + 1];
        if (option == "--mode") {
            if (value == "read-only") out.args.mode = ConfinedSandboxMode::ReadOnly;
            else if (value == "workspace-write") out.args.mode = ConfinedSandboxMode::WorkspaceWrite;
            else return std::nullopt;
            mode = true;
        } else if (option == "--workspace-root") {
            out.args.workspaceRoot = value;
            root = true;
        } else if (option == "--temp-dir") {
            out.args.tempDir = value;
        } else if (option == "--private-temp-base") {
            out.args.privateTempBase = value;
        } else if (option == "--protect") {
            out.args.protectedPaths.push_back(value);
        } else {
            return std::nullopt;
        }
    }
    if (!mode || !root || i >= runner_argv.size()) return std::nullopt;
    out.argv.assign(runner_argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, runner_argv.end());
    return out;
}

RunnerArgs runner_args(const SandboxPolicy& policy, const std::string& private_temp_base,
                       const std::vector<std::string>& protected_paths) {
    RunnerArgs args;
    args.mode = policy.mode;
    args.workspaceRoot = policy.workspaceRoot;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        if (policy.sessionTempDir) args.tempDir = *policy.sessionTempDir;
        else args.privateTempBase = private_temp_base;
        for (const auto& path : protected_paths)
            if (path_within(path, policy.workspaceRoot)) args.protectedPaths.push_back(path);
    }
    return args;
}

std::vector<std::string> writable_roots(const RunnerArgs& args) {
    // Read-only has no writable root: NUL, the sink, is a device, not a path in a file system.
    std::vector<std::string> roots;
    if (args.mode != ConfinedSandboxMode::WorkspaceWrite) return roots;
    roots.push_back(args.workspaceRoot);
    if (args.tempDir) roots.push_back(*args.tempDir);
    else if (args.privateTempBase) roots.push_back(*args.privateTempBase);
    return roots;
}

TokenPlan token_plan(const RunnerArgs& args, const std::optional<std::string>& temp_dir, const std::string& temp_sid) {
    TokenPlan plan;
    const bool writes = args.mode == ConfinedSandboxMode::WorkspaceWrite;
    const std::string ws_sid = workspace_sid(args.workspaceRoot);
    if (writes) {
        plan.restrictingSids.push_back({ws_sid, "the workspace's standing grant"});
        if (temp_dir) plan.restrictingSids.push_back({temp_sid, "the private temp directory's grant"});
    }
    plan.restrictingSids.push_back({kLogonSid, "the window station and desktop every process opens grant the logon session"});
    plan.restrictingSids.push_back({kEveryoneSid, "NUL, the console and the named objects a process writes grant Everyone"});
    if (!writes) return plan;

    const std::string& root = args.workspaceRoot;
    plan.acl.push_back({root, ws_sid, AceType::Allow, rights::Modify & ~rights::Delete, Scope::Object,
                        "the root itself, but not its own removal or renaming"});
    plan.acl.push_back({root, ws_sid, AceType::Allow, rights::Modify, Scope::Children, "everything below the root"});
    for (const auto& path : args.protectedPaths) {
        plan.acl.push_back({path, ws_sid, AceType::Deny, rights::AnyWrite, Scope::ObjectAndChildren,
                            "dsh-confine's own files inside the workspace"});
        // No directory between the root and it can be renamed away for a planted copy.
        for (const auto& anchor : anchors(root, path))
            plan.acl.push_back({anchor, ws_sid, AceType::Deny, rights::Delete, Scope::Object,
                                "a directory on the way to dsh-confine's own files"});
    }
    if (temp_dir) {
        plan.acl.push_back({*temp_dir, temp_sid, AceType::Allow, rights::Modify, Scope::ObjectAndChildren,
                            "the private temp directory"});
        plan.environment = {{"TEMP", *temp_dir}, {"TMP", *temp_dir}};
    }
    return plan;
}

std::vector<std::string> enforcement_gaps(const SandboxPolicy& policy) {
    std::vector<std::string> gaps = enforcement_gaps(policy.mode);
    const auto join = [](const std::vector<std::string>& paths) {
        std::string out;
        for (const auto& path : paths) out += (out.empty() ? "" : ", ") + path;
        return out;
    };
    if (policy.network == NetworkPolicy::Deny)
        gaps.push_back("network: a restricted token cannot take the network away without administrator rights "
                       "(a firewall rule); the command can still connect and listen");
    if (policy.network == NetworkPolicy::Hosts)
        gaps.push_back("network: the hosts network has no allow-list proxy here, and a restricted token cannot take "
                       "the network away: the command can connect to any host and listen");
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite && !policy.protectedPaths.empty())
        gaps.push_back("protected paths: the workspace's ACL grant is inherited below it, so " + join(policy.protectedPaths) +
                       " remain writable");
    if (!policy.unreadablePaths.empty())
        gaps.push_back("unreadable paths: the restricted token takes no read access away, so " + join(policy.unreadablePaths) +
                       " remain readable");
    return gaps;
}

std::vector<std::string> enforcement_gaps(ConfinedSandboxMode mode) {
    std::vector<std::string> gaps = {
        "everyone-writable: files and directories whose ACL lets Everyone or the logon session write stay "
        "writable (those SIDs must restrict the token for a process to start)",
    };
    if (mode == ConfinedSandboxMode::WorkspaceWrite) {
        gaps.push_back("hard links: a file under the workspace that is also linked from outside it inherits the "
                       "workspace grant under every name");
        gaps.push_back("alternate data streams: the streams of every file the grant reaches, and of the workspace "
                       "root itself, are writable, and most tools do not show them");
    }
    return gaps;
}

Dialect dialect(const std::vector<std::string>& extra_informational_lines) {
    Dialect out;
    // "Access is denied." (Win32), "Permission denied" (C runtime EACCES), "Access to the path
    // '...' is denied." (.NET, PowerShell).
    out.denialSignatures = {"access is denied", "permission denied", "access to the path"};
    RunnerFailureRule rule;
    rule.allowedExitCodes = std::vector<int>{125};
    rule.fatalSignatures = {"dsh-confine: error: RESTRICTED_TOKEN: "};
    rule.informationalLines = extra_informational_lines;
    out.runnerFailureRules.push_back(std::move(rule));
    return out;
}

}  // namespace dsh::restricted_token
