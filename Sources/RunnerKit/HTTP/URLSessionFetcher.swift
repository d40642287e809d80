import Dispatch
import Foundation
import FoundationNetworking
import Synchronization

/// The HTTP client on URLSession (FoundationNetworking on Linux): one session per process,
/// bodies streamed to the caller's sink through the session delegate.
///
/// URLSession on Linux has no `waitsForConnectivity` and rounds request timeouts to whole
/// seconds, so deadlines are not its business: the policy cancels the Swift task, and this
/// client cancels the URLSession task from the cancellation handler.
///
/// URLSession cannot say which address it connects to, nor veto one. So the address policy is
/// applied to the addresses `getaddrinfo` gives for the host just before the request, and again
/// for every redirect's target: every address must pass. This is weaker than the curl client's
/// check: a name whose DNS answer changes between the two lookups (DNS rebinding) can get
/// around it. Header bounds are checked once URLSession has read the headers, and it merges
/// repeated header names, so lines are counted as distinct names.
///
/// Headers stay with their origin: every redirect is a new request built here with the headers
/// of its hop (see `RequestConfig.headers(of:hop:settings:)`). TLS files (a CA bundle, a
/// client certificate) cannot be given to URLSession on Linux: `HTTPClientKind.make` refuses
/// them for this client.
public final class URLSessionFetcher: HTTPFetching {
    private let session: URLSession
    private let delegate: SessionDelegate
    private let policy: AddressPolicy
    private let requests: RequestConfig
    private let resolver: AddressPolicy.Resolver
    /// Creating, resuming and cancelling a URLSession task wait synchronously for the session's
    /// internal queue; issued from here, in order, they never block the concurrency pool.
    private let control = DispatchQueue(label: "runner.urlsession.control")

    /// - Parameters:
    ///   - maxConnectionsPerHost: connections URLSession opens to one host at once.
    ///   - policy: which addresses requests and redirects may go to.
    public convenience init(maxConnectionsPerHost: Int = 16, policy: AddressPolicy = .standard) {
        self.init(maxConnectionsPerHost: maxConnectionsPerHost, policy: policy, requests: RequestConfig())
    }

    /// - Parameters:
    ///   - resolver: how host names are resolved for the policy's check.
    ///   - requests: the User-Agent and the headers per host (its TLS files are not used).
    package init(
        maxConnectionsPerHost: Int = 16, policy: AddressPolicy = .standard, requests: RequestConfig,
        resolver: @escaping AddressPolicy.Resolver = AddressPolicy.systemResolver
    ) {
        self.policy = policy
        self.requests = requests
        self.resolver = resolver
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpMaximumConnectionsPerHost = maxConnectionsPerHost
        // The runner enforces its own deadlines; this only stops a transfer stalled for an hour.
        configuration.timeoutIntervalForRequest = 3600
        configuration.timeoutIntervalForResource = 3600
        configuration.httpAdditionalHeaders = ["User-Agent": requests.userAgent ?? RunnerVersion.userAgent]
        let delegate = SessionDelegate(control: control, policy: policy, requests: requests, resolver: resolver)
        let queue = BoundedOperationQueue(limit: 64)
        queue.maxConcurrentOperationCount = 1
        queue.name = "runner.urlsession"
        self.delegate = delegate
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    }

    deinit { session.invalidateAndCancel() }

    /// URLSession tasks started and not yet completed: zero when nothing is in flight.
    package var activeTaskCount: Int { delegate.activeCount }

    /// Checks the addresses of the URL's host against the policy, then fetches it on this fetcher's
    /// session; each redirect's target is checked again before it is followed.
    public func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead {
        let urlRequest = try Self.urlRequest(request, hop: request.url, requests: requests)
        try Task.checkCancellation()
        let addresses = try await check(request.url)
        try Task.checkCancellation()
        let state = TransferState(sink: body, request: request, addresses: addresses)
        let (session, delegate, control, prepared) = (self.session, self.delegate, self.control, urlRequest)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<FetchResponseHead, any Error>) in
                guard state.setContinuation(continuation) else { return }
                control.async {
                    guard !state.isFinished else { return }
                    let task = session.dataTask(with: prepared)
                    state.task = task
                    delegate.register(task.taskIdentifier, state)
                    task.resume()
                }
            }
        } onCancel: {
            // Answer the caller at once: cancelling a libcurl transfer inside URLSession can take
            // a while when many are cancelled together, and a deadline must not wait for that.
            // The sink refuses whatever still arrives; the URLSession task ends on its own.
            state.finish(.failure(CancellationError()))
            control.async { state.task?.cancel() }
        }
    }
}

