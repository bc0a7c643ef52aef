// What the subcommands share that touches the host: where dsh-confine's state, cache and
// config live (XDG, with the Windows fallbacks), the config lookup, the process's cwd, and
// dsh-confine's own files as the backends must see them.
#include <nlohmann/json.hpp>

#include "common.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "../lib/error.hpp"
#include "../lib/policy.hpp"
#include "../platform/posix/safe_path.hpp"

namespace dsh::cli {
namespace {

std::optional<std::string> env(const char* name) {
    const char* value = std::getenv(name);
    if (!value || !*value) return std::nullopt;
    return std::string(value);
}

std::string joined(const std::string& base, const char* tail) { return (std::filesystem::path(base) / tail).string(); }

// The XDG base directory spec: a relative $XDG_* value is ignored. On Windows, where neither is
// usually set, %LOCALAPPDATA%\dsh-confine\WINDOWS_LEAF comes last.
std::string home_relative(const char* xdg, const char* fallback, const char* windows_leaf, const char* what) {
    if (auto base = env(xdg); base && is_absolute_path(*base)) return joined(*base, "dsh-confine");
    if (auto home = env("HOME"); home && is_absolute_path(*home)) return joined(joined(*home, fallback), "dsh-confine");
#if defined(_WIN32)
    if (auto local = env("LOCALAPPDATA"); local && is_absolute_path(*local))
        return joined(joined(*local, "dsh-confine"), windows_leaf);
    throw Error(code::State, std::string("neither $") + xdg + ", $HOME nor %LOCALAPPDATA% is an absolute path: no place for the " + what);
#else
    (void)windows_leaf;
    throw Error(code::State, std::string("neither $") + xdg + " nor $HOME is an absolute path: no place for the " + what);
#endif
}

// Where dsh-confine's own config directory is, if anywhere: $XDG_CONFIG_HOME/dsh-confine, else
// ~/.config/dsh-confine, else (Windows) %APPDATA%\dsh-confine.
std::optional<std::string> config_dir() {
    // The XDG base directory spec: a relative $XDG_* value is ignored (as for state and cache).
    if (auto xdg = env("XDG_CONFIG_HOME"); xdg && is_absolute_path(*xdg)) return joined(*xdg, "dsh-confine");
    if (auto home = env("HOME"); home && is_absolute_path(*home)) return joined(joined(*home, ".config"), "dsh-confine");
#if defined(_WIN32)
    if (auto roaming = env("APPDATA")) return joined(*roaming, "dsh-confine");
#endif
    return std::nullopt;
}

}  // namespace

std::string state_dir() {
    if (auto dir = env("DSH_CONFINE_STATE_DIR")) {
        if (!is_absolute_path(*dir)) throw Error(code::State, "$DSH_CONFINE_STATE_DIR must be an absolute path, not '" + *dir + "'");
        return *dir;
    }
    return home_relative("XDG_STATE_HOME", ".local/state", "state", "state directory");
}

std::optional<std::string> cache_dir() {
    try {
        return home_relative("XDG_CACHE_HOME", ".cache", "cache", "probe cache");
    } catch (const Error&) {
        return std::nullopt;
    }
}

std::string current_dir() {
    std::error_code ec;
    auto here = std::filesystem::current_path(ec);
    if (ec) throw Error(code::WorkspaceRoot, "the current directory cannot be read: " + ec.message());
    return here.string();
}

Config load_configuration(const std::string& explicit_file) {
    ConfigLookup lookup;
    if (!explicit_file.empty()) lookup.explicitFile = explicit_file;
    lookup.envFile = env("DSH_CONFINE_CONFIG");
    if (auto dir = config_dir()) lookup.candidates.push_back(joined(*dir, "config.toml"));
    lookup.candidates.push_back("/etc/dsh-confine/config.toml");
    Config config = load_config(lookup);
    spdlog::debug("config: {}", config.source);
    return config;
}

platform::HostContext host_context(const Config& config) {
    platform::HostContext host;
    host.cwd = current_dir();
    std::vector<std::string> own;
    try {
        own.push_back(state_dir());
    } catch (const Error&) {
    }
    if (auto cache = cache_dir()) own.push_back(*cache);
    if (auto dir = config_dir()) own.push_back(*dir);
    if (config.source != "<built-in>") own.push_back(config.source);
    for (const auto& path : own) host.protectedPaths.push_back(posix::resolved_path(path));
    return host;
}

void write_error_json(const std::string& code_name, const std::string& message) {
    nlohmann::ordered_json error;
    error["error"]["code"] = code_name;
    error["error"]["message"] = message;
    write_out(error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void write_out(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

}  // namespace dsh::cli
