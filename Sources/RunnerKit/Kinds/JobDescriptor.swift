import Foundation

/// One decoded, validated job: ready to run. Its kind's parameters, and the fields every kind
/// shares.
public struct JobDescriptor: Sendable {
    /// What the job's kind decoded, and how the job runs.
    public var parameters: any DecodedJob
    /// The kind's name, as the job file gave it.
    public var kindName: String { parameters.kindName }
    /// The `Accept` header of the kind's requests.
    public var accept: String? { parameters.accept }
    /// Identity of the task: at most one task per key runs at a time.
    public var key: String
    /// The URL fetched, a `{id}` template already filled: absolute http or https for a job file's
    /// (a kind that does its own network operation may accept others).
    public var url: URL
    /// Deadline of one attempt, waiting for connectivity included.
    public var timeout: Duration { didSet { inherits.remove(.timeout) } }
    /// How long without connectivity before the "no network connection" notice.
    public var noticeAfter: Duration
    /// Further attempts after a transient failure.
    public var retries: Int { didSet { inherits.remove(.retries) } }
    /// Largest payload accepted, counted after content decoding.
    public var maxBytes: Int { didSet { inherits.remove(.maxBytes) } }
    /// Payload path relative to the output directory, when the job file sets one (`{urlPath}`
    /// in it already replaced by the URL's path).
    public var output: String?
    /// The `output` of this job's children that set none, with `{urlPath}` left in it: each child
    /// places its payload by its own URL's path (a child inherits it for its own children).
    public var childOutput: String?
    /// The job that started this one, for children of trees and lists.
    public var parent: String?
    /// The SHA-256 the payload must have (lowercase hex), from `checksum: "sha256:<hex>"`.
    public var checksum: String?
    /// Request headers from the job and its batch's `defaults`, bound to the origin of `url`
    /// (a child inherits its parent's, still bound to the parent's origin).
    package var headers: OriginHeaders? { didSet { inherits.remove(.headers) } }
    /// After a 404 or 410, the key's last payload stays, pointed at by its record as stale
    /// (`keepStale`; a child inherits it). Without it the payload is no longer pointed at, and
    /// `runner prune` removes it.
    public var keepStale = false
    /// Through a queue: not queued while a job of its key is queued or running (`unique`). A
    /// run or a spool watcher has nothing to compare it with, and runs the job.
    public var unique = false
    /// An attempt whose body moved less than `lowSpeed` bytes a second for this long fails
    /// (`timedOut`, "stalled"), and the next attempt may begin; a body that keeps moving is never
    /// cut by it. Only an attempt whose `timeout` is longer can stall.
    public var stall: Duration = defaultStall
    /// The bytes a second below which a body counts as not moving, for `stall`; 0: an attempt never
    /// stalls. Default 1.
    public var lowSpeed = defaultLowSpeed
    /// The fields the job left unset, which the engine that runs it fills from its
    /// `jobDefaults` (and empties); nothing once set by hand.
    var inherits: JobDefaults.Fields = []

    /// The runner's `timeout`: 2 seconds, where `JobDefaults.timeout` starts.
    public static let defaultTimeout: Duration = .seconds(2)
    package static let defaultStall: Duration = .seconds(30)
    package static let defaultLowSpeed = 1
    /// The runner's `noticeAfter`: half a second without connectivity before the notice.
    public static let defaultNoticeAfter: Duration = .milliseconds(500)
    /// The runner's `maxBytes`: 64 MiB, where `JobDefaults.maxBytes` starts.
    public static let defaultMaxBytes = 64 * 1024 * 1024

    /// The fields every kind shares.
    package static let commonFields = [
        "kind", "key", "url", "timeout", "noticeAfter", "retries", "maxBytes", "output", "checksum", "headers", "keepStale", "unique",
        "stall", "lowSpeed", "childOutput",
    ]

    /// A job of `parameters`. `timeout`, `retries` and `maxBytes` left nil, and the headers,
    /// come from the engine's `jobDefaults` when it runs the job. A `{name}` template in `url`
    /// (written as `{id}` in the string the URL was made from) is filled as a job file's is.
    public init(
        parameters: any DecodedJob, key: String? = nil, url: URL,
        timeout: Duration? = nil, noticeAfter: Duration = defaultNoticeAfter, retries: Int? = nil,
        maxBytes: Int? = nil, output: String? = nil, parent: String? = nil
    ) {
        self.init(
            resolved: parameters, key: key, url: Self.filled(url, parameters), timeout: timeout, noticeAfter: noticeAfter,
            retries: retries, maxBytes: maxBytes, output: output, parent: parent)
    }

