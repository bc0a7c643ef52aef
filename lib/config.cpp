#include "config.hpp"

#include <algorithm>
#include <cstring>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "error.hpp"
#include "host_pattern.hpp"
#include "policy.hpp"

namespace dsh {
namespace {

// toml++ before 3.4 (Debian 12 has 3.3.0) reaches a __builtin_unreachable, undefined behaviour,
// when it asks whether a code point in U+00A1-U+0499, U+2C5E-U+3057 (but U+3000) or
// U+FB26-U+FEFE is whitespace, which it does between tokens and after a line-ending backslash
// in a multi-line string (upstream issues marzer/tomlplusplus#190 and #295). So before such a
// text is parsed, each of those code points is moved to plane 15, U+F0000 + c, which toml++
// takes like any other non-ASCII character (in comments and strings; elsewhere an error), and
// every string read back, key, value or message, is moved home. The move keeps one code point
// for one, so line and column stay right. A text that already holds a code point that would be
// moved home could not be told apart, and is refused (raw, or as any `\U000F` escape).
#if TOML_LIB_MAJOR < 3 || (TOML_LIB_MAJOR == 3 && TOML_LIB_MINOR < 4)
constexpr bool kShieldCodePoints = true;
#else
constexpr bool kShieldCodePoints = false;
#endif
constexpr char32_t kPlane15 = 0xF0000;

bool toml_mishandles(char32_t c) {
    return (c >= 0xA1 && c <= 0x499) || (c >= 0x2C5E && c <= 0x3057 && c != 0x3000) || (c >= 0xFB26 && c <= 0xFEFE);
}

// The code point a well-formed UTF-8 sequence at TEXT[I] encodes and its length, or 0 and 0.
std::pair<char32_t, std::size_t> decode(std::string_view text, std::size_t i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
    const auto follows = [&](std::size_t k) { return i + k < text.size() && (byte(k) & 0xC0) == 0x80; };
    const unsigned char b0 = byte(0);
    if (b0 >= 0xC2 && b0 <= 0xDF && follows(1)) return {((b0 & 0x1FU) << 6) | (byte(1) & 0x3FU), 2};
    if (b0 >= 0xE0 && b0 <= 0xEF && follows(1) && follows(2)) {
        const char32_t c = ((b0 & 0x0FU) << 12) | ((byte(1) & 0x3FU) << 6) | (byte(2) & 0x3FU);
        if (c >= 0x800 && (c < 0xD800 || c > 0xDFFF)) return {c, 3};
    }
    if (b0 >= 0xF0 && b0 <= 0xF4 && follows(1) && follows(2) && follows(3)) {
        const char32_t c =
            ((b0 & 0x07U) << 18) | ((byte(1) & 0x3FU) << 12) | ((byte(2) & 0x3FU) << 6) | (byte(3) & 0x3FU);
        if (c >= 0x10000 && c <= 0x10FFFF) return {c, 4};
    }
    return {0, 0};
}

void encode(char32_t c, std::string& out) {
    if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    }
    out += static_cast<char>(0x80 | (c & 0x3F));
}

// Maps each code point for which MOVE answers a new one; everything else is copied byte for byte.
template <typename Move>
std::string remap(std::string_view text, Move move) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto [c, length] = decode(text, i);
        const char32_t moved = length > 0 ? move(c) : 0;
        if (moved != 0) {
            encode(moved, out);
            i += length;
        } else {
            out += text[i++];
        }
    }
    return out;
}

// Where a shielded code point came from: C moved home, or 0 when C is not one the shield makes.
char32_t home_of(char32_t c) {
    return c >= kPlane15 && c < kPlane15 + 0x10000 && toml_mishandles(c - kPlane15) ? c - kPlane15 : 0;
}

// TEXT read back from a shielded document (SHIELDED), or from one that was not.
std::string unshield(std::string_view text, bool shielded) {
    if (!shielded) return std::string(text);
    return remap(text, home_of);
}

