#include "seatbelt_argv.hpp"

#include <set>

#include "../../lib/denial_words.hpp"
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

// The protected paths are dsh-confine's own files and the policy's protected paths (.git/hooks,
// ...), each inside one of the writable roots.
Guarded guarded(const Layout& layout, const SandboxPolicy& policy) {
    Guarded out;
    if (policy.mode != ConfinedSandboxMode::WorkspaceWrite) return out;
    std::vector<std::string> roots = {policy.workspaceRoot};
    roots.insert(roots.end(), policy.writableRoots.begin(), policy.writableRoots.end());
    std::vector<std::string> candidates = layout.protectedPaths;
    candidates.insert(candidates.end(), policy.protectedPaths.begin(), policy.protectedPaths.end());
    std::set<std::string> paths, anchors;
    for (const auto& root : roots)
        for (const auto& path : paths_within(candidates, root)) {
            if (!paths.insert(path).second) continue;
            for (std::size_t slash = path.find('/', root.size() + 1); slash != std::string::npos; slash = path.find('/', slash + 1))
                anchors.insert(path.substr(0, slash));
        }
    out.paths.assign(paths.begin(), paths.end());
    out.anchors.assign(anchors.begin(), anchors.end());
    return out;
}

ProfileShape shape_of(const Layout& layout, const SandboxPolicy& policy) {
    const Guarded guard = guarded(layout, policy);
    ProfileShape shape;
    shape.mode = policy.mode;
    shape.writableRoots = policy.mode == ConfinedSandboxMode::WorkspaceWrite ? policy.writableRoots.size() : 0;
    shape.protectedPaths = guard.paths.size();
    shape.anchors = guard.anchors.size();
    shape.unreadablePaths = policy.unreadablePaths.size();
    shape.denyNetwork = policy.network != NetworkPolicy::Allow;  // hosts: see enforcement_gaps
    return shape;
}

std::string text_of(std::string_view name) {
    const std::optional<std::string_view> text = embedded_profile(name);
    return text ? std::string(*text) : std::string();
}

}  // namespace

std::vector<std::string> enforcement_gaps(const SandboxPolicy& policy) {
    if (policy.network != NetworkPolicy::Hosts) return {};
    return {"network: Seatbelt has no allow-list proxy: the network is denied as with --network deny, so the "
            "allowed hosts are not reachable either"};
}

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
    ProfileShape shape;
    shape.mode = mode;
    shape.protectedPaths = protected_count;
    shape.anchors = anchor_count;
    return profile(shape);
}

std::string profile(const ProfileShape& shape) {
    std::string text = strip_comments(text_of("read-only"));
    if (shape.mode == ConfinedSandboxMode::WorkspaceWrite) text += strip_comments(text_of("workspace-write"));
    // Extra writable roots: what the workspace profile allows its root, each.
    for (std::size_t i = 0; i < shape.writableRoots; ++i) {
        const std::string root = "(param \"WRITABLE_ROOT_" + std::to_string(i) + "\")";
        text += "(allow file-write* (subpath " + root + "))\n(allow file-link (subpath " + root + "))\n";
    }
    // Last, so they win over the allows: protected paths (dsh-confine's own files, .git/hooks
    // and .git/config, ...) stay unwritable, their directories cannot be moved away, unreadable
    // paths cannot be read, and with the network denied no socket reaches out or in.
    for (std::size_t i = 0; i < shape.protectedPaths; ++i)
        text += "(deny file-write* file-link (subpath (param \"PROTECTED_" + std::to_string(i) + "\")))\n";
    for (std::size_t i = 0; i < shape.anchors; ++i)
        text += "(deny file-write-unlink (literal (param \"ANCHOR_" + std::to_string(i) + "\")))\n";
    for (std::size_t i = 0; i < shape.unreadablePaths; ++i)
        text += "(deny file-read* (subpath (param \"UNREADABLE_" + std::to_string(i) + "\")))\n";
    if (shape.denyNetwork) text += "(deny network*)\n";
    return text;
}

std::vector<Parameter> parameters(const Layout& layout, const SandboxPolicy& policy) {
    std::vector<Parameter> out;
    if (policy.mode == ConfinedSandboxMode::WorkspaceWrite) {
        out.push_back({"WORKSPACE_ROOT", policy.workspaceRoot});
        out.push_back({"TEMP_DIR", layout.tempDir});
        for (std::size_t i = 0; i < policy.writableRoots.size(); ++i)
            out.push_back({"WRITABLE_ROOT_" + std::to_string(i), policy.writableRoots[i]});
        const Guarded guard = guarded(layout, policy);
        for (std::size_t i = 0; i < guard.paths.size(); ++i) out.push_back({"PROTECTED_" + std::to_string(i), guard.paths[i]});
        for (std::size_t i = 0; i < guard.anchors.size(); ++i) out.push_back({"ANCHOR_" + std::to_string(i), guard.anchors[i]});
    }
    for (std::size_t i = 0; i < policy.unreadablePaths.size(); ++i)
        out.push_back({"UNREADABLE_" + std::to_string(i), policy.unreadablePaths[i]});
    return out;
}

std::vector<std::string> build_argv(const Layout& layout, const std::vector<std::string>& argv,
                                    const SandboxPolicy& policy) {
    std::vector<std::string> out = {layout.runner, "-p", profile(shape_of(layout, policy))};
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
        roots.insert(roots.end(), policy.writableRoots.begin(), policy.writableRoots.end());
        roots.push_back(layout.tempDir);
    }
    for (const auto& sink : posix_shell_sinks()) roots.push_back(sink);
    roots.push_back("/dev/fd");  // descriptors the command already holds
    return roots;
}

Dialect dialect(const std::vector<std::string>& extra_informational_lines) {
    Dialect out;
    // Seatbelt refuses with EPERM, writes and (with the network denied) sockets alike.
    add_denial_words(out.denialSignatures, DeniedErrno::Eperm);
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