    private init(
        resolved parameters: any DecodedJob, key: String?, url: URL, timeout: Duration?, noticeAfter: Duration, retries: Int?,
        maxBytes: Int?, output: String?, parent: String?
    ) {
        self.parameters = parameters
        self.key = key ?? parameters.defaultKey(kind: parameters.kindName, url: url.absoluteString)
        self.url = url
        self.timeout = timeout ?? Self.defaultTimeout
        self.noticeAfter = noticeAfter
        self.retries = retries ?? 0
        self.maxBytes = maxBytes ?? Self.defaultMaxBytes
        self.output = output
        self.parent = parent
        if timeout == nil { inherits.insert(.timeout) }
        if retries == nil { inherits.insert(.retries) }
        if maxBytes == nil { inherits.insert(.maxBytes) }
        if parent == nil { inherits.insert(.headers) }
    }

    /// A job of a compiled kind. `timeout`, `retries` and `maxBytes` left nil, and the headers,
    /// come from the engine's `jobDefaults`; a `{id}` in `url` is filled by the kind.
    public init<Kind: JobKind>(
        _ kind: Kind, key: String? = nil, url: URL, timeout: Duration? = nil,
        noticeAfter: Duration = defaultNoticeAfter, retries: Int? = nil, maxBytes: Int? = nil,
        output: String? = nil, parent: String? = nil
    ) {
        self.init(
            parameters: kind, key: key, url: url, timeout: timeout,
            noticeAfter: noticeAfter, retries: retries, maxBytes: maxBytes, output: output, parent: parent)
    }

    /// A job of a compiled kind whose URL is a template, as a job file's `url` is: `{id}` and
    /// such are filled by the kind (percent-encoded), and the result is checked as a job file's.
    /// - Throws: the URL's problem, as for a job file (`field` is `url`).
    public init<Kind: JobKind>(
        _ kind: Kind, key: String? = nil, url template: String, timeout: Duration? = nil,
        noticeAfter: Duration = defaultNoticeAfter, retries: Int? = nil, maxBytes: Int? = nil,
        output: String? = nil, parent: String? = nil
    ) throws(JobSpecError) {
        let url = try kind.validateURL(kind.resolveURL(template))
        self.init(
            resolved: kind, key: key, url: url, timeout: timeout, noticeAfter: noticeAfter, retries: retries, maxBytes: maxBytes,
            output: output, parent: parent)
    }

    /// `url` with a template the kind fills filled: `URL(string:)` keeps `{id}` as `%7Bid%7D`.
    private static func filled(_ url: URL, _ parameters: any DecodedJob) -> URL {
        let text = url.absoluteString
        guard text.contains("%7B") || text.contains("%7b") || text.contains("{") else { return url }
        let template = text.replacingOccurrences(of: "%7B", with: "{").replacingOccurrences(of: "%7b", with: "{")
            .replacingOccurrences(of: "%7D", with: "}").replacingOccurrences(of: "%7d", with: "}")
        let resolved = parameters.resolveURL(template)
        guard resolved != template, let filled = URL(string: resolved) else { return url }
        return filled
    }

    /// The URL as records show it: with any `user:password@` removed.
    package var recordURL: String { Self.withoutCredentials(url) }

