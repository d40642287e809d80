import Foundation

/// One decoded, validated job: ready to run.
public struct JobDescriptor: Sendable {
    /// The kind's decoded parameters, and how the job runs.
    public var kind: any KindJob
    /// The kind's name, as the job file gave it.
    public var kindName: String
    /// The `Accept` header of the kind's requests.
    public var accept: String?
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
    /// The SHA-256 the payload must have (lowercase hex), from `checksum: "sha256:<hex>"`.
    public var checksum: String?
    /// Request headers from the job and its batch's `defaults`, bound to the origin of `url`
    /// (a child inherits its parent's, still bound to the parent's origin).
    public var headers: OriginHeaders?

    public static let defaultTimeout: Duration = .seconds(2)
    public static let defaultNoticeAfter: Duration = .milliseconds(500)
    public static let defaultMaxBytes = 64 * 1024 * 1024

    /// The fields every kind shares.
    public static let commonFields = ["kind", "key", "url", "timeout", "noticeAfter", "retries", "maxBytes", "output", "checksum", "headers"]

    public init(
        kind: any KindJob, kindName: String, accept: String? = nil, key: String? = nil, url: URL,
        timeout: Duration = defaultTimeout, noticeAfter: Duration = defaultNoticeAfter, retries: Int = 0,
        maxBytes: Int = defaultMaxBytes, output: String? = nil, parent: String? = nil
    ) {
        self.kind = kind
        self.kindName = kindName
        self.accept = accept
        self.key = key ?? kind.defaultKey(kind: kindName, url: url.absoluteString)
        self.url = url
        self.timeout = timeout
        self.noticeAfter = noticeAfter
        self.retries = retries
        self.maxBytes = maxBytes
        self.output = output
        self.parent = parent
    }

    /// A job of a compiled kind.
    public init<Kind: JobKind>(
        _ kind: Kind, key: String? = nil, url: URL, timeout: Duration = defaultTimeout,
        noticeAfter: Duration = defaultNoticeAfter, retries: Int = 0, maxBytes: Int = defaultMaxBytes,
        output: String? = nil, parent: String? = nil
    ) {
        self.init(
            kind: kind, kindName: Kind.name, accept: Kind.accept, key: key, url: url, timeout: timeout,
            noticeAfter: noticeAfter, retries: retries, maxBytes: maxBytes, output: output, parent: parent)
    }

    /// The URL as records show it: with any `user:password@` removed.
    public var recordURL: String { Self.withoutCredentials(url) }

