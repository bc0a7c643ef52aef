// The Seatbelt profiles of profiles/*.sbpl, embedded at build time (cmake/EmbedProfiles.cmake
// generates the definition), so the binary never reads a profile from disk at run time.
#pragma once

#include <optional>
#include <string_view>

namespace dsh::seatbelt {

// The text of profiles/<name>.sbpl ("read-only", "workspace-write"), or nullopt.
std::optional<std::string_view> embedded_profile(std::string_view name);

}  // namespace dsh::seatbelt
