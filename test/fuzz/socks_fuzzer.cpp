// Fuzzes the proxy's SOCKS5 greeting and request parsing (platform/linux/proxy_protocol.cpp):
// any bytes give "need more", an error reply, or a target whose host is canonical and whose
// port is not 0; what a parse says it used lies within the input, and every shorter prefix of a
// complete greeting or request still needs more (nothing is decided on bytes not yet sent).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "platform/linux/proxy_protocol.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace dsh::proxy;
    const std::string_view input(reinterpret_cast<const char*>(data), size);

    const SocksGreeting greeting = parse_socks_greeting(input);
    if (greeting.outcome == SocksGreeting::Outcome::Accepted ||
        greeting.outcome == SocksGreeting::Outcome::NoAcceptableMethod) {
        require(greeting.bytes >= 2 && greeting.bytes <= input.size());
        for (std::size_t cut = 1; cut < greeting.bytes; ++cut)
            require(parse_socks_greeting(input.substr(0, cut)).outcome == SocksGreeting::Outcome::NeedMore);
    }

    const SocksRequest request = parse_socks_request(input);
    if (request.outcome == SocksRequest::Outcome::Target) {
        require(request.bytes >= 7 && request.bytes <= input.size() && request.bytes <= 262);
        require(request.port != 0);
        const auto again = dsh::canonical_host(request.host.host);
        require(again.has_value() && *again == request.host);
        for (std::size_t cut = 0; cut < request.bytes; ++cut)
            require(parse_socks_request(input.substr(0, cut)).outcome == SocksRequest::Outcome::NeedMore);
        require(socks_reply(SocksReply::Succeeded).size() == 10);
    } else if (request.outcome == SocksRequest::Outcome::Error) {
        require(request.error != SocksReply::Succeeded);
        require(socks_reply(request.error)[1] == static_cast<char>(request.error));
    }
    return 0;
}
