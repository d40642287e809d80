import Foundation

/// One parsed HTTP/1.x request head: request line and header fields. The body, if any, is
/// consumed and discarded by the connection.
struct HTTPRequest {
    var method: String
    /// The request target as sent, such as "/images/png.png?delay=100", or in absolute form
    /// "http://example.test/images/png.png" when the client takes this server for a proxy.
    var target: String
    /// The authority of an absolute-form target ("example.test:8080"), nil for an origin-form one.
    var proxiedAuthority: String?
    /// The authority a CONNECT asks a tunnel to ("localhost:8443", authority-form); nil for any
    /// other method. Its path is empty.
    var tunnelAuthority: String?
    /// The target's path without its query (from an absolute-form target, the part after the
    /// authority, "/" when empty), not percent-decoded.
    var path: String
    /// The query parameters, percent-decoded; the last of repeated names wins.
    var query: [String: String]
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    var minorVersion: Int
    /// Header fields in arrival order, names lowercased.
    var headers: [(name: String, value: String)]

    /// The field's value, repeated fields joined with ", "; nil when absent.
    func header(_ name: String) -> String? {
        let values = headers.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether the client asked to keep the connection open: HTTP/1.1 unless "Connection: close",
    /// HTTP/1.0 only with "Connection: keep-alive".
    var keepAlive: Bool {
        let tokens = (header("connection") ?? "").lowercased().split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        return minorVersion >= 1 ? !tokens.contains("close") : tokens.contains("keep-alive")
    }

    // MARK: - Parsing

    /// Why a request head was refused, with the status to answer.
    struct ParseError: Swift.Error {
        var status: Int
        var message: String
    }

    /// Parses a request head: the bytes up to, not including, the empty line that ends it.
    /// Lines may end in CRLF or a bare LF.
    static func parse(_ head: ArraySlice<UInt8>) throws(ParseError) -> HTTPRequest {
        var lines = head.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { line in
            String(decoding: line.last == UInt8(ascii: "\r") ? line.dropLast() : line, as: UTF8.self)
        }
        while lines.last?.isEmpty == true {
            lines.removeLast()
        }
        guard let requestLine = lines.first else {
            throw ParseError(status: 400, message: "empty request")
        }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(\.isLetter), !parts[1].isEmpty else {
            throw ParseError(status: 400, message: "malformed request line")
        }
        let target = String(parts[1])
        let isConnect = parts[0] == "CONNECT"
        let (authority, originForm) = isConnect ? (nil, "") : try splitAbsoluteForm(target)
        let tunnelAuthority = isConnect ? try Self.tunnelAuthority(target) : nil
        let minorVersion: Int
        switch parts[2] {
        case "HTTP/1.1": minorVersion = 1
        case "HTTP/1.0": minorVersion = 0
        default:
            throw ParseError(status: 505, message: "unsupported protocol version \(parts[2])")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw ParseError(status: 400, message: "malformed header line")
            }
            let name = line[..<colon]
            // No whitespace inside or around a field name; that also refuses obsolete line folding.
            guard !name.contains(where: { $0.isWhitespace }) else {
                throw ParseError(status: 400, message: "malformed header name")
            }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name.lowercased(), value))
        }
        let (path, query) = splitTarget(originForm)
        return HTTPRequest(
            method: String(parts[0]), target: target, proxiedAuthority: authority, tunnelAuthority: tunnelAuthority,
            path: path, query: query, minorVersion: minorVersion, headers: headers)
    }

    /// The length of the body that follows the head: 0 without Content-Length.
    func bodyLength() throws(ParseError) -> Int {
        if header("transfer-encoding") != nil {
            throw ParseError(status: 501, message: "request bodies with Transfer-Encoding are not supported")
        }
        guard let field = header("content-length") else {
            return 0
        }
        // Repeated fields arrive joined by ", "; they must agree.
        let values = Set(field.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        guard values.count == 1, let value = values.first, value.allSatisfy(\.isASCII),
            value.allSatisfy(\.isNumber), let length = Int(value)
        else {
            throw ParseError(status: 400, message: "invalid Content-Length")
        }
        return length
    }

    /// An origin-form target ("/path?query") as it is, or an absolute-form one (RFC 9112 section
    /// 3.2.2: "http://authority/path?query", or https) split into its authority and the origin form
    /// of the rest. Other forms (authority-form for CONNECT, "*") are refused.
    private static func splitAbsoluteForm(_ target: String) throws(ParseError) -> (authority: String?, originForm: String) {
        if target.hasPrefix("/") {
            return (nil, target)
        }
        guard let scheme = ["http://", "https://"].first(where: { target.lowercased().hasPrefix($0) }) else {
            throw ParseError(status: 400, message: "malformed request line")
        }
        let rest = target.dropFirst(scheme.count)
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = String(rest[..<end])
        guard !authority.isEmpty, !authority.contains(where: { $0 == "@" || $0.isWhitespace }) else {
            throw ParseError(status: 400, message: "malformed request line")
        }
        let originForm = String(rest[end...])
        return (authority, originForm.hasPrefix("/") ? originForm : "/" + originForm)
    }

    /// A CONNECT's target, which must be in authority form: "host:port", an IPv6 host in brackets.
    private static func tunnelAuthority(_ target: String) throws(ParseError) -> String {
        guard let colon = target.lastIndex(of: ":"), let port = UInt16(target[target.index(after: colon)...]), port > 0,
            colon != target.startIndex, !target.contains(where: { "/?@#".contains($0) || $0.isWhitespace })
        else {
            throw ParseError(status: 400, message: "malformed request line")
        }
        return target
    }

    private static func splitTarget(_ target: String) -> (path: String, query: [String: String]) {
        guard let mark = target.firstIndex(of: "?") else {
            return (target, [:])
        }
        var query: [String: String] = [:]
        for item in target[target.index(after: mark)...].split(separator: "&") {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(pair[0])
            let value = pair.count > 1 ? String(pair[1]) : ""
            query[name.removingPercentEncoding ?? name] = value.removingPercentEncoding ?? value
        }
        return (String(target[..<mark]), query)
    }
}
