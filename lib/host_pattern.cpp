#include "host_pattern.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <variant>
#include <vector>

namespace dsh {
namespace {

constexpr std::size_t kMaxName = 253;
constexpr std::size_t kMaxLabel = 63;

using Groups = std::array<std::uint16_t, 8>;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower(char c) { return c >= 'a' && c <= 'z'; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

int hex_value(char c) {
    if (is_digit(c)) return c - '0';
    c = lower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// The pattern as a message shows it: printable ASCII as is, other bytes as \xNN, so the
// message stays one line whatever was given.
std::string shown(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte < 0x7f && c != '\\') {
            out += c;
        } else {
            out += "\\x";
            out += kHex[byte >> 4];
            out += kHex[byte & 0xf];
        }
    }
    return out;
}

// Dotted decimal, exactly four numbers 0..255 without leading zeros: the one form every
// resolver reads the same way (inet_aton also takes 127.1, 0x7f.0.0.1 and octal 010.0.0.1).
std::optional<std::array<std::uint8_t, 4>> parse_ipv4(std::string_view text) {
    std::array<std::uint8_t, 4> octets{};
    std::size_t at = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        if (i > 0) {
            if (at >= text.size() || text[at] != '.') return std::nullopt;
            ++at;
        }
        std::size_t end = at;
        while (end < text.size() && is_digit(text[end]) && end - at < 4) ++end;
        const std::string_view digits = text.substr(at, end - at);
        if (digits.empty() || digits.size() > 3 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
        unsigned value = 0;
        for (char c : digits) value = value * 10 + static_cast<unsigned>(c - '0');
        if (value > 255) return std::nullopt;
        octets[i] = static_cast<std::uint8_t>(value);
        at = end;
    }
    if (at != text.size()) return std::nullopt;
    return octets;
}

std::string ipv4_text(const std::array<std::uint8_t, 4>& octets) {
    std::string out;
    for (std::size_t i = 0; i < 4; ++i) {
        if (i > 0) out += '.';
        out += std::to_string(octets[i]);
    }
    return out;
}

// The groups of one side of "::" (or of the whole address): hex groups of 1 to 4 digits, the
// last of which may be a dotted IPv4 address standing for two groups when `last_side`.
bool parse_ipv6_side(std::string_view text, bool last_side, std::vector<std::uint16_t>& groups) {
    if (text.empty()) return true;
    std::size_t at = 0;
    for (;;) {
        const std::size_t colon = text.find(':', at);
        const std::string_view part = text.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at);
        if (colon == std::string_view::npos && last_side && part.find('.') != std::string_view::npos) {
            const auto v4 = parse_ipv4(part);
            if (!v4) return false;
            groups.push_back(static_cast<std::uint16_t>(((*v4)[0] << 8) | (*v4)[1]));
            groups.push_back(static_cast<std::uint16_t>(((*v4)[2] << 8) | (*v4)[3]));
            return true;
        }
        if (part.empty() || part.size() > 4) return false;
        unsigned value = 0;
        for (char c : part) {
            const int digit = hex_value(c);
            if (digit < 0) return false;
            value = value * 16 + static_cast<unsigned>(digit);
        }
        groups.push_back(static_cast<std::uint16_t>(value));
        if (groups.size() > 8) return false;
        if (colon == std::string_view::npos) return true;
        at = colon + 1;
    }
}

// RFC 4291's text forms: eight groups, or fewer around one "::", the last 32 bits optionally
// in dotted decimal. No zone index (fe80::1%eth0).
std::optional<Groups> parse_ipv6(std::string_view text) {
    std::vector<std::uint16_t> head;
    std::vector<std::uint16_t> tail;
    const std::size_t gap = text.find("::");
    if (gap == std::string_view::npos) {
        if (!parse_ipv6_side(text, true, head) || head.size() != 8) return std::nullopt;
    } else {
        if (text.find("::", gap + 1) != std::string_view::npos) return std::nullopt;
        if (!parse_ipv6_side(text.substr(0, gap), false, head)) return std::nullopt;
        if (!parse_ipv6_side(text.substr(gap + 2), true, tail)) return std::nullopt;
        if (head.size() + tail.size() > 7) return std::nullopt;
    }
    Groups groups{};
    std::copy(head.begin(), head.end(), groups.begin());
    std::copy(tail.begin(), tail.end(), groups.end() - static_cast<std::ptrdiff_t>(tail.size()));
    return groups;
}

// RFC 5952: lower-case hex without leading zeros, the longest run of two or more zero groups
// (the first of equal ones) as "::", and an IPv4-mapped address's last 32 bits in dotted decimal.
std::string ipv6_text(const Groups& groups) {
    static constexpr char kHex[] = "0123456789abcdef";
    auto group_text = [](std::uint16_t value) {
        std::string out;
        bool started = false;
        for (int shift = 12; shift >= 0; shift -= 4) {
            const unsigned digit = (value >> shift) & 0xfu;
            if (digit != 0 || started || shift == 0) {
                out += kHex[digit];
                started = true;
            }
        }
        return out;
    };
    const bool mapped = std::all_of(groups.begin(), groups.begin() + 5, [](std::uint16_t g) { return g == 0; }) &&
                        groups[5] == 0xffff;
    const std::size_t hex_groups = mapped ? 6 : 8;
    std::size_t best_at = hex_groups;
    std::size_t best_length = 1;
    for (std::size_t i = 0; i < hex_groups;) {
        if (groups[i] != 0) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < hex_groups && groups[j] == 0) ++j;
        if (j - i > best_length) {
            best_at = i;
            best_length = j - i;
        }
        i = j;
    }
    std::string out;
    for (std::size_t i = 0; i < hex_groups; ++i) {
        if (i == best_at) {
            out += "::";
            i += best_length - 1;
            continue;
        }
        if (!out.empty() && out.back() != ':') out += ':';
        out += group_text(groups[i]);
    }
    if (mapped) {
        if (!out.empty() && out.back() != ':') out += ':';
        out += std::to_string(groups[6] >> 8) + '.' + std::to_string(groups[6] & 0xff) + '.' +
               std::to_string(groups[7] >> 8) + '.' + std::to_string(groups[7] & 0xff);
    }
    return out;
}

