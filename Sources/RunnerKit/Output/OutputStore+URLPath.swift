import Foundation

extension OutputStore {
    /// The placeholder of an `output` (or `childOutput`) that stands for the job's URL's path, as
    /// `wget -x` and `rclone` keep it: `"output": "{urlPath}"`, or under a folder, `"mirror/{urlPath}"`.
    package static let urlPathPlaceholder = "{urlPath}"

    /// The path of `url` as a relative path inside the output directory, normalized:
    ///
    /// - `.` parts are dropped and `..` parts take the part before them away, as a browser
    ///   resolves them; a `..` with nothing before it is dropped, so the path never climbs out;
    /// - each part is percent-decoded, unless that would give a `/`, a control character or
    ///   bytes that are not UTF-8 (then it stays as the URL spells it);
    /// - a part that begins with `.` (hidden) begins with `%2E` instead;
    /// - a path that names a folder (empty, or ending in `/`) gets `index.html`, as wget does;
    /// - the query and fragment are not part of it.
    ///
    /// Throws when a part is longer than a file name may be (255 bytes).
    package static func urlPath(of url: URL) throws(JobSpecError) -> String {
        let encoded = URLComponents(url: url, resolvingAgainstBaseURL: true)?.percentEncodedPath ?? url.path
        var parts: [String] = []
        for raw in encoded.split(separator: "/", omittingEmptySubsequences: true).map(String.init) {
            let decoded = raw.removingPercentEncoding ?? raw
            if decoded == "." { continue }
            if decoded == ".." {
                if !parts.isEmpty { parts.removeLast() }
                continue
            }
            var part = decoded.unicodeScalars.contains(where: { $0 == "/" || $0.value < 0x20 || $0.value == 0x7F }) ? raw : decoded
            if part.hasPrefix(".") { part = "%2E" + part.dropFirst() }
            guard part.utf8.count <= 255 else {
                throw JobSpecError(field: "output", "{urlPath}: the URL's path has a part longer than 255 bytes, more than a file name may be")
            }
            parts.append(part)
        }
        if parts.isEmpty || encoded.hasSuffix("/") || encoded.hasSuffix("/.") || encoded.hasSuffix("/..") { parts.append("index.html") }
        return parts.joined(separator: "/")
    }

    /// `output` with `{urlPath}` replaced by `url`'s path (`urlPath(of:)`), then checked as any
    /// `output` is: relative, inside the output directory, not in `results/` or `runs/`, no
    /// hidden name. An `output` without the placeholder is only checked.
    package static func resolveOutput(_ template: String, url: URL) throws(JobSpecError) -> String {
        guard template.contains(urlPathPlaceholder) else { return try validateOutput(template) }
        let path = try urlPath(of: url)
        let resolved = template.replacingOccurrences(of: urlPathPlaceholder, with: path)
        do {
            return try validateOutput(resolved)
        } catch {
            throw JobSpecError(
                field: error.field,
                "is '\(resolved)' for this URL, which \(error.message); put the mirror under a folder of its own, as \"mirror/\(urlPathPlaceholder)\"")
        }
    }
}
