#include "git_protection.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
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
// found by reading a few files, never by walking a tree; these keep a crafted layout cheap. A
// bound reached is a named gap, never a silent omission.
constexpr std::size_t kMaxRepositories = 1024;
// The largest config file read (git reads any): beyond it, a bound reached, named in the plan.
constexpr std::uintmax_t kMaxConfigBytes = std::uintmax_t{64} << 20;
constexpr int kMaxSubmoduleDepth = 8;
constexpr std::size_t kMaxModuleEntries = 16384;

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

// One variable of a git config file: section and key lower-case, the subsection as written.
struct ConfigEntry {
    std::string section, subsection, key, value;
};

// A git config file as git reads it (config.c): sections `[name]`, `[name "sub"]` and the older
// `[name.sub]`, keys case-insensitive, a key alone meaning true; in a value, double quotes group
// (and go), `\"`, `\\`, `\n`, `\t` and `\b` are escapes, a backslash at the end of a line joins
// the next, `#` and `;` outside quotes start a comment, and whitespace around the value goes.
// What it cannot parse ends the reading there, as git would refuse the file. Includes are not
// followed: the callers look at each file on its own. A file over kMaxConfigBytes is not read
// (config_targets names that as a bound reached).
std::vector<ConfigEntry> read_git_config(const fs::path& file) {
    std::vector<ConfigEntry> out;
    std::error_code ec;
    if (!fs::is_regular_file(fs::status(file, ec)) || fs::file_size(file, ec) > kMaxConfigBytes) return out;
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Git reads a CR before a LF as nothing: a backslash before CRLF continues a line.
    std::size_t kept = 0;  // one pass: each character moves at most once, back
    for (std::size_t i = 0; i < text.size(); ++i)
        if (text[i] != '\r' || i + 1 >= text.size() || text[i + 1] != '\n') text[kept++] = text[i];
    text.resize(kept);
    std::size_t at = text.rfind("\xef\xbb\xbf", 0) == 0 ? 3 : 0;  // a UTF-8 byte order mark, which git skips
    std::string section, subsection;
    const auto blank = [&] { return at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r'); };
    const auto git_space = [&] { return at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r'); };
    const auto skip_line = [&] {
        while (at < text.size() && text[at] != '\n') ++at;
    };
    while (at < text.size()) {
        while (blank() || (at < text.size() && text[at] == '\n')) ++at;
        if (at >= text.size()) break;
        const char c = text[at];
        if (c == '#' || c == ';') {
            skip_line();
            continue;
        }
        if (c == '[') {
            ++at;
            std::string name;
            while (at < text.size() && (std::isalnum(static_cast<unsigned char>(text[at])) || text[at] == '-' || text[at] == '.'))
                name += static_cast<char>(std::tolower(static_cast<unsigned char>(text[at++])));
            subsection.clear();
            if (git_space()) {
                while (git_space()) ++at;
                if (at >= text.size() || text[at] != '"') return out;
                ++at;
                while (at < text.size() && text[at] != '"' && text[at] != '\n') {
                    if (text[at] == '\\' && at + 1 < text.size()) ++at;
                    subsection += text[at++];
                }
                if (at >= text.size() || text[at] != '"') return out;
                ++at;
            } else if (const std::size_t dot = name.find('.'); dot != std::string::npos) {
                subsection = name.substr(dot + 1);
                name = name.substr(0, dot);
            }
            if (at >= text.size() || text[at] != ']') return out;
            ++at;
            section = name;
            continue;  // a key may follow on the same line
        }
        if (!std::isalpha(static_cast<unsigned char>(c))) return out;
        std::string key;
        while (at < text.size() && (std::isalnum(static_cast<unsigned char>(text[at])) || text[at] == '-'))
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(text[at++])));
        while (blank()) ++at;
        std::string value = "true";
        if (at < text.size() && text[at] == '=') {
            ++at;
            value.clear();
            bool quoted = false;
            std::size_t pending_space = 0;  // unquoted whitespace inside the value: one space each, as git keeps it
            while (blank()) ++at;
            while (at < text.size()) {
                const char v = text[at];
                if (v == '\n' && !quoted) break;
                if (!quoted && (v == '#' || v == ';')) {
                    skip_line();
                    break;
                }
                ++at;
                if (v == ' ' || v == '\t' || v == '\r') {
                    if (quoted) value += v;
                    else if (!value.empty()) ++pending_space;
                    continue;
                }
                value.append(pending_space, ' ');
                pending_space = 0;
                if (v == '"') {
                    quoted = !quoted;
                } else if (v == '\\') {
                    if (at >= text.size()) break;
                    const char e = text[at++];
                    if (e == '\n') continue;  // a continuation line
                    if (e != 'n' && e != 't' && e != 'b' && e != '"' && e != '\\') return out;  // git refuses the file
                    value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'b' ? '\b' : e;
                } else if (v == '\n') {
                    return out;  // a newline inside quotes: git refuses the file
                } else {
                    value += v;
                }
            }
        } else {
            if (at < text.size() && (text[at] == '#' || text[at] == ';')) skip_line();
        }
        if (!section.empty()) out.push_back({section, subsection, key, value});
    }
    return out;
}