// TEXT shielded, or nothing when it needs no shield.
std::optional<std::string> shield(std::string_view text, const std::string& source) {
    if (!kShieldCodePoints) return std::nullopt;
    bool needed = false, ambiguous = false;
    for (std::size_t i = 0; i < text.size();) {
        const auto [c, length] = decode(text, i);
        needed = needed || (length > 0 && toml_mishandles(c));
        ambiguous = ambiguous || (length > 0 && home_of(c) != 0);
        i += length > 0 ? length : 1;
    }
    if (!needed) return std::nullopt;
    // A `\U000F....` escape can make such a code point too (its digits are not worth decoding).
    ambiguous = ambiguous || text.find("\\U000F") != std::string_view::npos || text.find("\\U000f") != std::string_view::npos;
    if (ambiguous)
        throw Error(code::Config, source + ": holds code points of plane 15 (U+F0000-U+FFFFF), which this build's "
                                           "TOML parser cannot be given together with the text's other non-ASCII characters");
    return remap(text, [](char32_t c) { return toml_mishandles(c) ? c + kPlane15 : 0; });
}

std::string position(const std::string& file, const toml::source_region& where) {
    return file + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

[[noreturn]] void config_error(const std::string& file, const toml::source_region& where,
                               const std::string& message) {
    throw Error(code::Config, position(file, where) + ": " + message);
}

std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
}

std::string_view type_name(toml::node_type type) {
    switch (type) {
        case toml::node_type::table: return "a table";
        case toml::node_type::array: return "an array";
        case toml::node_type::string: return "a string";
        case toml::node_type::integer: return "an integer";
        case toml::node_type::floating_point: return "a float";
        case toml::node_type::boolean: return "a boolean";
        case toml::node_type::date: return "a date";
        case toml::node_type::time: return "a time";
        case toml::node_type::date_time: return "a date-time";
        default: return "nothing";
    }
}

// Walks one table, rejecting keys it does not know.
class TableReader {
public:
    TableReader(const std::string& file, bool shielded, const toml::table& table, std::string name,
                std::vector<std::string> known)
        : file_(file), shielded_(shielded), table_(table), name_(std::move(name)), known_(std::move(known)) {
        // The first unknown key in the file, not in the table's (sorted) order.
        const toml::key* first = nullptr;
        for (auto&& [key, node] : table_) {
            if (std::find(known_.begin(), known_.end(), std::string(key.str())) != known_.end()) continue;
            const auto& at = key.source().begin;
            if (!first || at.line < first->source().begin.line ||
                (at.line == first->source().begin.line && at.column < first->source().begin.column))
                first = &key;
        }
        if (first) {
            const std::string k = unshield(first->str(), shielded_);
            std::string message = "unknown key '" + k + "' in " + name_;
            if (auto close = did_you_mean(k, known_)) message += " (did you mean '" + *close + "'?)";
            message += "; known keys: " + join(known_);
            config_error(file_, first->source(), message);
        }
    }

    const toml::node* find(std::string_view key) const { return table_.get(key); }

    [[noreturn]] void wrong_type(std::string_view key, const toml::node& node,
                                 std::string_view expected) const {
        config_error(file_, node.source(),
                     std::string(name_) + " " + std::string(key) + " must be " +
                         std::string(expected) + ", not " + std::string(type_name(node.type())));
    }

    [[noreturn]] void bad_value(const toml::node& node, const std::string& message) const {
        config_error(file_, node.source(), message);
    }

    std::optional<std::string> string(std::string_view key) const {
        const toml::node* node = find(key);
        if (!node) return std::nullopt;
        if (!node->is_string()) wrong_type(key, *node, "a string");
        return unshield(*node->value<std::string>(), shielded_);
    }

    std::optional<bool> boolean(std::string_view key) const {
        const toml::node* node = find(key);
        if (!node) return std::nullopt;
        if (!node->is_boolean()) wrong_type(key, *node, "a boolean");
        return *node->value<bool>();
    }

    std::optional<std::int64_t> integer(std::string_view key) const {
        const toml::node* node = find(key);
        if (!node) return std::nullopt;
        if (!node->is_integer()) wrong_type(key, *node, "an integer");
        return *node->value<std::int64_t>();
    }

    std::optional<std::vector<std::string>> strings(std::string_view key) const {
        const toml::node* node = find(key);
        if (!node) return std::nullopt;
        const toml::array* array = node->as_array();
        if (!array) wrong_type(key, *node, "an array of strings");
        std::vector<std::string> out;
        for (const toml::node& item : *array) {
            if (!item.is_string()) wrong_type(key, item, "an array of strings");
            out.push_back(unshield(*item.value<std::string>(), shielded_));
        }
        return out;
    }

