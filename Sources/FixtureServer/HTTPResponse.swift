/// A response before it is written: status, fields and a body that may be generated on the fly.
struct HTTPResponse {
    var status: Int
    var contentType: String?
    /// Fields beyond Content-Type, Content-Length, validators and Connection.
    var headers: [(name: String, value: String)] = []
    var body: Body = .empty
    /// A strong entity tag, quotes included.
    var etag: String?
    /// Seconds since 1970, sent as Last-Modified.
    var lastModified: Int?
    /// Send only this many bytes of the body, then close (as the `truncate` fault does).
    var cutAfter: Int?

    /// What follows the head.
    enum Body {
        case empty
        case bytes([UInt8])
        /// `count` bytes where byte `i` is `UInt8(i % 256)`, produced while sending.
        case pattern(count: Int)
        /// `head`, then `padding` bytes of the pattern, produced while sending.
        case headed([UInt8], padding: Int)
        /// `count` bytes of version `version` of `/ranged/N` from its byte `from`, produced while sending.
        case ranged(from: Int, count: Int, version: Int)

        var count: Int {
            switch self {
            case .empty: 0
            case .bytes(let bytes): bytes.count
            case .pattern(let count): count
            case .headed(let head, let padding): head.count + padding
            case .ranged(_, let count, _): count
            }
        }
    }

    // MARK: - Making responses

    /// A static resource, with validators derived from its bytes.
    static func resource(_ bytes: [UInt8], contentType: String) -> HTTPResponse {
        let hash = String(FixtureCatalog.stableHash(bytes), radix: 16)
        return HTTPResponse(
            status: 200, contentType: contentType, body: .bytes(bytes),
            etag: "\"" + String(repeating: "0", count: 16 - hash.count) + hash + "\"",
            lastModified: HTTPDate.fixtureLastModified)
    }

    static func resource(_ text: String, contentType: String) -> HTTPResponse {
        resource(Array(text.utf8), contentType: contentType)
    }

    /// A short plain-text answer, such as an error.
    static func text(_ status: Int, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: .bytes(Array((message + "\n").utf8)))
    }

    static func json(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", body: .bytes(Array(text.utf8)))
    }

    /// 304 Not Modified for this resource: its validators, no body.
    var notModified: HTTPResponse {
        HTTPResponse(status: 304, headers: headers, etag: etag, lastModified: lastModified)
    }

    /// Whether the status forbids a body (1xx, 204, 304).
    var isBodiless: Bool {
        status < 200 || status == 204 || status == 304
    }

    // MARK: - Writing

    /// The status line and header fields, through the empty line.
    func head(chunked: Bool, keepAlive: Bool) -> String {
        var lines = ["HTTP/1.1 \(status) \(Self.reason(status))", "Server: FixtureServer"]
        if let contentType {
            lines.append("Content-Type: \(contentType)")
        }
        if !isBodiless {
            lines.append(chunked ? "Transfer-Encoding: chunked" : "Content-Length: \(body.count)")
        }
        if let etag {
            lines.append("ETag: \(etag)")
        }
        if let lastModified {
            lines.append("Last-Modified: \(HTTPDate.format(lastModified))")
        }
        lines += headers.map { "\($0.name): \($0.value)" }
        lines.append(keepAlive ? "Connection: keep-alive" : "Connection: close")
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}
