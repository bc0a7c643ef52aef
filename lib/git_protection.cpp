#include "git_protection.hpp"

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "policy.hpp"

namespace dsh {
namespace {

namespace fs = std::filesystem;

// Bounds on what one plan walks: submodules (and their submodules) and linked worktrees are
// found by reading a few files, never by walking a tree; these keep a crafted layout cheap.
constexpr std::size_t kMaxRepositories = 256;
constexpr int kMaxSubmoduleDepth = 8;
constexpr std::size_t kMaxModuleEntries = 4096;

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string trim(std::string_view text) {
    std::size_t begin = 0;
    std::size_t end = text.size();
    while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
    while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
    return std::string(text.substr(begin, end - begin));
}

// The first line of a small file (what git reads from `.git`, `commondir`, `gitdir`), trimmed.
std::optional<std::string> first_line(const fs::path& file) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::status(file, ec))) return std::nullopt;
    std::ifstream in(file);
    std::string line;
    if (!in || !std::getline(in, line)) return std::nullopt;
    line = trim(line);
    if (line.empty()) return std::nullopt;
    return line;
}

// The directory a path names relative to `base` (as git resolves `gitdir:` and `commondir`),
// canonical; nullopt unless it exists and is a directory.
std::optional<std::string> directory_named(const std::string& text, const fs::path& base) {
    std::error_code ec;
    const fs::path path = fs::path(text).is_absolute() ? fs::path(text) : base / text;
    const fs::path canonical = fs::canonical(path, ec);
    if (ec || !fs::is_directory(canonical, ec)) return std::nullopt;
    return canonical.string();
}

// Whether a repository's config turns on extensions.worktreeConfig (git then reads
// config.worktree as config). Git reads the repository format from that file alone, without
// includes, so a scan of its sections and keys is what git sees.
bool worktree_config_on(const fs::path& config) {
    std::ifstream in(config);
    std::string line;
    bool in_extensions = false;
    while (std::getline(in, line)) {
        const std::string text = trim(line);
        if (text.empty() || text[0] == '#' || text[0] == ';') continue;
        if (text[0] == '[') {
            const std::size_t close = text.find(']');
            in_extensions = close != std::string::npos && lower(trim(std::string_view(text).substr(1, close - 1))) == "extensions";
            continue;
        }
        if (!in_extensions) continue;
        const std::size_t equals = text.find('=');
        if (lower(trim(std::string_view(text).substr(0, equals))) != "worktreeconfig") continue;
        if (equals == std::string::npos) return true;  // a bare key is true
        const std::string value = lower(trim(std::string_view(text).substr(equals + 1)));
        return value == "true" || value == "yes" || value == "on" || value == "1";
    }
    return false;
}

class Finder {
public:
    Finder(const std::vector<std::string>& roots, GitMode mode) : roots_(roots) { plan_.mode = mode; }

    // Each [sandbox] protected_paths pattern that exists at the top of a root.
    void patterns(const std::string& root, const std::vector<std::string>& patterns) {
        for (const auto& pattern : patterns) read_only(fs::path(root) / pattern);
    }

    void root(const std::string& root, int depth) {
        const fs::path dot_git = fs::path(root) / ".git";
        std::error_code ec;
        const fs::file_status status = fs::symlink_status(dot_git, ec);
        if (fs::is_symlink(status)) {
            // Kept in place (a symlink can be a mount point too), and what it names protected.
            keep(dot_git.string());
            if (auto target = directory_named(fs::read_symlink(dot_git, ec).string(), root); target && !ec)
                repository(*target, true);
        } else if (fs::is_regular_file(status)) {
            read_only(dot_git.string());
            if (auto line = first_line(dot_git); line && line->rfind("gitdir:", 0) == 0)
                if (auto gitdir = directory_named(trim(line->substr(7)), root)) repository(*gitdir, false);
        } else if (fs::is_directory(status)) {
            repository(dot_git.string(), true);
        }
        submodules(root, depth);
    }

    GitPlan finish() {
        for (auto* list : {&plan_.repositories, &plan_.readOnly, &plan_.madeDirectories, &plan_.madeFiles,
                           &plan_.keptInPlace, &plan_.checkedAtEnd}) {
            std::sort(list->begin(), list->end());
            list->erase(std::unique(list->begin(), list->end()), list->end());
        }
        return std::move(plan_);
    }

private:
    bool inside_roots(const std::string& path) const {
        for (const auto& root : roots_)
            if (!paths_within({path}, root).empty()) return true;
        return false;
    }

    // `path` with every symlink on its way resolved, each one met inside a root kept in place
    // (the stage reaches paths without symlinks, so a protected path is named by its target).
    // `exists` says whether the last component is there.
    struct Resolved {
        std::string path;
        bool exists = false;
    };
    std::optional<Resolved> resolve(const fs::path& lexical) {
        std::error_code ec;
        const fs::path relative = lexical.relative_path();
        const std::vector<fs::path> parts(relative.begin(), relative.end());
        fs::path real = "/";
        for (std::size_t i = 0; i < parts.size(); ++i) {
            const fs::path candidate = real / parts[i];
            const fs::file_status status = fs::symlink_status(candidate, ec);
            if (ec || !fs::exists(status)) {
                if (i + 1 != parts.size()) return std::nullopt;  // only the last component may be missing
                return Resolved{candidate.string(), false};
            }
            if (fs::is_symlink(status)) {
                keep(candidate.string());
                const fs::path target = fs::canonical(candidate, ec);
                if (ec) return std::nullopt;
                real = target;
            } else {
                real = candidate;
            }
        }
        return Resolved{real.string(), true};
    }