    const toml::table* table(std::string_view key) const {
        const toml::node* node = find(key);
        if (!node) return nullptr;
        if (!node->is_table()) wrong_type(key, *node, "a table");
        return node->as_table();
    }

    const std::string& file() const { return file_; }
    bool shielded() const { return shielded_; }

private:
    const std::string& file_;
    bool shielded_;
    const toml::table& table_;
    std::string name_;
    std::vector<std::string> known_;
};

void read_backend(const TableReader& backends, const std::string& name, BackendConfig& out,
                  bool has_path, bool has_abi = false) {
    const toml::table* table = backends.table(name);
    if (!table) return;
    std::vector<std::string> known = {"informational_lines"};
    if (has_path) known.insert(known.begin(), "path");
    if (has_abi) known.push_back("max_abi");
    TableReader reader(backends.file(), backends.shielded(), *table, "[backend." + name + "]", known);
    if (has_path) {
        if (auto path = reader.string("path")) {
            if (!is_absolute_path(*path))
                reader.bad_value(*reader.find("path"),
                                 "[backend." + name + "] path must be an absolute path");
            out.path = *path;
        }
    }
    if (auto lines = reader.strings("informational_lines")) {
        for (const auto& line : *lines)
            if (line.empty())
                reader.bad_value(*reader.find("informational_lines"),
                                 "[backend." + name + "] informational_lines must not contain an empty line");
        out.informationalLines = *lines;
    }
    if (has_abi) {
        if (auto abi = reader.integer("max_abi")) {
            if (*abi < 1 || *abi > 1000)
                reader.bad_value(*reader.find("max_abi"), "[backend." + name + "] max_abi must be a Landlock ABI of 1 or more");
            out.maxAbi = static_cast<int>(*abi);
        }
    }
}

// A duration, size or count of [run] as its text: a string as written, an integer as its digits
// (a bare number: seconds, bytes, processes), both parsed by the grammar `run`'s options use.
std::optional<std::string> number_text(const TableReader& reader, std::string_view key) {
    const toml::node* node = reader.find(key);
    if (!node) return std::nullopt;
    if (const auto number = node->value_exact<std::int64_t>()) return std::to_string(*number);
    if (!node->is_string()) reader.wrong_type(key, *node, "a string or an integer");
    return unshield(*node->value<std::string>(), reader.shielded());
}

void read_run(const TableReader& reader, RunBounds& out) {
    const auto duration = [&](const char* key) -> std::optional<Milliseconds> {
        const auto text = number_text(reader, key);
        if (!text) return std::nullopt;
        const auto parsed = parse_duration(*text);
        if (!parsed) reader.bad_value(*reader.find(key), std::string("[run] ") + key + ": " + parsed.reason());
        return *parsed;
    };
    out.timeout = duration("timeout");
    out.killAfter = duration("kill_after");
    const toml::table* limits = reader.table("limits");
    if (!limits) return;
    const TableReader table(reader.file(), reader.shielded(), *limits, "[run.limits]", limit_names());
    for (const auto& key : limit_names()) {
        const auto text = number_text(table, key);
        if (!text) continue;
        const LimitName name = *parse_limit_name(key);
        const auto value = parse_limit_value(name, *text);
        if (!value) table.bad_value(*table.find(key), "[run.limits] " + key + ": " + value.reason());
        out.limits.set(name, *value);
    }
}

// A config file is a few hundred bytes; one far larger is a mistake, not a policy to parse.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

std::string read_file(const std::string& path) {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxConfigBytes)
        throw Error(code::Config, path + ": " + std::to_string(size) + " bytes; a config file may be at most 1 MiB");
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        const int error = errno;
        throw Error(code::Config, path + ": cannot be read: " + std::strerror(error));
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

const std::vector<std::string>& known_backend_names() {
    static const std::vector<std::string> names = {"bwrap", "landlock", "seatbelt", "restricted-token"};
    return names;
}

const BackendConfig& Config::backend(std::string_view name) const {
    if (name == "bwrap") return bwrap;
    if (name == "landlock") return landlock;
    if (name == "seatbelt") return seatbelt;
    return restrictedToken;
}

