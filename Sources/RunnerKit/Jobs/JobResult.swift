import Foundation

/// The result record of one job: the same shape in `results/`, in the run log and on stdout.
public struct JobResult: Sendable {
    public var key: String
    public var kind: String
    /// The URL the job asked for, resolved, without any `user:password@`.
    public var url: String?
    public var status: JobStatus
    /// Payload path relative to the output directory (for `stale` results, the earlier payload).
    public var output: String?
    /// Why it did not succeed: at most `maxErrorBytes` (a server's words are in it, shown on
    /// the page, in logs and in the queue).
    public var error: String? {
        didSet { if let error, error.utf8.count > Self.maxErrorBytes { self.error = Self.capped(error) } }
    }
    /// Why it did not succeed, as a program tells cases apart (`error` says it in words): nil
    /// for `succeeded` and `notModified`. Unless set, it follows from the status and
    /// `httpStatus` (`FailureReason.inferred`).
    public var reason: FailureReason? {
        get { status.isSuccess ? nil : assignedReason ?? FailureReason.inferred(status: status, httpStatus: httpStatus) }
        set { assignedReason = newValue }
    }
    private var assignedReason: FailureReason?
    public var httpStatus: Int?
    public var bytes: Int?
    public var sha256: String?
    public var attempts: Int
    public var waitedForNetworkMs: Int
    /// Of `durationMs`, the time spent waiting for a slot at the job's host (`--per-host`) and
    /// for its turn at a paced host (`--rate`): not the job's own time.
    public var waitedForHostMs = 0
    public var durationMs: Int
    public var startedAt: Date
    public var finishedAt: Date
    /// What the kind recorded, in its order (the record's `details`); read one by name with
    /// `detail(_:)`.
    public var details: [(key: String, value: JSONValue)]
    /// True when the job failed and `output` points at an earlier good payload.
    public var stale: Bool = false
    /// The key of the job that started this one (tree → entries, list → images), if any.
    public var parent: String?
    /// The payload's ETag and Last-Modified, for the next run's conditional request.
    public var validators: Validators?
    /// Bytes of the payload kept from an earlier, cut attempt (this run's or an earlier one's)
    /// that the last attempt went on from; nil when it fetched the whole body.
    public var resumedFrom: Int?
    /// Body bytes received over the network by all attempts of this run: set when it differs
    /// from a whole body's bytes (a resume, a large body fetched more than once).
    public var transferred: Int?
    /// Why bytes kept from a cut attempt were fetched again (the server answered a range
    /// request with the whole file, or with a range that could not be appended).
    public var startedOver: String?
    /// How the jobs this one started ended (children, and theirs): for the run's summary and
    /// exit code, not written in the record (whose `details` hold the children's counts).
    public var descendants = Descendants()

    /// Jobs below a parent, by status, and the elements that could not be made into jobs.
    public struct Descendants: Sendable, Equatable {
        public var byStatus: [JobStatus: Int] = [:]
        public var invalid = 0

        public init() {}

        public var total: Int { byStatus.values.reduce(0, +) }

        /// Those that count as failures of the run: statuses other than success, `notFound`
        /// (an answer, for a child) and `duplicate`. (Elements that were not jobs are counted in
        /// the summary, not as failures: the parent's record names the first.)
        public var failures: Int { byStatus.filter { !$0.key.isAcceptableForChild }.values.reduce(0, +) }

        public mutating func add(_ other: Descendants) {
            for (status, count) in other.byStatus { byStatus[status, default: 0] += count }
            invalid += other.invalid
        }
    }

    public init(
        key: String, kind: String, url: String? = nil, status: JobStatus, output: String? = nil, error: String? = nil,
        httpStatus: Int? = nil, bytes: Int? = nil, sha256: String? = nil, attempts: Int = 0,
        waitedForNetworkMs: Int = 0, durationMs: Int = 0, startedAt: Date, finishedAt: Date,
        details: [(key: String, value: JSONValue)] = [], parent: String? = nil
    ) {
        self.key = key
        self.kind = kind
        self.url = url
        self.status = status
        self.output = output
        self.error = error.map(Self.capped)
        self.httpStatus = httpStatus
        self.bytes = bytes
        self.sha256 = sha256
        self.attempts = attempts
        self.waitedForNetworkMs = waitedForNetworkMs
        self.durationMs = durationMs
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.details = details
        self.parent = parent
    }

    /// What a record says of its job (key, kind, URL, status, output, error, parent), from the
    /// record as one line of JSON; nil when it is not one.
    public init?(record line: [UInt8]) {
        guard let record = try? JSONParser.parse(line), let key = record["key"]?.stringValue, let kind = record["kind"]?.stringValue,
            let status = record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))
        else { return nil }
        self.init(
            key: key, kind: kind, url: record["url"]?.stringValue, status: status, output: record["output"]?.stringValue,
            error: record["error"]?.stringValue, startedAt: Date(), finishedAt: Date(), parent: record["parent"]?.stringValue)
        if let reason = record["reason"]?.stringValue.flatMap(FailureReason.init(rawValue:)) { self.reason = reason }
    }

    /// The longest error text kept, in bytes of UTF-8.
    public static let maxErrorBytes = 2048

    /// `text` cut to `maxErrorBytes` at a character's end, saying how much was cut.
    static func capped(_ text: String) -> String {
        let bytes = text.utf8.count
        guard bytes > maxErrorBytes else { return text }
        var kept = ""
        var count = 0
        for character in text {
            let size = character.utf8.count
            if count + size > maxErrorBytes - 40 { break }
            kept.append(character)
            count += size
        }
        return kept + "… (\(bytes - count) more bytes)"
    }

    /// The record as an ordered JSON object, fields in the documented order.
    public var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("key", .string(key)),
            ("kind", .string(kind)),
            ("url", JSONValue(url)),
            ("status", .string(status.rawValue)),
            ("output", JSONValue(output)),
            ("error", JSONValue(error)),
            ("httpStatus", httpStatus.map { JSONValue($0) } ?? .null),
            ("bytes", bytes.map { JSONValue($0) } ?? .null),
            ("sha256", JSONValue(sha256)),
            ("attempts", JSONValue(attempts)),
            ("waitedForNetworkMs", JSONValue(waitedForNetworkMs)),
            ("durationMs", JSONValue(durationMs)),
            ("startedAt", .string(Timestamp.iso8601(startedAt))),
            ("finishedAt", .string(Timestamp.iso8601(finishedAt))),
            ("details", .object(details)),
        ]
        if let reason { members.append(("reason", .string(reason.rawValue))) }
        if stale { members.append(("stale", .bool(true))) }
        if let parent { members.append(("parent", .string(parent))) }
        if let validators { members.append(("validators", validators.json)) }
        if waitedForHostMs > 0 { members.append(("waitedForHostMs", JSONValue(waitedForHostMs))) }
        if let resumedFrom { members.append(("resumedFrom", JSONValue(resumedFrom))) }
        if let transferred { members.append(("transferred", JSONValue(transferred))) }
        if let startedOver { members.append(("startedOver", .string(startedOver))) }
        return .object(members)
    }

    /// The detail named `name`, or nil: `result.detail("width")?.intValue`,
    /// `result.detail("format")?.stringValue`, `result.detail("children")?["notFound"]?.intValue`.
    public func detail(_ name: String) -> JSONValue? {
        details.first { $0.key == name }?.value
    }

    /// The job's own time: `durationMs` without its waits for its host's slot and pace.
    public var ownMs: Int { max(0, durationMs - waitedForHostMs) }

    /// One line of JSON, no trailing newline.
    public var jsonLine: String { JSONWriter.string(json) }
}
