/// The fault modes a request asks for in its query, combinable with any path:
///
/// | parameter | effect |
/// | --- | --- |
/// | `delay=MS` | wait MS milliseconds before answering |
/// | `status=N` | answer status N (200...599) with a short text body instead of the resource |
/// | `retryAfter=S` | add `Retry-After: S` |
/// | `hang=1` | read the request and never answer, until the server stops or the client leaves |
/// | `truncate=N` | announce the full Content-Length, send only N bytes of body, then close |
/// | `reset=1` | read the request, then close with a reset (RST) |
/// | `html=1` | answer 200 with an HTML page under the Content-Type the path would have (a captive portal) |
/// | `trickle=MS` | send the body one byte every MS milliseconds |
/// | `trickleAfter=N` | with `trickle`: send the first N bytes at once, then trickle |
/// | `close=1` | answer with `Connection: close`, then close |
/// | `chunked=1` | send the body with chunked transfer coding, without Content-Length |
struct FaultOptions: Equatable {
    var delay: Int?
    var status: Int?
    var retryAfter: Int?
    var hang = false
    var truncate: Int?
    var reset = false
    var html = false
    var trickle: Int?
    var trickleAfter: Int?
    var close = false
    var chunked = false

    /// Reads the options from a query; a parameter with an unusable value is an error (answered 400).
    init(query: [String: String]) throws(HTTPRequest.ParseError) {
        delay = try Self.number(query, "delay")
        status = try Self.number(query, "status")
        retryAfter = try Self.number(query, "retryAfter")
        hang = try Self.flag(query, "hang")
        truncate = try Self.number(query, "truncate")
        reset = try Self.flag(query, "reset")
        html = try Self.flag(query, "html")
        trickle = try Self.number(query, "trickle")
        trickleAfter = try Self.number(query, "trickleAfter")
        close = try Self.flag(query, "close")
        chunked = try Self.flag(query, "chunked")
        if let status, !(200...599).contains(status) {
            throw HTTPRequest.ParseError(status: 400, message: "status must be within 200...599")
        }
    }

    private static func number(_ query: [String: String], _ name: String) throws(HTTPRequest.ParseError) -> Int? {
        guard let text = query[name] else {
            return nil
        }
        guard let value = Int(text), value >= 0 else {
            throw HTTPRequest.ParseError(status: 400, message: "\(name) must be a non-negative integer")
        }
        return value
    }

    private static func flag(_ query: [String: String], _ name: String) throws(HTTPRequest.ParseError) -> Bool {
        switch query[name] {
        case nil, "0", "false": return false
        case "", "1", "true": return true
        default: throw HTTPRequest.ParseError(status: 400, message: "\(name) must be 1 or 0")
        }
    }

    // MARK: - Applying

    /// The page a captive portal answers with.
    static let captivePortalPage = """
        <!DOCTYPE html>
        <html><head><title>Sign in to the network</title></head>
        <body><h1>Welcome to the guest Wi-Fi</h1><p>Accept the terms of use to continue.</p></body></html>

        """

    /// The response after `status`, `html` and `retryAfter`; `conditional` evaluates validators and
    /// runs only when neither `status` nor `html` replaced the resource.
    func apply(to response: HTTPResponse, conditional: (HTTPResponse) -> HTTPResponse) -> HTTPResponse {
        var result: HTTPResponse
        if let status {
            result = .text(status, "fixture status \(status) \(HTTPResponse.reason(status))")
            if result.isBodiless {
                result.body = .empty
                result.contentType = nil
            }
        } else if html {
            let type = response.status == 200 ? response.contentType : nil
            result = HTTPResponse(
                status: 200, contentType: type ?? "text/html; charset=utf-8",
                body: .bytes(Array(Self.captivePortalPage.utf8)))
        } else {
            result = conditional(response)
        }
        if let retryAfter {
            result.headers.append(("Retry-After", String(retryAfter)))
        }
        return result
    }
}