struct Failure {
    std::string rule;
};

// A host name's rules, on the text with its trailing dot already removed. Returns the
// lower-case name, or the rule it breaks.
std::variant<std::string, Failure> check_name(std::string_view text) {
    if (text.empty()) return Failure{"the host name is empty"};
    if (text.size() > kMaxName) return Failure{"a host name is at most 253 characters"};
    std::string name(text);
    for (char& c : name) c = lower(c);
    std::size_t at = 0;
    std::string_view last;
    for (;;) {
        const std::size_t dot = name.find('.', at);
        const std::string_view label =
            std::string_view(name).substr(at, dot == std::string::npos ? std::string::npos : dot - at);
        if (label.empty()) return Failure{"a host name has no empty labels (\"..\", or a leading dot)"};
        if (label.size() > kMaxLabel) return Failure{"a label of a host name is at most 63 characters"};
        for (char c : label)
            if (!is_lower(c) && !is_digit(c) && c != '-')
                return Failure{"a host name holds only letters, digits, hyphens and dots"};
        if (label.front() == '-' || label.back() == '-')
            return Failure{"a label of a host name does not begin or end with a hyphen"};
        last = label;
        if (dot == std::string::npos) break;
        at = dot + 1;
    }
    if (!is_lower(last.front())) {
        const bool numeric = std::all_of(name.begin(), name.end(), [](char c) { return is_digit(c) || c == '.'; });
        if (numeric) return Failure{"an IPv4 address is four decimal numbers from 0 to 255 without leading zeros"};
        return Failure{"the last label of a host name begins with a letter (it could be read as an address)"};
    }
    return name;
}

