import Foundation

/// What a kind says when its attempt ends well: what to store, what it found, what to run next.
///
/// The kind does not write the payload or count its bytes: the engine commits what `stored`
/// names and fills the record's `output`, `bytes`, `sha256` and `httpStatus` from that, so a
/// record always describes the file at its `output`.
public struct KindOutcome: Sendable {
    /// What goes to the output directory.
    public enum Stored: Sendable {
        /// The fetched body, as it arrived.
        case body(JobContext.Response)
        /// Bytes the kind made (a normalized document), from a response with this status (nil:
        /// no HTTP response, as when a program did the network operation itself).
        case bytes([UInt8], httpStatus: Int?)
        /// The server said 304: the payload on disk is current and its record carries forward.
        case notModified
    }

    /// What the engine commits to the output directory.
    public var stored: Stored
    /// Where the payload goes unless the job sets `output`: `<folder>/<key without its kind>.<ext>`.
    public var folder: String
    /// The payload file's extension, without the dot (`png`, `json`); unused when the job sets
    /// `output`.
    public var fileExtension: String
    /// What the kind found, for the record's `details` (an image's format and size), in order; the
    /// engine bounds them (64 members, strings of 1 KiB, 8 levels).
    public var details: [(key: String, value: JSONValue)]
    /// Jobs to run after this one's attempt ends, outside its deadline, through the same
    /// scheduler and TaskManager; their statuses are counted into `details.children`.
    public var children: ChildJobs

    /// An outcome storing `stored` under `folder` (unless the job sets `output`), with `details`
    /// for the record and `children` to run after it, both empty unless given.
    public init(
        _ stored: Stored, folder: String, fileExtension: String,
        details: [(key: String, value: JSONValue)] = [], children: ChildJobs = ChildJobs()
    ) {
        self.stored = stored
        self.folder = folder
        self.fileExtension = fileExtension
        self.details = details
        self.children = children
    }

    /// The outcome after a fetch: the body stored as it arrived, or after a 304 the earlier payload.
    public static func fetched(
        _ fetch: JobContext.Fetch, folder: String, fileExtension: String,
        details: [(key: String, value: JSONValue)] = [], children: ChildJobs = ChildJobs()
    ) -> KindOutcome {
        switch fetch {
        case .fetched(let response):
            KindOutcome(.body(response), folder: folder, fileExtension: fileExtension, details: details, children: children)
        case .notModified:
            KindOutcome(.notModified, folder: folder, fileExtension: fileExtension, details: details, children: children)
        }
    }
}

/// A child job as a kind asks for it: by kind name, decoded through the registry like a job of
/// a job file, so no kind names another's type. Children inherit the parent's timing, retries
/// and size limit.
public struct ChildJob: Sendable {
    /// The job object, in order: `kind`, `url` (a template the kind fills), an optional `key`, and
    /// the kind's own fields.
    public var fields: [(key: String, value: JSONValue)]

    /// A job object: `kind`, `url` and the kind's own fields; `key` optional.
    public init(_ fields: [(key: String, value: JSONValue)]) {
        self.fields = fields
    }

    /// A job of the kind named `kind` at `url`, with `key` (nil: the kind's default key) and the
    /// kind's own fields in `more`.
    public init(kind: String, url: String, key: String? = nil, _ more: [(key: String, value: JSONValue)] = []) {
        var fields: [(key: String, value: JSONValue)] = [("kind", .string(kind)), ("url", .string(url))]
        if let key { fields.append(("key", .string(key))) }
        fields.append(contentsOf: more)
        self.fields = fields
    }
}

/// The children of one job: made one at a time as the engine's window takes them, so a list of
/// a million elements never holds a million jobs. A child that cannot be made is counted
/// `invalid`, with the first reason in the parent's record.
public struct ChildJobs: Sendable {
    /// How many elements there are: children to make, including those that will turn out invalid.
    public let count: Int
    private let make: @Sendable (Int) -> Result<ChildJob, ChildJobs.Invalid>

    /// Why an element cannot become a job.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public var description: String
        /// Why the element cannot become a job; the first such reason goes to the parent's record
        /// (`details.invalidChild`).
        public init(_ description: String) { self.description = description }
    }

    /// No children: the parent's record gets no `children` counts.
    public init() {
        count = 0
        make = { _ in .failure(Invalid("no such child")) }
    }

    /// `count` children, the i-th made by `make(i)` when the engine is ready to run it.
    public init(count: Int, make: @escaping @Sendable (Int) -> Result<ChildJob, ChildJobs.Invalid>) {
        self.count = count
        self.make = make
    }

    /// Children already made, in the order they run in.
    public init(_ jobs: [ChildJob]) {
        self.init(count: jobs.count) { .success(jobs[$0]) }
    }

    /// The `index`-th child (from 0), or why that element cannot be a job; called as the engine's
    /// window takes the element.
    public func child(at index: Int) -> Result<ChildJob, ChildJobs.Invalid> { make(index) }

    /// Whether there is no element: then the engine runs no children and records no counts.
    public var isEmpty: Bool { count == 0 }
}

extension ChildJobs {
    /// The child at `index` made a job of `parent`: its fields decoded through `registry` as a
    /// job file's are, within `limits`, with the parent's headers (still bound to the parent's
    /// origin); or why it cannot be one, as "child 3: …". The one place children become jobs,
    /// for the engine's window and for a shared queue alike.
    package func job(
        at index: Int, of parent: JobDescriptor, registry: KindRegistry, limits: JobLimits
    ) -> Result<(job: JobDescriptor, child: ChildJob), UnmadeChild> {
        switch child(at: index) {
        case .success(let child):
            do {
                var job = try JobDescriptor.decode(child.fields, registry: registry, parent: parent, limits: limits)
                job.headers = parent.headers
                return .success((job, child))
            } catch {
                return .failure(UnmadeChild(description: "child \(index + 1): \(error)"))
            }
        case .failure(let invalid):
            return .failure(UnmadeChild(description: "child \(index + 1): \(invalid)"))
        }
    }
}

/// Why an element of a kind's children is no job, naming it by its place ("child 3: …").
package struct UnmadeChild: Error, CustomStringConvertible {
    package var description: String
}
