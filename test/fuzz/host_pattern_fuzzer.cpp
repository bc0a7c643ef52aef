// Fuzzes host patterns and requested hosts (lib/host_pattern.cpp): any bytes give a pattern or
// a one-line reason, never a crash or undefined behaviour; an accepted pattern's canonical text
// reads back as the same pattern; a canonical host is canonical again; and a literal or name
// pattern allows exactly its own canonical host. The input is split at the first NUL into a
// pattern and a requested host.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lib/host_pattern.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = input.find('\0');
    const std::string_view pattern_text = input.substr(0, nul);
    const std::string_view host_text = nul == std::string_view::npos ? input : input.substr(nul + 1);

    const auto pattern = dsh::parse_host_pattern(pattern_text);
    if (!pattern) {
        require(!pattern.reason().empty() && pattern.reason().find('\n') == std::string::npos);
    } else {
        const std::string text = dsh::to_string(*pattern);
        const auto again = dsh::parse_host_pattern(text);
        require(again.has_value() && *again == *pattern && dsh::to_string(*again) == text);
        require(!pattern->port || *pattern->port != 0);
        if (pattern->kind != dsh::HostKind::Wildcard) {
            const auto own = dsh::canonical_host(pattern->host);
            require(own.has_value() && own->kind == pattern->kind && own->host == pattern->host);
            const std::uint16_t port = pattern->port ? *pattern->port : 443;
            require(dsh::allows({*pattern}, *own, port));
            require(!dsh::allows({*pattern}, *own, 0));
        } else {
            require(!dsh::allows({*pattern}, pattern->host, 443));  // never the apex itself
        }
    }

    const auto host = dsh::canonical_host(host_text);
    if (!host) {
        require(host.reason().find('\n') == std::string::npos);
        if (pattern) require(!dsh::allows({*pattern}, host_text, 443));
        return 0;
    }
    require(host->kind != dsh::HostKind::Wildcard);
    const auto again = dsh::canonical_host(host->host);
    require(again.has_value() && *again == *host);
    if (pattern) {
        const bool allowed = dsh::allows({*pattern}, host_text, 443);
        require(allowed == dsh::matches(*pattern, *host, 443));
        if (allowed && pattern->kind == dsh::HostKind::Wildcard)
            require(host->host.size() > pattern->host.size() + 1 && host->host.ends_with("." + pattern->host));
        if (allowed && pattern->kind != dsh::HostKind::Wildcard) require(host->host == pattern->host);
    }
    return 0;
}
