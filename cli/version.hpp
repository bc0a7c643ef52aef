#pragma once

namespace dsh::cli {
inline constexpr const char* kVersion = "0.1.0";
}
