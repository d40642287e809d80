import Foundation
import RunnerKit
import Testing

/// An HTTP client double: answers each URL from a script, records every request, and lets a test
/// wait until N requests have started (after Nuke's `MockDataLoader`).
///
/// A URL's replies are used in order and the last one repeats; a URL without a script gets the
/// `fallback`. A reply can hang until the request is cancelled, which is how a test holds a
/// job mid-fetch. `instant` answers every request at once without recording anything, for
/// measuring what the engine itself costs.
public final class RecordingHTTP: HTTPFetching {
    /// How the double answers one request.
    public enum Reply: Sendable {
        /// A response: status, headers (any case) and body.
        case respond(status: Int, headers: [String: String] = [:], body: [UInt8] = [])
        /// The fetch throws this error (a transport failure such as `FetchError.cannotConnect`).
        case fail(any Error)
        /// Nothing arrives until the request is cancelled; then the fetch throws `CancellationError`.
        case hang

        /// 200 with `body` as UTF-8.
        public static func ok(_ body: String, headers: [String: String] = [:]) -> Reply {
            .respond(status: 200, headers: headers, body: Array(body.utf8))
        }

        /// A response with no body.
        public static func status(_ status: Int, headers: [String: String] = [:]) -> Reply {
            .respond(status: status, headers: headers)
        }
    }

    /// One request as the double received it.
    public struct Request: Sendable {
        /// The URL asked for; the double follows no redirect.
        public var url: URL
        /// The request's `headers`, in order (`Accept`, validators, a range); its `originHeaders`,
        /// a job's own, are not recorded.
        public var headers: [(name: String, value: String)]
        /// The most body bytes the request accepts: for a job's fetch, the job's `maxBytes`.
        public var maxBytes: Int

        /// The value of a request header, by name in any case.
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// What happened to a request, in order.
    public enum Event: Sendable {
        /// A request arrived, before its reply.
        case started(Request)
        /// The fetch returned a response with this status.
        case answered(URL, status: Int)
        /// The fetch threw an error other than cancellation (a scripted `fail`, or one the sink
        /// threw); the text is its description.
        case failed(URL, String)
        /// The fetch ended by cancellation: a `hang` whose task was cancelled, or a
        /// `CancellationError` thrown.
        case cancelled(URL)
    }

    private struct State: Sendable {
        var scripts: [String: [Reply]] = [:]
        var events: [Event] = []
        var started = 0
        var cancelled = 0
        var hanging: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Watched(State())
    private let fallback: Reply
    /// Set for `instant`: every request gets this reply, unrecorded.
    private let fixed: Reply?

    /// A double that answers unscripted URLs with `fallback` (404 unless told otherwise).
    public init(fallback: Reply = .status(404)) {
        self.fallback = fallback
        self.fixed = nil
    }

    private init(fixed: Reply) {
        self.fallback = fixed
        self.fixed = fixed
    }

    /// A double that answers every request at once with `body` and status 200, and records
    /// nothing: the engine's own cost, or jobs that end faster than their records are written.
    /// The default body, an empty JSON object, is an entry of any id.
    public static func instant(body: String = "{}") -> RecordingHTTP {
        RecordingHTTP(fixed: .ok(body))
    }

    // MARK: - Scripting

    /// Sets the replies to `url`, used in order; the last one repeats.
    public func script(_ url: String, _ replies: Reply...) {
        precondition(!replies.isEmpty, "a script needs at least one reply")
        state.update { $0.scripts[url] = replies }
    }

    // MARK: - Observing

    /// Every request received so far, in order.
    public var requests: [Request] {
        state.read { $0.events.compactMap { if case .started(let request) = $0 { request } else { nil } } }
    }

    /// The requests to `url`, in order.
    public func requests(to url: String) -> [Request] { requests.filter { $0.url.absoluteString == url } }

    /// Everything that happened so far, in order.
    public var events: [Event] { state.read { $0.events } }

    /// Waits until at least `count` requests have started; false (and an issue) if they never do.
    @discardableResult
    public func waitForRequests(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await state.wait(until: { $0.started >= count }, "\(count) requests (have \(requests.count))", sourceLocation: sourceLocation)
    }

    /// Waits until at least `count` requests were cancelled; false (and an issue) if they never are.
    @discardableResult
    public func waitForCancelled(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await state.wait(until: { $0.cancelled >= count }, "\(count) cancelled requests", sourceLocation: sourceLocation)
    }

    // MARK: - HTTPFetching

    /// Records the request and answers with the URL's next scripted reply (or `fallback`), the body
    /// written to `body` in one piece; an `instant` double answers at once, unrecorded.
    public func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead {
        if let fixed { return try answer(fixed, to: request, into: body) }
        let url = request.url
        let reply = state.update { state -> Reply in
            state.started += 1
            state.events.append(.started(Request(url: url, headers: request.headers, maxBytes: request.maxBytes)))
            let key = url.absoluteString
            guard var replies = state.scripts[key], let first = replies.first else { return fallback }
            if replies.count > 1 {
                replies.removeFirst()
                state.scripts[key] = replies
            }
            return first
        }
        do {
            let head = try await reply.isHang ? hang(url) : answer(reply, to: request, into: body)
            state.update { $0.events.append(.answered(url, status: head.status)) }
            return head
        } catch is CancellationError {
            state.update { state in
                state.cancelled += 1
                state.events.append(.cancelled(url))
            }
            throw CancellationError()
        } catch {
            state.update { $0.events.append(.failed(url, String(describing: error))) }
            throw error
        }
    }

    private func answer(_ reply: Reply, to request: FetchRequest, into body: any BodySink) throws -> FetchResponseHead {
        switch reply {
        case .respond(let status, let headers, let bytes):
            let lowered = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }) { last, _ in last }
            try body.begin(status: status, headers: lowered)
            if !bytes.isEmpty { try bytes.withUnsafeBytes { try body.write($0) } }
            return FetchResponseHead(status: status, headers: lowered, url: request.url)
        case .fail(let error):
            throw error
        case .hang:
            throw CancellationError()
        }
    }

    /// Suspends until the calling task is cancelled, then throws `CancellationError`.
    private func hang(_ url: URL) async throws -> FetchResponseHead {
        let id = state.update { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.update { state -> Bool in
                    if Task.isCancelled { return true }
                    state.hanging[id] = continuation
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let continuation = state.update { $0.hanging.removeValue(forKey: id) }
            continuation?.resume(throwing: CancellationError())
        }
        throw CancellationError()
    }
}

extension RecordingHTTP.Reply {
    fileprivate var isHang: Bool {
        if case .hang = self { return true }
        return false
    }
}