// The host part of a pattern or a request, without a port: a name, an IPv4 address or an IPv6
// address (already unbracketed). `wildcard_allowed` for patterns.
std::variant<HostPattern, Failure> parse_host(std::string_view text, bool wildcard_allowed) {
    HostPattern out;
    if (text.find(':') != std::string_view::npos) {
        if (text.find('%') != std::string_view::npos)
            return Failure{"an IPv6 address has no zone index (\"%\")"};
        const auto groups = parse_ipv6(text);
        if (!groups) return Failure{"not a valid IPv6 address"};
        out.kind = HostKind::IPv6;
        out.host = ipv6_text(*groups);
        return out;
    }
    if (text.size() > 1 && text.back() == '.') text.remove_suffix(1);
    if (const auto v4 = parse_ipv4(text)) {
        out.kind = HostKind::IPv4;
        out.host = ipv4_text(*v4);
        return out;
    }
    if (text.find('*') != std::string_view::npos) {
        if (!wildcard_allowed) return Failure{"a host name holds only letters, digits, hyphens and dots"};
        if (text == "*") return Failure{"\"*\" alone would allow every host: name the hosts, or use --network allow"};
        if (!text.starts_with("*.") || text.find('*', 1) != std::string_view::npos)
            return Failure{"\"*\" is allowed only as the whole first label, as in *.example.org"};
        text.remove_prefix(2);
        if (text.find('.') == std::string_view::npos)
            return Failure{"a wildcard needs at least two labels after \"*.\", as in *.example.org"};
        if (text.size() > kMaxName - 2) return Failure{"a host name is at most 253 characters"};
        out.kind = HostKind::Wildcard;
    }
    auto name = check_name(text);
    if (auto* failure = std::get_if<Failure>(&name)) return *failure;
    out.host = std::move(std::get<std::string>(name));
    return out;
}

std::variant<std::uint16_t, Failure> parse_port(std::string_view digits) {
    if (digits.empty()) return Failure{"the port after \":\" is empty"};
    if (digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), is_digit))
        return Failure{"a port is a number from 1 to 65535"};
    unsigned value = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (value < 1 || value > 65535) return Failure{"a port is a number from 1 to 65535"};
    return static_cast<std::uint16_t>(value);
}

std::variant<HostPattern, Failure> parse_pattern(std::string_view text) {
    if (text.empty()) return Failure{"the pattern is empty"};
    // One pass over the text for what decides its form: a list gives a hundred patterns.
    bool url = false;
    bool non_ascii = false;
    std::size_t colons = 0;
    for (const char c : text) {
        url = url || c == '/' || c == '?' || c == '#' || c == '@';
        non_ascii = non_ascii || static_cast<unsigned char>(c) >= 0x80;
        colons += c == ':' ? 1 : 0;
    }
    if (url) return Failure{"a pattern is a host with an optional port, not a URL (example.org, example.org:443)"};
    if (non_ascii)
        return Failure{"an internationalized name is given in its ASCII (punycode) form, as in xn--bcher-kva.example"};
    std::string_view host = text;
    std::optional<std::string_view> port;
    if (text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos) return Failure{"\"[\" without \"]\""};
        host = text.substr(1, close - 1);
        const std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return Failure{"only \":PORT\" may follow \"]\""};
            port = rest.substr(1);
        }
        if (host.find(':') == std::string_view::npos) return Failure{"brackets are only for IPv6 addresses"};
    } else {
        if (colons == 1) {
            const std::size_t colon = text.find(':');
            host = text.substr(0, colon);
            port = text.substr(colon + 1);
        }
        // Two or more: a bare IPv6 address, which takes no port (write [::1]:443 for one).
    }
    auto parsed = parse_host(host, true);
    if (auto* failure = std::get_if<Failure>(&parsed)) return *failure;
    HostPattern pattern = std::move(std::get<HostPattern>(parsed));
    if (port) {
        const auto number = parse_port(*port);
        if (const auto* failure = std::get_if<Failure>(&number)) return *failure;
        pattern.port = std::get<std::uint16_t>(number);
    }
    return pattern;
}

}  // namespace

Expected<HostPattern> parse_host_pattern(std::string_view text) {
    auto parsed = parse_pattern(text);
    if (auto* failure = std::get_if<Failure>(&parsed))
        return Expected<HostPattern>::failure("host pattern \"" + shown(text) + "\": " + failure->rule);
    return std::move(std::get<HostPattern>(parsed));
}