extension URLSessionFetcher {
    /// The GET of one hop of `request`, with that hop's headers.
    static func urlRequest(_ request: FetchRequest, hop: URL, requests: RequestConfig) throws(FetchError) -> URLRequest {
        var urlRequest = URLRequest(url: hop)
        urlRequest.httpMethod = "GET"
        let settings = requests.settings(for: hop)
        for header in try requests.headers(of: request, hop: hop, settings: settings) {
            urlRequest.setValue(header.value, forHTTPHeaderField: header.name)
        }
        return urlRequest
    }

    /// The policy's verdict on the URL's addresses, resolved off the concurrency pool.
    private func check(_ url: URL) async throws -> [NetworkAddress] {
        let (policy, resolver) = (self.policy, self.resolver)
        if let host = url.host, NetworkAddress(host) != nil {
            let (refusal, addresses) = policy.refusal(url: url, resolver: resolver)
            if let refusal { throw FetchError.refused(refusal.description) }
            return addresses
        }
        // getaddrinfo cannot be interrupted: a cancelled caller (its deadline) is answered at
        // once and the lookup's late answer is dropped.
        let pending = PendingLookup()
        let (refusal, addresses) = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pending.set(continuation)
                if Task.isCancelled { pending.finish(.failure(CancellationError())) }
                BlockingWork.shared.enqueue(on: .calls) { pending.finish(.success(policy.refusal(url: url, resolver: resolver))) }
            }
        } onCancel: {
            pending.finish(.failure(CancellationError()))
        }
        if let refusal { throw FetchError.refused(refusal.description) }
        return addresses
    }
}

/// A lookup's continuation, resumed once: by the lookup or by the caller's cancellation.
private final class PendingLookup: Sendable {
    typealias Verdict = (AddressPolicy.Refusal?, [NetworkAddress])
    private let slot = Mutex<CheckedContinuation<Verdict, any Error>?>(nil)

    func set(_ continuation: CheckedContinuation<Verdict, any Error>) { slot.withLock { $0 = continuation } }

    func finish(_ result: Result<Verdict, any Error>) { slot.withLock { $0.take() }?.resume(with: result) }
}

// MARK: - Delegate

/// Per-transfer state. `head` and `received` are touched only on the session's serial delegate
/// queue; the continuation is resumed exactly once, by whoever finishes first (the delegate on
/// completion, or the caller's cancellation).
///
/// URLSession on Linux hands each piece of the body (after libcurl's content decoding) to the
/// delegate queue as it arrives, with no back-pressure: a sink slower than the network would let
/// the pieces pile up in memory, and a gzip bomb inflates far faster than any disk. So the
/// delegate only counts the bytes against `maxBytes` and passes them on to `writer`, a serial
/// queue of this transfer that feeds the sink in order; a body over the limit is refused as soon
/// as its bytes arrive, whatever the sink's pace, and at most `maxBytes` wait for the sink.
private final class TransferState: RepliesOnce, @unchecked Sendable {
    let sink: any BodySink
    let maxBytes: Int
    let url: URL
    /// The request as the caller made it: each redirect's headers are made from it.
    let request: FetchRequest
    let reply = OneShotReply()
    var head: FetchResponseHead?
    /// Body bytes that arrived so far, after content decoding.
    var received = 0
    /// Feeds the sink in order; completion goes through it too, after the last piece.
    let writer = DispatchQueue(label: "runner.urlsession.body")
    /// The URLSession task, once created; touched only on the fetcher's control queue.
    var task: URLSessionDataTask?
    private let abort = Mutex<(any Error)?>(nil)
    /// The current hop's URL and the addresses its host resolved to, for the next redirect's check.
    let hop: Mutex<(url: URL, addresses: [NetworkAddress])>

    init(sink: any BodySink, request: FetchRequest, addresses: [NetworkAddress]) {
        self.sink = sink
        self.maxBytes = request.maxBytes
        self.url = request.url
        self.request = request
        self.hop = Mutex((request.url, addresses))
    }