    /// `url` without its user and password, if it has any.
    public static func withoutCredentials(_ url: URL) -> String {
        let text = url.absoluteString
        // Without an '@' there is no user or password: skip parsing the URL again.
        guard text.utf8.contains(UInt8(ascii: "@")) else { return text }
        guard url.user != nil || url.password != nil, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return text
        }
        parts.user = nil
        parts.password = nil
        return parts.string ?? text
    }

    /// The fields a child inherits unless it sets them: timing, retries and size limit.
    public var inheritedFields: [(key: String, value: JSONValue)] {
        [
            ("timeout", .number(Self.seconds(timeout))),
            ("noticeAfter", .number(Self.seconds(noticeAfter))),
            ("retries", JSONValue(retries)),
            ("maxBytes", JSONValue(maxBytes)),
        ]
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds / 1_000_000_000_000_000) / 1000
    }

    // MARK: - Decoding

    /// Decodes one job object, with a batch's `defaults` underneath it.
    /// - Parameter limits: the operator's caps on `maxBytes`, `timeout` and `retries`.
    public static func decode(
        _ object: [(key: String, value: JSONValue)],
        defaults: [(key: String, value: JSONValue)] = [],
        registry: KindRegistry,
        parent: String? = nil,
        limits: JobLimits = .none
    ) throws(JobSpecError) -> JobDescriptor {
        var fields = JobFields(object, defaults: defaults)
        let kindName = try fields.requiredString("kind")
        guard let definition = registry.definition(named: kindName) else {
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
        let checksum = try fields.string("checksum").map { (text) throws(JobSpecError) -> String in try validateChecksum(text) }
        let headers = try decodeHeaders(fields.value("headers") != nil, object, defaults)

        let kind = try definition.decode(&fields)
        if let unknown = fields.firstUnknownField() {
            throw JobSpecError(field: unknown, "is not a field of kind '\(kindName)'")
        }
        let url = try kind.validateURL(kind.resolveURL(template))
        var job = JobDescriptor(
            kind: kind, kindName: definition.name, accept: definition.accept, key: key, url: url, timeout: timeout,
            noticeAfter: noticeAfter, retries: retries, maxBytes: maxBytes, output: output, parent: parent
        )
        job.checksum = checksum
        if let headers { job.headers = OriginHeaders(origin: Origin(url), headers: headers) }
        return job
    }

    /// The `headers` of `defaults`, overlaid header by header with the job's own (names compare
    /// case-insensitively); references are read, not expanded.
    private static func decodeHeaders(
        _ present: Bool, _ object: [(key: String, value: JSONValue)], _ defaults: [(key: String, value: JSONValue)]
    ) throws(JobSpecError) -> [HeaderTemplate]? {
        guard present else { return nil }
        var headers: [HeaderTemplate] = []
        for layer in [defaults, object] {
            guard let value = layer.last(where: { $0.key == "headers" })?.value else { continue }
            if case .null = value { continue }
            for header in try headerTemplates(value, field: "headers") {
                headers.removeAll { $0.name.caseInsensitiveCompare(header.name) == .orderedSame }
                headers.append(header)
            }
        }
        return headers.isEmpty ? nil : headers
    }

    /// An object of header names and string values, as in a job's `headers` or the config's.
    public static func headerTemplates(_ value: JSONValue, field: String, folder: String? = nil) throws(JobSpecError) -> [HeaderTemplate] {
        guard case .object(let members) = value else {
            throw JobSpecError(field: field, "must be an object of header names and string values, not \(value.typeDescription)")
        }
        var headers: [HeaderTemplate] = []
        for (name, item) in members {
            guard case .string(let text) = item else {
                throw JobSpecError(field: field, "\(name): must be a string, not \(item.typeDescription)")
            }
            do {
                headers.append(try HeaderTemplate(name: name, value: text, folder: folder))
            } catch {
                throw JobSpecError(field: field, error.description)
            }
        }
        return headers
    }

    /// `sha256:<64 hex digits>`; answers the digits in lowercase.
    public static func validateChecksum(_ text: String) throws(JobSpecError) -> String {
        let prefix = "sha256:"
        let digits = text.hasPrefix(prefix) ? text.dropFirst(prefix.count).lowercased() : ""
        guard digits.utf8.count == 64, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw JobSpecError(field: "checksum", "must be sha256: followed by 64 hexadecimal digits, not '\(text)'")
        }
        return digits
    }

    private static func seconds(_ fields: inout JobFields, _ name: String, allowZero: Bool) throws(JobSpecError) -> Duration? {
        guard let value = try fields.number(name) else { return nil }
        guard value.isFinite, allowZero ? value >= 0 : value > 0 else {
            throw JobSpecError(field: name, allowZero ? "must be 0 or more seconds" : "must be a number of seconds greater than 0")
        }
        guard value <= 86_400 else { throw JobSpecError(field: name, "must be at most 86400 seconds (one day)") }
        return Duration(seconds: value)
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
    ///
    /// The path is read as the file system reads it, byte by byte between `/` bytes: as Swift
    /// characters, a combining mark after a `/` would hide it (`x\u{600}/../y` would seem to
    /// have no `..` part).
    public static func validateOutput(_ path: String) throws(JobSpecError) -> String {
        let bytes = Array(path.utf8)
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        if bytes.isEmpty { throw JobSpecError(field: "output", "must not be empty") }
        if bytes[0] == slash || bytes[0] == UInt8(ascii: "~") {
            throw JobSpecError(field: "output", "must be a path relative to the output directory, not '\(path)'")
        }
        if bytes.contains(0) { throw JobSpecError(field: "output", "must not contain a NUL character") }
        let parts = bytes.split(separator: slash, omittingEmptySubsequences: true).filter { !($0.count == 1 && $0.first == dot) }
        if parts.contains(where: { $0.elementsEqual([dot, dot]) }) {
            throw JobSpecError(field: "output", "must not climb out of the output directory with '..'")
        }
        guard let first = parts.first, let last = parts.last else {
            throw JobSpecError(field: "output", "must name a file")
        }
        if first.elementsEqual("results".utf8) || first.elementsEqual("runs".utf8) || parts.contains(where: { $0.first == dot }) {
            throw JobSpecError(field: "output", "must not point into results/, runs/ or a hidden name")
        }
        if bytes.last == slash || last.count > 255 {
            throw JobSpecError(field: "output", "must name a file")
        }
        return String(decoding: Array(parts.joined(separator: [slash])), as: UTF8.self)
    }
}
