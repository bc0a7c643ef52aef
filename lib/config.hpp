// The TOML configuration: where it is looked up, its schema, and the built-in defaults that
// make a file unnecessary. Every key is documented in docs/config.md. An unknown key or a
// wrong type is an error with file:line:column, so a typo never weakens a policy silently.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run_limits.hpp"
#include "types.hpp"

namespace dsh {

struct BackendConfig {
    std::optional<std::string> path;            // the runner binary (bwrap); absent: PATH lookup
    std::vector<std::string> informationalLines;  // extra benign runner lines
    std::optional<int> maxAbi;                    // landlock: use at most this ABI (compatibility, tests)
};

struct Config {
    std::string source = "<built-in>";  // the file it came from
    std::optional<SandboxMode> defaultMode;
    std::optional<std::string> workspaceRoot;
    // [sandbox] writable_roots, deny_read: absolute or `~/...` (expanded at resolution).
    std::optional<std::vector<std::string>> writableRoots;
    std::optional<std::vector<std::string>> protectedPaths;  // relative to each writable root
    std::optional<std::vector<std::string>> denyRead;
    std::optional<NetworkPolicy> network;
    std::optional<GitMode> git;
    std::optional<std::vector<std::string>> allowHosts;  // [network] allow_hosts, canonical
    bool allowBroadRoots = false;  // [sandbox] allow_broad_roots: `/`, $HOME or above as a writable root
    std::optional<std::vector<std::string>> backends;  // the provider chain, in order
    int probeTimeoutMs = 5000;
    bool probeCache = true;
    BackendConfig bwrap;
    BackendConfig landlock;
    BackendConfig seatbelt;
    BackendConfig restrictedToken;
    RunBounds run;  // [run] timeout, kill_after and [run.limits]: `run`'s defaults, its options win

    const BackendConfig& backend(std::string_view name) const;
};

// Every backend name the configuration and --backend accept, on any system.
const std::vector<std::string>& known_backend_names();

// Where to look, already read from the environment by the caller.
struct ConfigLookup {
    std::optional<std::string> explicitFile;  // --config: must exist
    std::optional<std::string> envFile;       // $DSH_CONFINE_CONFIG: must exist when set
    std::vector<std::string> candidates;      // XDG then /etc: used when present
};

// The first file of the lookup order, or the built-in defaults when none applies.
Config load_config(const ConfigLookup& lookup);

// Parse one document; `source` names it in messages.
Config parse_config(std::string_view text, const std::string& source);

// The closest of `known` to `word` when it is close enough to be a likely typo.
std::optional<std::string> did_you_mean(std::string_view word, const std::vector<std::string>& known);

}  // namespace dsh
