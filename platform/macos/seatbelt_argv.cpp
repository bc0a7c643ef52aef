#include "seatbelt_argv.hpp"

#include <set>

#include "../../lib/policy.hpp"
#include "seatbelt_profiles.hpp"

namespace dsh::seatbelt {
namespace {

// dsh-confine's own paths inside the workspace, and the directories between the root and
// them: the protected path is denied, and no anchor can be unlinked or renamed away, so the
// command cannot move the path aside and plant its own (the bwrap builder's anchors).
struct Guarded {
    std::vector<std::string> paths;
    std::vector<std::string> anchors;
};

Guarded guarded(const Layout& layout, const SandboxPolicy& policy) {
    Guarded out;
    if (policy.mode != ConfinedSandboxMode::WorkspaceWrite) return out;
    out.paths = paths_within(layout.protectedPaths, policy.workspaceRoot);
    std::set<std::string> anchors;
    for (const auto& path : out.paths)
        for (std::size_t slash = path.find('/', policy.workspaceRoot.size() + 1); slash != std::string::npos;
             slash = path.find('/', slash + 1))
            anchors.insert(path.substr(0, slash));
    out.anchors.assign(anchors.begin(), anchors.end());
    return out;
}

std::string text_of(std::string_view name) {
    const std::optional<std::string_view> text = embedded_profile(name);
    return text ? std::string(*text) : std::string();
}

}  // namespace

std::string strip_comments(std::string_view text) {
    std::string out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view line = text.substr(start, end - start);
        const std::size_t first = line.find_first_not_of(" \t\r");
        if (first != std::string_view::npos && line[first] != ';') {
            out.append(line);
            out.push_back('\n');
        }
        start = end + 1;
    }
    return out;
}

std::string profile(ConfinedSandboxMode mode, std::size_t protected_count, std::size_t anchor_count) {
    std::string text = strip_comments(text_of("read-only"));
    if (mode == ConfinedSandboxMode::WorkspaceWrite) text += strip_comments(text_of("workspace-write"));
    // Last, so they win over the workspace's allow: dsh-confine's own files stay unwritable.
    for (std::size_t i = 0; i < protected_count; ++i)
        text += "(deny file-write* file-link (subpath (param \"PROTECTED_" + std::to_string(i) + "\")))\n";
    for (std::size_t i = 0; i < anchor_count; ++i)
        text += "(deny file-write-unlink (literal (param \"ANCHOR_" + std::to_string(i) + "\")))\n";
    return text;
}

std::vector<Parameter> parameters(const Layout& layout, const SandboxPolicy& policy) {
    std::vector<Parameter> out;
    if (policy.mode != ConfinedSandboxMode::WorkspaceWrite) return out;
    out.push_back({"WORKSPACE_ROOT", policy.workspaceRoot});
    out.push_back({"TEMP_DIR", layout.tempDir});
    const Guarded guard = guarded(layout, policy);
    for (std::size_t i = 0; i < guard.paths.size(); ++i) out.push_back({"PROTECTED_" + std::to_string(i), guard.paths[i]});
    for (std::size_t i = 0; i < guard.anchors.size(); ++i) out.push_back({"ANCHOR_" + std::to_string(i), guard.anchors[i]});
    return out;
}

std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy) {
    const Guarded guard = guarded(layout, policy);
    std::vector<std::string> out = {layout.runner, "-p", profile(policy.mode, guard.paths.size(), guard.anchors.size())};
    for (const auto& parameter : parameters(layout, policy)) {
        out.push_back("-D");
        out.push_back(parameter.name + "=" + parameter.value);
    }
    out.push_back("--");
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        out.push_back(layout.env);
        out.push_back("TMPDIR=" + layout.tempDir);
        // env(1) takes a leading word with '=' for one more assignment: such a program name
        // is run through sh's exec instead, which looks it up on PATH the same way.
        if (!argv.empty() && argv.front().find('=') != std::string::npos)
            out.insert(out.end(), {"/bin/sh", "-c", "exec \"$0\" \"$@\""});
    }
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
}

std::vector<std::string> writable_roots(const Layout& layout, const SandboxPolicy& policy) {
    std::vector<std::string> roots;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        roots.push_back(policy.workspaceRoot);
        roots.push_back(layout.tempDir);
    }
    for (const auto& sink : posix_shell_sinks()) roots.push_back(sink);
    roots.push_back("/dev/fd");  // descriptors the command already holds
    return roots;
}

Dialect dialect(const std::vector<std::string>& extra_informational_lines) {
    Dialect out;
    out.denialSignatures = {"operation not permitted"};
    // A usage error (EX_USAGE, 64) or a profile sandbox-exec cannot compile (EX_DATAERR, 65):
    // every "sandbox-exec: " line then is the runner's own.
    RunnerFailureRule setup;
    setup.allowedExitCodes = std::vector<int>{64, 65};
    setup.fatalSignatures = {"sandbox-exec: ", "usage: sandbox-exec"};
    setup.informationalLines = extra_informational_lines;
    // Applying the profile failed (EX_OSERR, 71), e.g. "sandbox-exec: sandbox_apply: Operation
    // not permitted" inside another sandbox. 71 is also execvp's status, so only these count.
    RunnerFailureRule apply;
    apply.allowedExitCodes = std::vector<int>{71};
    apply.fatalSignatures = {"sandbox-exec: sandbox_apply", "sandbox-exec: sandbox_init"};
    apply.informationalLines = extra_informational_lines;
    out.runnerFailureRules = {std::move(setup), std::move(apply)};
    return out;
}

}  // namespace dsh::seatbelt