std::string to_string(const HostPattern& pattern) {
    const bool bracketed = pattern.port && pattern.kind == HostKind::IPv6;
    std::string out;
    out.reserve(pattern.host.size() + 10);  // "*." or "[]", and ":65535"
    if (pattern.kind == HostKind::Wildcard) out += "*.";
    if (bracketed) out += '[';
    out += pattern.host;
    if (bracketed) out += ']';
    if (pattern.port) {
        char digits[8];
        const auto end = std::to_chars(digits, digits + sizeof digits, *pattern.port).ptr;
        out += ':';
        out.append(digits, end);
    }
    return out;
}

Expected<RequestedHost> canonical_host(std::string_view text) {
    if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
        text = text.substr(1, text.size() - 2);
        if (text.find(':') == std::string_view::npos)
            return Expected<RequestedHost>::failure("host \"" + shown(text) + "\": brackets are only for IPv6 addresses");
    }
    if (text.empty()) return Expected<RequestedHost>::failure("the host is empty");
    if (std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; }))
        return Expected<RequestedHost>::failure("host \"" + shown(text) +
                                                "\": an internationalized name is given in its ASCII (punycode) form");
    auto parsed = parse_host(text, false);
    if (auto* failure = std::get_if<Failure>(&parsed))
        return Expected<RequestedHost>::failure("host \"" + shown(text) + "\": " + failure->rule);
    auto& host = std::get<HostPattern>(parsed);
    return RequestedHost{host.kind, std::move(host.host)};
}

Expected<Authority> parse_authority(std::string_view text) {
    std::string_view host = text;
    std::optional<std::string_view> port;
    if (text.starts_with('[')) {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos)
            return Expected<Authority>::failure("authority \"" + shown(text) + "\": \"[\" without \"]\"");
        host = text.substr(0, close + 1);
        const std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':')
                return Expected<Authority>::failure("authority \"" + shown(text) + "\": only \":PORT\" may follow \"]\"");
            port = rest.substr(1);
        }
    } else if (const std::size_t colon = text.find(':'); colon != std::string_view::npos) {
        if (text.find(':', colon + 1) != std::string_view::npos)
            return Expected<Authority>::failure("authority \"" + shown(text) + "\": an IPv6 address is written in brackets");
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    auto canonical = canonical_host(host);
    if (!canonical) return Expected<Authority>::failure(canonical.reason());
    Authority authority{std::move(canonical).value(), std::nullopt};
    if (port) {
        const auto number = parse_port(*port);
        if (const auto* failure = std::get_if<Failure>(&number))
            return Expected<Authority>::failure("authority \"" + shown(text) + "\": " + failure->rule);
        authority.port = std::get<std::uint16_t>(number);
    }
    return authority;
}

std::string host_port_text(const RequestedHost& host, std::uint16_t port) {
    if (host.kind == HostKind::IPv6) return "[" + host.host + "]:" + std::to_string(port);
    return host.host + ":" + std::to_string(port);
}

bool matches(const HostPattern& pattern, const RequestedHost& host, std::uint16_t port) {
    if (port == 0 || (pattern.port && *pattern.port != port)) return false;
    if (pattern.kind == HostKind::Wildcard)
        return host.kind == HostKind::Name && host.host.size() > pattern.host.size() + 1 &&
               host.host.ends_with(pattern.host) && host.host[host.host.size() - pattern.host.size() - 1] == '.';
    return pattern.kind == host.kind && pattern.host == host.host;
}

bool allows(const std::vector<HostPattern>& patterns, const RequestedHost& host, std::uint16_t port) {
    return std::any_of(patterns.begin(), patterns.end(),
                       [&](const HostPattern& pattern) { return matches(pattern, host, port); });
}

bool allows(const std::vector<HostPattern>& patterns, std::string_view host, std::uint16_t port) {
    const auto canonical = canonical_host(host);
    return canonical && allows(patterns, *canonical, port);
}

std::optional<std::string> refused_host(std::string_view line) {
    const std::size_t at = line.find(kRefusedHostPrefix);
    if (at == std::string_view::npos) return std::nullopt;
    std::string_view rest = line.substr(at + kRefusedHostPrefix.size());
    rest = rest.substr(0, rest.find_first_of(", \t\r\n"));
    const auto authority = parse_authority(rest);
    if (!authority || !authority->port) return std::nullopt;
    return host_port_text(authority->host, *authority->port);
}

}  // namespace dsh
