// `dsh-confine doctor`: each backend this system has, whether it is usable here and why,
// its enforcement and gaps, the facts behind them, and the probe cache.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "../lib/error.hpp"
#include "../lib/git_protection.hpp"
#include "../platform/posix/process.hpp"
#include "../platform/platform.hpp"
#include "../platform/posix/state_store.hpp"
#include "common.hpp"
#include "verify.hpp"

namespace dsh::cli {

int run_doctor(const DoctorOptions& options) {
    const Config config = load_configuration(options.config);
    const std::vector<std::string> chain = config.backends.value_or(platform::default_backend_chain());
    std::optional<posix::FileProbeCache> cache;
    const std::optional<std::string> cache_path = config.probeCache ? cache_dir() : std::nullopt;
    if (cache_path) cache.emplace(*cache_path);

    std::vector<std::shared_ptr<const Backend>> backends;
    const platform::HostContext host = host_context(config);
    for (const auto& name : known_backend_names())
        if (auto backend = platform::make_backend(name, config, host)) backends.push_back(backend);
    SandboxProvider cached(backends, cache ? &*cache : nullptr, config.probeTimeoutMs);

    nlohmann::ordered_json out;
    out["system"] = platform::system_name();
    out["chain"] = chain;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    std::optional<std::string> selected;
    std::vector<std::shared_ptr<const Backend>> usable;
    for (const auto& backend : backends) {
        BackendReport report = backend->report();
        nlohmann::ordered_json item;
        item["name"] = report.name;
        item["inChain"] = std::find(chain.begin(), chain.end(), report.name) != chain.end();
        bool ok = report.usable;
        std::string reason = report.reason;
        nlohmann::ordered_json probe = nullptr;
        if (ok) {
            const ProbeOutcome was = cached.probe(*backend);  // the cached answer, or a fresh one
            const Expected<Usable> fresh = backend->probe(config.probeTimeoutMs);
            probe = {{"usable", fresh.has_value()}, {"reason", fresh ? "" : fresh.reason()},
                     {"cachedAnswer", was.usable}, {"wasCached", was.fromCache}};
            ok = fresh.has_value();
            if (!fresh) reason = "probe failed: " + fresh.reason();
        }
        item["usable"] = ok;
        item["reason"] = reason;
        item["enforcement"] = report.enforcement ? nlohmann::ordered_json(std::string(to_string(*report.enforcement)))
                                                 : nlohmann::ordered_json(nullptr);
        item["enforcementGaps"] = report.enforcementGaps;
        nlohmann::ordered_json facts = nlohmann::ordered_json::object();
        for (const auto& [key, value] : report.facts) facts[key] = value;
        item["facts"] = facts;
        item["probe"] = probe;
        // The hosts network: what the backend offers, when the backend itself is usable.
        const HostsNetworkSupport& hosts = report.hostsNetwork;
        const bool hosts_available = ok && hosts.available;
        item["hostsNetwork"] = {
            {"available", hosts_available},
            {"reason", hosts_available ? std::string() : !hosts.available ? hosts.reason : "the backend is unusable here"},
            {"enforcement", hosts_available && hosts.enforcement ? nlohmann::ordered_json(std::string(to_string(*hosts.enforcement)))
                                                                 : nlohmann::ordered_json(nullptr)},
            {"mechanism", hosts.mechanism},
            {"gaps", hosts_available ? hosts.gaps : std::vector<std::string>{}}};
        if (ok) usable.push_back(backend);
        if (ok && !selected && item["inChain"].get<bool>()) selected = report.name;
        list.push_back(item);
    }
    out["backends"] = list;
    out["selected"] = selected ? nlohmann::ordered_json(*selected) : nlohmann::ordered_json(nullptr);
    out["probeCache"] = {{"enabled", config.probeCache}, {"dir", cache_path ? nlohmann::ordered_json(*cache_path) : nlohmann::ordered_json(nullptr)}};
    // Whether the host's git takes a bare repository a command plants below a root, which no
    // backend can keep from being made (docs/security.md).
    nlohmann::ordered_json git = nullptr;
    if (const posix::ProgramLookup found = posix::resolve_program("git"); found.status == posix::Lookup::Found) {
        const posix::SpawnOutcome version = posix::spawn_with_timeout({found.path, "--version"}, 5000);
        const posix::SpawnOutcome setting = posix::spawn_with_timeout({found.path, "config", "--get", "safe.bareRepository"}, 5000);
        const HostGitBareRepositories host_git =
            assess_host_git(version.output, setting.exitCode == 0 ? std::string_view(setting.output) : std::string_view());
        git = {{"path", found.path},
               {"version", host_git.version},
               {"safeBareRepository", host_git.setting.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(host_git.setting)},
               {"takesImplicitBareRepositories", host_git.takesImplicitBareRepositories},
               {"advice", host_git.advice}};
    }
    out["git"] = git;

    int status = 0;
    if (options.verify) {
        nlohmann::ordered_json verified = nlohmann::ordered_json::array();
        for (const auto& backend : usable) {
            VerifyReport report = verify_backend(*backend);
            verified.push_back(verify_json(report));
            if (report.fullButEscaped || report.unnamedEscape || report.overBlocked) status = 1;
        }
        out["verify"] = verified;
    }

    if (options.json) {
        write_out(out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        return status;
    }
    std::string text = "system: " + platform::system_name() + "\nchain: ";
    for (std::size_t i = 0; i < chain.size(); ++i) text += (i ? ", " : "") + chain[i];
    text += "\nselected: " + selected.value_or("none (a confined mode fails with SANDBOX_UNAVAILABLE)") + "\n";
    for (const auto& item : list) {
        text += "\n" + item["name"].get<std::string>() + ": " + (item["usable"].get<bool>() ? "usable" : "unusable");
        if (!item["usable"].get<bool>()) text += " (" + item["reason"].get<std::string>() + ")";
        text += "\n";
        if (!item["enforcement"].is_null()) text += "  enforcement: " + item["enforcement"].get<std::string>() + "\n";
        for (const auto& gap : item["enforcementGaps"]) text += "  gap: " + gap.get<std::string>() + "\n";
        for (const auto& [key, value] : item["facts"].items()) text += "  " + key + ": " + value.get<std::string>() + "\n";
        const auto& hosts = item["hostsNetwork"];
        if (hosts["available"].get<bool>()) {
            text += "  hosts network: " + hosts["enforcement"].get<std::string>() + ": " + hosts["mechanism"].get<std::string>() + "\n";
            for (const auto& gap : hosts["gaps"]) text += "  hosts network gap: " + gap.get<std::string>() + "\n";
        } else {
            text += "  hosts network: unavailable (" + hosts["reason"].get<std::string>() + ")\n";
        }
    }
    text += "\nprobe cache: " + (cache_path && config.probeCache ? *cache_path : std::string("disabled")) + "\n";
    if (git.is_null()) {
        text += "git: not found on PATH\n";
    } else if (git["takesImplicitBareRepositories"].get<bool>()) {
        text += "git: " + git["path"].get<std::string>() + " " + git["version"].get<std::string>() +
                " takes a bare repository a command plants in a subdirectory of the workspace (safe.bareRepository is " +
                (git["safeBareRepository"].is_null() ? std::string("unset") : git["safeBareRepository"].get<std::string>()) +
                "); to refuse them: " + git["advice"].get<std::string>() + "\n";
    } else {
        text += "git: " + git["path"].get<std::string>() + " " + git["version"].get<std::string>() +
                " refuses implicit bare repositories (safe.bareRepository = explicit)\n";
    }
    if (options.verify) text += render_verify_text(out["verify"]);
    write_out(text);
    return status;
}

}  // namespace dsh::cli
