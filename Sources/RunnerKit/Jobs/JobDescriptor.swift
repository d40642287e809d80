import Foundation

/// One decoded, validated job: ready to run.
public struct JobDescriptor: Sendable {
    /// The kind's decoded parameters; `type(of: kind).name` is the kind's name.
    public var kind: any JobKind
    /// Identity of the task: at most one task per key runs at a time.
    public var key: String
    public var url: URL
    /// Deadline of one attempt, waiting for connectivity included.
    public var timeout: Duration
    /// How long without connectivity before the "no network connection" notice.
    public var noticeAfter: Duration
    /// Further attempts after a transient failure.
    public var retries: Int
    /// Largest payload accepted, counted after content decoding.
    public var maxBytes: Int
    /// Payload path relative to the output directory, when the job file sets one.
    public var output: String?
    /// The job that started this one, for children of trees and lists.
    public var parent: String?

    public var kindName: String { type(of: kind).name }

    public static let defaultTimeout: Duration = .seconds(2)
    public static let defaultNoticeAfter: Duration = .milliseconds(500)
    public static let defaultMaxBytes = 64 * 1024 * 1024

    /// The fields every kind shares.
    public static let commonFields = ["kind", "key", "url", "timeout", "noticeAfter", "retries", "maxBytes", "output"]

    public init(
        kind: any JobKind, key: String? = nil, url: URL, timeout: Duration = defaultTimeout,
        noticeAfter: Duration = defaultNoticeAfter, retries: Int = 0, maxBytes: Int = defaultMaxBytes,
        output: String? = nil, parent: String? = nil
    ) {
        self.kind = kind
        self.key = key ?? kind.defaultKey(url: url.absoluteString)
        self.url = url
        self.timeout = timeout
        self.noticeAfter = noticeAfter
        self.retries = retries
        self.maxBytes = maxBytes
        self.output = output
        self.parent = parent
    }

    /// A child job that inherits this job's timing, retries and size limit.
    public func child(kind: any JobKind, url: URL, key: String? = nil) -> JobDescriptor {
        JobDescriptor(
            kind: kind, key: key, url: url, timeout: timeout, noticeAfter: noticeAfter,
            retries: retries, maxBytes: maxBytes, output: nil, parent: self.key
        )
    }

    // MARK: - Decoding

    /// Decodes one job object, with a batch's `defaults` underneath it.
    /// - Parameter limits: the operator's caps on `maxBytes`, `timeout` and `retries`.
    public static func decode(
        _ object: [(key: String, value: JSONValue)],
        defaults: [(key: String, value: JSONValue)] = [],
        registry: KindRegistry,
        limits: JobLimits = .none
    ) throws(JobSpecError) -> JobDescriptor {
        var fields = JobFields(object, defaults: defaults)
        let kindName = try fields.requiredString("kind")
        guard let kindType = registry.kind(named: kindName) else {
            let known = registry.names.joined(separator: ", ")
            throw JobSpecError(field: "kind", "names an unknown kind '\(kindName)' (known kinds: \(known))")
        }
        let template = try fields.requiredString("url")
        let key = try fields.string("key")
        if let key, key.isEmpty { throw JobSpecError(field: "key", "must not be empty") }
        if let key, key.utf8.contains(0) { throw JobSpecError(field: "key", "must not contain a NUL character") }
        let timeout = try limits.timeout(try seconds(&fields, "timeout", allowZero: false), default: defaultTimeout)
        let noticeAfter = try seconds(&fields, "noticeAfter", allowZero: true) ?? defaultNoticeAfter
        let retries = try fields.int("retries") ?? 0
        guard (0...100).contains(retries) else { throw JobSpecError(field: "retries", "must be between 0 and 100") }
        _ = try limits.retries(retries)
        let askedBytes = try fields.int("maxBytes")
        if let askedBytes, askedBytes <= 0 { throw JobSpecError(field: "maxBytes", "must be greater than 0") }
        let maxBytes = try limits.maxBytes(askedBytes, default: defaultMaxBytes)
        let output = try fields.string("output").map { (path) throws(JobSpecError) -> String in try validateOutput(path) }

        let kind = try kindType.init(fields: &fields)
        if let unknown = fields.firstUnknownField() {
            throw JobSpecError(field: unknown, "is not a field of kind '\(kindName)'")
        }
        let url = try validateURL(kind.resolveURL(template))
        return JobDescriptor(
            kind: kind, key: key, url: url, timeout: timeout, noticeAfter: noticeAfter,
            retries: retries, maxBytes: maxBytes, output: output
        )
    }

    private static func seconds(_ fields: inout JobFields, _ name: String, allowZero: Bool) throws(JobSpecError) -> Duration? {
        guard let value = try fields.number(name) else { return nil }
        guard value.isFinite, allowZero ? value >= 0 : value > 0 else {
            throw JobSpecError(field: name, allowZero ? "must be 0 or more seconds" : "must be a number of seconds greater than 0")
        }
        guard value <= 86_400 else { throw JobSpecError(field: name, "must be at most 86400 seconds (one day)") }
        return .milliseconds(Int64((value * 1000).rounded()))
    }

