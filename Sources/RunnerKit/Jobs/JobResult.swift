import Foundation

/// The result record of one job: the same shape in `results/`, in the run log and on stdout.
public struct JobResult: Sendable {
    /// The job's key: at most one job of a key runs at a time, and its last record is the file
    /// `OutputStore.recordPath(forKey:)` names.
    public var key: String
    /// The name of the job's kind, as job files give it (`image`, `entry`).
    public var kind: String
    /// The URL the job asked for, resolved, without any `user:password@`.
    public var url: String?
    /// How the job ended; unless it is `succeeded` or `notModified`, `reason` and `error` say why.
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
    /// The status of the last response: 304 for `notModified`, the one that caused a failure; nil
    /// when none came (offline, a transport error, a job that never ran) or the kind gave none.
    public var httpStatus: Int?
    /// The size in bytes of the payload at `output` (for `stale` and `notModified`, the earlier
    /// one); nil when there is none.
    public var bytes: Int?
    /// The SHA-256 of the payload at `output`, in lowercase hex; nil when there is none.
    public var sha256: String?
    /// Attempts made, retries included; 0 for a job that never ran (refused, `duplicate`, cancelled
    /// while it waited).
    public var attempts: Int
    /// Milliseconds the attempts together waited for connectivity to the host, inside their
    /// deadlines: a part of `durationMs`.
    public var waitedForNetworkMs: Int
    /// Of `durationMs`, the time spent waiting for a slot at the job's host (`--per-host`) and
    /// for its turn at a paced host (`--rate`): not the job's own time.
    public var waitedForHostMs = 0
    /// Milliseconds from the job's start (its slot and key held) until its record was made, its
    /// children's run included; 0 for a job that never ran.
    public var durationMs: Int
    /// When the job had its slot, by the wall clock (for one cancelled while it waited for a slot,
    /// when it was cancelled).
    public var startedAt: Date
    /// When the job ended, children included, by the wall clock.
    public var finishedAt: Date
    /// What the kind found (an image's format and size, a list's element count), in its order, and
    /// a parent's `children` counts; bounded to 64 members, strings of 1 KiB and 8 levels. Read
    /// one by name with `detail(_:)`.
    public var details: [(key: String, value: JSONValue)]
    /// True when the job failed and `output` points at an earlier good payload.
    public var stale: Bool = false
    /// The key of the job that started this one (tree → entries, list → images), if any.
    public var parent: String?
    /// The payload's ETag and Last-Modified, for the next run's conditional request.
    package var validators: Validators?
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
        /// Jobs below the parent (its children and theirs), counted by status.
        public var byStatus: [JobStatus: Int] = [:]
        /// Elements of the parents' payloads that could not be made into jobs.
        public var invalid = 0

        /// No jobs below the parent.
        package init() {}

        /// Every job below the parent; elements not made into jobs (`invalid`) are not counted.
        public var total: Int { byStatus.values.reduce(0, +) }

        /// Those that count as failures of the run: statuses other than success, `notFound`
        /// (an answer, for a child) and `duplicate`. (Elements that were not jobs are counted in
        /// the summary, not as failures: the parent's record names the first.)
        public var failures: Int { byStatus.filter { !$0.key.isAcceptableForChild }.values.reduce(0, +) }

        package mutating func add(_ other: Descendants) {
            for (status, count) in other.byStatus { byStatus[status, default: 0] += count }
            invalid += other.invalid
        }
    }

    package init(
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
    package init?(record line: [UInt8]) {
        guard let record = try? JSONParser.parse(line), let key = record["key"]?.stringValue, let kind = record["kind"]?.stringValue,
            let status = record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))
        else { return nil }
        self.init(
            key: key, kind: kind, url: record["url"]?.stringValue, status: status, output: record["output"]?.stringValue,
            error: record["error"]?.stringValue, startedAt: Date(), finishedAt: Date(), parent: record["parent"]?.stringValue)
        if let reason = record["reason"]?.stringValue.flatMap(FailureReason.init(rawValue:)) { self.reason = reason }
    }

    /// The longest error text kept, in bytes of UTF-8.
    package static let maxErrorBytes = 2048

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
    package var json: JSONValue {
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
    package var jsonLine: String { JSONWriter.string(json) }
}
