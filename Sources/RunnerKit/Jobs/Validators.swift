/// A payload's HTTP validators, kept in its key's record so the next run can ask
/// "has it changed?" (`If-None-Match`, `If-Modified-Since`) and get a 304 instead of the body.
package struct Validators: Sendable, Equatable {
    package var etag: String?
    package var lastModified: String?

    /// A validator holding a control character (CR, LF, NUL, DEL…) or longer than 8 KiB is
    /// dropped: sent back in a request header it could split the request or smuggle headers.
    package init?(etag: String?, lastModified: String?) {
        let etag = etag.flatMap(Self.sendable)
        let lastModified = lastModified.flatMap(Self.sendable)
        guard etag != nil || lastModified != nil else { return nil }
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Longest validator kept, in bytes.
    package static let maxLength = 8 * 1024

    private static func sendable(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= maxLength,
            !value.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F })
        else { return nil }
        return value
    }

    /// From response headers (names in lower case).
    package init?(headers: [String: String]) {
        self.init(etag: headers["etag"], lastModified: headers["last-modified"])
    }

    /// From a result record's `validators` member.
    package init?(record: JSONValue) {
        guard let member = record["validators"] else { return nil }
        self.init(etag: member["etag"]?.stringValue, lastModified: member["lastModified"]?.stringValue)
    }

    package var conditionalHeaders: [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        if let etag { headers.append(("If-None-Match", etag)) }
        if let lastModified { headers.append(("If-Modified-Since", lastModified)) }
        return headers
    }

    package var json: JSONValue {
        .object([("etag", JSONValue(etag)), ("lastModified", JSONValue(lastModified))])
    }
}