    /// Why this side aborted the transfer, when it did.
    var abortReason: (any Error)? { abort.withLock { $0 } }

    /// Records why this side aborts the transfer; the first reason wins.
    func abort(because reason: any Error) {
        abort.withLock { current in
            if current == nil { current = reason }
        }
    }
}

private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let transfers = Mutex<[Int: TransferState]>([:])
    /// The fetcher's control queue. Cancelling a task waits for URLSession's internal queue,
    /// which may itself be waiting for room on the delegate queue: never cancel from here.
    private let control: DispatchQueue
    private let policy: AddressPolicy
    private let requests: RequestConfig
    private let resolver: AddressPolicy.Resolver

    init(control: DispatchQueue, policy: AddressPolicy, requests: RequestConfig, resolver: @escaping AddressPolicy.Resolver) {
        self.control = control
        self.policy = policy
        self.requests = requests
        self.resolver = resolver
    }

    private func cancel(_ task: URLSessionTask) {
        control.async { task.cancel() }
    }

    var activeCount: Int { transfers.withLock { $0.count } }

    func register(_ id: Int, _ state: TransferState) {
        transfers.withLock { $0[id] = state }
    }

    private func state(_ task: URLSessionTask) -> TransferState? {
        transfers.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let state = state(dataTask), let http = response as? HTTPURLResponse else {
            completionHandler(.cancel)
            return
        }
        var headers: [String: String] = [:]
        var headerBytes = 0
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String {
                headers[name.lowercased()] = value
                headerBytes += name.utf8.count + value.utf8.count + 4  // ": " and CRLF
            }
        }
        if let excess = HeaderBounds.excess(bytes: headerBytes, lines: headers.count + 1) {
            state.abort(because: FetchError.refused(excess))
            completionHandler(.cancel)
            cancel(dataTask)
            return
        }
        state.head = FetchResponseHead(status: http.statusCode, headers: headers, url: http.url ?? state.url)
        // A declared length counts only without a content coding: with one it is the coded size.
        let coded = FetchResponseHead.isCoded(headers)
        if (200..<300).contains(http.statusCode), !coded, let length = headers["content-length"].flatMap({ Int($0) }),
            length > state.maxBytes
        {
            state.abort(because: FetchError.tooLarge(limit: state.maxBytes))
            completionHandler(.cancel)  // ignored by URLSession on Linux, hence the cancel
            cancel(dataTask)
            return
        }
        // On the writer's queue: before the first piece of the body, as every piece goes.
        let (status, finalHeaders) = (http.statusCode, headers)
        state.writer.async { [control] in
            guard state.abortReason == nil, !state.isFinished else { return }
            do {
                try state.sink.begin(status: status, headers: finalHeaders)
            } catch {
                state.abort(because: error)
                control.async { dataTask.cancel() }
            }
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let state = state(dataTask), state.abortReason == nil, !state.isFinished else { return }
        state.received += data.count
        guard state.received <= state.maxBytes else {
            state.abort(because: FetchError.tooLarge(limit: state.maxBytes))
            cancel(dataTask)
            return
        }
        state.writer.async { [control] in
            guard state.abortReason == nil, !state.isFinished else { return }
            do {
                state.request.bandwidth?.take(data.count)  // on this transfer's own queue
                try data.withUnsafeBytes { try state.sink.write($0) }
            } catch {
                state.abort(because: error)
                control.async { dataTask.cancel() }
            }
        }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        let scheme = request.url?.scheme?.lowercased()
        guard let state = state(task) else {
            completionHandler(nil)
            return
        }
        guard let target = request.url, scheme == "http" || scheme == "https" else {
            state.abort(because: FetchError.redirectRefused(request.url?.absoluteString ?? "?"))
            completionHandler(nil)
            cancel(task)
            return
        }
        let (policy, resolver) = (self.policy, self.resolver)
        let previous = state.hop.withLock { $0 }
        // A new request with the target's own headers: the caller's origin-bound headers
        // (and the config's for another host) must not follow the redirect to another origin.
        let next: URLRequest
        do {
            next = try URLSessionFetcher.urlRequest(state.request, hop: target, requests: requests)
        } catch {
            state.abort(because: error)
            completionHandler(nil)
            cancel(task)
            return
        }
        // Resolving may block: not on the delegate queue. URLSession waits for the answer.
        BlockingWork.shared.enqueue(on: .calls) { [self] in
            var refusal = policy.refusal(redirectFrom: previous.url, to: target)
            if refusal == nil {
                let (verdict, addresses) = policy.refusal(url: target, after: previous.addresses, resolver: resolver)
                refusal = verdict
                state.hop.withLock { $0 = (target, addresses) }
            }
            if let refusal {
                state.abort(because: FetchError.refused(refusal.description))
                completionHandler(nil)
                cancel(task)
            } else {
                completionHandler(next)
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let state = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        let head = state.head
        // After the pieces still on their way to the sink.
        state.writer.async {
            if let reason = state.abortReason {
                state.finish(.failure(reason))
            } else if let error {
                state.finish(.failure(Self.translate(error, url: state.url)))
            } else if let head {
                state.finish(.success(head))
            } else {
                state.finish(.failure(FetchError.badResponse("no HTTP response")))
            }
        }
    }

    private static func translate(_ error: any Error, url: URL) -> any Error {
        guard let urlError = error as? URLError else { return FetchError.other(String(describing: error)) }
        let host = url.host ?? "the server"
        switch urlError.code {
        case .cancelled: return CancellationError()
        case .cannotFindHost, .dnsLookupFailed: return FetchError.cannotResolveHost(host)
        case .cannotConnectToHost, .notConnectedToInternet:
            return FetchError.cannotConnect(hostPort(url))
        case .networkConnectionLost: return FetchError.connectionLost
        case .timedOut: return FetchError.timedOut
        case .badServerResponse, .cannotParseResponse:
            return FetchError.badResponse("it is not valid HTTP")
        case .cannotDecodeContentData, .cannotDecodeRawData:
            return FetchError.badResponse("its content coding (such as gzip) could not be decoded")
        case .httpTooManyRedirects, .redirectToNonExistentLocation:
            return FetchError.other("the server redirected too many times")
        case .unsupportedURL:
            return FetchError.redirectRefused(url.absoluteString)
        case .badURL where host.contains(":"):
            return FetchError.other(
                "URLSession on Linux cannot fetch a URL with an IPv6 address literal ([\(host)]); use a host name that resolves to that address")
        case .badURL:
            return FetchError.other("the HTTP client refused the URL '\(url.absoluteString)' as malformed")
        case .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
            .serverCertificateHasUnknownRoot, .clientCertificateRejected, .clientCertificateRequired, .secureConnectionFailed:
            return FetchError.other("TLS with \(host) failed: \(urlError.localizedDescription) (URLError \(urlError.code.rawValue))")
        case .unknown where urlError.localizedDescription.hasPrefix("transfer closed with"):
            // libcurl's CURLE_PARTIAL_FILE, which URLSession on Linux does not translate: the
            // connection closed before the body's declared end.
            return FetchError.connectionLost
        default:
            // URLSession on Linux files many of libcurl's failures (a certificate that does not
            // verify among them) under one code; libcurl's own words say which.
            return FetchError.other("the HTTP transfer failed: \(urlError.localizedDescription) (URLError \(urlError.code.rawValue))")
        }
    }

    private static func hostPort(_ url: URL) -> String {
        guard let host = url.host else { return "the server" }
        return url.port.map { "\(host):\($0)" } ?? host
    }
}

// MARK: - Delegate queue

/// The session's delegate queue, with back-pressure.
///
/// URLSession on Linux adds one operation per piece of body to this queue from its internal
/// queue and never waits for them, so a server faster than the delegate would pile the pieces
/// up in memory. Here adding waits while `limit` operations are pending, which holds up
/// URLSession's internal queue and with it the reading of sockets (TCP then slows the server).
/// The wait is bounded, so that nothing can deadlock on it: at worst a piece is admitted late.
private final class BoundedOperationQueue: OperationQueue, @unchecked Sendable {
    private let room: DispatchSemaphore

    init(limit: Int) {
        room = DispatchSemaphore(value: limit)
        super.init()
    }

    override func addOperation(_ block: @escaping @Sendable () -> Void) {
        let admitted = room.wait(timeout: .now() + .milliseconds(100)) == .success
        super.addOperation { [room] in
            block()
            if admitted { room.signal() }
        }
    }
}
