// Fuzzes the session log reader: any bytes give events or a dsh::Error (SESSION). Only a torn
// last line is skipped (with one warning), and events written back with encode_mode_event read
// back the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lib/error.hpp"
#include "lib/session.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view content(reinterpret_cast<const char*>(data), size);
    dsh::ParsedLog log;
    try {
        log = dsh::parse_session_log(content, "fuzz");
    } catch (const dsh::Error& e) {
        require(e.code() == dsh::code::Session);
        return 0;
    }
    const bool torn = !content.empty() && content.back() != '\n';
    require(log.warnings.size() == (torn ? 1u : 0u));

    std::string rewritten;
    for (const auto& event : log.events) rewritten += dsh::encode_mode_event(event.mode, event.at);
    const dsh::ParsedLog again = dsh::parse_session_log(rewritten, "fuzz");
    require(again.warnings.empty() && again.events.size() == log.events.size());
    for (std::size_t i = 0; i < log.events.size(); ++i)
        require(again.events[i].mode == log.events[i].mode && again.events[i].at == log.events[i].at);
    return 0;
}