    /// `url` without its user and password, if it has any.
    package static func withoutCredentials(_ url: URL) -> String {
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

    // MARK: - Decoding

    /// The longest URL a job may have, resolved (servers refuse longer ones; pages show it).
    package static let maxURLBytes = 8192

    /// Decodes one job object, with a batch's `defaults` underneath it.
    /// - Parameter parent: for a child, the job that started it: the child inherits its
    ///   `timeout`, `noticeAfter`, `retries` and `maxBytes` where it does not set them.
    /// - Parameter limits: the operator's caps on `maxBytes`, `timeout` and `retries`.
    package static func decode(
        _ object: [(key: String, value: JSONValue)],
        defaults: [(key: String, value: JSONValue)] = [],
        registry: KindRegistry,
        parent: JobDescriptor? = nil,
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
        if let key, key.utf8.count > JobLimits.maxKeyBytes {
            throw JobSpecError(field: "key", "is \(key.utf8.count) bytes long; a key is at most \(JobLimits.maxKeyBytes) bytes of UTF-8")
        }
        // A kind's own default (the file kind's, for large bodies) is not cut down by a parent's.
        let kindTimeout = definition.defaultTimeout.map { max($0, parent?.timeout ?? $0) }
        let askedTimeout = try seconds(&fields, "timeout", allowZero: false) ?? (kindTimeout == nil ? parent?.timeout : nil)
        let timeout = try limits.timeout(askedTimeout, default: kindTimeout ?? defaultTimeout)
        let noticeAfter = try seconds(&fields, "noticeAfter", allowZero: true) ?? parent?.noticeAfter ?? defaultNoticeAfter
        let askedRetries = try fields.int("retries") ?? parent?.retries
        let retries = askedRetries ?? 0
        guard (0...100).contains(retries) else { throw JobSpecError(field: "retries", "must be between 0 and 100") }
        _ = try limits.retries(retries)
        let kindBytes = definition.defaultMaxBytes.map { max($0, parent?.maxBytes ?? $0) }
        let askedBytes = try fields.int("maxBytes") ?? (kindBytes == nil ? parent?.maxBytes : nil)
        if let askedBytes, askedBytes <= 0 { throw JobSpecError(field: "maxBytes", "must be greater than 0") }
        let maxBytes = try limits.maxBytes(askedBytes, default: kindBytes ?? defaultMaxBytes)
        // `output` is checked now, and again once `{urlPath}` is replaced, when the URL is known.
        let outputTemplate = try fields.string("output") ?? parent?.childOutput
        if let outputTemplate { _ = try checkOutputTemplate(outputTemplate, field: "output") }
        let childOutput = try fields.string("childOutput") ?? parent?.childOutput
        if let childOutput {
            guard try checkOutputTemplate(childOutput, field: "childOutput") else {
                throw JobSpecError(field: "childOutput", "must hold \(OutputStore.urlPathPlaceholder), else every child would write the same file")
            }
        }
        let checksum = try fields.string("checksum").map { (text) throws(JobSpecError) -> String in try validateChecksum(text) }
        let headers = try decodeHeaders(fields.value("headers") != nil, object, defaults)
        let keepStale = try fields.bool("keepStale") ?? parent?.keepStale ?? false
        let unique = try fields.bool("unique") ?? false
        let stall = try seconds(&fields, "stall", allowZero: false) ?? parent?.stall ?? defaultStall
        let lowSpeed = try fields.int("lowSpeed") ?? parent?.lowSpeed ?? defaultLowSpeed
        guard lowSpeed >= 0 else { throw JobSpecError(field: "lowSpeed", "must be 0 or more bytes a second") }
        if let headers, !limits.allowsSecretReferences, let header = headers.first(where: { !$0.references.isEmpty }) {
            throw JobSpecError(
                field: "headers",
                "\(header.name): \(header.references[0]) is not expanded in a job a watcher runs (only under 'runner run'); "
                    + "put the header in the watcher's --config, under the host it is for")
        }

        let parameters = try definition.decode(&fields)
        if let unknown = fields.firstUnknownField() {
            throw JobSpecError(field: unknown, "is not a field of kind '\(kindName)'")
        }
        let url = try parameters.validateURL(parameters.resolveURL(template))
        if url.absoluteString.utf8.count > maxURLBytes {
            throw JobSpecError(field: "url", "is \(url.absoluteString.utf8.count) bytes long; a URL is at most \(maxURLBytes) bytes")
        }
        let output = try outputTemplate.map { (template) throws(JobSpecError) -> String in try OutputStore.resolveOutput(template, url: url) }
        var job = JobDescriptor(
            resolved: parameters, key: key, url: url, timeout: timeout,
            noticeAfter: noticeAfter, retries: retries, maxBytes: maxBytes, output: output, parent: parent?.key
        )
        // What neither the job, its file's defaults nor its parent set comes from the engine's.
        job.inherits = []
        // (A kind's own defaults, the file kind's, are more particular than the engine's.)
        if askedTimeout == nil, kindTimeout == nil { job.inherits.insert(.timeout) }
        if askedRetries == nil { job.inherits.insert(.retries) }
        if askedBytes == nil, kindBytes == nil { job.inherits.insert(.maxBytes) }
        if headers == nil, parent == nil { job.inherits.insert(.headers) }
        job.checksum = checksum
        job.keepStale = keepStale
        job.unique = unique
        job.stall = stall
        job.lowSpeed = lowSpeed
        job.childOutput = childOutput
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
            for header in try HeaderTemplate.templates(value, field: "headers") {
                headers.removeAll { $0.name.caseInsensitiveCompare(header.name) == .orderedSame }
                headers.append(header)
            }
        }
        return headers.isEmpty ? nil : headers
    }

    /// Checks an `output` (or `childOutput`) before the URL is known, `{urlPath}` standing for a
    /// plain name; answers whether it holds `{urlPath}`.
    private static func checkOutputTemplate(_ template: String, field: String) throws(JobSpecError) -> Bool {
        let holds = template.contains(OutputStore.urlPathPlaceholder)
        do {
            _ = try OutputStore.validateOutput(template.replacingOccurrences(of: OutputStore.urlPathPlaceholder, with: "name"))
        } catch {
            throw JobSpecError(field: field, error.message)
        }
        return holds
    }

    /// `sha256:<64 hex digits>`; answers the digits in lowercase.
    package static func validateChecksum(_ text: String) throws(JobSpecError) -> String {
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
    package static func validateURL(_ text: String, field: String = "url") throws(JobSpecError) -> URL {
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
}
