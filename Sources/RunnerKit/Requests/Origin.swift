import Foundation

/// A URL's origin as RFC 6454 has it: scheme, host and port (the scheme's default when the URL
/// names none). Headers given for one origin go to that origin only.
package struct Origin: Sendable, Hashable, CustomStringConvertible {
    package var scheme: String
    package var host: String
    package var port: Int

    package init(_ url: URL) {
        scheme = url.scheme?.lowercased() ?? ""
        host = HostPattern.normalized(url.host ?? "")
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    package var description: String { "\(scheme)://\(host):\(port)" }
}

/// Headers given with a job (or its batch's `defaults`), bound to the origin of the job's URL:
/// they go to that origin only, never to another one a redirect or a child leads to.
package struct OriginHeaders: Sendable {
    package var origin: Origin
    package var headers: [HeaderTemplate]

    package init(origin: Origin, headers: [HeaderTemplate]) {
        self.origin = origin
        self.headers = headers
    }

    /// The headers for a request to `url`, references expanded; none for another origin.
    package func expanded(for url: URL) throws(HeaderTemplate.Problem) -> [(name: String, value: String)] {
        guard Origin(url) == origin else { return [] }
        var expanded: [(name: String, value: String)] = []
        expanded.reserveCapacity(headers.count)
        for header in headers { expanded.append((header.name, try header.expand())) }
        return expanded
    }
}

extension Array where Element == (name: String, value: String) {
    /// Sets `name` to `value`, replacing any header of that name (names compare case-insensitively).
    mutating func setHeader(_ name: String, _ value: String) {
        removeAll { $0.name.caseInsensitiveCompare(name) == .orderedSame }
        append((name, value))
    }
}