    /// Checks that a URL is absolute http or https with a host.
    public static func validateURL(_ text: String, field: String = "url") throws(JobSpecError) -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
            throw JobSpecError(field: field, "is not a valid absolute URL: '\(text)'")
        }
        guard scheme == "http" || scheme == "https" else {
            throw JobSpecError(field: field, "uses the scheme '\(scheme)'; only http and https are supported")
        }
        // Without a '%', the host as written is the host decoded: skip decoding it.
        if let written = url.host(percentEncoded: true), !written.isEmpty, !written.utf8.contains(UInt8(ascii: "%")) {
            return url
        }
        guard let host = url.host, !host.isEmpty else {
            throw JobSpecError(field: field, "has no host: '\(text)'")
        }
        return url
    }

    /// An `output` must stay inside the output directory and out of its bookkeeping folders.
    public static func validateOutput(_ path: String) throws(JobSpecError) -> String {
        switch try validateASCIIOutput(path) {
        case .unchanged: return path
        case .normalized(let normalized): return normalized
        case .notASCII: break
        }
        if path.isEmpty { throw JobSpecError(field: "output", "must not be empty") }
        if path.hasPrefix("/") || path.hasPrefix("~") {
            throw JobSpecError(field: "output", "must be a path relative to the output directory, not '\(path)'")
        }
        if path.utf8.contains(0) { throw JobSpecError(field: "output", "must not contain a NUL character") }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        if parts.contains("..") {
            throw JobSpecError(field: "output", "must not climb out of the output directory with '..'")
        }
        guard let first = parts.first, let last = parts.last else {
            throw JobSpecError(field: "output", "must name a file")
        }
        if first == "results" || first == "runs" || parts.contains(where: { $0.hasPrefix(".") }) {
            throw JobSpecError(field: "output", "must not point into results/, runs/ or a hidden name")
        }
        if path.hasSuffix("/") || last.utf8.count > 255 {
            throw JobSpecError(field: "output", "must name a file")
        }
        return parts.joined(separator: "/")
    }

    private enum CheckedOutput {
        case unchanged
        case normalized(String)
        case notASCII
    }

    /// `validateOutput` for an ASCII path, byte by byte, with the same checks, messages and
    /// result. (Beyond ASCII, Swift compares whole characters: a '/' followed by a combining
    /// mark is no separator, so those paths take the general way.)
    private static func validateASCIIOutput(_ path: String) throws(JobSpecError) -> CheckedOutput {
        var path = path
        return try path.withUTF8 { bytes in
            Result { () throws(JobSpecError) -> CheckedOutput in try validateASCIIOutput(bytes) }
        }.get()
    }

    private static func validateASCIIOutput(_ bytes: UnsafeBufferPointer<UInt8>) throws(JobSpecError) -> CheckedOutput {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        guard bytes.isASCII else { return .notASCII }
        if bytes.isEmpty { throw JobSpecError(field: "output", "must not be empty") }
        if bytes[0] == slash || bytes[0] == UInt8(ascii: "~") {
            throw JobSpecError(field: "output", "must be a path relative to the output directory, not '\(String(decoding: bytes, as: UTF8.self))'")
        }
        if bytes.contains(0) { throw JobSpecError(field: "output", "must not contain a NUL character") }
        // The parts between slashes, empty ones and "." left out.
        var first: Range<Int>?
        var last: Range<Int>?
        var climbs = false
        var hidden = false
        var normalized = true  // no empty or "." part: the path is its own result
        forEachPart(of: bytes) { part in
            if part.isEmpty || (part.count == 1 && bytes[part.lowerBound] == dot) {
                normalized = false
                return
            }
            if first == nil { first = part }
            last = part
            if bytes[part.lowerBound] == dot {
                hidden = true
                if part.count == 2 && bytes[part.lowerBound + 1] == dot { climbs = true }
            }
        }
        if climbs {
            throw JobSpecError(field: "output", "must not climb out of the output directory with '..'")
        }
        guard let first, let last else {
            throw JobSpecError(field: "output", "must name a file")
        }
        let firstPart = UnsafeBufferPointer(rebasing: bytes[first])
        if firstPart.elementsEqual("results".utf8) || firstPart.elementsEqual("runs".utf8) || hidden {
            throw JobSpecError(field: "output", "must not point into results/, runs/ or a hidden name")
        }
        if bytes[bytes.count - 1] == slash || last.count > 255 {
            throw JobSpecError(field: "output", "must name a file")
        }
        if normalized { return .unchanged }
        var joined: [UInt8] = []
        joined.reserveCapacity(bytes.count)
        forEachPart(of: bytes) { part in
            if part.isEmpty || (part.count == 1 && bytes[part.lowerBound] == dot) { return }
            if !joined.isEmpty { joined.append(slash) }
            joined.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[part]))
        }
        return .normalized(String(decoding: joined, as: UTF8.self))
    }

    /// Calls `body` with the range of each part between slashes, empty ones included.
    private static func forEachPart(of bytes: UnsafeBufferPointer<UInt8>, _ body: (Range<Int>) -> Void) {
        var start = 0
        for end in 0...bytes.count where end == bytes.count || bytes[end] == UInt8(ascii: "/") {
            body(start..<end)
            start = end + 1
        }
    }
}