    void keep(const std::string& path) {
        if (inside_roots(path)) plan_.keptInPlace.push_back(path);
    }
    void read_only(const fs::path& path) {
        if (auto r = resolve(path); r && r->exists && inside_roots(r->path)) plan_.readOnly.push_back(r->path);
    }
    // Read-only, and made first where missing (git's own layout: only its parent must exist).
    void made(const fs::path& path, bool directory) {
        auto r = resolve(path);
        if (!r || !inside_roots(r->path)) return;
        if (r->exists) {
            plan_.readOnly.push_back(r->path);
            return;
        }
        std::error_code ec;
        if (!fs::is_directory(fs::path(r->path).parent_path(), ec)) return;
        (directory ? plan_.madeDirectories : plan_.madeFiles).push_back(r->path);
    }
    void kept_directory(const fs::path& path) {
        std::error_code ec;
        if (auto r = resolve(path); r && r->exists && fs::is_directory(r->path, ec) && inside_roots(r->path))
            plan_.keptInPlace.push_back(r->path);
    }

    // A git directory (`through_directory`: git finds it as a `.git` directory, not by a `.git`
    // file's name).
    void repository(const std::string& gitdir, [[maybe_unused]] bool through_directory) {
        if (!seen_.insert(gitdir).second || seen_.size() > kMaxRepositories) return;
        plan_.repositories.push_back(gitdir);
        const fs::path git(gitdir);
        std::optional<std::string> common;
        if (auto line = first_line(git / "commondir")) common = directory_named(*line, git);
        const fs::path shared = common ? fs::path(*common) : git;
        const bool worktree_config = worktree_config_on(shared / "config");
        if (plan_.mode == GitMode::ReadOnly) {
            read_only(git);
            if (common) read_only(*common);
        } else {
            // Config, hooks, objects and refs are the common directory's; a linked worktree's own
            // git directory holds its HEAD, its config.worktree and the commondir naming the rest.
            for (const auto& directory : {shared}) {
                read_only(directory / "config");
                made(directory / "hooks", true);
                kept_directory(directory / "objects");
                kept_directory(directory / "refs");
            }
            if (worktree_config) made(git / "config.worktree", false);
            else read_only(git / "config.worktree");
            read_only(git / "commondir");
            // Every git directory inside a root: one found as a `.git` directory makes git try the
            // directory above as a bare repository when it is invalid, and any can be given a
            // `commondir` that sends git to another directory's config and hooks.
            if (inside_roots(gitdir)) plan_.checkedAtEnd.push_back(gitdir);
        }
        modules(git / "modules", 0);
        if (common) modules(shared / "modules", 0);
        worktrees(shared / "worktrees", worktree_config);
    }

    // .git/modules holds the git directories of submodules, by name; a name may contain '/'.
    void modules(const fs::path& directory, int depth) {
        std::error_code ec;
        if (depth > kMaxSubmoduleDepth || !fs::is_directory(fs::symlink_status(directory, ec))) return;
        for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
            if (++entries_ > kMaxModuleEntries) return;
            const fs::path entry = it->path();
            if (!fs::is_directory(fs::symlink_status(entry, ec))) continue;
            std::error_code head_ec;
            if (fs::exists(fs::symlink_status(entry / "HEAD", head_ec))) {
                if (auto canonical = directory_named(entry.string(), "/")) repository(*canonical, false);
            } else {
                modules(entry, depth + 1);
            }
        }
    }

    // .git/worktrees/NAME: a linked worktree's git directory. Its `commondir` and `gitdir` say
    // where its repository and its worktree are; the worktree's `.git` file names it back.
    void worktrees(const fs::path& directory, bool worktree_config) {
        std::error_code ec;
        if (!fs::is_directory(fs::symlink_status(directory, ec))) return;
        for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
            if (++entries_ > kMaxModuleEntries) return;
            const fs::path entry = it->path();
            if (!fs::is_directory(fs::symlink_status(entry, ec))) continue;
            if (plan_.mode != GitMode::ReadOnly) {
                read_only(entry / "commondir");
                read_only(entry / "gitdir");
                if (worktree_config) made(entry / "config.worktree", false);
                else read_only(entry / "config.worktree");
            }
            if (auto dot_git = first_line(entry / "gitdir"); dot_git && fs::path(*dot_git).is_absolute())
                read_only(*dot_git);
        }
    }

    // The submodules a root's .gitmodules registers: each one's `.git` (a file naming its git
    // directory under .git/modules, or an old-style directory) and its own submodules. What
    // .gitmodules says only picks paths inside the root to protect, never one outside it.
    void submodules(const std::string& root, int depth) {
        if (depth >= kMaxSubmoduleDepth) return;
        std::ifstream in(fs::path(root) / ".gitmodules");
        std::string line;
        while (std::getline(in, line)) {
            const std::string text = trim(line);
            const std::size_t equals = text.find('=');
            if (equals == std::string::npos || lower(trim(std::string_view(text).substr(0, equals))) != "path") continue;
            const fs::path relative = fs::path(trim(std::string_view(text).substr(equals + 1))).lexically_normal();
            if (relative.empty() || relative.is_absolute() || *relative.begin() == "..") continue;
            const fs::path sub = fs::path(root) / relative;
            std::error_code ec;
            if (!fs::is_directory(fs::symlink_status(sub, ec))) continue;
            root_of_submodule(sub.string(), depth + 1);
        }
    }
    void root_of_submodule(const std::string& directory, int depth) {
        if (!inside_roots(directory)) return;
        root(directory, depth);
    }

    std::vector<std::string> roots_;
    GitPlan plan_;
    std::set<std::string> seen_;
    std::size_t entries_ = 0;
};

}  // namespace

