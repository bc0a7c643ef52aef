// Fuzzes the TOML configuration loader: any bytes give a Config or a dsh::Error (CONFIG with a
// position), never another exception, a crash or undefined behaviour, and an accepted file
// holds only values the schema allows. Non-ASCII text included: lib/config.cpp works around
// toml++ 3.3.0's undefined behaviour on some code points, and this fuzzer catches it if it returns.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
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
