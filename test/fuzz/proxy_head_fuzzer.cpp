// Fuzzes the proxy's HTTP head inspection (platform/linux/proxy_protocol.cpp), the code a
// hostile confined command talks to first: any bytes give "need more", a refusal with a status
// and a one-line reason, or a request whose host is canonical and whose port is not 0; a head
// forwarded to an origin, or back to the client, is exactly one head (no second one smuggled
// in behind it). The same bytes are also read as an origin's response head, and their head's end
// looked for as a connection reads them, in pieces the input itself sizes: it is where one look
// at them all finds it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "platform/linux/proxy_protocol.hpp"

namespace {

void require(bool condition) {
    if (!condition) __builtin_trap();
}

// One head: it ends with the blank line, and only there.
bool one_head(const std::string& head) {
    return head.size() >= 4 && head.find("\r\n\r\n") == head.size() - 4;
}

// find_head_end fed the input a piece at a time, as read_head is: pieces of 1 to 8 bytes, sized by
// the input's own bytes, so the fuzzer chooses where the reads split it.
void check_head_end(std::string_view input, std::size_t limit) {
    using dsh::proxy::HeadEnd;
    const std::size_t whole = input.substr(0, limit).find("\r\n\r\n");
    std::size_t held = 0, searched = 0, next = 0;
    for (;;) {
        const HeadEnd end = dsh::proxy::find_head_end(input.substr(0, held), searched, limit);
        if (end.outcome == HeadEnd::Outcome::Found) {
            require(whole != std::string_view::npos && end.bytes == whole + 4 && end.bytes <= held);
            return;
        }
        if (end.outcome == HeadEnd::Outcome::TooLong) {
            require(whole == std::string_view::npos && held >= limit);
            return;
        }
        require(held < limit && end.bytes == limit - held);
        require(whole == std::string_view::npos || whole + 4 > held);
        if (held == input.size()) return;
        const std::size_t piece = 1 + static_cast<unsigned char>(input[next++ % input.size()]) % 8;
        searched = held;
        held = std::min({input.size(), held + piece, held + end.bytes});
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace dsh::proxy;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t limit = 4096;

    const HeadInspection head = inspect_request_head(input, limit);
    switch (head.outcome) {
        case HeadInspection::Outcome::NeedMore: require(input.size() < limit); break;
        case HeadInspection::Outcome::Refused:
            require(head.status == 400 || head.status == 431);
            require(!head.reason.empty() && head.reason.find('\n') == std::string::npos);
            break;
        case HeadInspection::Outcome::Request: {
            const HttpRequest& request = head.request;
            require(head.headBytes > 0 && head.headBytes <= input.size());
            require(request.port != 0);
            const auto again = dsh::canonical_host(request.host.host);
            require(again.has_value() && *again == request.host);
            if (request.form == RequestForm::Connect) {
                require(request.upstreamHead.empty() && request.body == BodyFraming::None);
            } else {
                require(one_head(request.upstreamHead));
                require(request.upstreamHead.find(" /") != std::string::npos);
                require(request.body != BodyFraming::UntilClose);
            }
            break;
        }
    }

    check_head_end(input, limit);
    check_head_end(input, 4 + size % 61);  // small limits, which the empty line can straddle

    const bool head_request = size > 0 && (data[0] & 1);
    const bool keep_alive = size > 0 && (data[0] & 2);
    const ResponseInspection response = inspect_response_head(input, limit, head_request, keep_alive);
    if (response.outcome == ResponseInspection::Outcome::Bad) {
        require(!response.reason.empty() && response.reason.find('\n') == std::string::npos);
    } else if (response.outcome == ResponseInspection::Outcome::Response) {
        require(response.headBytes > 0 && response.headBytes <= input.size());
        require(one_head(response.response.clientHead));
        require(!response.response.keepAlive || keep_alive);
        if (head_request) require(response.response.body == BodyFraming::None);
    }
    return 0;
}
