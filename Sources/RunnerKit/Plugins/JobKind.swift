/// A kind of job: a plugin that names itself, decodes its own parameters and runs.
///
/// A value of a conforming type holds the decoded parameters of one job. The engine never
/// switches on a kind's name: it asks the registry for the type, lets the type decode its
/// fields, and calls `run(in:)` inside the policy.
public protocol JobKind: Sendable {
    /// The name job files use in their `kind` field, e.g. `"image"`.
    static var name: String { get }
    /// One sentence for `runner kinds`.
    static var summary: String { get }
    /// The fields this kind accepts beyond the common ones, for `runner kinds` and for `defaults`.
    static var parameters: [KindParameter] { get }

    /// Decodes this kind's own fields. Read each field through `fields`, which reports
    /// missing, mistyped and (afterwards) unknown fields by name.
    init(fields: inout JobFields) throws(JobSpecError)

    /// The URL to fetch, given the job's `url` field (a kind that takes an id fills in `{id}`).
    func resolveURL(_ template: String) -> String

    /// The key of a job that names none, from its resolved URL.
    func defaultKey(url: String) -> String

    /// Fetches, validates and writes the payload; may start child jobs through the context.
    /// Throw `JobFailure` to end the job with a status and message; any other error is `failed`.
    func run(in context: JobContext) async throws -> JobOutcome
}

extension JobKind {
    public func resolveURL(_ template: String) -> String { template }
    public func defaultKey(url: String) -> String { "\(Self.name):\(url)" }
}

/// A field a kind accepts, as `runner kinds` lists it.
public struct KindParameter: Sendable {
    public var name: String
    public var type: String
    public var required: Bool
    public var defaultValue: String?
    public var summary: String

    public init(_ name: String, type: String, required: Bool = false, default defaultValue: String? = nil, _ summary: String) {
        self.name = name
        self.type = type
        self.required = required
        self.defaultValue = defaultValue
        self.summary = summary
    }
}

/// What a kind reports when its job ends without an error.
public struct JobOutcome: Sendable {
    public var status: JobStatus
    public var output: String?
    public var httpStatus: Int?
    public var bytes: Int?
    public var sha256: String?
    public var details: [(key: String, value: JSONValue)]
    public var error: String?
    /// Jobs to run after this one's attempt ends (a tree's entries, a list's images), outside its
    /// deadline, through the same scheduler and TaskManager; their statuses are counted into
    /// `details.children`.
    public var children: [JobDescriptor]

    public init(
        status: JobStatus = .succeeded, output: String? = nil, httpStatus: Int? = nil, bytes: Int? = nil,
        sha256: String? = nil, details: [(key: String, value: JSONValue)] = [], error: String? = nil,
        children: [JobDescriptor] = []
    ) {
        self.children = children
        self.status = status
        self.output = output
        self.httpStatus = httpStatus
        self.bytes = bytes
        self.sha256 = sha256
        self.details = details
        self.error = error
    }
}

/// Ends a job with a status other than success, and a sentence saying why.
public struct JobFailure: Error, Sendable, CustomStringConvertible {
    public var status: JobStatus
    public var message: String
    public var httpStatus: Int?
    /// Whether another attempt may succeed (DESIGN §3 item 6).
    public var isTransient: Bool
    /// How long the server asked us to wait before trying again.
    public var retryAfter: Duration?

    public init(_ status: JobStatus, _ message: String, httpStatus: Int? = nil, isTransient: Bool = false, retryAfter: Duration? = nil) {
        self.status = status
        self.message = message
        self.httpStatus = httpStatus
        self.isTransient = isTransient
        self.retryAfter = retryAfter
    }

    public static func failed(_ message: String, httpStatus: Int? = nil) -> JobFailure {
        JobFailure(.failed, message, httpStatus: httpStatus)
    }

    public var description: String { message }
}