// Whether a repository's config turns on extensions.worktreeConfig (git then reads
// config.worktree as config). Git reads the repository format from that file alone.
bool worktree_config_on(const fs::path& config) {
    bool on = false;
    for (const auto& entry : read_git_config(config))
        if (entry.section == "extensions" && entry.subsection.empty() && entry.key == "worktreeconfig") {
            const std::string value = lower(entry.value);
            on = value == "true" || value == "yes" || value == "on" || value == "1";
        }
    return on;
}

// A git directory as git's validity test sees one: a HEAD, an objects/ and a refs/ directory.
bool looks_like_git_directory(const fs::path& directory) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(directory / "HEAD", ec)) && fs::is_directory(directory / "objects", ec) &&
           fs::is_directory(directory / "refs", ec);
}

// A linked worktree's own git directory (.git/worktrees/NAME): it alone may have a `commondir`
// (naming the repository's), and a `gitdir` (naming the worktree's `.git` file).
bool linked_worktree_directory(const fs::path& directory) {
    std::error_code ec;
    return directory.parent_path().filename() == "worktrees" && fs::is_regular_file(directory / "commondir", ec) &&
           fs::is_regular_file(directory / "gitdir", ec);
}

// A git directory's common directory (config, hooks, objects, modules/): the one a linked
// worktree's own git directory names in `commondir`, or the git directory itself.
fs::path common_directory(const fs::path& gitdir) {
    if (linked_worktree_directory(gitdir))
        if (auto line = first_line(gitdir / "commondir"))
            if (auto common = directory_named(*line, gitdir)) return *common;
    return gitdir;
}

class Finder {
public:
    Finder(const std::vector<std::string>& roots, GitMode mode) : roots_(roots) { plan_.mode = mode; }

    // Each [sandbox] protected_paths pattern that exists at the top of a root.
    void patterns(const std::string& root, const std::vector<std::string>& patterns) {
        for (const auto& pattern : patterns) read_only(fs::path(root) / pattern);
    }

    // The repository at the top of `root` (`.git` a directory, a file naming one, or a symlink),
    // or the root itself when it is a git directory (a bare repository, or a `.git` given as a
    // writable root), and the submodules its `.gitmodules` registers.
    void root(const std::string& root, int depth) {
        const fs::path dot_git = fs::path(root) / ".git";
        std::error_code ec;
        const fs::file_status status = fs::symlink_status(dot_git, ec);
        std::optional<std::string> gitdir;
        if (fs::is_symlink(status)) {
            // Kept in place (a symlink can be a mount point too), and what it names protected.
            keep(dot_git.string());
            if (auto target = directory_named(fs::read_symlink(dot_git, ec).string(), root); target && !ec) gitdir = target;
        } else if (fs::is_regular_file(status)) {
            read_only(dot_git.string());
            if (auto line = first_line(dot_git); line && line->rfind("gitdir:", 0) == 0)
                gitdir = directory_named(trim(line->substr(7)), root);
        } else if (fs::is_directory(status)) {
            gitdir = dot_git.string();
        } else if (depth == 0 && looks_like_git_directory(root)) {
            repository(root, std::nullopt);
        }
        if (gitdir) repository(*gitdir, root);
        submodules(root, depth, gitdir ? std::optional<fs::path>(*gitdir) : std::nullopt);
    }