bool valid_git_head(std::string_view content, bool is_symlink) {
    if (is_symlink) return content.rfind("refs/", 0) == 0;
    if (content.rfind("ref:", 0) == 0) {
        std::size_t at = 4;
        while (at < content.size() && std::isspace(static_cast<unsigned char>(content[at]))) ++at;
        return content.substr(at).rfind("refs/", 0) == 0;
    }
    // A detached HEAD: an object name in either hash, then nothing or a line end.
    for (std::size_t length : {std::size_t{40}, std::size_t{64}}) {
        if (content.size() < length) continue;
        const bool hex = std::all_of(content.begin(), content.begin() + static_cast<std::ptrdiff_t>(length),
                                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
        if (hex && (content.size() == length || std::isspace(static_cast<unsigned char>(content[length])))) return true;
    }
    return false;
}

std::vector<std::string> protected_patterns_for(GitMode mode, const std::vector<std::string>& patterns) {
    if (mode != GitMode::Writable) return patterns;
    std::vector<std::string> out;
    for (const auto& pattern : patterns)
        if (pattern != ".git" && pattern.rfind(".git/", 0) != 0) out.push_back(pattern);
    return out;
}

HostGitBareRepositories assess_host_git(std::string_view version_output, std::string_view setting) {
    HostGitBareRepositories out;
    const std::string_view prefix = "git version ";
    const std::size_t at = version_output.find(prefix);
    if (at != std::string_view::npos) {
        std::size_t end = at + prefix.size();
        while (end < version_output.size() && !std::isspace(static_cast<unsigned char>(version_output[end]))) ++end;
        out.version = std::string(version_output.substr(at + prefix.size(), end - at - prefix.size()));
    }
    out.setting = lower(trim(setting));
    int major = 0, minor = 0;
    const bool parsed = std::sscanf(out.version.c_str(), "%d.%d", &major, &minor) == 2;
    const bool knows_setting = parsed && (major > 2 || (major == 2 && minor >= 38));
    out.takesImplicitBareRepositories = !(knows_setting && out.setting == "explicit");
    if (out.takesImplicitBareRepositories)
        out.advice = knows_setting ? "git config --global safe.bareRepository explicit"
                                   : "git " + (out.version.empty() ? std::string("(version unknown)") : out.version) +
                                         " cannot refuse implicit bare repositories: safe.bareRepository needs git 2.38 or later";
    return out;
}

GitPlan plan_git_protection(const std::vector<std::string>& roots, GitMode mode, const std::vector<std::string>& patterns) {
    Finder finder(roots, mode);
    for (const auto& root : roots) finder.patterns(root, protected_patterns_for(mode, patterns));
    if (mode == GitMode::Writable) {
        GitPlan plan = finder.finish();
        plan.notes.push_back("git: not protected (--git writable): the command may change the repositories in the "
                             "writable roots, their hooks and config included, which the git you run there later executes");
        return plan;
    }
    for (const auto& root : roots) finder.root(root, 0);
    GitPlan plan = finder.finish();
    if (!plan.checkedAtEnd.empty())
        plan.notes.push_back(
            "git: HEAD, objects/ and refs/ stay writable (git replaces HEAD on every switch and rebase); a repository the "
            "command leaves invalid (which makes git take the directory above it for a bare repository) is restored when "
            "the call ends, but a git you run in the workspace while the call runs sees it as the command left it");
    plan.notes.push_back(
        "git: a repository the command creates is not protected: git run inside it, or `git status` at the top once it is "
        "registered as a submodule (a gitlink in the index), runs what the command wrote into its config and hooks");
    plan.notes.push_back(
        "git: a bare repository the command plants in a directory (HEAD, objects/, refs/, config) is taken by a git run "
        "there, before any repository above it, unless git's safe.bareRepository is 'explicit' (git 2.38 and later: "
        "git config --global safe.bareRepository explicit); `dsh-confine doctor` says what this host's git does");
    return plan;
}

}  // namespace dsh
