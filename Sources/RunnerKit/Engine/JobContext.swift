import Foundation
import Synchronization

/// What a kind gets to run one attempt of one job: the job, the HTTP client and the output
/// store, behind a few calls that keep the engine's promises (bounded bodies, atomic writes,
/// no temporary file left behind).
public final class JobContext: Sendable {
    public let job: JobDescriptor
    public let store: OutputStore
    private let http: any HTTPFetching
    private let payloads = Mutex<[Payload]>([])
    /// The key's last good record, whose payload is still on disk: the source of validators
    /// for a conditional request, and of the payload when the server says 304.
    public let previous: JSONValue?
    private let received = Mutex<Validators?>(nil)

    init(job: JobDescriptor, store: OutputStore, http: any HTTPFetching, previous: JSONValue? = nil) {
        self.job = job
        self.store = store
        self.http = http
        self.previous = previous
    }

    /// The validators of the job's own URL as the server sent them in this attempt.
    public var validators: Validators? { received.withLock { $0 } }

    /// The payload path of the key's last good result, when it is still on disk.
    public var previousOutput: String? { previous?["output"]?.stringValue }

    /// The bytes of the key's last good payload, for a kind that must re-read it after a 304.
    public func previousPayload() throws -> [UInt8] {
        guard let output = previousOutput, let bytes = OutputStore.readFile(in: AT_FDCWD, store.absolute(output)) else {
            throw JobFailure.failed("the server said not modified, but the earlier payload is gone")
        }
        return bytes
    }

    /// A fetched response with a 2xx status, its body in a temporary file.
    public struct Response: Sendable {
        public var head: HTTPResponseHead
        public var payload: Payload
    }

    /// Fetches the job's URL (or `url`) into a temporary file in `folder`.
    ///
    /// Throws `JobFailure`: `notFound` for 404 and 410, `notModified` for 304, `failed` for
    /// any other status or transport error (transient for 408, 429, 5xx and connection errors).
    public func fetch(_ url: URL? = nil, into folder: String, headers: [(name: String, value: String)] = []) async throws -> Response {
        var headers = headers
        let ownURL = url == nil
        if ownURL, let validators = previous.flatMap(Validators.init(record:)) {
            headers.append(contentsOf: validators.conditionalHeaders)
        }
        let url = url ?? job.url
        let payload = Payload(store: store, folder: folder, maxBytes: job.maxBytes)
        payloads.withLock { $0.append(payload) }
        let head: HTTPResponseHead
        do {
            head = try await http.fetch(HTTPRequest(url: url, headers: headers, maxBytes: job.maxBytes), into: payload)
        } catch {
            payload.discard()
            throw JobContext.failure(for: error)
        }
        if let failure = JobContext.failure(forStatus: head) {
            payload.discard()
            throw failure
        }
        if ownURL { received.withLock { $0 = Validators(headers: head.headers) } }
        return Response(head: head, payload: payload)
    }

    /// The folder the payload goes to: that of the job's `output` if set, else `folder`. Fetch into
    /// it, so the temporary file is renamed into place within one folder.
    public func payloadFolder(default folder: String) -> String {
        job.output.map(OutputStore.folder(of:)) ?? folder
    }

    /// The payload path: the job's `output` if set, else `<folder>/<key without its kind>.<ext>`.
    public func payloadPath(folder: String, fileExtension: String) -> String {
        if let output = job.output { return output }
        var stem = job.key
        let prefix = job.kindName + ":"
        if stem.hasPrefix(prefix) { stem.removeFirst(prefix.count) }
        return "\(folder)/\(OutputStore.fileName(forKey: stem)).\(fileExtension)"
    }

    /// Moves a fetched payload to `path` atomically; returns `path`.
    @discardableResult
    public func commit(_ payload: Payload, to path: String) throws -> String {
        try store.commit(payload.file(), to: path)
        return path
    }

    /// Writes bytes (e.g. a normalized document) to `path` atomically; returns `path`.
    @discardableResult
    public func write(_ bytes: [UInt8], to path: String) throws -> String {
        try store.write(bytes, to: path)
        return path
    }

    /// Removes every temporary file of this attempt that was not committed.
    func discardLeftovers() {
        for payload in payloads.withLock({ $0 }) { payload.discard() }
    }

    // MARK: - Classification

    static func failure(forStatus head: HTTPResponseHead) -> JobFailure? {
        let status = head.status
        switch status {
        case 200..<300: return nil
        case 304: return JobFailure(.notModified, "the server said the payload is not modified", httpStatus: 304)
        case 404, 410:
            return JobFailure(.notFound, answered(status), httpStatus: status)
        case 408, 429, 500..<600:
            return JobFailure(
                .failed, answered(status), httpStatus: status,
                isTransient: true, retryAfter: head.headers["retry-after"].flatMap(parseRetryAfter))
        default:
            return JobFailure(.failed, answered(status), httpStatus: status)
        }
    }

    /// Maps what a fetch or a write threw to how the job ends.
    public static func failure(for error: any Error) -> any Error {
        switch error {
        case let failure as JobFailure: return failure
        case is CancellationError: return error
        case let http as HTTPError: return JobFailure(.failed, http.description, isTransient: http.isTransient)
        case let tooLarge as Payload.TooLarge: return JobFailure(.failed, tooLarge.description)
        case let write as OutputStore.WriteError: return JobFailure(.failed, write.description)
        default: return JobFailure(.failed, String(describing: error))
        }
    }

    static func parseRetryAfter(_ value: String) -> Duration? {
        if let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 { return .seconds(seconds) }
        return nil
    }

    static func answered(_ status: Int) -> String {
        let phrase = HTTPURLResponseReason.phrase(status)
        return "the server answered \(status)" + (phrase.isEmpty ? "" : " \(phrase)")
    }
}

/// Reason phrases for the statuses users meet most.
enum HTTPURLResponseReason {
    static func phrase(_ status: Int) -> String {
        switch status {
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 300..<400: return "(a redirect that was not followed)"
        default: return ""
        }
    }
}