    GitPlan finish() {
        for (auto* list : {&plan_.repositories, &plan_.readOnly, &plan_.madeDirectories, &plan_.madeFiles,
                           &plan_.keptInPlace, &plan_.checkedAtEnd}) {
            std::sort(list->begin(), list->end());
            list->erase(std::unique(list->begin(), list->end()), list->end());
        }
        if (!unpopulated_.empty()) {
            std::sort(unpopulated_.begin(), unpopulated_.end());
            std::string named;
            for (std::size_t i = 0; i < unpopulated_.size() && i < 3; ++i) named += (i ? ", " : "") + unpopulated_[i];
            if (unpopulated_.size() > 3) named += " and " + std::to_string(unpopulated_.size() - 3) + " more";
            plan_.notes.push_back("git: submodules registered but not checked out (" + named + ") are kept empty, but "
                                  "a git directory the command makes for one under modules/ (where other submodules' "
                                  "are) is the one a git submodule update --init you run later reuses, its config "
                                  "and hooks included");
        }
        if (overflow_) plan_.notes.push_back(*overflow_);
        plan_.bounded = overflow_.has_value();
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
        // Still to walk, the next last: a symlink's own components take its place, one link at a
        // time, so each link of a chain is kept in place (the kernel's limit: 40 links).
        std::vector<fs::path> pending;
        push_parts(pending, lexical.relative_path());
        fs::path real = "/";
        int links = 0;
        while (!pending.empty()) {
            const fs::path part = pending.back();
            pending.pop_back();
            if (part == "..") {
                keep(real.string());  // left by `..`: not on the way to what is named
                real = real.parent_path();
                continue;
            }
            const fs::path candidate = real / part;
            const fs::file_status status = fs::symlink_status(candidate, ec);
            if (ec || !fs::exists(status)) {
                if (!pending.empty()) return std::nullopt;  // only the last component may be missing
                return Resolved{candidate.string(), false};
            }
            if (fs::is_symlink(status)) {
                const fs::path target = fs::read_symlink(candidate, ec);
                if (ec || ++links > 40) return std::nullopt;
                keep(candidate.string());
                if (target.is_absolute()) real = "/";
                push_parts(pending, target.relative_path());
                continue;
            }
            real = candidate;
        }
        return Resolved{real.string(), true};
    }
    // `path`'s components onto `pending`, the first last (walked first).
    static void push_parts(std::vector<fs::path>& pending, const fs::path& path) {
        std::vector<fs::path> parts;
        for (const auto& part : path)
            if (!part.empty() && part != ".") parts.push_back(part);
        pending.insert(pending.end(), parts.rbegin(), parts.rend());
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

    // What a path in a config names, as git reaches it: from `base`, each component of `path` in
    // turn, a `..` taken after what came before it (the kernel resolves it so, past any symlink
    // before it). Each symlink on the way is kept in place, as is each directory the walk leaves
    // by `..` (it is not on the way to the target, and a symlink put there would send git
    // elsewhere); a missing directory is made, read-only (up to kMaxMade: more is a bound reached,
    // named in the plan), and the target is kept read-only, or made so where missing. Returns
    // the target's real path where it exists.
    std::optional<fs::path> made_along(const fs::path& base, const fs::path& path, bool directory) {
        constexpr std::size_t kMaxMade = 64;
        std::error_code ec;
        std::vector<fs::path> pending;
        push_parts(pending, path);
        fs::path real = base;
        std::size_t made_count = 0;
        int links = 0;
        while (!pending.empty()) {
            const fs::path part = pending.back();
            pending.pop_back();
            const bool last = pending.empty();
            if (part == "..") {
                keep(real.string());
                real = real.parent_path();
                continue;
            }
            const fs::path next = real / part;
            const fs::file_status status = fs::symlink_status(next, ec);
            if (!ec && fs::is_symlink(status)) {
                // Each link of a chain kept in place, its target walked in its place.
                const fs::path target = fs::read_symlink(next, ec);
                if (ec || ++links > 40) return std::nullopt;
                keep(next.string());
                if (target.is_absolute()) real = "/";
                push_parts(pending, target.relative_path());
                continue;
            }
            if (!ec && fs::exists(status)) {
                real = next;
                if (last && inside_roots(real.string())) plan_.readOnly.push_back(real.string());
                continue;
            }
            if (!inside_roots(next.string())) return std::nullopt;
            if (++made_count > kMaxMade) {
                bounded("more than " + std::to_string(kMaxMade) + " missing directories on the way to " + (base / path).string());
                return std::nullopt;
            }
            (last && !directory ? plan_.madeFiles : plan_.madeDirectories).push_back(next.string());
            real = next;
        }
        if (made_count > 0) return std::nullopt;
        return real;
    }

    void kept_directory(const fs::path& path) {
        std::error_code ec;
        if (auto r = resolve(path); r && r->exists && fs::is_directory(r->path, ec) && inside_roots(r->path))
            plan_.keptInPlace.push_back(r->path);
    }

    bool bounded(const std::string& what) {
        if (!overflow_)
            overflow_ = "git: " + what + " in the writable roots exceed what one plan looks at, so the rest are not "
                        "protected (a command can make that so: it has been told in this plan)";
        return true;
    }

    // What a repository's config points into the worktree is the worktree's: a hooks directory
    // (core.hooksPath, as husky sets it) and included files (include.path, includeIf.*.path) would
    // be the command's to write, and git runs or reads them. Kept read-only where they lie inside a
    // root; where one is missing (husky's gitignored .husky/_, an optional ../.gitconfig.local),
    // made empty first, as .git/hooks is, with the directories above it that are missing too. A
    // relative hooks path is relative to where git runs hooks, `hooks_base`: the worktree's top,
    // or for a bare repository the git directory. An included file's own hooks path and includes
    // are followed too, as deep as git follows includes (10).
    void config_targets(const fs::path& config, const fs::path& hooks_base, int depth = 0) {
        constexpr int kMaxIncludeDepth = 10;
        std::error_code ec;
        if (fs::is_regular_file(config, ec) && fs::file_size(config, ec) > kMaxConfigBytes && inside_roots(config.string()))
            bounded("a config file over " + std::to_string(kMaxConfigBytes >> 20) + " MiB (" + config.string() + ")");
        for (const auto& entry : read_git_config(config)) {
            const bool hooks = entry.section == "core" && entry.subsection.empty() && entry.key == "hookspath";
            const bool include = (entry.section == "include" || entry.section == "includeif") && entry.key == "path";
            if ((!hooks && !include) || entry.value.empty()) continue;
            // As git interpolates a path: `~/` is the home directory (the caller's: a workspace
            // inside it is named so), `~USER/` another user's, `%(prefix)/` git's own.
            std::string value = entry.value;
            if (value.rfind("%(prefix)/", 0) == 0) continue;
            // /proc/self/... is git's own process's, not this one's: not known here.
            if (value.rfind("/proc/", 0) == 0) {  // portability: compared, not opened
                if (!proc_paths_) plan_.notes.push_back("git: a hooks path or include written /proc/... in the config is not "
                                                        "followed, nor protected where it names the workspace");
                proc_paths_ = true;
                continue;
            }
            if (value == "~" || value.rfind("~/", 0) == 0) {
                const char* home = std::getenv("HOME");
                if (home == nullptr || *home != '/') continue;  // git cannot expand it either
                value = home + value.substr(1);
            } else if (value.front() == '~') {
                if (!named_users_) plan_.notes.push_back("git: a hooks path or include written ~USER/ in the config is not "
                                                         "looked up, nor protected where it names the workspace");
                named_users_ = true;
                continue;
            }
            const fs::path written = value;
            const fs::path base = written.is_absolute() ? fs::path("/") : hooks ? hooks_base : config.parent_path();
            const std::optional<fs::path> target = made_along(base, written.relative_path(), hooks);
            // Each included file read once, and so many at most: a file that includes itself a
            // thousand times (git stops at its depth) costs one read.
            if (!include || !target || depth >= kMaxIncludeDepth || !fs::is_regular_file(*target, ec) ||
                included_.count(target->string()) != 0)
                continue;
            if (included_.size() >= kMaxIncludedFiles) {
                bounded("more than " + std::to_string(kMaxIncludedFiles) + " included config files");
                continue;
            }
            included_.insert(target->string());
            config_targets(*target, hooks_base, depth + 1);
        }
    }

    // A git directory, and the worktree it belongs to where known.
    void repository(const std::string& gitdir, const std::optional<std::string>& worktree) {
        if (seen_.count(gitdir) != 0) return;
        if (seen_.size() >= kMaxRepositories && bounded("more than " + std::to_string(kMaxRepositories) + " git directories"))
            return;
        seen_.insert(gitdir);
        plan_.repositories.push_back(gitdir);
        const fs::path git(gitdir);
        // Only a linked worktree's own git directory may name a common directory; anywhere else a
        // `commondir` is a plant (an earlier call's, killed before its check): not followed, and
        // removed when this call ends.
        const bool linked = linked_worktree_directory(git);
        const fs::path shared = common_directory(git);
        const std::optional<std::string> common = shared != git ? std::optional<std::string>(shared.string()) : std::nullopt;
        const bool worktree_config = worktree_config_on(shared / "config");
        if (plan_.mode == GitMode::ReadOnly) {
            read_only(git);
            if (common) read_only(*common);
        } else {
            // Config, hooks, objects and refs are the common directory's; a linked worktree's own
            // git directory holds its HEAD, its config.worktree and the commondir naming the rest.
            read_only(shared / "config");
            made(shared / "hooks", true);
            kept_directory(shared / "objects");
            kept_directory(shared / "refs");
            // The older places a remote is named in: `.git/remotes/NAME` and `.git/branches/NAME`
            // are read when the config names no such remote (a push to a path runs that
            // repository's hooks). Kept where they exist; a `remotes` the command makes is removed
            // when the call ends (git_check).
            read_only(shared / "remotes");
            read_only(shared / "branches");
            if (worktree_config) made(git / "config.worktree", false);
            else read_only(git / "config.worktree");
            if (linked) {
                read_only(git / "commondir");
                read_only(git / "gitdir");
            }
            // Every git directory inside a root but a linked worktree's own: an invalid one found as a
            // `.git` directory makes git take the directory above it for a bare repository, and
            // any can be given a `commondir` or symlinks. A linked worktree's own is found through
            // a `.git` file only (git stops at an invalid one), and its `commondir` is kept.
            if (!linked && inside_roots(gitdir)) plan_.checkedAtEnd.push_back(gitdir);
            if (common && inside_roots(*common) && linked_worktree_directory(*common) == false &&
                seen_.count(*common) == 0) {
                seen_.insert(*common);
                plan_.repositories.push_back(*common);
                plan_.checkedAtEnd.push_back(*common);
            }
            const fs::path hooks_base = worktree ? fs::path(*worktree) : git;
            config_targets(shared / "config", hooks_base);
            if (worktree_config) config_targets(git / "config.worktree", hooks_base);
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
            if (++entries_ > kMaxModuleEntries && bounded("more than " + std::to_string(kMaxModuleEntries) + " entries under modules/ and worktrees/"))
                return;
            const fs::path entry = it->path();
            if (!fs::is_directory(fs::symlink_status(entry, ec))) continue;
            if (looks_like_git_directory(entry)) {
                // A submodule's git directory names its worktree (core.worktree, relative to it),
                // which a relative core.hooksPath is relative to: known here, at the first visit.
                std::optional<std::string> worktree;
                for (const auto& setting : read_git_config(entry / "config"))
                    if (setting.section == "core" && setting.subsection.empty() && setting.key == "worktree" && !setting.value.empty())
                        worktree = (fs::path(setting.value).is_absolute() ? fs::path(setting.value) : entry / setting.value)
                                       .lexically_normal()
                                       .string();
                if (auto canonical = directory_named(entry.string(), "/")) repository(*canonical, worktree);
                // Its checkout, as the git directory names it, whatever .gitmodules says now: a
                // call may have taken the submodule out of .gitmodules, and git still finds it
                // through the index, its `.git` file included.
                if (worktree && inside_roots(*worktree)) submodule_checkout(*worktree, 1);
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
            if (++entries_ > kMaxModuleEntries && bounded("more than " + std::to_string(kMaxModuleEntries) + " entries under modules/ and worktrees/"))
                return;
            const fs::path entry = it->path();
            if (!fs::is_directory(fs::symlink_status(entry, ec))) continue;
            if (plan_.mode != GitMode::ReadOnly) {
                read_only(entry / "commondir");
                read_only(entry / "gitdir");
                if (worktree_config) made(entry / "config.worktree", false);
                else read_only(entry / "config.worktree");
            }
            // Absolute, or (git 2.48's worktree.useRelativePaths) relative to this directory.
            const auto dot_git = first_line(entry / "gitdir");
            if (!dot_git) continue;
            const fs::path file = fs::path(*dot_git).is_absolute() ? fs::path(*dot_git) : (entry / *dot_git).lexically_normal();
            read_only(file);
            // A checkout inside a root is one as the root's own is: its submodules (their git
            // directories under this directory's modules/) and its .gitmodules.
            const std::string checkout = file.parent_path().string();
            if (inside_roots(checkout) && checkouts_.insert(checkout).second) root(checkout, 0);
        }
    }

    // The submodules a root's .gitmodules registers (read as git reads it): each one's `.git` (a
    // file naming its git directory under .git/modules, or an old-style directory) and its own
    // submodules. What .gitmodules says only picks paths inside the root to protect, never one
    // outside it.
    //
    // One registered but not checked out yet (a clone without --recursive: its directory empty,
    // no modules/NAME) has no repository to protect, and a git the caller runs later would use
    // one the command made there: in its directory (status recurses into it) or under the
    // modules/ of `gitdir`, the checkout's git directory (a linked worktree's is its own,
    // .git/worktrees/NAME), which submodule update --init reuses. So its directory is kept
    // read-only, and a missing modules/ is made empty and read-only (git makes it anyway, and an
    // empty one changes nothing for it). Where modules/ exists (other submodules are checked
    // out, their git directories in it), a NAME there cannot be kept from being made: the plan
    // names those submodules.
    void submodules(const std::string& top, int depth, const std::optional<fs::path>& gitdir) {
        if (depth >= kMaxSubmoduleDepth) return;
        for (const auto& entry : read_git_config(fs::path(top) / ".gitmodules")) {
            if (entry.section != "submodule" || entry.key != "path") continue;
            const fs::path relative = fs::path(entry.value).lexically_normal();
            if (relative.empty() || relative.is_absolute() || *relative.begin() == "..") continue;
            const fs::path sub = fs::path(top) / relative;
            std::error_code ec;
            if (!fs::is_directory(fs::symlink_status(sub, ec)) || !inside_roots(sub.string())) continue;
            if (!fs::exists(fs::symlink_status(sub / ".git", ec))) {
                read_only(sub);
                if (!gitdir || plan_.mode == GitMode::ReadOnly) continue;  // read-only: modules/ is too
                if (fs::exists(fs::symlink_status(*gitdir / "modules", ec))) unpopulated_.push_back(sub.string());
                else made(*gitdir / "modules", true);
                continue;
            }
            submodule_checkout(sub.string(), depth + 1);
        }
    }

    // A submodule's checkout looked at as a root's top is, once (found by .gitmodules and by its
    // git directory's core.worktree alike).
    void submodule_checkout(const std::string& path, int depth) {
        std::error_code ec;
        if (!fs::is_directory(fs::symlink_status(path, ec)) || !submodule_checkouts_.insert(path).second) return;
        root(path, depth);
    }

    std::vector<std::string> roots_;
    GitPlan plan_;
    std::set<std::string> seen_;
    std::size_t entries_ = 0;
    std::optional<std::string> overflow_;
    std::vector<std::string> unpopulated_;  // submodules not checked out, whose modules/NAME can be made
    std::set<std::string> checkouts_;       // linked worktrees' checkouts, each looked at once
    std::set<std::string> included_;        // the included config files read (config_targets)
    std::set<std::string> submodule_checkouts_;  // submodules' checkouts, each looked at once
    bool named_users_ = false;                   // the note on ~USER/ paths given
    bool proc_paths_ = false;                    // the note on /proc/ paths given
    static constexpr std::size_t kMaxIncludedFiles = 1024;
};

}  // namespace

bool valid_git_head(std::string_view content, bool is_symlink) {
    if (is_symlink) return content.rfind("refs/", 0) == 0;
    // As git's validate_headref reads it: the first 255 bytes, and its own white space (space,
    // tab, CR, LF: not \v or \f, which the C library's isspace also takes). A HEAD git refuses
    // makes it take the directory above for a bare repository.
    content = content.substr(0, 255);
    const auto git_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    if (content.rfind("ref:", 0) == 0) {
        std::size_t at = 4;
        while (at < content.size() && git_space(content[at])) ++at;
        if (content.substr(at).rfind("refs/", 0) == 0) return true;
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

GitPlan git_plan_unenforced(const GitPlan& plan) {
    GitPlan out;
    out.mode = plan.mode;
    out.repositories = plan.repositories;
    if (plan.mode != GitMode::Writable && !plan.repositories.empty())
        out.notes.push_back("git: this backend keeps nothing of git's read-only or in place, and restores nothing when the "
                            "call ends (enforcementGaps says so): the command can plant what a git you run later executes");
    for (const auto& note : plan.notes)
        if (note.rfind("git: HEAD, objects/", 0) != 0) out.notes.push_back(note);
    return out;
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
            "command leaves invalid (which makes git take the directory above it for a bare repository) is made valid "
            "again when the call ends, but a git you run in the workspace while the call runs sees it as the command left it");
    if (plan.repositories.empty())
        plan.notes.push_back(
            "git: no repository was found in the writable roots: a repository a root lies inside (a project of a larger "
            "repository) is not looked for nor protected, and one the command makes at a root's top (git init) is the one "
            "every git run in that root uses after the call, its hooks and config included");
    plan.notes.push_back(
        "git: a repository the command creates is not protected: git run inside it, or a git at the top that recurses "
        "into submodules (status, submodule update, fetch, pull) once the command has registered it as one (a gitlink in "
        "the index), runs what the command wrote into its config and hooks; nor is a rebase, merge or cherry-pick the "
        "command leaves in progress (its todo list is the command's: git rebase --continue runs its exec lines)");
    plan.notes.push_back(
        "git: a bare repository the command plants in a directory (HEAD, objects/, refs/, config) is taken by a git run "
        "there, before any repository above it, unless git's safe.bareRepository is 'explicit' (git 2.38 and later: "
        "git config --global safe.bareRepository explicit); `dsh-confine doctor` says what this host's git does");
    return plan;
}

}  // namespace dsh