std::optional<std::string> did_you_mean(std::string_view word, const std::vector<std::string>& known) {
    std::optional<std::string> best;
    std::size_t best_distance = 0;
    for (const auto& candidate : known) {
        // Levenshtein distance, one row at a time.
        std::vector<std::size_t> row(candidate.size() + 1);
        for (std::size_t j = 0; j <= candidate.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= word.size(); ++i) {
            std::size_t diagonal = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= candidate.size(); ++j) {
                const std::size_t up = row[j];
                const bool same = word[i - 1] == candidate[j - 1];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
                diagonal = up;
            }
        }
        const std::size_t distance = row[candidate.size()];
        if (!best || distance < best_distance) {
            best = candidate;
            best_distance = distance;
        }
    }
    const std::size_t limit = std::max<std::size_t>(2, word.size() / 3);
    if (best && best_distance <= limit && best_distance < word.size()) return best;
    return std::nullopt;
}

Config parse_config(std::string_view text, const std::string& source) {
    const std::optional<std::string> shielded_text = shield(text, source);
    const bool shielded = shielded_text.has_value();
    toml::table root;
    try {
        root = toml::parse(shielded ? std::string_view(*shielded_text) : text, source);
    } catch (const toml::parse_error& e) {
        config_error(source, e.source(), unshield(e.description(), shielded));
    }

    Config config;
    config.source = source;
    TableReader top(source, shielded, root, "the top level", {"sandbox", "network", "provider", "backend", "run"});

    if (const toml::table* sandbox = top.table("sandbox")) {
        TableReader reader(source, shielded, *sandbox, "[sandbox]",
                           {"default_mode", "workspace_root", "writable_roots", "protected_paths", "deny_read", "network",
                            "allow_broad_roots", "git"});
        if (auto mode = reader.string("default_mode")) {
            config.defaultMode = parse_sandbox_mode(*mode);
            if (!config.defaultMode)
                reader.bad_value(*reader.find("default_mode"),
                                 "[sandbox] default_mode '" + *mode +
                                     "' is not a mode; modes: read-only, workspace-write, danger-full-access");
        }
        if (auto root_dir = reader.string("workspace_root")) {
            if (!is_absolute_path(*root_dir))
                reader.bad_value(*reader.find("workspace_root"),
                                 "[sandbox] workspace_root must be an absolute path");
            config.workspaceRoot = *root_dir;
        }
        // Absolute, or under the home directory: `~/...`, expanded when the policy is resolved.
        const auto host_paths = [&](const char* key) -> std::optional<std::vector<std::string>> {
            auto paths = reader.strings(key);
            if (!paths) return std::nullopt;
            for (const auto& path : *paths)
                if (!is_absolute_path(path) && path.rfind("~/", 0) != 0)
                    reader.bad_value(*reader.find(key), std::string("[sandbox] ") + key + ": '" + path +
                                                            "' must be an absolute path or start with ~/");
            return paths;
        };
        config.writableRoots = host_paths("writable_roots");
        config.denyRead = host_paths("deny_read");
        if (auto paths = reader.strings("protected_paths")) {
            for (const auto& path : *paths) {
                bool climbs = false;
                for (std::size_t start = 0; start <= path.size();) {
                    const std::size_t end = std::min(path.find('/', start), path.size());
                    if (path.compare(start, end - start, "..") == 0) climbs = true;
                    start = end + 1;
                }
                if (path.empty() || path.front() == '/' || path.front() == '~' || climbs)
                    reader.bad_value(*reader.find("protected_paths"),
                                     "[sandbox] protected_paths: '" + path +
                                         "' must be a relative path inside each writable root (no '..')");
            }
            config.protectedPaths = *paths;
        }
        if (auto network = reader.string("network")) {
            config.network = parse_network_policy(*network);
            if (!config.network)
                reader.bad_value(*reader.find("network"), "[sandbox] network '" + *network + "' must be allow, deny or hosts");
        }
        if (auto broad = reader.boolean("allow_broad_roots")) config.allowBroadRoots = *broad;
        if (auto git = reader.string("git")) {
            config.git = parse_git_mode(*git);
            if (!config.git)
                reader.bad_value(*reader.find("git"), "[sandbox] git '" + *git + "' must be protect, read-only or writable");
        }
    }

    if (const toml::table* network = top.table("network")) {
        TableReader reader(source, shielded, *network, "[network]", {"allow_hosts"});
        if (auto hosts = reader.strings("allow_hosts")) {
            std::vector<std::string> canonical;
            for (const auto& host : *hosts) {
                auto pattern = parse_host_pattern(host);
                if (!pattern) reader.bad_value(*reader.find("allow_hosts"), "[network] allow_hosts: " + pattern.reason());
                canonical.push_back(to_string(*pattern));
            }
            std::sort(canonical.begin(), canonical.end());
            canonical.erase(std::unique(canonical.begin(), canonical.end()), canonical.end());
            // Naming hosts puts the network in its hosts state; [sandbox] network may say so too,
            // but not the opposite.
            if (!canonical.empty() && config.network && *config.network != NetworkPolicy::Hosts)
                reader.bad_value(*reader.find("allow_hosts"), "[network] allow_hosts names hosts to reach, and [sandbox] network = '" +
                                                                  std::string(to_string(*config.network)) + "' says otherwise");
            if (!canonical.empty()) config.network = NetworkPolicy::Hosts;
            config.allowHosts = canonical;
        }
    }
    if (config.network == NetworkPolicy::Hosts && (!config.allowHosts || config.allowHosts->empty()))
        config_error(source, root["sandbox"]["network"].node()->source(),
                     "[sandbox] network = 'hosts' needs [network] allow_hosts, the hosts to allow");

    if (const toml::table* provider = top.table("provider")) {
        TableReader reader(source, shielded, *provider, "[provider]", {"backends", "probe_timeout_ms", "probe_cache"});
        if (auto chain = reader.strings("backends")) {
            const toml::node& node = *reader.find("backends");
            if (chain->empty()) reader.bad_value(node, "[provider] backends must name at least one backend");
            for (const auto& name : *chain) {
                const auto& known = known_backend_names();
                if (std::find(known.begin(), known.end(), name) != known.end()) continue;
                std::string message = "[provider] backends: unknown backend '" + name + "'";
                if (auto close = did_you_mean(name, known)) message += " (did you mean '" + *close + "'?)";
                reader.bad_value(node, message + "; backends: " + join(known));
            }
            config.backends = *chain;
        }
        if (auto timeout = reader.integer("probe_timeout_ms")) {
            if (*timeout < 1 || *timeout > 600000)
                reader.bad_value(*reader.find("probe_timeout_ms"),
                                 "[provider] probe_timeout_ms must be between 1 and 600000");
            config.probeTimeoutMs = static_cast<int>(*timeout);
        }
        if (auto cache = reader.boolean("probe_cache")) config.probeCache = *cache;
    }

    if (const toml::table* run = top.table("run")) read_run(TableReader(source, shielded, *run, "[run]", {"timeout", "kill_after", "limits"}), config.run);

    if (const toml::table* backend = top.table("backend")) {
        TableReader reader(source, shielded, *backend, "[backend]", known_backend_names());
        read_backend(reader, "bwrap", config.bwrap, true);
        read_backend(reader, "landlock", config.landlock, false, true);
        read_backend(reader, "seatbelt", config.seatbelt, true);
        read_backend(reader, "restricted-token", config.restrictedToken, false);
    }
    return config;
}

Config load_config(const ConfigLookup& lookup) {
    namespace fs = std::filesystem;
    auto load_required = [](const std::string& path, const char* what) {
        std::error_code ec;
        if (!fs::exists(path, ec)) throw Error(code::Config, path + ": no such config file (from " + what + ")");
        if (fs::is_directory(path, ec)) throw Error(code::Config, path + ": is a directory, not a config file");
        return parse_config(read_file(path), path);
    };
    if (lookup.explicitFile) return load_required(*lookup.explicitFile, "--config");
    if (lookup.envFile) return load_required(*lookup.envFile, "DSH_CONFINE_CONFIG");
    for (const auto& candidate : lookup.candidates) {
        std::error_code ec;
        if (!fs::exists(candidate, ec)) continue;
        if (fs::is_directory(candidate, ec)) throw Error(code::Config, candidate + ": is a directory, not a config file");
        return parse_config(read_file(candidate), candidate);
    }
    return Config{};
}

}  // namespace dsh
